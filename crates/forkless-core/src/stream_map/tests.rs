//! Unit tests of `stream_map`.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::stream::{EventKind, StreamKind};
use crate::time::Timestamp;

fn stream(n: u64, high_water: u64) -> Stream {
    let mut bytes = [0u8; 12];
    bytes[..8].copy_from_slice(&n.to_be_bytes());
    let mut s = Stream::new(StreamId::from_bytes(bytes), StreamKind::Request, Timestamp::from_millis(0));
    for _ in 0..high_water {
        let _ = s.on_append(1, EventKind::Intermediate, Timestamp::from_millis(0));
    }
    s
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u64),
    Remove(u64),
    RemoveMany(Vec<u64>),
    Touch(u64),
    Snapshot,
    MarkClean,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..200).prop_map(Op::Insert),
        2 => (0u64..200).prop_map(Op::Remove),
        1 => prop::collection::vec(0u64..200, 0..60).prop_map(Op::RemoveMany),
        2 => (0u64..200).prop_map(Op::Touch),
        1 => Just(Op::Snapshot),
        1 => Just(Op::MarkClean),
    ]
}

/// The changes a plain ordered map would report between two versions.
fn expected(before: &BTreeMap<u64, Stream>, after: &BTreeMap<u64, Stream>) -> Vec<(u64, u8)> {
    let mut keys: Vec<u64> = before.keys().chain(after.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| match (before.get(&k), after.get(&k)) {
            (None, Some(_)) => Some((k, 0)),
            (Some(a), Some(b)) if a != b => Some((k, 1)),
            (Some(_), None) => Some((k, 2)),
            _ => None,
        })
        .collect()
}

fn reported(after: &StreamMap, before: &StreamMap) -> Vec<(u64, u8)> {
    let key = |s: &Stream| u64::from_be_bytes(s.id().as_bytes()[..8].try_into().unwrap_or_default());
    after
        .changes_since(before)
        .map(|c| match c {
            StreamChange::Added(s) => (key(s), 0),
            StreamChange::Changed { after, .. } => (key(after), 1),
            StreamChange::Removed(s) => (key(s), 2),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Against a BTreeMap: same contents and order after any operations, and the change
    /// walk between any snapshot and now reports exactly the differences.
    #[test]
    fn behaves_like_an_ordered_map(ops in prop::collection::vec(op(), 1..400)) {
        let mut map = StreamMap::default();
        let mut model = BTreeMap::new();
        let (mut snap, mut snap_model) = (map.clone(), model.clone());
        for op in ops {
            match op {
                Op::Insert(k) => {
                    let fresh = !model.contains_key(&k);
                    prop_assert_eq!(map.insert(stream(k, 0)), fresh);
                    model.entry(k).or_insert_with(|| stream(k, 0));
                }
                Op::Remove(k) => {
                    prop_assert_eq!(map.remove(stream(k, 0).id()).is_some(), model.remove(&k).is_some());
                }
                Op::RemoveMany(mut keys) => {
                    keys.sort_unstable();
                    keys.dedup();
                    let ids: Vec<_> = keys.iter().map(|&k| stream(k, 0).id()).collect();
                    let gone: Vec<_> = map.remove_sorted(&ids).iter().map(Stream::id).collect();
                    let expected: Vec<_> =
                        keys.iter().filter(|k| model.remove(k).is_some()).map(|&k| stream(k, 0).id()).collect();
                    prop_assert_eq!(gone, expected);
                }
                Op::Touch(k) => {
                    let id = stream(k, 0).id();
                    if let Some(s) = map.get_mut(id) {
                        let _ = s.on_append(1, EventKind::Intermediate, Timestamp::from_millis(1));
                    }
                    if let Some(s) = model.get_mut(&k) {
                        let _ = s.on_append(1, EventKind::Intermediate, Timestamp::from_millis(1));
                    }
                }
                Op::Snapshot => {
                    snap = map.clone();
                    snap_model = model.clone();
                }
                Op::MarkClean => map.mark_clean(),
            }
            prop_assert_eq!(map.len(), model.len());
            prop_assert!(map.chunks.iter().all(|c| !c.is_empty() && c.len() <= CHUNK));
            // Each chunk's last id kept beside it, where lookups find chunks.
            let lasts: Vec<_> = map.chunks.iter().filter_map(|c| c.last().map(Stream::id)).collect();
            prop_assert_eq!(&map.chunks.lasts, &lasts);
            for k in model.keys() {
                prop_assert_eq!(map.get(stream(*k, 0).id()), model.get(k));
            }
            prop_assert!(map.iter().eq(model.values()));
            for k in [0, 57, 199] {
                prop_assert_eq!(map.get(stream(k, 0).id()), model.get(&k));
            }
        }
        // Both directions: from a clean ancestor (touched streams only) and otherwise (walk).
        prop_assert_eq!(reported(&map, &snap), expected(&snap_model, &model));
        prop_assert_eq!(reported(&snap, &map), expected(&model, &snap_model));
        prop_assert_eq!(map == snap, model == snap_model);
    }
}

#[test]
fn a_change_copies_one_chunk_and_the_walk_skips_the_rest() {
    let mut map = StreamMap::default();
    for k in 0..1024 {
        assert!(map.insert(stream(k, 0)));
    }
    let before = map.clone();
    let shared = |a: &StreamMap, b: &StreamMap| {
        a.chunks.iter().zip(b.chunks.iter()).filter(|(x, y)| Arc::ptr_eq(x, y)).count()
    };
    assert_eq!(shared(&map, &before), map.chunks.len());
    let _ = map
        .get_mut(stream(500, 0).id())
        .map(|s| s.on_append(1, EventKind::Intermediate, Timestamp::from_millis(1)));
    assert_eq!(shared(&map, &before), map.chunks.len() - 1);
    let changes: Vec<_> = map.changes_since(&before).map(|c| c.id()).collect();
    assert_eq!(changes, vec![stream(500, 0).id()]);
    // From a clean version, only touched streams are compared, with the same answer.
    map.mark_clean();
    let clean = map.clone();
    for k in [3, 700, 701] {
        let _ = map
            .get_mut(stream(k, 0).id())
            .map(|s| s.on_append(1, EventKind::Intermediate, Timestamp::from_millis(2)));
    }
    assert!(matches!(map.changes_since(&clean), Changes::Touched { n: 3, .. }));
    let ids: Vec<_> = map.changes_since(&clean).map(|c| c.id()).collect();
    assert_eq!(ids, [3, 700, 701].map(|k| stream(k, 0).id()));
    // A pass that changes nothing copies nothing.
    let again = map.clone();
    map.update_each(|_| {});
    assert_eq!(shared(&map, &again), map.chunks.len());
}
