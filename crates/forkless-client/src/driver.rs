//! Stream drivers: one task per SSE stream that reads its connections, feeds the resumption
//! state machine, routes the messages, and reconnects with backoff when a connection is lost.
//!
//! Decisions about continuity are the [`StreamTracker`]'s; pacing is the [`RetryPolicy`]'s;
//! message routing and session ends are the client's. This module is the loop that connects
//! them to the network, plus [`StreamControl`], the handle tools use to watch and cut streams.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use std::time::Duration;

use forkless_core::{EntropySource, Revision, StreamId};
use futures::StreamExt;
use reqwest::Response;
use sse_stream::SseByteStream;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::RetryPolicy;
use crate::error::Error;
use crate::events::{ClientEvent, StreamOrigin};
use crate::http::{self, BodyKind, IdleGuarded};
use crate::jsonrpc::{self, Incoming};
use crate::resume::{Continuation, Continuity, Opened, ResumeHeaders, Step, StreamTracker};
use crate::stats::StreamStats;

/// What a stream's driver needs from the session it serves (implemented by the session in
/// `inner.rs`): the registry of live streams, the retry settings, where messages and events
/// go, and the session's own requests (a GET to resume, a DELETE to end it). The driver knows
/// nothing else of the session.
pub(crate) trait Host: Send + Sync + 'static {
    /// The registry of this session's streams.
    fn streams(&self) -> &Mutex<Streams>;
    /// How to retry a broken stream.
    fn retry(&self) -> RetryPolicy;
    /// How long a stream may stay silent before it counts as broken.
    fn idle_timeout(&self) -> Option<Duration>;
    /// What a request's stream accepts as its continuation.
    fn continuation(&self) -> Continuation;
    /// The randomness behind retry jitter.
    fn jitter(&self) -> &Mutex<Box<dyn EntropySource + Send>>;
    /// Tell the application.
    fn emit(&self, event: ClientEvent);
    /// Route one message a stream delivered; whether it answered a request of this stream.
    fn dispatch(&self, view: &SessionView, msg: Incoming, origin: StreamOrigin) -> bool;
    /// The session cannot go on.
    fn end_session(&self, view: &SessionView, error: Error);
    /// Whether request `id` still waits for its response.
    fn is_pending(&self, id: u64) -> bool;
    /// Fail request `id`: its stream cannot be continued.
    fn fail_request(&self, id: u64, error: Error);
    /// The server's advertised grace window.
    fn note_grace(&self, view: &SessionView, grace: Duration);
    /// `GET` on the session, resuming when `resume` is given.
    fn get(
        &self,
        view: &SessionView,
        resume: Option<&ResumeHeaders>,
    ) -> impl Future<Output = Result<Response, Error>> + Send;
    /// `DELETE` the session.
    fn delete(&self, view: &SessionView) -> impl Future<Output = Result<(), Error>> + Send;
}

/// A snapshot of the session the caller works in. Streams keep the one they were opened in,
/// so a stream of an ended session never talks to its successor.
#[derive(Clone, Debug)]
pub(crate) struct SessionView {
    pub(crate) id: Option<String>,
    pub(crate) revision: Option<Revision>,
    pub(crate) generation: u64,
    pub(crate) cancel: CancellationToken,
}

#[derive(Default)]
pub(crate) struct Streams {
    pub(crate) live: Vec<Arc<StreamShared>>,
    pub(crate) finished: VecDeque<Arc<StreamShared>>,
    pub(crate) retired: StreamStats,
}

/// A poisoned lock only means another task panicked mid-update; the data is still sound.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How many finished streams [`crate::Client::streams`] keeps for inspection.
const FINISHED_STREAMS_KEPT: usize = 64;

mod control;
pub use control::StreamControl;
pub(crate) use control::StreamShared;

/// Open the standalone GET stream and start its driver.
pub(crate) async fn open_standalone<H: Host>(
    inner: &Arc<H>,
    view: SessionView,
) -> Result<StreamControl, Error> {
    // One standalone stream per session: a second GET would only get 409 until the first's
    // connection is gone, so hand out the live one instead.
    let live = lock(inner.streams())
        .live
        .iter()
        .find(|s| {
            s.origin == StreamOrigin::Standalone
                && s.session.generation == view.generation
                && !s.stop.is_cancelled()
                && !s.finished.load(Ordering::SeqCst)
        })
        .cloned();
    if let Some(shared) = live {
        return Ok(StreamControl::new(shared));
    }
    let shared = StreamShared::new(StreamOrigin::Standalone, view);
    let mut tracker = StreamTracker::new(inner.retry().budget);
    let (resp, _) = connect(inner, &shared, &mut tracker, Instant::now(), true).await?;
    let control = StreamControl::new(shared.clone());
    spawn(inner.clone(), shared, tracker, resp);
    Ok(control)
}

/// Stop the driver of request `id`'s stream (the request was abandoned).
pub(crate) fn stop_request_stream<H: Host>(inner: &H, id: u64) {
    for s in lock(inner.streams()).live.iter().filter(|s| s.origin == StreamOrigin::Request(id)) {
        s.stop.cancel();
    }
}

