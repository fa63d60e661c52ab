//! The header checks on arbitrary header lists (names and values from the input, repeats
//! included): never panic, and always answer with a typed reason.
#![no_main]

use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 6] =
    ["mcp-session-id", "mcp-protocol-version", "last-event-id", "mcp-stream-id", "accept", "content-type"];

fuzz_target!(|data: &[u8]| {
    let mut headers = HeaderMap::new();
    for chunk in data.split(|b| *b == b'\n') {
        let Some((&which, value)) = chunk.split_first() else { continue };
        let name = HeaderName::from_static(NAMES[usize::from(which) % NAMES.len()]);
        if let Ok(value) = HeaderValue::from_bytes(value) {
            headers.append(name, value);
        }
    }
    if let Err(reason) = forkless_server::fuzzing::check_headers(&headers) {
        assert!(!reason.is_empty());
    }
});
