//! The scenarios of `forkless check`, each a short script against fresh sessions that ends in
//! a verdict and the evidence for it, built from [`super::steps`]. The criteria are in the
//! table of [`super::SCENARIOS`] and the module docs of [`super`].

use std::time::Duration;

use tokio::time::{Instant, sleep};

use super::Outcome;
use super::probe::Stop;
use super::steps::{
    COUNT, CUT_AFTER, Ctx, Ev, INTERVAL_MS, READ_LIMIT, RETRY_409, WATCH, head_or_reason, is_prefix,
    judge_continuation, read_if_stream, read_tail, restart, resume, run, start,
};
use super::tape::{Continuation, Kind, Tape, ranges};

mod cursors;
pub(crate) use cursors::{bare_numeric_cursor, cursor_ahead, cursor_lost, foreign_cursor, resume_after_8};

/// 6. Two connections resume one stream at once.
pub(crate) async fn racing_resumes(ctx: &mut Ctx) -> Outcome {
    let mut ev = Ev::default();
    run(&mut ev, async |ev| {
        let interval = 2 * INTERVAL_MS;
        let mut s = start(ctx, Kind::Request, COUNT * 2, interval, ev).await?;
        s.read_to(CUT_AFTER, ev).await?;
        let lei = s.cursor(ev)?;
        s.cut(ev);
        // Both at once; only when both are refused with 409 (the cut not yet noticed) are
        // both sent again, so a 409 that answers the race itself stands.
        let give_up = Instant::now() + RETRY_409;
        let mut rounds = 0;
        let (mut a, mut b) = loop {
            let (a, b) = tokio::join!(s.session.get(Some(&lei)), s.session.get(Some(&lei)));
            let (a, b) = (a.map_err(|e| ev.fail(e.to_string()))?, b.map_err(|e| ev.fail(e.to_string()))?);
            rounds += 1;
            if a.head.status == 409 && b.head.status == 409 && Instant::now() < give_up {
                sleep(Duration::from_millis(100)).await;
                continue;
            }
            break (a, b);
        };
        let (da, db) = (head_or_reason(&mut a).await, head_or_reason(&mut b).await);
        ev.note(format!("two GETs Last-Event-ID: {lei} at once ({rounds} round(s)) → A: {da}, B: {db}"));
        if !a.head.is_stream() && !b.head.is_stream() {
            return Err(ev.unsupported("both refused: the server does not resume this stream"));
        }
        let limit = Duration::from_millis(interval * s.count) + Duration::from_secs(3);
        let (ta, tb) = tokio::join!(read_if_stream(&s, &mut a, limit), read_if_stream(&s, &mut b, limit));
        let mut complete = 0;
        for (name, tape) in [("A", &ta), ("B", &tb)] {
            let Some(tape) = tape else { continue };
            ev.note(format!("{name} delivered {}{}", tape.summary(), tape.ending()));
            let c = Continuation::of(&tape.nums, CUT_AFTER, s.count);
            if !c.duplicates.is_empty() || c.reordered || !is_prefix(&tape.nums, CUT_AFTER) {
                return Ok(ev.fail(format!("{name} is not a continuation of #{CUT_AFTER}: {}", c.problems())));
            }
            if tape.complete(s.kind, s.count) {
                complete += 1;
            }
        }
        match complete {
            0 => Ok(ev.fail(format!(
                "neither connection delivered the rest (#{}-#{})",
                CUT_AFTER + 1,
                s.count
            ))),
            1 => Ok(ev.pass(
                "one connection carried the stream to its end, the other stopped early or was refused",
            )),
            _ => {
                Ok(ev.fail("both connections stayed attached to the end: two live connections on one stream"))
            }
        }
    })
    .await
}

