//! The one SSE writer per attachment: replay and live delivery on one path.
//!
//! This module owns turning a granted attachment ([`forkless_core::Grant`]) into an HTTP body.
//! The body is a `futures::Stream` polled by hyper, so a chunk is produced only when hyper
//! has room for it: a connection that stops draining stops polling and stops reporting
//! progress to its [`AttachmentLease`], and the node's stall watch detaches it after `grace`
//! (under per-connection liveness it stops renewing, and the core detaches it). It does not
//! decide who may attach (the core did) and never writes to a stream whose epoch moved on.
//!
//! It also owns the body of a request stream answered at once ([`finished_body`]): the whole
//! stream was known before its connection was served, and the one append that stored it also
//! released the attachment, so it goes out with a length and no writer runs.
//!
//! ```text
//!  start ─▶ acquire the attachment lease: a displaced writer has stopped (≤ grace), and one on
//!           another node can no longer read (the store's handover) ─▶ preamble
//!  loop: epoch still ours, stream not fenced, lease not stalled, no shutdown?  else end
//!        queued chunk?                   → yield it
//!        cursor < delivered?             → gather: while events keep arriving, up to
//!                                          gather_passes yields to the runtime, so a burst
//!                                          leaves in one write; then read a batch from the
//!                                          cursor (the store checks our epoch again), queue,
//!                                          advance
//!        completed and cursor = delivered → end
//!        wait: store signal | keep-alive timer | shutdown | poll_after (then retry: and end)
//!  drop ─▶ release the lease; detach(stream, epoch) through the core (a stale epoch is fine)
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use forkless_core::{Epoch, EventId, Grant, Liveness, Seq, SessionId, StreamId};
use forkless_store::{Reader, Store, StreamEnd, StreamSignal, StreamWatch};
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::answer::start_detached;
use crate::clock::now;
use crate::common::Common;
use crate::metrics::Metrics;
use crate::node::{AttachmentLease, Held};
use crate::sse;

/// Yields with nothing new after which a writer stops gathering a burst ([`Writer::gather`]).
/// One is too few: an event travels through a few tasks (a backend's channel, the message
/// layer, the store) before it is appended, so a burst's next event is often two yields
/// behind the last (measured: with one, rmcp's progress bursts still left one event per
/// write).
const QUIET_PASSES: u32 = 2;

/// What kind of preamble the body starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Preamble {
    /// A new stream in 2025-11-25: the priming event `<stream>.0` with `retry:`.
    Priming,
    /// Only `retry:` (older revisions, and resumed streams).
    Retry,
}

/// A writer's settings beyond the grant.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriterOptions {
    pub(crate) preamble: Preamble,
    /// Close the connection (not the stream) after this long (2025-11-25 polling).
    pub(crate) poll_after: Option<Duration>,
}

/// The HTTP body serving `grant` on `session`.
pub(crate) fn body<S: Store>(
    common: Arc<Common<S>>,
    session: SessionId,
    grant: Grant,
    watch: StreamWatch,
    opts: WriterOptions,
) -> Body {
    let span =
        tracing::info_span!("sse", session = %session, stream = %grant.stream, epoch = grant.epoch.get());
    let signal = watch.current();
    if grant.resumed {
        common.metrics.replayed(signal.delivered.get().saturating_sub(grant.after.get()));
    }
    let now = Instant::now();
    let keep_alive = common.cfg.core.keep_alive;
    let handover = grant.displaced.then(|| now + common.store.handover());
    let writer = Writer {
        guard: DetachGuard {
            common: common.clone(),
            session,
            stream: grant.stream,
            epoch: grant.epoch,
            lease: None,
        },
        common,
        cursor: grant.after,
        watch,
        signal,
        queue: VecDeque::new(),
        phase: Phase::Starting,
        last_write: now,
        last_renew: now,
        wrote_since_renew: false,
        keep_alive,
        poll_deadline: opts.poll_after.map(|d| now + d),
        handover,
        opts,
        span,
    };
    let stream = futures::stream::unfold(writer, |mut w| async move {
        let span = w.span.clone();
        let next = w.next().instrument(span).await;
        next.map(|chunk| (Ok::<_, Infallible>(chunk), w))
    });
    Body::from_stream(stream)
}

