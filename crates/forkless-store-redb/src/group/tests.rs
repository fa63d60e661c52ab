//! How a group forms (its rows folded, its window planned) and what its sync settles.

use super::*;

const WINDOW: Duration = Duration::from_millis(5);

/// A plan after a flood's group.
fn flooded() -> WindowPlan {
    let mut plan = WindowPlan::default();
    plan.gathered(FLOOD);
    plan
}

#[test]
fn without_a_flood_a_group_gathers_for_half_the_window() {
    let mut plan = WindowPlan::default();
    assert_eq!(plan.early(WINDOW), WINDOW / 2);
    plan.synced(Duration::from_micros(100));
    plan.gathered(FLOOD - 1);
    assert_eq!(plan.early(WINDOW), WINDOW / 2, "fast syncs do not lengthen a light load's gather");
    plan.gathered(FLOOD);
    assert!(plan.early(WINDOW) < WINDOW / 2, "a flood gathers longer");
    plan.gathered(3);
    assert_eq!(plan.early(WINDOW), WINDOW / 2, "and the flood's end shortens it again");
}

#[test]
fn under_a_flood_a_slow_sync_closes_windows_earlier_at_once_and_is_forgotten_gradually() {
    let mut plan = flooded();
    assert_eq!(plan.early(WINDOW), DELIVERY_ALLOWANCE);
    for _ in 0..100 {
        plan.synced(Duration::from_micros(200));
    }
    assert_eq!(plan.early(WINDOW), Duration::from_micros(200) + DELIVERY_ALLOWANCE);
    // One slow sync among fast ones: planned for from the next group on.
    plan.synced(Duration::from_millis(1));
    assert_eq!(plan.early(WINDOW), Duration::from_millis(1) + DELIVERY_ALLOWANCE);
    plan.synced(Duration::from_micros(200));
    let after_one = plan.early(WINDOW);
    assert!(after_one < Duration::from_millis(1) + DELIVERY_ALLOWANCE);
    assert!(after_one > Duration::from_micros(900) + DELIVERY_ALLOWANCE);
    // Forgotten after a few dozen fast ones (half of it in about 22).
    for _ in 0..22 {
        plan.synced(Duration::from_micros(200));
    }
    assert!(plan.early(WINDOW) < Duration::from_micros(600) + DELIVERY_ALLOWANCE);
    for _ in 0..200 {
        plan.synced(Duration::from_micros(200));
    }
    assert_eq!(plan.early(WINDOW), Duration::from_micros(200) + DELIVERY_ALLOWANCE);
}

#[test]
fn a_window_never_closes_before_its_middle() {
    let mut plan = flooded();
    plan.synced(Duration::from_millis(40));
    assert_eq!(plan.early(WINDOW), WINDOW / 2);
}

fn stream(seq: u64) -> forkless_core::Stream {
    let mut s = forkless_core::Stream::new(
        forkless_core::StreamId::from_bytes([3; 12]),
        forkless_core::StreamKind::Request,
        forkless_core::Timestamp::from_millis(1),
    );
    for _ in 0..seq {
        s.on_append(1, forkless_core::EventKind::Intermediate, forkless_core::Timestamp::from_millis(2))
            .unwrap();
    }
    s
}

fn row(prefix: [u8; 28], seq: u64, origin: Origin) -> Write {
    Write::Row { prefix, stream: stream(seq), origin }
}

fn event(prefix: [u8; 28], seq: u64) -> Write {
    let mut key = [0; 36];
    key[..28].copy_from_slice(&prefix);
    key[28..].copy_from_slice(&seq.to_be_bytes());
    Write::Op(Op::PutEvent { key, payload: bytes::Bytes::from_static(b"{}") })
}