/// Start the driver of a POST answered with SSE (the head is judged before returning, so a
/// refused grace window fails the request right away).
pub(crate) fn start<H: Host>(inner: Arc<H>, shared: Arc<StreamShared>, resp: Response) -> Result<(), Error> {
    let mut tracker = StreamTracker::new(inner.retry().budget);
    let head = http::response_head(resp.headers());
    // A fresh tracker can only open Fresh (or fail): there is no cursor to continue.
    tracker.on_head(&head, &mut shared.stats_mut())?;
    note_head(&*inner, &shared, &tracker, &head);
    spawn(inner, shared, tracker, resp);
    Ok(())
}

fn spawn<H: Host>(inner: Arc<H>, shared: Arc<StreamShared>, tracker: StreamTracker, resp: Response) {
    lock(inner.streams()).live.push(shared.clone());
    tokio::spawn(async move {
        let outcome = run(&inner, &shared, tracker, resp).await;
        shared.finished.store(true, Ordering::SeqCst);
        if let Err(error) = outcome
            && !shared.stop.is_cancelled()
        {
            fail(&inner, &shared, error).await;
        }
        retire(&*inner, &shared);
        shared.done.cancel();
    });
}

fn retire<H: Host>(inner: &H, shared: &Arc<StreamShared>) {
    let mut streams = lock(inner.streams());
    streams.live.retain(|s| !Arc::ptr_eq(s, shared));
    let stats = shared.stats();
    streams.retired.add(&stats);
    streams.finished.push_back(shared.clone());
    while streams.finished.len() > FINISHED_STREAMS_KEPT {
        streams.finished.pop_front();
    }
}

async fn fail<H: Host>(inner: &Arc<H>, shared: &StreamShared, error: Error) {
    tracing::warn!(origin = ?shared.origin, %error, "stream failed");
    match error {
        Error::SessionEnded { .. } => inner.end_session(&shared.session, error),
        Error::Gap { .. } => {
            // The session cannot be trusted any more: end it here and at the server.
            inner.end_session(&shared.session, error);
            if let Err(e) = inner.delete(&shared.session).await {
                tracing::debug!(error = %e, "DELETE of the broken session failed");
            }
        }
        error => {
            if let StreamOrigin::Request(id) = shared.origin {
                inner.fail_request(id, error.clone());
            }
            inner.emit(ClientEvent::StreamFailed { origin: shared.origin, error });
        }
    }
}

/// How one connection ended.
#[derive(Debug)]
enum ConnEnd {
    /// The server closed the body.
    Closed,
    /// The connection failed (I/O error, idle timeout, or a cut).
    Lost(String),
    /// The stream was stopped (client closed, session ended, [`StreamControl::close`]).
    Stopped,
}

async fn run<H: Host>(
    inner: &Arc<H>,
    shared: &Arc<StreamShared>,
    mut tracker: StreamTracker,
    mut resp: Response,
) -> Result<(), Error> {
    let mut answered = false;
    loop {
        let end = read_connection(inner, shared, &mut tracker, resp, &mut answered).await?;
        match &end {
            ConnEnd::Lost(why) => tracing::info!(origin = ?shared.origin, %why, answered, "connection lost"),
            _ => tracing::debug!(origin = ?shared.origin, ?end, answered, "connection ended"),
        }
        if matches!(end, ConnEnd::Stopped) || answered {
            return Ok(());
        }
        // A request answered elsewhere (or abandoned) needs nothing more from its stream.
        if let StreamOrigin::Request(id) = shared.origin
            && !inner.is_pending(id)
        {
            return Ok(());
        }
        shared.stats_mut().disconnects += 1;
        let lost_at = Instant::now();
        let (next, opened) = connect(inner, shared, &mut tracker, lost_at, false).await?;
        shared.stats_mut().resume_latency.record(lost_at.elapsed());
        if let Some(why) = unproven(inner.continuation(), &opened) {
            return Err(Error::Unproven(why));
        }
        match opened {
            Opened::Continued { continuity } => inner.emit(ClientEvent::Resumed {
                origin: shared.origin,
                stream: tracker.stream_id(),
                continuity,
            }),
            Opened::NewStream { previous, stream } => {
                inner.emit(ClientEvent::NewStream { origin: shared.origin, previous, current: stream })
            }
            Opened::Fresh { .. } => {}
        }
        resp = next;
    }
}

/// Why a reconnect does not continue a stream as `continuation` requires; `None` when it does.
fn unproven(continuation: Continuation, opened: &Opened) -> Option<String> {
    if continuation == Continuation::Follow {
        return None;
    }
    match opened {
        Opened::Continued { continuity: Continuity::Verified } | Opened::Fresh { .. } => None,
        Opened::Continued { continuity: Continuity::Unverified } => Some(
            "the server resumed it without naming its stream, so nothing proves the events follow on".into(),
        ),
        Opened::NewStream { previous, stream } => Some(format!(
            "the reconnect to stream {} was answered by {}",
            previous.as_ref().map_or_else(|| "(unnamed)".to_owned(), ToString::to_string),
            stream.as_ref().map_or_else(|| "an unnamed new stream".to_owned(), |s| format!("new stream {s}")),
        )),
    }
}

