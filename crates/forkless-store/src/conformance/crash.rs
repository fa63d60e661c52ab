//! The conformance suite's check across a crash (promise 4 of the crate docs): what a client
//! received must still be named by the same ids after the store restarts, or be refused.

use crate::{Append, EventKind};
use std::future::Future;

use bytes::Bytes;
use forkless_core::{AppendTarget, GetOutcome, GetRequest, Limits, SeededEntropy, Seq, StreamId};

use super::{T0, cfg, delivered, new_record, payload};
use crate::{Error, Reader, Store, transact};

/// What [`crash_keeps_every_delivered_id`] saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Events the simulated client received before the crash.
    pub received: usize,
    /// Of those, events still readable after it, byte-identical under the same id.
    pub still_named: usize,
    /// Received ids whose resume was refused after the crash (unknown session or stream, or a
    /// cursor ahead of what survived): refusals, never other content.
    pub refused: usize,
}

/// Promise 4 across a crash: a simulated client reads everything `store` delivers on a
/// session's standalone stream and on a labelled request stream, while more events are
/// appended than were delivered; then `crash` turns the store into what a restart after a
/// crash finds (a memory store: a new, empty one; a durable one: its files as a power failure
/// leaves them, reopened). After it, for every event id the client received, either the
/// store still names byte-identical content under it and a resume from it continues right
/// after it, or a resume from it is refused with a typed reason. New events appended after
/// the crash (a restarted emitter, the answer to an orphaned request) must land above every
/// id the client received. Returns what it saw, or the first violation.
pub async fn crash_keeps_every_delivered_id<S, F, Fut>(store: S, crash: F) -> Result<CrashReport, String>
where
    S: Store,
    F: FnOnce(S) -> Fut,
    Fut: Future<Output = S>,
{
    let record = new_record(30, false);
    let sid = record.id();
    let standalone = record.standalone().id();
    store.create(record).await.map_err(|e| format!("create: {e}"))?;
    let (grant, _) =
        transact(&store, sid, |r| r.on_get(&GetRequest::default(), T0, &cfg(), &mut SeededEntropy::new(31)))
            .await
            .map_err(|e| format!("GET: {e}"))?;
    let GetOutcome::Attached(grant) = grant else { return Err(format!("GET not attached: {grant:?}")) };
    let request = StreamId::generate(&mut SeededEntropy::new(32));
    let label = Some(forkless_core::Label::new(b"\"req-1\""));
    let (opened, _) =
        transact(&store, sid, |r| r.open_labeled_request_stream(request, label.clone(), T0, &cfg()))
            .await
            .map_err(|e| format!("open: {e}"))?;
    let streams = [(standalone, grant.epoch), (request, opened.epoch)];
    let mut received: Vec<(StreamId, Seq, Bytes)> = Vec::new();
    let mut cursors = [Seq::PRIMING; 2];
    for round in 0..3u64 {
        for n in 0..20u64 {
            for (i, (stream, _)) in streams.iter().enumerate() {
                let target = if i == 0 { AppendTarget::Standalone } else { AppendTarget::Stream(*stream) };
                store
                    .append(Append {
                        session: sid,
                        target,
                        payload: payload(round * 100 + n),
                        kind: EventKind::Intermediate,
                        now: T0,
                        limits: &Limits::default(),
                    })
                    .await
                    .map_err(|e| format!("append: {e}"))?;
            }
        }
        if round == 0 {
            // An answer (a finished body the client receives at once) is delivered when its
            // append returns, and with it everything appended before it.
            let answer = StreamId::generate(&mut SeededEntropy::new(34));
            let bytes = payload(999);
            let id = store
                .append(Append {
                    session: sid,
                    target: AppendTarget::Answer(answer),
                    payload: bytes.clone(),
                    kind: EventKind::Final,
                    now: T0,
                    limits: &Limits::default(),
                })
                .await
                .map_err(|e| format!("answer: {e}"))?;
            received.push((answer, id.seq, bytes));
            delivered(&store, sid, standalone, 1).await;
            delivered(&store, sid, request, 1).await;
        }
        // The client takes whatever is delivered now, as a writer would, from its cursor.
        for (i, (stream, epoch)) in streams.iter().enumerate() {
            let events = store
                .read(sid, *stream, cursors[i], 10_000, Reader::Attached(*epoch))
                .await
                .map_err(|e| format!("read: {e}"))?;
            for e in events {
                if e.seq != cursors[i].next() {
                    return Err(format!("gap before the crash: {} after {}", e.seq, cursors[i]));
                }
                cursors[i] = e.seq;
                received.push((*stream, e.seq, e.payload));
            }
        }
    }
    let mut report = CrashReport { received: received.len(), ..CrashReport::default() };
    let store = crash(store).await;

    let Some(after) = store.load(sid).await.map_err(|e| format!("load: {e}"))? else {
        // The whole session is gone: every resume of it is a 404 (session unknown).
        report.refused = received.len();
        return Ok(report);
    };
    // A restarted emitter and the orphan's answer land above everything the client saw.
    for (i, (stream, _)) in streams.iter().enumerate() {
        if after.value.stream(*stream).is_none_or(|m| m.is_completed() || m.is_fenced()) {
            continue;
        }
        let target = if i == 0 { AppendTarget::Standalone } else { AppendTarget::Stream(*stream) };
        let id = store
            .append(Append {
                session: sid,
                target,
                payload: Bytes::from_static(b"{\"after\":\"crash\"}"),
                kind: EventKind::ending_if(i == 1),
                now: T0,
                limits: &Limits::default(),
            })
            .await
            .map_err(|e| format!("append after the crash: {e}"))?;
        if id.seq <= cursors[i] {
            return Err(format!(
                "{} was assigned again after the crash (the client held {})",
                id, cursors[i]
            ));
        }
    }
    for (stream, seq, bytes) in &received {
        let lei = forkless_core::EventId::new(*stream, *seq).to_string();
        let req = GetRequest { last_event_id: Some(&lei), stream_token: None };
        let outcome = {
            // Judge on a copy: the decision a resume from this id would get, without ending the
            // session for the ids still to be judged.
            let mut copy = store.load(sid).await.map_err(|e| format!("load: {e}"))?.map(|v| v.value);
            match copy.as_mut() {
                None => None,
                Some(r) => Some(
                    r.on_get(&req, T0, &cfg(), &mut SeededEntropy::new(33)).map_err(|e| format!("{e}"))?,
                ),
            }
        };
        match outcome {
            None | Some(GetOutcome::Rejected(_)) => report.refused += 1,
            Some(GetOutcome::Attached(g)) if g.resumed && g.stream == *stream && g.after == *seq => {
                let events =
                    match store.read(sid, *stream, Seq::new(seq.get() - 1), 1, Reader::Inspector).await {
                        Ok(events) => events,
                        Err(Error::Evicted { .. }) => Vec::new(),
                        Err(e) => return Err(format!("read after the crash: {e}")),
                    };
                match events.first() {
                    Some(e) if e.seq == *seq && e.payload == *bytes => report.still_named += 1,
                    Some(e) if e.seq == *seq => {
                        return Err(format!(
                            "{lei} now names other content: {:?}, the client saw {:?}",
                            String::from_utf8_lossy(&e.payload),
                            String::from_utf8_lossy(bytes)
                        ));
                    }
                    // Evicted since: a resume from it still continues, and the id names nothing else.
                    _ => report.refused += 1,
                }
            }
            Some(other) => return Err(format!("a resume from {lei} was answered {other:?}")),
        }
    }
    Ok(report)
}