/// The whole body of a request stream answered at once ([`forkless_core::AppendTarget::Answer`]):
/// its preamble and its one event, sent with a length like any finished body. No writer
/// serves it, so nothing here can outlive the stream's one attachment.
pub(crate) fn finished_body(preamble: Preamble, event: EventId, payload: &[u8], retry: Duration) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 128);
    put_preamble(&mut out, preamble, event.stream, retry);
    sse::put_event(&mut out, Some(&event), payload);
    out.freeze()
}

/// The start of every new SSE body of `stream`: its priming event, or `retry:` alone.
fn put_preamble(out: &mut BytesMut, preamble: Preamble, stream: StreamId, retry: Duration) {
    match preamble {
        Preamble::Priming => sse::put_priming(out, &EventId::new(stream, Seq::PRIMING), retry),
        Preamble::Retry => sse::put_retry_alone(out, retry),
    }
}

/// Where a writer is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not yet polled: it has still to wait for a displaced writer and queue its preamble.
    Starting,
    /// Delivering (replay, then live).
    Serving,
    /// Yielding what is queued, then ending (2025-11-25 polling closes the connection).
    Closing,
    /// Ended: the body yields nothing more.
    Finished,
}

struct Writer<S: Store> {
    common: Arc<Common<S>>,
    guard: DetachGuard<S>,
    cursor: Seq,
    watch: StreamWatch,
    /// The last signal seen.
    signal: StreamSignal,
    queue: VecDeque<Bytes>,
    phase: Phase,
    last_write: Instant,
    last_renew: Instant,
    wrote_since_renew: bool,
    keep_alive: Duration,
    poll_deadline: Option<Instant>,
    /// A live attachment was displaced: write nothing before this instant, by when a displaced
    /// writer on another node can no longer read (see [`forkless_store::Ownership::handover`]).
    handover: Option<Instant>,
    opts: WriterOptions,
    span: tracing::Span,
}

impl<S: Store> Writer<S> {
    fn session(&self) -> SessionId {
        self.guard.session
    }
    fn stream(&self) -> StreamId {
        self.guard.stream
    }
    fn epoch(&self) -> Epoch {
        self.guard.epoch
    }

    /// Whether this connection may still write: its epoch is current and the stream is not
    /// fenced. Checked before every chunk.
    fn still_ours(&self) -> bool {
        let now = self.watch.current();
        let latest = if self.signal.end == Some(StreamEnd::Fenced) { self.signal } else { now };
        latest.epoch == self.epoch() && latest.end != Some(StreamEnd::Fenced)
    }

    fn finish(&mut self, why: &'static str) -> Option<Bytes> {
        tracing::debug!(cursor = self.cursor.get(), why, "sse connection ends");
        self.phase = Phase::Finished;
        None
    }