async fn read_connection<H: Host>(
    inner: &Arc<H>,
    shared: &StreamShared,
    tracker: &mut StreamTracker,
    resp: Response,
    answered: &mut bool,
) -> Result<ConnEnd, Error> {
    let body = IdleGuarded::new(Box::pin(resp.bytes_stream()), inner.idle_timeout());
    let mut events = Box::pin(SseByteStream::new(body));
    loop {
        let next = tokio::select! {
            biased;
            () = shared.stop.cancelled() => return Ok(ConnEnd::Stopped),
            () = shared.cut.notified() => return Ok(ConnEnd::Lost("cut by StreamControl".into())),
            next = events.next() => next,
        };
        let sse = match next {
            None => return Ok(ConnEnd::Closed),
            Some(Err(e)) => return Ok(ConnEnd::Lost(e.to_string())),
            Some(Ok(sse)) => sse,
        };
        let step = tracker.on_event(&sse, &mut shared.stats_mut())?;
        if let Step::Deliver(data) = step {
            for msg in jsonrpc::parse(&data)? {
                *answered |= inner.dispatch(&shared.session, msg, shared.origin);
            }
        }
    }
}

/// Open (`first`) or re-open the stream's connection, with backoff, until the server answers
/// with an SSE response the tracker accepts, the budget runs out, or a final answer comes.
async fn connect<H: Host>(
    inner: &Arc<H>,
    shared: &StreamShared,
    tracker: &mut StreamTracker,
    lost_at: Instant,
    first: bool,
) -> Result<(Response, Opened), Error> {
    let policy = inner.retry();
    let mut attempt: u32 = 0;
    let mut last = String::from("no attempt made");
    loop {
        let resume = tracker.begin_reconnect();
        if resume.is_none() && matches!(shared.origin, StreamOrigin::Request(_)) {
            // A POST stream can only be continued through a cursor (GET + Last-Event-ID).
            return Err(Error::NotResumable);
        }
        if !(first && attempt == 0) {
            let delay = {
                let mut entropy = lock(inner.jitter());
                policy.delay(attempt, tracker.server_retry(), lost_at.elapsed(), &mut **entropy)
            };
            let Some(delay) = delay else {
                return Err(Error::RetryBudgetExhausted { attempts: attempt, budget: policy.budget, last });
            };
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = shared.stop.cancelled() => return Err(Error::Closed),
            }
        }
        attempt = attempt.saturating_add(1);
        if resume.is_some() {
            shared.stats_mut().resumes_attempted += 1;
        }
        let sent = tokio::select! {
            r = inner.get(&shared.session, resume.as_ref()) => r,
            () = shared.stop.cancelled() => return Err(Error::Closed),
        };
        let resp = match sent {
            Ok(resp) => resp,
            Err(e) => {
                if resume.is_some() {
                    shared.stats_mut().reject("transport");
                }
                last = e.to_string();
                continue;
            }
        };
        let status = resp.status();
        if status.is_success() && http::body_kind(resp.headers()) == BodyKind::Sse {
            let head = http::response_head(resp.headers());
            let opened = tracker.on_head(&head, &mut shared.stats_mut());
            let opened = match opened {
                Ok(o) => o,
                Err(e) => {
                    if resume.is_some() {
                        shared.stats_mut().reject("protocol");
                    }
                    return Err(e);
                }
            };
            if resume.is_some() && matches!(opened, Opened::NewStream { .. }) {
                shared.stats_mut().reject("new_stream");
            }
            note_head(&**inner, shared, tracker, &head);
            return Ok((resp, opened));
        }
        let error = match status.as_u16() {
            405 => Error::StandaloneUnsupported,
            s if (200..300).contains(&s) => Error::Protocol(format!(
                "GET answered {s} with content type {:?}",
                http::header(resp.headers(), "content-type")
            )),
            _ => http::status_error(resp).await,
        };
        let reason = match &error {
            Error::SessionEnded { reason: Some(r) } => r.clone(),
            _ => format!("status_{}", status.as_u16()),
        };
        if resume.is_some() {
            shared.stats_mut().reject(&reason);
        }
        if !error.is_transient() {
            return Err(error);
        }
        last = error.to_string();
    }
}

fn note_head<H: Host>(
    inner: &H,
    shared: &StreamShared,
    tracker: &StreamTracker,
    head: &crate::resume::ResponseHead,
) {
    *lock(&shared.stream_id) = tracker.stream_id();
    if let Some(ms) = head.grace_ms.as_deref().and_then(|g| g.trim().parse::<u64>().ok()) {
        inner.note_grace(&shared.session, Duration::from_millis(ms));
    }
}
