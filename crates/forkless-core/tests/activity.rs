//! The idle clock's resolution: requests move it only when a write is worth it, and never so
//! coarsely that a session within its idle time-to-live could expire.

use std::time::Duration;

use forkless_core::{Config, EndReason, Limits, SeededEntropy};

mod support;
use support::{at, session};

#[test]
fn activity_is_due_once_a_second() {
    let mut e = SeededEntropy::new(1);
    let mut r = session(&mut e);
    let cfg = Config::default();
    assert!(!r.activity_due(at(999), &cfg));
    assert!(r.activity_due(at(1_000), &cfg));
    r.on_request(at(1_000)).unwrap();
    assert!(!r.activity_due(at(1_500), &cfg), "the request just recorded moved the clock");
}

#[test]
fn a_short_idle_ttl_gets_a_finer_resolution() {
    let mut e = SeededEntropy::new(2);
    let mut r = session(&mut e);
    let cfg = Config {
        limits: Limits { session_idle_ttl: Duration::from_millis(800), ..Limits::default() },
        ..Config::default()
    };
    assert!(!r.activity_due(at(99), &cfg));
    assert!(r.activity_due(at(100), &cfg), "an eighth of the idle time-to-live");
    // Skipping an update that was not due never lets a session in use expire: the oldest
    // recorded activity is at most one resolution behind, far inside the time-to-live.
    r.on_request(at(100)).unwrap();
    assert!(r.on_tick(at(150), &cfg).is_empty());
}

#[test]
fn an_ended_session_is_always_due_so_the_request_is_refused() {
    let mut e = SeededEntropy::new(3);
    let mut r = session(&mut e);
    r.on_end(EndReason::Deleted, at(10)).unwrap();
    assert!(r.activity_due(at(10), &Config::default()));
    assert!(r.on_request(at(10)).is_err());
}
