//! The POST body classifier on arbitrary bytes: never panics, and a body it accepts holds at
//! least one message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(n) = forkless_server::fuzzing::classify_body(data) {
        assert!(n >= 1);
    }
});