    async fn next(&mut self) -> Option<Bytes> {
        if self.phase == Phase::Finished {
            return None;
        }
        if self.phase == Phase::Starting {
            self.start().await;
            if self.phase == Phase::Finished {
                return None;
            }
        }
        // Being polled again means hyper took the previous chunk: a completed write.
        if self.wrote_since_renew {
            if let Some(lease) = &self.guard.lease {
                lease.progressed();
            }
            let renews = self.common.cfg.core.liveness == Liveness::PerConnection;
            if renews && self.last_renew.elapsed() >= self.keep_alive / 2 && !self.renew().await {
                return self.finish("liveness renewal refused");
            }
        }
        loop {
            if !self.still_ours() {
                return self.finish("fenced or displaced");
            }
            if self.guard.lease.as_ref().is_some_and(AttachmentLease::is_stalled) {
                return self.finish("stalled: no progress within grace");
            }
            // Once shutdown begins nothing more is written, even what is ready: the events
            // stay in the store for the client's resume, and every stream ends promptly.
            if self.common.shutdown.is_cancelled() {
                return self.finish("server shutting down");
            }
            if let Some(chunk) = self.queue.pop_front() {
                self.last_write = Instant::now();
                self.wrote_since_renew = true;
                return Some(chunk);
            }
            if self.phase == Phase::Closing {
                return self.finish("closing");
            }
            self.signal = self.watch.mark_seen();
            if self.cursor < self.signal.delivered {
                self.signal = self.gather(self.signal).await;
                if let Err(why) = self.read_batch().await {
                    return self.finish(why);
                }
                continue;
            }
            if self.signal.end == Some(StreamEnd::Completed) {
                return self.finish("stream completed");
            }
            let keep_alive_at = self.last_write + self.keep_alive;
            let poll_at = self.poll_deadline;
            let lease = self.guard.lease.as_ref();
            tokio::select! {
                biased;
                () = self.common.shutdown.cancelled() => return self.finish("server shutting down"),
                () = stalled(lease) => return self.finish("stalled: no progress within grace"),
                sig = self.watch.changed() => self.signal = sig,
                () = tokio::time::sleep_until(keep_alive_at) => self.queue.push_back(sse::comment("keep-alive")),
                () = sleep_until_opt(poll_at) => {
                    // Polling: close the connection, not the stream; the client reconnects
                    // with Last-Event-ID after `retry`.
                    self.queue.push_back(sse::retry(self.common.cfg.core.retry_interval));
                    self.phase = Phase::Closing;
                }
            }
        }
    }

    /// Give a burst the chance to finish before reading it: up to `gather_passes` yields to
    /// the runtime while events keep arriving, so one burst leaves in one write rather than
    /// one write (and one wake-up of the client) per event. It stops after [`QUIET_PASSES`]
    /// bring nothing new, once a read batch is waiting, or when the stream ends; it never
    /// waits on a timer, so an idle server delivers a lone event within microseconds.
    async fn gather(&mut self, mut sig: StreamSignal) -> StreamSignal {
        let batch = u64::try_from(self.common.cfg.read_batch).unwrap_or(u64::MAX);
        let mut quiet = 0;
        for _ in 0..self.common.cfg.gather_passes {
            if sig.end.is_some() || sig.delivered.get().saturating_sub(self.cursor.get()) >= batch {
                break;
            }
            tokio::task::yield_now().await;
            let now = self.watch.current();
            quiet = if now == sig { quiet + 1 } else { 0 };
            if quiet == QUIET_PASSES {
                break;
            }
            sig = now;
        }
        sig
    }

    /// Acquire the attachment lease (any older writer of this stream has stopped, or `grace`
    /// passed), then queue the preamble.
    async fn start(&mut self) {
        self.phase = Phase::Serving;
        let held = Held { session: self.session(), stream: self.stream(), epoch: self.epoch() };
        let acquire = self.common.attachments.acquire(held, self.common.cfg.core.grace);
        let until = self.handover;
        let handover = async move {
            if let Some(at) = until {
                tokio::time::sleep_until(at).await;
            }
        };
        tokio::select! {
            (lease, ()) = async { tokio::join!(acquire, handover) } => self.guard.lease = Some(lease),
            () = self.common.shutdown.cancelled() => {
                self.phase = Phase::Finished;
                return;
            }
        }
        let mut chunk = BytesMut::with_capacity(64);
        put_preamble(&mut chunk, self.opts.preamble, self.stream(), self.common.cfg.core.retry_interval);
        self.queue.push_back(chunk.freeze());
    }