/// What the group's writes are, in order: `E` an event, `R(high-water, origin)` a row,
/// `D` a deletion.
fn shape(group: &Group) -> Vec<String> {
    group
        .ops
        .iter()
        .map(|op| match op {
            Op::PutEvent { .. } => "E".to_owned(),
            Op::PutStream { stream: StreamRow::Seen(s), origin, .. } => {
                format!("R({},{origin:?})", s.high_water().get())
            }
            Op::DropStream { .. } | Op::DropSession { .. } => "D".to_owned(),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn a_stream_row_is_written_into_the_one_the_group_holds_for_it() {
    let (a, b) = ([1; 28], [2; 28]);
    let mut group = Group::default();
    group.add([row(a, 0, Origin::New)], [], None);
    for seq in 1..=3 {
        group.add([event(a, seq), row(a, seq, Origin::Existing)], [], None);
    }
    group.add([event(b, 1), row(b, 1, Origin::Existing)], [], None);
    // One row per stream, holding the last state, where the first one was; the creation's
    // origin is kept.
    assert_eq!(shape(&group), ["R(3,New)", "E", "E", "E", "E", "R(1,Existing)"]);
    assert_eq!(group.messages, 5);
}

#[test]
fn a_row_is_never_moved_across_a_deletion_of_its_stream_or_session() {
    let (a, b) = ([1; 28], [2; 28]);
    let mut session = [0u8; 28];
    session[..16].copy_from_slice(&[1; 16]);
    let mut group = Group::default();
    group.add([event(a, 1), row(a, 1, Origin::Existing)], [], None);
    group.add([Write::Op(Op::DropStream { prefix: a })], [], None);
    group.add([row(a, 0, Origin::New)], [], None);
    group.add([event(a, 1), row(a, 1, Origin::Existing)], [], None);
    assert_eq!(shape(&group), ["E", "R(1,Existing)", "D", "R(1,New)", "E"]);

    let mut group = Group::default();
    group.add([row(a, 1, Origin::Existing), row(b, 1, Origin::Existing)], [], None);
    group.add([Write::Op(Op::DropSession { session: [1; 16] })], [], None);
    group.add([row(a, 2, Origin::Existing), row(b, 2, Origin::Existing)], [], None);
    assert_eq!(
        shape(&group),
        ["R(1,Existing)", "R(2,Existing)", "D", "R(2,Existing)"],
        "stream a (of the dropped session) gets a new row; b, of another session, folds"
    );
}

#[test]
fn rows_held_by_a_taken_queue_are_not_written_into_again() {
    let a = [1; 28];
    let mut queued = Group::default();
    queued.add([row(a, 1, Origin::Existing)], [], None);
    let mut writing = Group::default();
    writing.take_from(&mut queued);
    // The writer's group now owns that row: the queue's next row of the stream is its own.
    queued.add([row(a, 2, Origin::Existing)], [], None);
    assert_eq!(shape(&writing), ["R(1,Existing)"]);
    assert_eq!(shape(&queued), ["R(2,Existing)"]);
    // And joined onto an open group, the queue's rows are appended, never folded.
    writing.take_from(&mut queued);
    assert_eq!(shape(&writing), ["R(1,Existing)", "R(2,Existing)"]);
    queued.add([row(a, 3, Origin::Existing)], [], None);
    assert_eq!(shape(&queued), ["R(3,Existing)"]);
}

#[test]
fn a_group_is_opened_by_its_first_write_and_keeps_that_time_when_joined() {
    let mut queued = Group::default();
    assert_eq!(queued.opened, None);
    queued.add([], [], None);
    let first = queued.opened.expect("opened by its first write");
    queued.add([], [], None);
    assert_eq!(queued.opened, Some(first), "a later write does not move it");

    // The writer's empty group takes the queue whole, with its opening time.
    let mut writing = Group::default();
    writing.take_from(&mut queued);
    assert_eq!((writing.opened, queued.opened), (Some(first), None));

    // Joining a later queue to a group already open keeps the earlier time.
    queued.add([], [], None);
    let later = queued.opened.unwrap();
    assert!(later >= first);
    writing.take_from(&mut queued);
    assert_eq!((writing.opened, writing.messages), (Some(first), 3));

    writing.clear();
    assert_eq!(writing.opened, None);
}

#[test]
fn a_window_closes_counting_from_its_first_write_not_from_when_the_writer_looks() {
    let mut group = Group::default();
    group.add([], [], None);
    // Queued 3 ms before the writer looks at it.
    let opened = Instant::now().checked_sub(Duration::from_millis(3)).expect("uptime");
    group.opened = Some(opened);
    let plan = WindowPlan::default();
    assert_eq!(group.closes(WINDOW, &plan), opened + WINDOW / 2);
    let mut flood = flooded();
    flood.synced(Duration::from_micros(300));
    assert_eq!(
        group.closes(WINDOW, &flood),
        opened + WINDOW - Duration::from_micros(300) - DELIVERY_ALLOWANCE
    );
}
