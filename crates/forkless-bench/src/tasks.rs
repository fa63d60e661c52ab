//! The task loads (2026-07-28, the tasks extension): against a running `forkless serve
//! --revisions all` (any store), the latency of creating a task, the rate and CPU cost of
//! `tasks/get`, and the server CPU that polling many live tasks at their suggested interval
//! costs. `scripts/bench-tasks.sh` runs them on every store; docs/benchmarks.md has the figures.
//!
//! It owns these loads and their figures, not the server (a process the caller started, whose
//! CPU it reads through `/proc/PID`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use crate::Error;
use crate::procstat::sample;

/// What the task loads measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TaskFigures {
    /// Tasks created (sequentially) for the latency figures.
    pub created: usize,
    /// Creation round trip (`tools/call` answered with `CreateTaskResult`), µs.
    pub create_p50_us: f64,
    /// Its 99th percentile, µs.
    pub create_p99_us: f64,
    /// `tasks/get` answered per second, at `clients` connections.
    pub get_per_s: f64,
    /// Its median latency, µs.
    pub get_p50_us: f64,
    /// Its 99th percentile, µs.
    pub get_p99_us: f64,
    /// Server CPU per `tasks/get`, µs.
    pub get_cpu_us: Option<f64>,
    /// Live tasks polled at their suggested interval.
    pub live: usize,
    /// The interval they suggested, ms.
    pub poll_interval_ms: u64,
    /// Polls answered per second while polling them.
    pub polls_per_s: f64,
    /// Server CPU while polling them, as a share of one core.
    pub poll_cpu_share: Option<f64>,
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { "extensions": { "io.modelcontextprotocol/tasks": {} } },
    })
}

async fn post(http: &reqwest::Client, url: &str, method: &str, mut params: Value) -> Result<Value, Error> {
    params["_meta"] = meta();
    let name = params
        .get("taskId")
        .or_else(|| params.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let text = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| Error::Load(e.to_string()))?
        .text()
        .await
        .map_err(|e| Error::Load(e.to_string()))?;
    let last = text.lines().filter_map(|l| l.strip_prefix("data:")).next_back().unwrap_or(&text);
    let v: Value = serde_json::from_str(last.trim()).map_err(|e| Error::Load(format!("{e}: {text}")))?;
    v.get("result").cloned().ok_or_else(|| Error::Load(format!("{method}: {v}")))
}

/// Create a task that works for `seconds`: its id and suggested poll interval.
async fn create(http: &reqwest::Client, url: &str, seconds: u64) -> Result<(String, u64), Error> {
    let r =
        post(http, url, "tools/call", json!({ "name": "slow_compute", "arguments": { "seconds": seconds } }))
            .await?;
    let id = r["taskId"].as_str().ok_or_else(|| Error::Load(format!("no task: {r}")))?.to_owned();
    Ok((id, r["pollIntervalMs"].as_u64().unwrap_or(1000)))
}

fn quantile(sorted: &[u32], q: f64) -> f64 {
    sorted.get(((sorted.len().max(1) - 1) as f64 * q).round() as usize).map_or(0.0, |v| f64::from(*v))
}

fn cpu_since(pid: Option<u32>, before: Option<crate::procstat::ProcSample>) -> Option<f64> {
    Some(before?.cpu_seconds_until(&sample(pid?)?))
}

/// How much of each task load to apply.
#[derive(Clone, Copy, Debug)]
pub struct TaskLoad {
    /// Tasks created one after another, for the creation latency.
    pub creates: usize,
    /// Connections of the `tasks/get` load.
    pub clients: usize,
    /// Its length, s.
    pub get_seconds: f64,
    /// Live tasks polled at their suggested interval (0: none).
    pub live: usize,
    /// Seconds of polling them before the measured window (unmeasured: the tasks age, and
    /// their suggested interval with them).
    pub poll_warmup: f64,
    /// Seconds of polling them, measured.
    pub poll_seconds: f64,
}

