//! How many syscalls one `Durability::Immediate` append costs: run under
//! `strace -f -c -e trace=fdatasync,fsync,pwrite64,ftruncate` with a data directory argument.
//!
//! `cargo run --release -p forkless-store --example commit_cost -- DIR [APPENDS]`

use bytes::Bytes;
use forkless_core::{
    AppendTarget, Limits, NewSession, Revision, SeededEntropy, SessionId, SessionRecord, Timestamp,
};
use forkless_store::{Durability, RedbStore, Store};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: commit_cost DIR [APPENDS]"));
    let n: u64 = args.next().map_or(2000, |a| a.parse().expect("APPENDS is a number"));
    let t = Timestamp::from_millis(1);
    let (store, _) = RedbStore::open(dir.join("cost.redb"), Durability::Immediate, t).expect("open");
    let mut e = SeededEntropy::new(1);
    let new = NewSession {
        id: SessionId::generate(&mut e),
        revision: Revision::V2025_11_25,
        reset_contract: false,
        principal: None,
    };
    let record = SessionRecord::create(new, t, &mut e).expect("create");
    let sid = record.id();
    store.create(record).await.expect("create");
    let limits = Limits { stream_max_events: u64::MAX, ..Limits::default() };
    let started = std::time::Instant::now();
    for i in 0..n {
        let payload = Bytes::from(format!("{{\"n\":{i}}}"));
        store.append(sid, AppendTarget::Standalone, payload, false, t, &limits).await.expect("append");
    }
    let per = started.elapsed() / u32::try_from(n).unwrap_or(u32::MAX);
    println!("{n} immediate appends, {per:?} each");
}