    async fn read_batch(&mut self) -> Result<(), &'static str> {
        let max = self.common.cfg.read_batch;
        // The store checks the epoch too (the fence where the data is read): a writer that has
        // not yet noticed its displacement still gets nothing.
        let reader = Reader::Attached(self.epoch());
        let events =
            match self.common.store.read(self.session(), self.stream(), self.cursor, max, reader).await {
                Ok(events) => events,
                Err(forkless_store::Error::Core(
                    e @ (forkless_core::Error::StaleEpoch { .. } | forkless_core::Error::StreamFenced),
                )) => {
                    tracing::debug!(error = %e, "read refused: fenced or displaced");
                    return Err("fenced or displaced");
                }
                Err(forkless_store::Error::Evicted { low_water }) => {
                    tracing::info!(
                        cursor = self.cursor.get(),
                        low_water = low_water.get(),
                        "reader fell behind retention"
                    );
                    Metrics::inc(&self.common.metrics.evictions);
                    return Err("events after the cursor were evicted");
                }
                Err(e) => {
                    tracing::info!(error = %e, "read failed");
                    return Err("read failed");
                }
            };
        if events.is_empty() {
            return Err("store returned no events below its high-water mark");
        }
        // The whole batch becomes one chunk: one frame through the body and one write, rather
        // than one per event (a replay or a burst is bound by per-chunk overhead, not bytes).
        // Fencing is still checked before every chunk, and a chunk holds only events the store
        // returned for this cursor.
        let size: usize = events.iter().map(|e| e.payload.len() + 80).sum();
        Metrics::inc(&self.common.metrics.sse_writes);
        Metrics::add(&self.common.metrics.sse_events, events.len() as u64);
        let mut chunk = BytesMut::with_capacity(size);
        for e in events {
            // The store promises gap-free reads; a gap would break the invariant, so refuse it.
            if e.seq != self.cursor.next() {
                tracing::warn!(cursor = self.cursor.get(), seq = e.seq.get(), "gap in stored events");
                return Err("gap in stored events");
            }
            self.cursor = e.seq;
            let id = EventId::new(self.stream(), e.seq);
            sse::put_event(&mut chunk, Some(&id), &e.payload);
        }
        self.queue.push_back(chunk.freeze());
        Ok(())
    }

    /// Renew liveness through the core; false if this attachment is over.
    async fn renew(&mut self) -> bool {
        self.last_renew = Instant::now();
        self.wrote_since_renew = false;
        let (stream, epoch, cfg) = (self.stream(), self.epoch(), self.common.cfg.core);
        let out = forkless_store::transact(&*self.common.store, self.session(), |r| {
            r.on_write_completed(stream, epoch, now(), &cfg)
        })
        .await;
        match out {
            Ok(_) => true,
            Err(forkless_store::Error::Core(e)) => {
                tracing::debug!(error = %e, "liveness renewal refused");
                false
            }
            // A failing store is no proof this connection is gone; the core detaches it after
            // grace if renewals keep failing.
            Err(e) => {
                tracing::info!(error = %e, "liveness renewal failed");
                true
            }
        }
    }
}

async fn stalled(lease: Option<&AttachmentLease>) {
    match lease {
        Some(lease) => lease.stalled().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Detaches the attachment through the core when the body is dropped (finished, or the
/// client went away), and releases its lease.
struct DetachGuard<S: Store> {
    common: Arc<Common<S>>,
    session: SessionId,
    stream: StreamId,
    epoch: Epoch,
    lease: Option<AttachmentLease>,
}

impl<S: Store> Drop for DetachGuard<S> {
    fn drop(&mut self) {
        let (common, session, stream, epoch) = (self.common.clone(), self.session, self.stream, self.epoch);
        drop(self.lease.take());
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        // Done on the spot with an in-memory store; in a task of its own if the store waits.
        let _ = start_detached(async move {
            let out =
                forkless_store::transact(&*common.store, session, |r| r.on_detach(stream, epoch, now()))
                    .await;
            match out {
                Ok(_) => tracing::debug!(session = %session, stream = %stream, "detached"),
                // Displaced, fenced, ended or already detached by liveness: nothing to undo.
                Err(forkless_store::Error::Core(_) | forkless_store::Error::SessionUnknown) => {}
                Err(e) => tracing::info!(session = %session, stream = %stream, error = %e, "detach failed"),
            }
        });
    }
}
