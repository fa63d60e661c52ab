//! The steps `forkless check`'s scenarios are made of: starting a numbered stream, cutting
//! and resuming it, following a resumed stream the way a client would, restarting the target,
//! and judging what arrived. The scenarios themselves are [`super::scenarios`].

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use super::probe::{Conn, Session, Stop, Target};
use super::tape::{Continuation, Kind, Tape, ranges};
use super::{Outcome, Verdict};

/// Milliseconds between two numbered notifications in most scenarios.
pub(crate) const INTERVAL_MS: u64 = 25;
/// Length of the numbered stream in most scenarios (the seed cuts after #8).
pub(crate) const COUNT: u64 = 20;
/// The seed's cut point.
pub(crate) const CUT_AFTER: u64 = 8;
/// The longest wait for the events a step expects (a failure guard).
pub(crate) const READ_LIMIT: Duration = Duration::from_secs(10);
/// How long a resume answered 409 (the server has not noticed the cut yet) is retried.
pub(crate) const RETRY_409: Duration = Duration::from_secs(5);
/// How long a request stream is read on after its response.
pub(crate) const TAIL: Duration = Duration::from_millis(300);
/// How many times one resume follows a server that closes the connection early.
pub(crate) const MAX_RECONNECTS: usize = 20;
/// How long a client stays away after a cut in the scenarios that model a real break.
pub(crate) const AWAY: Duration = Duration::from_millis(300);
/// How long a connection the client should never have been given is watched.
pub(crate) const WATCH: Duration = Duration::from_millis(1500);

/// A tool that emits numbered notifications, and the arguments to call it with.
#[derive(Clone, Debug)]
pub(crate) struct ToolSpec {
    pub(crate) name: String,
    /// `--args`: merged over `{"interval", "count"}`; a string value `$count`, `$interval`
    /// (milliseconds) or `$seconds` (the whole run) stands for that number.
    pub(crate) args: serde_json::Map<String, Value>,
    /// `--progress`: whether its calls ask for progress.
    pub(crate) progress: Progress,
}

/// Whether the tool's calls carry a `progressToken`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    /// No token: its numbered events are log messages.
    Omit,
    /// A fresh token per call: its numbered events are `notifications/progress`.
    Ask,
}

impl ToolSpec {
    pub(crate) fn arguments(&self, count: u64, interval: u64) -> Value {
        let mut args = serde_json::Map::new();
        args.insert("interval".into(), json!(interval));
        args.insert("count".into(), json!(count));
        for (k, v) in &self.args {
            let v = match v.as_str() {
                Some("$count") => json!(count),
                Some("$interval") => json!(interval),
                Some("$seconds") => json!(count.saturating_mul(interval) as f64 / 1000.0),
                _ => v.clone(),
            };
            args.insert(k.clone(), v);
        }
        Value::Object(args)
    }

    /// The `tools/call` params for a run of `count` events `interval` ms apart.
    pub(crate) fn call(&self, count: u64, interval: u64) -> Value {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let mut params = json!({ "name": self.name, "arguments": self.arguments(count, interval) });
        if self.progress == Progress::Ask {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            params["_meta"] = json!({ "progressToken": format!("forkless-check-{n}") });
        }
        params
    }
}

/// Everything the scenarios share.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub(crate) target: Target,
    /// Emits on its request's own SSE stream (`start-notification-stream`).
    pub(crate) request: Option<ToolSpec>,
    /// Emits on the standalone GET stream (`start-background-stream`).
    pub(crate) background: Option<ToolSpec>,
    /// State of the churn scenario's random cut points.
    pub(crate) rng: u64,
    /// `--restart-cmd`: restarts the target (`crash-restart`).
    pub(crate) restart: Option<String>,
}

impl Ctx {
    /// What to add to a verdict of a request stream that delivered none of its numbered
    /// events: a server that numbers its work by progress (a stdio server behind a gateway,
    /// whose log messages name no request) needs its calls to ask for progress.
    pub(crate) fn progress_hint(&self) -> &'static str {
        match self.request.as_ref().map(|t| t.progress) {
            Some(Progress::Omit) => {
                "; if the server numbers its work by progress notifications (a stdio server behind a gateway), run with --progress"
            }
            _ => "",
        }
    }

    pub(crate) fn random(&mut self, below: u64) -> u64 {
        // xorshift64: the cut points only need to vary, not to be unpredictable.
        let mut x = self.rng.max(1);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x % below.max(1)
    }
}

