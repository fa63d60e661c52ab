//! The cluster's own load: how long a resume takes when it reaches another node than the one
//! that served the stream (`forkless-bench load --load cross-resume`).
//!
//! It owns this load, not the cluster it runs against (see `scripts/bench-cluster.sh`).

use std::time::{Duration, Instant};

use super::{Endpoint, Measured, notify_call, read_stream};
use crate::Error;
use crate::wire::Conn;

/// Per round: a session created at `owner`, a `start-notification-stream` call of `count`
/// notifications read to its end there, then a GET at `resume_at` with `Last-Event-ID` =
/// the stream's first event id, timed from sending it to the last replayed notification.
/// `rounds` rounds after an uncounted warm-up round; latencies are per resume, `ops` the
/// resumes that replayed everything after the cursor.
pub async fn cross_resume(
    owner: &Endpoint,
    resume_at: &Endpoint,
    count: u64,
    rounds: u32,
) -> Result<Measured, Error> {
    let mut latencies = Vec::with_capacity(rounds as usize);
    let mut m = Measured::default();
    let mut total = Duration::ZERO;
    for round in 0..=rounds {
        let mut conn = Conn::open(owner).await?;
        let session = conn.initialize().await?;
        let resp = conn.post(Some(&session), notify_call(1, count)).await?;
        let live = read_stream(resp, Instant::now(), count, true).await;
        let Some(first) = live.first_id.clone() else {
            return Err(Error::Load("the stream's events carry no id: nothing to resume from".into()));
        };
        // The first id is the priming event's (nothing before it) or the first
        // notification's (that one is not replayed).
        let expected = if first.ends_with(".0") { count } else { count - 1 };
        let mut other = Conn::open(resume_at).await?;
        let sent = Instant::now();
        let resp = other.get(&session, Some(&first), live.stream.as_ref()).await?;
        let replay = read_stream(resp, sent, expected, false).await;
        conn.delete(&session).await;
        if round == 0 {
            continue;
        }
        if live.ok && replay.ok && replay.notifications >= expected {
            m.ops += 1;
            total += replay.elapsed;
            latencies.push(u32::try_from(replay.elapsed.as_micros()).unwrap_or(u32::MAX));
        } else {
            m.errors += 1;
        }
    }
    m.seconds = total.as_secs_f64();
    m.finish(&mut latencies, None);
    Ok(m)
}