/// 7. Two plain GETs (no cursor) at once on a fresh session.
pub(crate) async fn two_plain_gets(ctx: &mut Ctx) -> Outcome {
    let mut ev = Ev::default();
    run(&mut ev, async |ev| {
        let mut session =
            ctx.target.open().await.map_err(|e| ev.fail(format!("cannot open a session: {e}")))?;
        let (a, b) = tokio::join!(session.get(None), session.get(None));
        let (mut a, mut b) = (a.map_err(|e| ev.fail(e.to_string()))?, b.map_err(|e| ev.fail(e.to_string()))?);
        let (da, db) = (head_or_reason(&mut a).await, head_or_reason(&mut b).await);
        ev.note(format!("two GETs without Last-Event-ID at once → A: {da}, B: {db}"));
        match (a.head.is_stream(), b.head.is_stream()) {
            (false, false) => return Err(ev.unsupported("both refused: no standalone stream")),
            (true, false) | (false, true) => return Ok(ev.pass("one attached, the other refused")),
            (true, true) => {}
        }
        let Some(spec) = ctx.background.clone() else {
            return Err(ev.unsupported(
                "both attached (the specification lets a client hold several streams); without a \
                 background tool the check cannot see where messages go",
            ));
        };
        let count = 3;
        let answer =
            session.request("tools/call", spec.call(count, 10)).await.map_err(|e| ev.fail(e.to_string()))?;
        if answer.get("error").is_some() {
            return Err(ev.fail(format!("tools/call {} failed: {answer}", spec.name)));
        }
        let deadline = Instant::now() + WATCH;
        let (mut ta, mut tb) = (Tape::default(), Tape::default());
        let done = |t: &Tape| t.nums.contains(&count);
        tokio::join!(ta.read(&mut a, None, deadline, done), tb.read(&mut b, None, deadline, done));
        ev.note(format!("{} {{count: {count}}}: A got {}, B got {}", spec.name, ta.summary(), tb.summary()));
        let both: Vec<u64> = ta.nums.iter().filter(|n| tb.nums.contains(n)).copied().collect();
        if !both.is_empty() {
            return Ok(ev.fail(format!("{} delivered on both connections", ranges(&both))));
        }
        let mut all = [ta.nums, tb.nums].concat();
        all.sort_unstable();
        let c = Continuation::of(&all, 0, count);
        if !c.missing.is_empty() || !c.duplicates.is_empty() {
            return Ok(ev.fail(format!("across both connections: {}", c.problems())));
        }
        Ok(ev.pass(
            "both attached (the specification lets a client hold several streams), and each \
             message arrived on exactly one",
        ))
    })
    .await
}

/// 8. Two resumes from one cursor give the same events.
pub(crate) async fn idempotent_replay(ctx: &mut Ctx) -> Outcome {
    let mut ev = Ev::default();
    run(&mut ev, async |ev| {
        let mut s = start(ctx, Kind::Request, COUNT, INTERVAL_MS / 5, ev).await?;
        s.read_to(CUT_AFTER, ev).await?;
        let lei = s.cursor(ev)?;
        s.cut(ev);
        // Let the tool finish, so both resumes see the same, final log.
        sleep(Duration::from_millis(INTERVAL_MS / 5 * s.count) + Duration::from_millis(300)).await;
        let first = resume(&s.session, &lei, ev).await?;
        if !first.head.is_stream() {
            return Err(ev.unsupported("the server refused to resume a valid cursor"));
        }
        let one = s.follow(first, lei.clone(), ev).await?;
        ev.note(format!("first resume delivered {}{}", one.summary(), one.ending()));
        let second = resume(&s.session, &lei, ev).await?;
        if !second.head.is_stream() {
            return Ok(
                ev.pass("the second resume was refused: a clean rejection, not a different continuation")
            );
        }
        let two = s.follow(second, lei, ev).await?;
        ev.note(format!("second resume delivered {}{}", two.summary(), two.ending()));
        if one.nums == two.nums && one.response == two.response && one.ids == two.ids {
            let c = Continuation::of(&one.nums, CUT_AFTER, s.count);
            let note = if c.exact() { String::new() } else { format!(" (both: {})", c.problems()) };
            return Ok(ev.pass(format!("both resumes delivered the same events with the same ids{note}")));
        }
        if one.nums == two.nums && one.response == two.response {
            let first_diff = one.ids.iter().zip(&two.ids).find(|(a, b)| a != b);
            let diff = first_diff.map_or_else(
                || format!("{} ids against {}", one.ids.len(), two.ids.len()),
                |(a, b)| format!("id {a} against {b}"),
            );
            return Ok(ev.fail(format!("the same numbers under different event ids ({diff})")));
        }
        Ok(ev.fail("the two resumes from one cursor delivered different events"))
    })
    .await
}

