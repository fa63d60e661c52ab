//! Unit tests of `stream`.

use super::*;
use crate::id::SeededEntropy;

const GRACE: Duration = Duration::from_secs(10);

fn stream() -> Stream {
    Stream::new(StreamId::generate(&mut SeededEntropy::new(1)), StreamKind::Request, Timestamp::ZERO)
}

#[test]
fn append_assigns_consecutive_seqs_from_one() {
    let mut s = stream();
    let t = Timestamp::ZERO;
    assert_eq!(s.on_append(3, EventKind::Intermediate, t).map(|a| a.seq), Ok(Seq::new(1)));
    assert_eq!(s.on_append(3, EventKind::Intermediate, t).map(|a| a.seq), Ok(Seq::new(2)));
    assert_eq!(s.retained_events(), 2);
    assert_eq!(s.retained_bytes(), 6);
}

#[test]
fn fenced_stream_refuses_append_attach_and_second_fence() {
    let mut s = stream();
    let t = Timestamp::ZERO;
    s.on_fence(t, FenceCause::Reset).unwrap();
    assert_eq!(s.on_append(1, EventKind::Intermediate, t), Err(Error::StreamFenced));
    assert_eq!(s.on_attach(t, GRACE), Err(Error::StreamFenced));
    assert_eq!(s.on_fence(t, FenceCause::Reset), Err(Error::StreamFenced));
}

#[test]
fn completed_stream_refuses_append_but_allows_attach() {
    let mut s = stream();
    let t = Timestamp::ZERO;
    let a = s.on_append(1, EventKind::Final, t).unwrap();
    assert!(a.completed);
    assert_eq!(s.on_append(1, EventKind::Intermediate, t), Err(Error::StreamCompleted));
    assert!(s.on_attach(t, GRACE).is_ok());
}

#[test]
fn attach_bumps_epoch_and_stale_epochs_are_refused() {
    let mut s = stream();
    let t = Timestamp::ZERO;
    let first = s.on_attach(t, GRACE).unwrap();
    let second = s.on_attach(t, GRACE).unwrap();
    assert!(second > first);
    assert_eq!(s.on_detach(first, t), Err(Error::StaleEpoch { held: first, current: second }));
    assert_eq!(s.on_detach(second, t), Ok(()));
    assert_eq!(s.on_detach(second, t), Err(Error::NotAttached));
}

#[test]
fn liveness_expires_after_grace_and_renews_on_writes() {
    let mut s = stream();
    let e = s.on_attach(Timestamp::from_millis(0), GRACE).unwrap();
    s.on_write_completed(e, Timestamp::from_millis(5_000), GRACE).unwrap();
    assert!(!s.on_liveness_check(Timestamp::from_millis(14_999)));
    assert!(s.is_live(Timestamp::from_millis(14_999)));
    assert!(s.on_liveness_check(Timestamp::from_millis(15_000)));
    assert!(!s.is_live(Timestamp::from_millis(15_000)));
    assert!(!s.is_fenced(), "liveness expiry detaches, it never fences");
}

#[test]
fn a_clock_jumping_backwards_never_expires_anything() {
    let mut s = stream();
    s.on_attach(Timestamp::from_millis(1_000_000), GRACE).unwrap();
    assert!(!s.on_liveness_check(Timestamp::ZERO));
}

#[test]
fn eviction_raises_low_water() {
    let mut s = stream();
    for _ in 0..3 {
        s.on_append(10, EventKind::Intermediate, Timestamp::ZERO).unwrap();
    }
    s.on_evict_oldest(10);
    assert_eq!(s.low_water(), Seq::new(2));
    assert_eq!(s.retained_events(), 2);
    s.on_evict_all();
    assert_eq!(s.low_water(), Seq::new(4));
    assert_eq!(s.retained_events(), 0);
    s.on_evict_oldest(10);
    assert_eq!(s.low_water(), Seq::new(4), "nothing left to evict");
}
