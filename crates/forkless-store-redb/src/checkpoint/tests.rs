//! Which writes a checkpoint may skip.

use super::*;

fn key(session: u8, stream: u8, seq: u64) -> [u8; 36] {
    let mut k = [0u8; 36];
    k[0] = session;
    k[16] = stream;
    k[28..].copy_from_slice(&seq.to_be_bytes());
    k
}

fn prefix(session: u8, stream: u8) -> [u8; 28] {
    let mut p = [0u8; 28];
    p.copy_from_slice(&key(session, stream, 0)[..28]);
    p
}

fn event(session: u8, stream: u8, seq: u64) -> Op {
    Op::PutEvent { key: key(session, stream, seq), payload: bytes::Bytes::from_static(b"{}") }
}

/// Writes a later op deletes are skipped; everything else applies.
#[test]
fn superseded_skips_only_what_a_later_op_deletes() {
    let mut session_one = [0u8; 16];
    session_one[0] = 1;
    let ops = vec![
        event(1, 1, 1),                                  // 0: its stream is dropped below
        Op::Trim { prefix: prefix(1, 1), low_water: 1 }, // 1: likewise
        event(1, 2, 1),                                  // 2: kept: stream 2 stays
        Op::PutStream { prefix: prefix(1, 1), stream: vec![1].into(), origin: Origin::Existing }, // 3: dropped below
        Op::DropStream { prefix: prefix(1, 1) },                                                  // 4
        event(2, 1, 1), // 5: its session's events go below
        Op::DropEvents {
            session: {
                let mut s = [0u8; 16];
                s[0] = 2;
                s
            },
        }, // 6
        event(2, 1, 2), // 7: after the drop: kept
        Op::PutHeader { session: session_one, header: vec![1] }, // 8: rewritten below
        Op::PutHeader { session: session_one, header: vec![2] }, // 9
    ];
    let skip = Superseded::default().of(&ops).to_vec();
    assert_eq!(skip, [true, true, false, true, false, true, false, false, true, false]);
    // Tables kept from an earlier use carry nothing into the next: the writer thread
    // reuses one for every group, and a leftover key would skip a write that must stay.
    let mut kept = Superseded::default();
    kept.of(&ops);
    let later = [
        event(1, 1, 2), // its stream's drop was in the earlier list, not this one
        Op::PutStream { prefix: prefix(1, 1), stream: vec![1].into(), origin: Origin::Existing },
        Op::PutHeader { session: session_one, header: vec![3] },
    ];
    assert_eq!(kept.of(&later), [false, false, false], "a later list starts afresh");
    assert_eq!(kept.of(&ops), skip);
}

/// Events a later trim evicts (an ended session's, above all) are never written; those at
/// or above its mark, and those of other streams, are.
#[test]
fn events_below_a_later_trim_are_never_written() {
    let trim = |stream, low_water| Op::Trim { prefix: prefix(1, stream), low_water };
    let ops = vec![
        event(1, 1, 1), // 0: below the later, higher mark
        event(1, 1, 2), // 1: likewise
        trim(1, 2),     // 2: kept: it deletes what earlier checkpoints stored
        event(1, 1, 3), // 3: below the mark of 5 below
        event(1, 1, 4), // 4: likewise
        event(1, 1, 5), // 5: at the mark: retained
        event(1, 2, 1), // 6: another stream
        trim(1, 5),     // 7
        event(1, 1, 6), // 8: after every trim
    ];
    assert_eq!(Superseded::default().of(&ops), [true, true, false, true, true, false, false, false, false]);
}

/// A stream created and deleted within one list of writes never reaches the store: its
/// deletion is skipped too. One that existed before keeps its deletion.
#[test]
fn a_stream_created_and_dropped_in_one_checkpoint_is_never_stored() {
    let put = |stream, origin| Op::PutStream { prefix: prefix(1, stream), stream: vec![0].into(), origin };
    let ops = vec![
        put(1, Origin::New),
        event(1, 1, 1),
        Op::DropStream { prefix: prefix(1, 1) },
        put(2, Origin::Existing),
        Op::DropStream { prefix: prefix(1, 2) },
    ];
    assert_eq!(Superseded::default().of(&ops), [true, true, true, true, false]);
}