/// 9. Events emitted while no connection is attached are delivered on resume.
pub(crate) async fn emit_while_detached(ctx: &mut Ctx) -> Outcome {
    let mut ev = Ev::default();
    run(&mut ev, async |ev| {
        // 60 events 25 ms apart: the client is away for 20 of them and comes back while the
        // tool is still emitting, so the resume must join replay and live delivery. (A resume
        // after the tool has finished is `idempotent-replay`'s.)
        let mut s = start(ctx, Kind::Request, COUNT * 3, INTERVAL_MS, ev).await?;
        let after = 2;
        s.read_to(after, ev).await?;
        let lei = s.cursor(ev)?;
        s.cut(ev);
        let quiet = Duration::from_millis(INTERVAL_MS * COUNT);
        sleep(quiet).await;
        ev.note(format!("stayed away {} ms while the tool kept emitting", quiet.as_millis()));
        let conn = resume(&s.session, &lei, ev).await?;
        if !conn.head.is_stream() {
            return Err(ev.unsupported("the server refused to resume a valid cursor"));
        }
        let tape = s.follow(conn, lei, ev).await?;
        Ok(judge_continuation(&s, &tape, after, ev))
    })
    .await
}

/// 10. Churn: random cuts, resume each time; count duplicates and gaps.
pub(crate) async fn churn(ctx: &mut Ctx) -> Outcome {
    let mut ev = Ev::default();
    let cut_points: Vec<u64> = (0..64).map(|_| 1 + ctx.random(12)).collect();
    run(&mut ev, async |ev| {
        let count = 150;
        let mut s = start(ctx, Kind::Request, count, INTERVAL_MS / 3, ev).await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let (mut all, mut cuts, mut resumes, mut retried) = (Vec::new(), 0usize, 0usize, 0usize);
        let mut last_id: Option<String> = None;
        let mut response = false;
        let mut late = Vec::new();
        for step in 0.. {
            let Some(conn) = s.conn.as_mut() else { break };
            let want = cut_points[step % cut_points.len()] as usize;
            let mut tape = Tape::default();
            let (kind, count) = (s.kind, s.count);
            tape.read(conn, s.request.as_ref(), deadline.min(Instant::now() + READ_LIMIT), |t| {
                t.nums.len() >= want || t.complete(kind, count)
            })
            .await;
            if tape.response && tape.stop == Stop::Met {
                read_tail(&mut tape, conn, s.request.as_ref()).await;
                late.extend_from_slice(tape.late());
            }
            all.extend_from_slice(&tape.nums);
            response |= tape.response;
            if tape.last_id.is_some() {
                last_id.clone_from(&tape.last_id);
            }
            // Twice the stream's length delivered without its end: broken, judge it now.
            if response || Instant::now() >= deadline || all.len() as u64 > 2 * s.count {
                break;
            }
            if tape.stop == Stop::Timeout {
                break;
            }
            let Some(lei) = last_id.clone() else {
                return Err(ev.unsupported("the events carry no SSE id: nothing to resume from"));
            };
            s.conn = None;
            cuts += 1;
            let mut quiet = Ev::default();
            let conn = resume(&s.session, &lei, &mut quiet).await?;
            retried += quiet.0.iter().filter(|l| l.contains("409")).count();
            if !conn.head.is_stream() {
                let why = quiet.0.join("; ");
                if resumes == 0 {
                    return Err(ev.unsupported(format!("the first resume was refused: {why}")));
                }
                return Ok(ev.fail(format!(
                    "resume {} was refused after {resumes} succeeded ({why}); lost everything after {}",
                    resumes + 1,
                    ranges(&all)
                )));
            }
            resumes += 1;
            s.conn = Some(conn);
        }
        ev.note(format!(
            "{cuts} cuts at random points (after 1-12 events), {resumes} resumes, {retried} answered 409 \
             first and were retried"
        ));
        if all.is_empty() {
            // Nothing it counts arrived: there is nothing to judge, not a stream with 150 gaps.
            let response = if response { ", only the response" } else { "" };
            let hint = ctx.progress_hint();
            return Err(ev.unsupported(format!(
                "the request stream delivered none of its {} numbered events{response}: nothing to judge{hint}",
                s.count
            )));
        }
        let c = Continuation::of(&all, 0, s.count);
        let got = format!(
            "delivered {} numbered events{}: {} duplicates, {} missing",
            all.len(),
            if response { " + response" } else { "" },
            c.duplicates.len(),
            c.missing.len()
        );
        if c.exact() && response && !late.is_empty() {
            return Ok(ev.fail(format!("{got}: the response came before {}", ranges(&late))));
        }
        if c.exact() && response && resumes > 0 {
            return Ok(ev.pass(format!("{got}: #1-#{} exactly once, in order", s.count)));
        }
        if c.exact() && response {
            return Err(ev.unsupported(format!("{got}, but no cut happened")));
        }
        let problems =
            if c.exact() { "the response to the tool call never arrived".to_owned() } else { c.problems() };
        Ok(ev.fail(format!("{got}: {problems}")))
    })
    .await
}