/// Evidence gathered so far; every early exit turns it into an [`Outcome`].
#[derive(Debug, Default)]
pub(crate) struct Ev(pub(crate) Vec<String>);

impl Ev {
    pub(crate) fn note(&mut self, line: impl Into<String>) {
        self.0.push(line.into());
    }
    pub(crate) fn end(&mut self, verdict: Verdict, line: impl Into<String>) -> Outcome {
        self.note(line);
        Outcome { verdict, evidence: std::mem::take(&mut self.0) }
    }
    pub(crate) fn pass(&mut self, line: impl Into<String>) -> Outcome {
        self.end(Verdict::Pass, line)
    }
    pub(crate) fn fail(&mut self, line: impl Into<String>) -> Outcome {
        self.end(Verdict::Fail, line)
    }
    pub(crate) fn unsupported(&mut self, line: impl Into<String>) -> Outcome {
        self.end(Verdict::Unsupported, line)
    }
}

pub(crate) type Step<T> = Result<T, Outcome>;

/// A numbered stream being read.
pub(crate) struct Numbered {
    pub(crate) session: Session,
    pub(crate) conn: Option<Conn>,
    /// The tool call's JSON-RPC id, for a request stream.
    pub(crate) request: Option<Value>,
    pub(crate) kind: Kind,
    pub(crate) count: u64,
    /// What the current connection delivered.
    pub(crate) tape: Tape,
    /// [`Ctx::progress_hint`], for a stream that delivers none of its numbered events.
    pub(crate) hint: &'static str,
}

impl Numbered {
    /// Read the current connection until `#n` (or the end of the stream).
    pub(crate) async fn read_to(&mut self, n: u64, ev: &mut Ev) -> Step<()> {
        let (kind, count) = (self.kind, self.count);
        let conn = self.conn.as_mut().ok_or_else(|| ev.fail("no connection to read"))?;
        let deadline = Instant::now() + READ_LIMIT;
        self.tape
            .read(conn, self.request.as_ref(), deadline, |t| t.nums.contains(&n) || t.complete(kind, count))
            .await;
        if !self.tape.nums.contains(&n) {
            let hint = if self.tape.nums.is_empty() { self.hint } else { "" };
            return Err(ev.unsupported(format!(
                "the stream delivered {}{} before #{n}{hint}",
                self.tape.summary(),
                self.tape.ending()
            )));
        }
        Ok(())
    }

    /// The cursor a client would resume from: the last SSE id it saw.
    pub(crate) fn cursor(&self, ev: &mut Ev) -> Step<String> {
        self.tape
            .last_id
            .clone()
            .ok_or_else(|| ev.unsupported("the events carry no SSE id: nothing to resume from"))
    }

    /// Drop the connection, as a network failure would.
    pub(crate) fn cut(&mut self, ev: &mut Ev) {
        self.conn = None;
        ev.note(format!(
            "read {}, cut the connection after id {}",
            self.tape.summary(),
            self.tape.last_id.as_deref().unwrap_or("(none)")
        ));
    }

    /// Read a resumed connection to the end of the stream the way a client would: when the
    /// server closes the connection before the end (2025-11-25 lets it, and a server may also
    /// answer a resume it cannot attach yet with a short stream), reconnect with the last id
    /// seen. Returns everything delivered, across connections, as one tape.
    pub(crate) async fn follow(&self, mut conn: Conn, mut lei: String, ev: &mut Ev) -> Step<Tape> {
        let deadline = Instant::now() + READ_LIMIT;
        let mut all = Tape::default();
        for _ in 0..MAX_RECONNECTS {
            let tape = self.read_rest(&mut conn, deadline.saturating_duration_since(Instant::now())).await;
            let repeats = matches!((all.nums.iter().max(), tape.nums.first()), (Some(max), Some(first)) if first <= max);
            all.append(&tape);
            if repeats {
                // Already not a continuation; following further would only add more of it.
                return Ok(all);
            }
            if let Some(id) = &tape.last_id {
                lei.clone_from(id);
            }
            if all.complete(self.kind, self.count) || tape.stop != Stop::Ended || Instant::now() >= deadline {
                return Ok(all);
            }
            ev.note(format!("the server closed the connection after {}; reconnecting", tape.summary()));
            conn = resume(&self.session, &lei, ev).await?;
            if !conn.head.is_stream() {
                return Ok(all);
            }
        }
        Ok(all)
    }

