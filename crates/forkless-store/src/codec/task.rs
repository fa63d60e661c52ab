//! The binary encoding of a task record ([`TaskRecord`]), shared by every store that persists
//! one. Big-endian integers, length-prefixed text, a format byte first so a later format is
//! refused by name rather than misread.
//!
//! ```text
//! task   : 1 id[16] kind principal:opt status message:opt created:u64 updated:u64 ttl_ms:u64
//!          poll_ms:u64 node:opt epoch:u64 policy:u8 inputs:opt answers:map
//! status : 0 (working) | 1 outstanding:map | 2 len:u32 result | 3 0 len:u32 error | 3 1 (owner lost) | 4 (cancelled)
//! kind   : 0 (a task) | 1 fingerprint[32] (a keyed request)
//! policy : 0 fail | 1 restart
//! map    : count:u32 (len:u32 key len:u32 value)*
//! opt    : 0 | 1 len:u32 bytes
//! ```
//!
//! It owns the bytes of one record, not where a store keeps them.

use std::collections::BTreeMap;
use std::time::Duration;

use forkless_core::task::{
    Cancelled, Completed, FailCause, Failed, InputRequired, OnOwnerLost, TaskKind, TaskOwner, TaskParts,
    TaskRecord, TaskStatus, Working,
};
use forkless_core::{Epoch, TaskId};

use super::{Decoder, Encoder};
use crate::Error;

/// The format this code writes and reads.
const FORMAT: u8 = 1;

