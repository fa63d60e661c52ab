//! Every identifier parser on arbitrary input: never panics, and whatever parses prints
//! back to exactly the same text (one canonical wire form per value).
#![no_main]

use forkless_core::{EventId, Revision, Seq, SessionId, StreamId};
use libfuzzer_sys::fuzz_target;

fn canonical<T: std::str::FromStr + std::fmt::Display>(s: &str) {
    if let Ok(v) = s.parse::<T>() {
        assert_eq!(v.to_string(), s);
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    canonical::<SessionId>(s);
    canonical::<StreamId>(s);
    canonical::<EventId>(s);
    canonical::<Seq>(s);
    canonical::<Revision>(s);
});