    /// Read `conn` until the stream is complete, it ends, or `limit`.
    pub(crate) async fn read_rest(&self, conn: &mut Conn, limit: Duration) -> Tape {
        let (kind, count) = (self.kind, self.count);
        let mut tape = Tape::default();
        tape.read(conn, self.request.as_ref(), Instant::now() + limit, |t| t.complete(kind, count)).await;
        if tape.response && tape.stop == Stop::Met {
            read_tail(&mut tape, conn, self.request.as_ref()).await;
        }
        tape
    }
}

/// Open a session and start a numbered stream of `count` events `interval` ms apart.
pub(crate) async fn start(ctx: &Ctx, kind: Kind, count: u64, interval: u64, ev: &mut Ev) -> Step<Numbered> {
    let spec = match kind {
        Kind::Request => ctx.request.as_ref().ok_or_else(|| {
            ev.unsupported(
                "no tool emits numbered notifications on its request stream \
                 (start-notification-stream; see --tool)",
            )
        })?,
        Kind::Standalone => ctx.background.as_ref().ok_or_else(|| {
            ev.unsupported(
                "no tool emits numbered notifications on the standalone stream \
                 (start-background-stream; see --background-tool)",
            )
        })?,
    };
    let mut session = ctx.target.open().await.map_err(|e| ev.fail(format!("cannot open a session: {e}")))?;
    let params = spec.call(count, interval);
    let count = params["arguments"]["count"].as_u64().unwrap_or(count);
    match kind {
        Kind::Request => {
            let (id, head, response) =
                session.send("tools/call", params).await.map_err(|e| ev.fail(e.to_string()))?;
            let mut conn = Conn::new(response, "POST tools/call");
            if !head.is_stream() {
                let d = conn.describe().await;
                return Err(if head.status == 200 {
                    ev.unsupported(format!(
                        "POST tools/call {} → {d}: no request stream to resume",
                        spec.name
                    ))
                } else {
                    ev.fail(format!("POST tools/call {} → {d}", spec.name))
                });
            }
            ev.note(format!("POST tools/call {} {{count: {count}}} → {}", spec.name, head.describe()));
            Ok(Numbered {
                session,
                conn: Some(conn),
                request: Some(id),
                kind,
                count,
                tape: Tape::default(),
                hint: ctx.progress_hint(),
            })
        }
        Kind::Standalone => {
            let mut conn = session.get(None).await.map_err(|e| ev.fail(e.to_string()))?;
            if !conn.head.is_stream() {
                let d = conn.describe().await;
                return Err(ev.unsupported(format!("GET (standalone stream) → {d}")));
            }
            ev.note(format!("GET → {}", conn.head.describe()));
            let answer = session.request("tools/call", params).await.map_err(|e| ev.fail(e.to_string()))?;
            if answer.get("error").is_some() {
                return Err(ev.fail(format!("tools/call {} failed: {answer}", spec.name)));
            }
            ev.note(format!("tools/call {} {{count: {count}}} answered", spec.name));
            Ok(Numbered {
                session,
                conn: Some(conn),
                request: None,
                kind,
                count,
                tape: Tape::default(),
                hint: "",
            })
        }
    }
}

/// `GET` with `Last-Event-ID: lei`, retried while the answer is 409 (the server may not have
/// noticed the cut yet: PROTOCOL section 6 bounds that by the grace window).
pub(crate) async fn resume(session: &Session, lei: &str, ev: &mut Ev) -> Step<Conn> {
    let give_up = Instant::now() + RETRY_409;
    let mut statuses = Vec::new();
    let mut pause = Duration::from_millis(50);
    loop {
        let mut conn = session.get(Some(lei)).await.map_err(|e| ev.fail(e.to_string()))?;
        if conn.head.status == 409 && Instant::now() + pause < give_up {
            statuses.push("409".to_owned());
            sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(400));
            continue;
        }
        let last = if conn.head.is_stream() { conn.head.describe() } else { conn.describe().await };
        statuses.push(last);
        ev.note(format!("GET Last-Event-ID: {lei} → {}", statuses.join(", ")));
        return Ok(conn);
    }
}

/// Judge a resumed delivery against the exact continuation `after+1 ..= count`.
pub(crate) fn judge_continuation(stream: &Numbered, tape: &Tape, after: u64, ev: &mut Ev) -> Outcome {
    let c = Continuation::of(&tape.nums, after, stream.count);
    let complete = tape.complete(stream.kind, stream.count);
    let got = format!("got {}{}", tape.summary(), tape.ending());
    if c.exact() && complete && tape.late().is_empty() {
        return ev.pass(format!("{got}: exactly once, in order"));
    }
    if c.exact() && complete {
        return ev.fail(format!("{got}: the response came before {}", ranges(tape.late())));
    }
    let mut problems = c.problems();
    if c.exact() {
        problems = "the response to the tool call never arrived".to_owned();
    }
    ev.fail(format!("{got}: {problems}"))
}