/// Scenario 11, a restart between two reads: every id seen before it must name the same event
/// after it, and the resumed stream must continue and end (PROTOCOL section 6, durable
/// before delivery).
pub(crate) async fn crash_restart(ctx: &mut Ctx) -> Outcome {
    let mut ev = Ev::default();
    let Some(command) = ctx.restart.clone() else {
        return ev.unsupported("no --restart-cmd: this scenario needs a way to restart the server");
    };
    run(&mut ev, async |ev| {
        let mut s = start(ctx, Kind::Request, 40, INTERVAL_MS, ev).await?;
        s.read_to(CUT_AFTER + 2, ev).await?;
        let lei = s.cursor(ev)?;
        let seen = s.tape.clone();
        s.cut(ev);
        restart(&command, &ctx.target, ev).await?;
        let conn = resume(&s.session, &lei, ev).await?;
        if !conn.head.is_stream() {
            return Ok(ev.pass("the resume after the restart was refused: nothing a client could take for a continuation"));
        }
        let tape = s.follow(conn, lei, ev).await?;
        let got = format!("got {}{}", tape.summary(), tape.ending());
        if !is_prefix(&tape.nums, CUT_AFTER + 2) {
            return Ok(ev.fail(format!("{got}: not a continuation of #{}", CUT_AFTER + 2)));
        }
        if !tape.response {
            return Ok(ev.fail(format!(
                "{got}: the resumed stream carries no response to the call, so a client that trusts it waits for ever"
            )));
        }
        ev.note(format!("{got}: a continuation that ends"));
        // The whole view: each id seen before the restart still names the same data.
        let Some(first) = seen.ids.first() else { return Ok(ev.pass("no id to compare")) };
        let mut conn = resume(&s.session, first, ev).await?;
        if !conn.head.is_stream() {
            return Ok(ev.fail(format!("a replay from {first}, the first id seen, was refused after a resume from a later one")));
        }
        let mut replay = Tape::default();
        let want = seen.ids.len() - 1;
        replay.read(&mut conn, s.request.as_ref(), Instant::now() + READ_LIMIT, |t| t.ids.len() >= want).await;
        let pairs = |t: &Tape, skip: usize| t.ids.iter().cloned().zip(t.data.iter().cloned()).skip(skip).collect::<Vec<_>>();
        let (before, after) = (pairs(&seen, 1), pairs(&replay, 0));
        match before.iter().zip(&after).find(|(b, a)| b != a) {
            Some((b, a)) => Ok(ev.fail(format!("after the restart, id {} names {:?}; before it named {:?}", b.0, a.1, b.1))),
            None if after.len() < before.len() => Ok(ev.fail(format!(
                "a replay from {first} delivered {} of the {} events seen after it",
                after.len(),
                before.len()
            ))),
            None => Ok(ev.pass(format!("a replay from {first} names the {} events seen after it, byte for byte", before.len()))),
        }
    })
    .await
}