/// Run the three task loads of `load` against `url` (server process `pid`, for its CPU).
pub async fn run(url: &str, pid: Option<u32>, load: TaskLoad) -> Result<TaskFigures, Error> {
    let TaskLoad { creates, clients, get_seconds, live, poll_warmup, poll_seconds } = load;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients.max(64))
        .build()
        .map_err(|e| Error::Load(e.to_string()))?;
    let mut figures = TaskFigures { created: creates, live, ..TaskFigures::default() };

    // Creation latency, sequential, after a warm-up.
    let mut latencies = Vec::with_capacity(creates);
    let mut ids = Vec::with_capacity(creates);
    for i in 0..creates + 20 {
        let sent = Instant::now();
        let (id, _) = create(&http, url, 600).await?;
        if i >= 20 {
            latencies.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
        }
        ids.push(id);
    }
    latencies.sort_unstable();
    figures.create_p50_us = quantile(&latencies, 0.50);
    figures.create_p99_us = quantile(&latencies, 0.99);

    // tasks/get at `clients` connections over the tasks just created.
    let ids = Arc::new(ids);
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(get_seconds);
    let before = pid.and_then(sample);
    let started = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let (http, url, ids, done) = (http.clone(), url.to_owned(), ids.clone(), done.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut i = c;
                while Instant::now() < deadline {
                    let sent = Instant::now();
                    if post(&http, &url, "tasks/get", json!({ "taskId": ids[i % ids.len()] })).await.is_ok() {
                        lat.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    i += clients;
                }
                lat
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for w in workers {
        latencies.extend(w.await.map_err(|e| Error::Load(e.to_string()))?);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let gets = done.load(Ordering::Relaxed);
    latencies.sort_unstable();
    figures.get_per_s = gets as f64 / elapsed;
    figures.get_p50_us = quantile(&latencies, 0.50);
    figures.get_p99_us = quantile(&latencies, 0.99);
    figures.get_cpu_us = cpu_since(pid, before).filter(|_| gets > 0).map(|c| c * 1e6 / gets as f64);

    // `live` tasks, each polled at its suggested interval, phases spread evenly.
    if live > 0 {
        let mut polled = Vec::with_capacity(live);
        for _ in 0..live {
            polled.push(create(&http, url, 600).await?);
        }
        let interval = polled.first().map_or(1000, |(_, ms)| *ms);
        figures.poll_interval_ms = interval;
        let polls = Arc::new(AtomicU64::new(0));
        let measured_from = Instant::now() + Duration::from_secs_f64(poll_warmup);
        let deadline = measured_from + Duration::from_secs_f64(poll_seconds);
        let window = {
            let (polls, pid) = (polls.clone(), pid);
            tokio::spawn(async move {
                tokio::time::sleep_until(measured_from.into()).await;
                let (before, counted) = (pid.and_then(sample), polls.load(Ordering::Relaxed));
                let started = Instant::now();
                tokio::time::sleep_until(deadline.into()).await;
                let elapsed = started.elapsed().as_secs_f64();
                let n = polls.load(Ordering::Relaxed) - counted;
                (n as f64 / elapsed, cpu_since(pid, before).map(|c| c / elapsed))
            })
        };
        let lanes = 64.min(live);
        let per_lane: Vec<Vec<String>> = (0..lanes)
            .map(|l| polled.iter().skip(l).step_by(lanes).map(|(id, _)| id.clone()).collect())
            .collect();
        let workers: Vec<_> = per_lane
            .into_iter()
            .map(|lane| {
                let (http, url, polls) = (http.clone(), url.to_owned(), polls.clone());
                tokio::spawn(async move {
                    // Each task polled when due: at first spread over one interval, then after
                    // the interval its last answer suggested.
                    let start = tokio::time::Instant::now();
                    let spread =
                        Duration::from_millis(interval) / u32::try_from(lane.len().max(1)).unwrap_or(1);
                    let mut due: std::collections::BinaryHeap<
                        std::cmp::Reverse<(tokio::time::Instant, usize)>,
                    > = (0..lane.len()).map(|i| std::cmp::Reverse((start + spread * i as u32, i))).collect();
                    while let Some(std::cmp::Reverse((at, i))) = due.pop() {
                        if Instant::now() >= deadline {
                            break;
                        }
                        tokio::time::sleep_until(at).await;
                        let next = match post(&http, &url, "tasks/get", json!({ "taskId": lane[i] })).await {
                            Ok(task) => {
                                polls.fetch_add(1, Ordering::Relaxed);
                                task["pollIntervalMs"].as_u64().unwrap_or(interval)
                            }
                            Err(_) => interval,
                        };
                        due.push(std::cmp::Reverse((
                            tokio::time::Instant::now() + Duration::from_millis(next),
                            i,
                        )));
                    }
                })
            })
            .collect();
        for w in workers {
            w.await.map_err(|e| Error::Load(e.to_string()))?;
        }
        (figures.polls_per_s, figures.poll_cpu_share) =
            window.await.map_err(|e| Error::Load(e.to_string()))?;
    }
    Ok(figures)
}