/// The judgement for a cursor the server cannot continue: anything but a stream the client
/// would read as a continuation passes.
pub(crate) async fn judge_refusal(
    mut conn: Conn,
    stream: Option<&Numbered>,
    what: &str,
    ev: &mut Ev,
) -> Outcome {
    if !conn.head.is_stream() {
        let d = conn.describe().await;
        return ev.pass(format!("{what} → {d}: refused, nothing a client could take for a continuation"));
    }
    let mut tape = Tape::default();
    let request = stream.and_then(|s| s.request.clone());
    tape.read(&mut conn, request.as_ref(), Instant::now() + WATCH, |_| false).await;
    let seen = format!("{what} → {}; it delivered {}{}", conn.head.describe(), tape.summary(), tape.ending());
    if conn.head.flagged_new() {
        return ev.pass(format!("{seen}, flagged as a new stream (Mcp-Stream-Resumed: false)"));
    }
    ev.fail(format!("{seen}: an unflagged stream a client reads as the continuation of its cursor"))
}

/// Run the user's restart command, then wait until the target answers `initialize` again.
pub(crate) async fn restart(command: &str, target: &Target, ev: &mut Ev) -> Step<()> {
    let status = tokio::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .status()
        .await
        .map_err(|e| ev.fail(format!("cannot run --restart-cmd: {e}")))?;
    if !status.success() {
        return Err(ev.fail(format!("--restart-cmd exited with {status}")));
    }
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        match target.open().await {
            Ok(session) => {
                session.close().await;
                ev.note("ran --restart-cmd; the server answers again");
                return Ok(());
            }
            Err(_) if Instant::now() < give_up => sleep(Duration::from_millis(100)).await,
            Err(e) => return Err(ev.fail(format!("the server did not come back within 30 s: {e}"))),
        }
    }
}

/// After the response, read on briefly: a notification arriving after it is a reordering the
/// evidence must show, not something to miss by hanging up first.
pub(crate) async fn read_tail(tape: &mut Tape, conn: &mut Conn, request: Option<&Value>) {
    tape.read(conn, request, Instant::now() + TAIL, |_| false).await;
    if tape.stop == Stop::Timeout {
        tape.stop = Stop::Met;
    }
}

/// Split an event id into a prefix and a trailing sequence number: `abc.41` → (`abc.`, 41),
/// `41` → (``, 41). `None` when the id does not end in a separator (or nothing) and digits,
/// e.g. an opaque `<uuid>_<ms>_<random>` whose random part happens to end in a digit.
pub(crate) fn sequence_part(id: &str) -> Option<(&str, u64)> {
    let digits = id.chars().rev().take_while(char::is_ascii_digit).count();
    let (prefix, tail) = id.split_at(id.len() - digits);
    if tail.is_empty() || prefix.chars().last().is_some_and(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some((prefix, tail.parse().ok()?))
}

/// Whether `nums` is exactly `after+1, after+2, …` (possibly empty).
pub(crate) fn is_prefix(nums: &[u64], after: u64) -> bool {
    nums.iter().zip(after + 1..).all(|(n, want)| *n == want)
}

pub(crate) async fn head_or_reason(conn: &mut Conn) -> String {
    if conn.head.is_stream() { conn.head.describe() } else { conn.describe().await }
}

pub(crate) async fn read_if_stream(s: &Numbered, conn: &mut Conn, limit: Duration) -> Option<Tape> {
    if conn.head.is_stream() { Some(s.read_rest(conn, limit).await) } else { None }
}

/// Run a scenario body; an early exit (`Err`) carries its own outcome.
pub(crate) async fn run(ev: &mut Ev, body: impl AsyncFnOnce(&mut Ev) -> Step<Outcome>) -> Outcome {
    match body(ev).await {
        Ok(outcome) | Err(outcome) => outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::sequence_part;

    #[test]
    fn sequence_parts_need_a_separator() {
        assert_eq!(sequence_part("AbC-def_ghi123.41"), Some(("AbC-def_ghi123.", 41)));
        assert_eq!(sequence_part("41"), Some(("", 41)));
        assert_eq!(sequence_part("3a0c-8922_1796042301816_2quc0p5m"), None);
        assert_eq!(sequence_part("x_17_jc6qgbm8"), None);
        assert_eq!(sequence_part("stream."), None);
    }
}
