//! The cursor scenarios of `forkless check`: what a server answers to one reconnect whose
//! `Last-Event-ID` is right, lost, bare, foreign or ahead. The concurrent and fault scenarios
//! are in [`super`].

use tokio::time::sleep;

use super::super::Outcome;
use super::super::steps::{
    AWAY, COUNT, CUT_AFTER, Ctx, Ev, INTERVAL_MS, READ_LIMIT, judge_continuation, judge_refusal, resume, run,
    sequence_part, start,
};
use super::super::tape::{Continuation, Kind};

/// 1. The seed: cut after #8, resume from its id, expect #9..#N exactly once.
pub(crate) async fn resume_after_8(ctx: &mut Ctx) -> Outcome {
    let mut ev = Ev::default();
    run(&mut ev, async |ev| {
        let mut s = start(ctx, Kind::Request, COUNT, INTERVAL_MS, ev).await?;
        s.read_to(CUT_AFTER, ev).await?;
        let lei = s.cursor(ev)?;
        s.cut(ev);
        let conn = resume(&s.session, &lei, ev).await?;
        if !conn.head.is_stream() {
            return Err(
                ev.unsupported("the server refused to resume a valid cursor: no fork, but no resumption")
            );
        }
        let tape = s.follow(conn, lei, ev).await?;
        Ok(judge_continuation(&s, &tape, CUT_AFTER, ev))
    })
    .await
}

/// 2. Cursor lost: reconnect the standalone stream without `Last-Event-ID`.
pub(crate) async fn cursor_lost(ctx: &mut Ctx) -> Outcome {
    let mut ev = Ev::default();
    run(&mut ev, async |ev| {
        let mut s = start(ctx, Kind::Standalone, COUNT * 2, INTERVAL_MS, ev).await?;
        let first_stream = s.conn.as_ref().and_then(|c| c.head.stream_id.clone());
        s.read_to(CUT_AFTER, ev).await?;
        let seen_up_to = s.tape.nums.last().copied().unwrap_or(0);
        s.cut(ev);
        // A real break takes time; the background tool keeps emitting meanwhile.
        sleep(AWAY).await;
        ev.note(format!("stayed away {} ms while the background tool kept emitting", AWAY.as_millis()));
        let mut conn = s.session.get(None).await.map_err(|e| ev.fail(e.to_string()))?;
        if !conn.head.is_stream() {
            let d = conn.describe().await;
            return Ok(ev.pass(format!("GET without Last-Event-ID → {d}: refused, not a continuation")));
        }
        let head = conn.head.clone();
        let new_id = head.stream_id.is_some() && head.stream_id != first_stream;
        let tape = s.read_rest(&mut conn, READ_LIMIT).await;
        let seen = format!(
            "GET without Last-Event-ID → {}; it delivered {}{}",
            head.describe(),
            tape.summary(),
            tape.ending()
        );
        if head.flagged_new() && new_id {
            return Ok(ev.pass(format!("{seen}: a new stream identity, flagged new (reset contract)")));
        }
        let c = Continuation::of(&tape.nums, seen_up_to, s.count);
        if c.exact() && tape.complete(s.kind, s.count) {
            return Ok(ev.pass(format!(
                "{seen}: unflagged, but exactly #{}-#{} (the server kept the stream's position)",
                seen_up_to + 1,
                s.count
            )));
        }
        Ok(ev.fail(format!(
            "{seen}: an unflagged 200 a client takes as its stream, and it is not the continuation of #{seen_up_to} ({})",
            c.problems()
        )))
    })
    .await
}

/// 3. A bare numeric cursor (the seed's `Last-Event-ID: 41`, without the stream part).
pub(crate) async fn bare_numeric_cursor(ctx: &mut Ctx) -> Outcome {
    let mut ev = Ev::default();
    run(&mut ev, async |ev| {
        let mut s = start(ctx, Kind::Request, COUNT, INTERVAL_MS, ev).await?;
        s.read_to(CUT_AFTER, ev).await?;
        let lei = s.cursor(ev)?;
        if lei.chars().all(|c| c.is_ascii_digit()) {
            return Err(ev.unsupported(format!(
                "this server's own event ids are bare numbers ({lei}): a numeric cursor is its \
                 normal format (see resume-after-8)"
            )));
        }
        // The sequence part of `<stream>.<seq>`; otherwise the event's own number, as the
        // seed's client sent `41`.
        let bare = match sequence_part(&lei) {
            Some((prefix, n)) if !prefix.is_empty() => n.to_string(),
            _ => CUT_AFTER.to_string(),
        };
        s.cut(ev);
        let conn = s.session.get(Some(&bare)).await.map_err(|e| ev.fail(e.to_string()))?;
        Ok(judge_refusal(conn, Some(&s), &format!("GET Last-Event-ID: {bare} (was {lei})"), ev).await)
    })
    .await
}

/// 4. Another session's cursor.
pub(crate) async fn foreign_cursor(ctx: &mut Ctx) -> Outcome {
    let mut ev = Ev::default();
    run(&mut ev, async |ev| {
        let mut a = start(ctx, Kind::Request, COUNT, INTERVAL_MS, ev).await?;
        a.read_to(CUT_AFTER, ev).await?;
        let lei = a.cursor(ev)?;
        a.cut(ev);
        // Let A's log grow past the cursor, so a server that leaks it has something to leak.
        sleep(AWAY).await;
        let b = ctx.target.open().await.map_err(|e| ev.fail(format!("cannot open a second session: {e}")))?;
        ev.note(format!("{} ms later, opened a second session B", AWAY.as_millis()));
        let conn = b.get(Some(&lei)).await.map_err(|e| ev.fail(e.to_string()))?;
        let outcome = judge_refusal(conn, Some(&a), &format!("B: GET Last-Event-ID: {lei} (A's)"), ev).await;
        b.close().await;
        Ok(outcome)
    })
    .await
}

/// 5. A cursor ahead of everything the server sent.
pub(crate) async fn cursor_ahead(ctx: &mut Ctx) -> Outcome {
    let mut ev = Ev::default();
    run(&mut ev, async |ev| {
        let mut s = start(ctx, Kind::Request, CUT_AFTER, INTERVAL_MS, ev).await?;
        s.read_to(CUT_AFTER, ev).await?;
        let lei = s.cursor(ev)?;
        let Some((prefix, n)) = sequence_part(&lei) else {
            return Err(
                ev.unsupported(format!("cannot build a cursor ahead of {lei}: no sequence number in it"))
            );
        };
        let ahead = format!("{prefix}{}", n.saturating_add(1_000_000));
        s.cut(ev);
        let conn = s.session.get(Some(&ahead)).await.map_err(|e| ev.fail(e.to_string()))?;
        Ok(judge_refusal(conn, Some(&s), &format!("GET Last-Event-ID: {ahead} (last sent {lei})"), ev).await)
    })
    .await
}