fn corrupt(what: &str) -> Error {
    Error::Corrupt(format!("undecodable task record: {what}"))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn map(w: &mut Encoder, m: &BTreeMap<String, String>) {
    w.0.extend_from_slice(&(m.len() as u32).to_be_bytes());
    for (k, v) in m {
        w.len_bytes(k.as_bytes());
        w.len_bytes(v.as_bytes());
    }
}

fn text(bytes: &[u8]) -> Result<String, Error> {
    String::from_utf8(bytes.to_vec()).map_err(|_| corrupt("text is not UTF-8"))
}

fn opt_text(bytes: Option<Vec<u8>>) -> Result<Option<String>, Error> {
    bytes.map(|b| String::from_utf8(b).map_err(|_| corrupt("text is not UTF-8"))).transpose()
}

fn read_map(r: &mut Decoder<'_>) -> Result<BTreeMap<String, String>, Error> {
    let n = u32::from_be_bytes(r.array::<4>()?);
    let mut m = BTreeMap::new();
    for _ in 0..n {
        let k = text(r.len_bytes()?)?;
        let v = text(r.len_bytes()?)?;
        m.insert(k, v);
    }
    Ok(m)
}

/// Encode a task record.
pub fn encode_task(t: &TaskRecord) -> Vec<u8> {
    let mut w = Encoder(Vec::with_capacity(128));
    w.u8(FORMAT);
    w.bytes(t.id().as_bytes());
    match t.kind() {
        TaskKind::Task => w.u8(0),
        TaskKind::Request { fingerprint } => {
            w.u8(1);
            w.bytes(&fingerprint);
        }
    }
    w.opt(t.principal().map(str::as_bytes));
    match t.status() {
        TaskStatus::Working(_) => w.u8(0),
        TaskStatus::InputRequired(waiting) => {
            w.u8(1);
            map(&mut w, &waiting.outstanding);
        }
        TaskStatus::Completed(done) => {
            w.u8(2);
            w.len_bytes(done.result.as_bytes());
        }
        TaskStatus::Failed(Failed { cause: FailCause::Error(error) }) => {
            w.u8(3);
            w.u8(0);
            w.len_bytes(error.as_bytes());
        }
        TaskStatus::Failed(Failed { cause: FailCause::OwnerLost }) => {
            w.u8(3);
            w.u8(1);
        }
        TaskStatus::Cancelled(_) => w.u8(4),
    }
    w.opt(t.message().map(str::as_bytes));
    w.ts(t.created());
    w.ts(t.updated());
    w.u64(millis(t.ttl()));
    w.u64(millis(t.poll_interval()));
    w.opt(t.owner().node.as_deref().map(str::as_bytes));
    w.u64(t.owner().epoch.get());
    w.u8(match t.policy() {
        OnOwnerLost::Fail => 0,
        OnOwnerLost::Restart => 1,
    });
    w.opt(t.inputs().map(str::as_bytes));
    map(&mut w, t.answers());
    w.0
}

/// Decode a task record; [`Error::Corrupt`] on anything but what [`encode_task`] writes.
pub fn decode_task(bytes: &[u8]) -> Result<TaskRecord, Error> {
    let mut r = Decoder(bytes);
    match r.u8()? {
        FORMAT => {}
        other => return Err(corrupt(&format!("unknown format {other}"))),
    }
    let id = TaskId::from_bytes(r.array()?);
    let kind = match r.u8()? {
        0 => TaskKind::Task,
        1 => TaskKind::Request { fingerprint: r.array()? },
        _ => return Err(corrupt("bad kind tag")),
    };
    let principal = opt_text(r.opt()?)?;
    let status = match r.u8()? {
        0 => TaskStatus::Working(Working),
        1 => TaskStatus::InputRequired(InputRequired { outstanding: read_map(&mut r)? }),
        2 => TaskStatus::Completed(Completed { result: text(r.len_bytes()?)? }),
        3 => TaskStatus::Failed(Failed {
            cause: match r.u8()? {
                0 => FailCause::Error(text(r.len_bytes()?)?),
                1 => FailCause::OwnerLost,
                _ => return Err(corrupt("bad failure tag")),
            },
        }),
        4 => TaskStatus::Cancelled(Cancelled),
        _ => return Err(corrupt("bad status tag")),
    };
    let message = opt_text(r.opt()?)?;
    let created = r.ts()?;
    let updated = r.ts()?;
    let ttl = Duration::from_millis(r.u64()?);
    let poll_interval = Duration::from_millis(r.u64()?);
    let owner = TaskOwner { node: opt_text(r.opt()?)?, epoch: Epoch::new(r.u64()?) };
    let on_owner_lost = match r.u8()? {
        0 => OnOwnerLost::Fail,
        1 => OnOwnerLost::Restart,
        _ => return Err(corrupt("bad policy tag")),
    };
    let inputs = opt_text(r.opt()?)?;
    let answers = read_map(&mut r)?;
    if !r.0.is_empty() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(TaskRecord::restore(TaskParts {
        id,
        kind,
        principal,
        status,
        message,
        created,
        updated,
        ttl,
        poll_interval,
        owner,
        on_owner_lost,
        inputs,
        answers,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkless_core::{NewTask, Outcome, SeededEntropy, Timestamp};

    fn sample(i: u64) -> TaskRecord {
        TaskRecord::new(NewTask {
            id: TaskId::generate(&mut SeededEntropy::new(i)),
            kind: if i % 4 == 3 { TaskKind::Request { fingerprint: [i as u8; 32] } } else { TaskKind::Task },
            principal: i.is_multiple_of(2).then(|| format!("issuer subject-{i}")),
            owner: TaskOwner { node: i.is_multiple_of(3).then(|| "node-a".into()), epoch: Epoch::new(i) },
            on_owner_lost: if i.is_multiple_of(2) { OnOwnerLost::Fail } else { OnOwnerLost::Restart },
            inputs: (i % 2 == 1).then(|| format!(r#"{{"n":{i}}}"#)),
            ttl: Duration::from_millis(60_000 + i),
            poll_interval: Duration::from_millis(500),
            now: Timestamp::from_millis(1_000 * i),
        })
    }

    #[test]
    fn every_status_reads_back_as_it_was_written() {
        let e = |t: &TaskRecord| t.owner().epoch;
        let now = Timestamp::from_millis(5);
        let mut records = Vec::new();
        for i in 0..6 {
            let mut t = sample(i);
            match i {
                1 => {
                    let asks = [("a".to_owned(), "{\"m\":1}".to_owned())].into();
                    t.on_input_needed(asks, e(&t), now).expect("asks");
                }
                2 => t.on_finished(Outcome::Result("{\"content\":[]}".into()), e(&t), now).expect("ends"),
                3 => t.on_finished(Outcome::Error("{\"code\":-1}".into()), e(&t), now).expect("ends"),
                4 => {
                    let lost = t.owner().clone();
                    t.on_owner_lost(&lost, None, now);
                }
                5 => {
                    t.on_cancel_requested(now);
                }
                _ => {}
            }
            records.push(t);
        }
        for t in records {
            let bytes = encode_task(&t);
            assert_eq!(decode_task(&bytes).expect("decodes"), t);
            // Every strict prefix is refused, never misread.
            for cut in 0..bytes.len() {
                assert!(decode_task(&bytes[..cut]).is_err(), "prefix of {cut} bytes decoded");
            }
        }
    }

    #[test]
    fn another_format_is_refused_by_name() {
        let mut bytes = encode_task(&sample(1));
        bytes[0] = 9;
        assert!(matches!(decode_task(&bytes), Err(Error::Corrupt(m)) if m.contains("unknown format 9")));
    }
}
