//! `forkless-bench`: see the crate documentation (`run` for the whole harness, `serve` for
//! one server under test).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use forkless_bench::servers::{self, StoreKind};
use forkless_bench::{Error, disk, report, suite};
use forkless_server::AnswerMode;
use forkless_store_redb::Durability;

// The allocator `forkless serve` ships with, so the servers under test (forkless and the bare
// hyper ceiling alike) run on it. The rmcp reference gets the same one (bench/rmcp-echo).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "forkless-bench",
    about = "End-to-end benchmarks of forkless against hyper, rmcp and the SDKs"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run the loads against every server and write the results.
    Run {
        /// The CI smoke: a fraction of a second per load, few connections.
        #[arg(long)]
        quick: bool,
        /// Where results go (results.json, results.md, scratch/).
        #[arg(long, default_value = "target/bench")]
        out: PathBuf,
        /// The rmcp reference server binary (bench/rmcp-echo).
        #[arg(long)]
        rmcp: Option<PathBuf>,
        /// The repository root, to run the TS and Python SDK servers from `.peers/`.
        #[arg(long)]
        peers: Option<PathBuf>,
        /// Do not pin servers to CPU 0.
        #[arg(long)]
        no_pin: bool,
        /// Only loads whose name starts with this (echo-json, echo-sse, notify, resume, idle).
        #[arg(long)]
        only: Vec<String>,
        /// Also run forkless on this PostgreSQL database (`postgres://…`; an empty one: the
        /// runs add sessions to it) on the stream loads.
        #[arg(long, env = "FORKLESS_BENCH_POSTGRES")]
        postgres: Option<String>,
        /// Also run forkless on this Redis (`redis://…#PREFIX`) on the stream loads.
        #[arg(long, env = "FORKLESS_BENCH_REDIS")]
        redis: Option<String>,
    },
    /// Apply one load to an already running server (for profiling it), print what it measured.
    Load {
        /// The server's endpoint, e.g. http://127.0.0.1:8080/mcp.
        #[arg(long)]
        url: String,
        /// echo, notify, resume, latency or cross-resume.
        #[arg(long, default_value = "echo")]
        load: String,
        /// Concurrent clients (echo) or streams (notify).
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Seconds of load.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// The server answers over SSE.
        #[arg(long)]
        sse: bool,
        /// Accept either answer (SSE or JSON): a server that is not ours picks.
        #[arg(long)]
        any_answer: bool,
        /// The name of the echo tool's argument (`message` for server-everything).
        #[arg(long, default_value = "text")]
        echo_arg: String,
        /// Notifications per stream (notify, resume).
        #[arg(long, default_value_t = 10_000)]
        count: u64,
        /// echo: create the session at this endpoint instead (another node of a cluster, so
        /// every call to `--url` is forwarded to the session's owner); cross-resume: create
        /// the session and read its stream there, and resume it at `--url`.
        #[arg(long, value_name = "URL")]
        session_at: Option<String>,
        /// echo: a session per connection instead of one shared by all.
        #[arg(long)]
        session_per_client: bool,
        /// cross-resume: resumes timed (after one uncounted).
        #[arg(long, default_value_t = 200)]
        rounds: u32,
        /// For `https://`: also trust this CA file (PEM), beside the system's roots.
        #[arg(long, value_name = "FILE")]
        ca_file: Option<PathBuf>,
        /// For `https://`: offer HTTP/1.1 only (by default `h2` first, as ALPN chooses).
        #[arg(long)]
        http1: bool,
    },
    /// The task loads against a running `forkless serve --revisions all`; prints JSON.
    Tasks {
        /// The server's endpoint.
        #[arg(long)]
        url: String,
        /// The server's process id, for its CPU time.
        #[arg(long)]
        pid: Option<u32>,
        /// Tasks created one after another (creation latency).
        #[arg(long, default_value_t = 500)]
        creates: usize,
        /// Connections for the `tasks/get` load.
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Seconds of `tasks/get`.
        #[arg(long, default_value_t = 5.0)]
        get_seconds: f64,
        /// Live tasks polled at their suggested interval (0: skip).
        #[arg(long, default_value_t = 10_000)]
        live: usize,
        /// Seconds of polling them before the measured window (they age meanwhile).
        #[arg(long, default_value_t = 0.0)]
        poll_warmup: f64,
        /// Seconds of polling them, measured.
        #[arg(long, default_value_t = 10.0)]
        poll_seconds: f64,
    },
    /// Retain events on the durable store beyond its cache, in this process: the resident set,
    /// and a replay from the data file against one from memory (prints JSON).
    Retention {
        /// Payload MiB retained across the sessions.
        #[arg(long, default_value_t = 1024)]
        mib: u64,
        /// Sessions sharing it.
        #[arg(long, default_value_t = 16)]
        sessions: usize,
        /// KiB per event.
        #[arg(long, default_value_t = 64)]
        event_kib: usize,
        /// The store's cache in MiB (`forkless serve --store-cache`).
        #[arg(long, default_value_t = 64)]
        cache_mib: u64,
        /// Where the stores' files go (a temporary directory by default).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Serve one server under test (prints `listening on http://ADDR/mcp`).
    Serve {
        #[arg(long, value_enum)]
        target: Target,
        #[arg(long, value_enum, default_value_t = Answer::Sse)]
        answer: Answer,
        /// `memory` or `redb:PATH`.
        #[arg(long, default_value = "memory")]
        store: String,
        #[arg(long, value_enum, default_value_t = Sync::Batched)]
        durability: Sync,
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Serve TLS with this certificate chain (PEM; with --tls-key): HTTP/2 and HTTP/1.1.
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The private key of --tls-cert (PEM).
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Target {
    Forkless,
    Hyper,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Answer {
    Sse,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Sync {
    Immediate,
    Batched,
    /// Batched, delivering before the sync (the behaviour before durable-before-delivery),
    /// for comparison only.
    BatchedEarly,
}

/// A new directory under `parent` for one run's files.
fn tempfile_in(parent: &std::path::Path) -> Result<PathBuf, Error> {
    let dir = parent.join(format!("forkless-retention-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn main() -> ExitCode {
    match real_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forkless-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<(), Error> {
    match Cli::parse().command {
        Cmd::Tasks { url, pid, creates, clients, get_seconds, live, poll_warmup, poll_seconds } => {
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let load = forkless_bench::tasks::TaskLoad {
                creates,
                clients,
                get_seconds,
                live,
                poll_warmup,
                poll_seconds,
            };
            let figures = rt.block_on(forkless_bench::tasks::run(&url, pid, load))?;
            println!("{}", serde_json::to_string_pretty(&figures).unwrap_or_default());
            Ok(())
        }
        Cmd::Retention { mib, sessions, event_kib, cache_mib, dir } => {
            let scratch = match dir {
                Some(dir) => tempfile_in(&dir)?,
                None => tempfile_in(&std::env::temp_dir())?,
            };
            let spec = forkless_bench::retention::Retention {
                sessions,
                retained_bytes: mib << 20,
                event_bytes: event_kib << 10,
                cache_bytes: cache_mib << 20,
                compare_memory: true,
            };
            let figures = forkless_bench::retention::run(&scratch, spec);
            let _ = std::fs::remove_dir_all(&scratch);
            println!("{}", serde_json::to_string_pretty(&figures?).unwrap_or_default());
            Ok(())
        }
        Cmd::Serve { target, answer, store, durability, listen, tls_cert, tls_key } => {
            let tls = tls_cert.zip(tls_key).map(|(cert, key)| servers::ServeTls { cert, key });
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let store = match store.split_once(':') {
                None if store == "memory" => StoreKind::Memory,
                Some(("postgres" | "postgresql", _)) => StoreKind::Postgres(store.clone()),
                Some(("redis" | "rediss", _)) => StoreKind::Redis(store.clone()),
                Some(("redb", path)) => StoreKind::Redb {
                    path: path.into(),
                    durability: match durability {
                        Sync::Immediate => Durability::Immediate,
                        Sync::Batched | Sync::BatchedEarly => Durability::default(),
                    },
                    early_delivery: matches!(durability, Sync::BatchedEarly),
                },
                _ => {
                    return Err(Error::Server(format!(
                        "unknown store {store:?} (memory, redb:PATH, postgres://URL or redis://URL)"
                    )));
                }
            };
            rt.block_on(async move {
                match target {
                    Target::Hyper => {
                        servers::serve_hyper(listen, matches!(answer, Answer::Sse), tls.as_ref()).await
                    }
                    Target::Forkless => {
                        let mode = match answer {
                            Answer::Sse => AnswerMode::Sse,
                            Answer::Json => AnswerMode::Json,
                        };
                        servers::serve_forkless(listen, mode, store, tls.as_ref()).await
                    }
                }
            })
        }
        Cmd::Load {
            url,
            load,
            clients,
            seconds,
            sse,
            any_answer,
            echo_arg,
            count,
            session_at,
            session_per_client,
            rounds,
            ca_file,
            http1,
        } => {
            let alpn = if http1 { forkless_bench::load::Alpn::Http1 } else { forkless_bench::load::Alpn::H2 };
            let endpoint = |url: &str| {
                if url.starts_with("https://") {
                    return forkless_bench::load::Endpoint::from_https_url(url, ca_file.as_deref(), alpn);
                }
                forkless_bench::load::Endpoint::from_url(url)
                    .ok_or_else(|| Error::Load(format!("not an http:// or https:// URL: {url}")))
            };
            let ep = endpoint(&url)?;
            let session_at = session_at.as_deref().map(endpoint).transpose()?;
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let probe: forkless_bench::load::Probe = std::sync::Arc::new(|| None);
            let d = Duration::from_secs_f64(seconds);
            rt.block_on(async {
                use forkless_bench::load;
                match load.as_str() {
                    "echo" => {
                        let expect = match (any_answer, sse) {
                            (true, _) => load::Expect::Either,
                            (false, true) => load::Expect::Sse,
                            (false, false) => load::Expect::Json,
                        };
                        let sessions = if session_per_client {
                            load::Sessions::PerClient
                        } else {
                            load::Sessions::Shared
                        };
                        let call = load::EchoCall {
                            argument: &echo_arg,
                            expect,
                            session_at: session_at.as_ref(),
                            sessions,
                        };
                        println!("{:?}", load::echo(&ep, clients, Duration::ZERO, d, call, &probe).await?)
                    }
                    "notify" => println!("{:?}", load::notifications(&ep, clients, count, d, &probe).await?),
                    "resume" => println!("{:?}", load::resume(&ep, count, 5, &probe).await?),
                    "latency" => println!("{:?}", load::delivery_latency(&ep, count, 1, &probe).await?),
                    "cross-resume" => {
                        let owner = session_at.as_ref().unwrap_or(&ep);
                        println!("{:?}", load::cross_resume(owner, &ep, count, rounds).await?)
                    }
                    other => return Err(Error::Load(format!("unknown load {other}"))),
                }
                Ok(())
            })
        }
        Cmd::Run { quick, out, rmcp, peers, no_pin, only, postgres, redis } => {
            std::fs::create_dir_all(&out)?;
            let opts = suite::Options {
                quick,
                exe: std::env::current_exe()?,
                rmcp,
                peers,
                pin: !no_pin && which("taskset"),
                scratch: suite::scratch_dir(&out)?,
                only,
                postgres,
                redis,
            };
            // The load generator is one thread: with the servers on CPU 0, it has CPU 1.
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let load_before = loadavg();
            let sync_before = disk::sync_latency(&opts.scratch, SYNC_PROBES)?;
            eprintln!("a 4 KiB write and fdatasync in {}: {sync_before}", opts.scratch.display());
            let rows = rt.block_on(suite::run(&opts, |row| {
                let m = &row.measured;
                if let Some(i) = &row.idle {
                    eprintln!("{:<14} {:<26} {:>5}  {i:?}", row.load, row.server, row.clients);
                    return;
                }
                eprintln!(
                    "{:<14} {:<26} {:>5}  {:>10.0} {}/s  p50 {:>7}  p99 {:>7}  cpu/op {:>8}  errors {}",
                    row.load,
                    row.server,
                    row.clients,
                    m.throughput,
                    row.unit,
                    m.p50_us.map_or("-".into(), |v| format!("{v:.0}µs")),
                    m.p99_us.map_or("-".into(), |v| format!("{v:.0}µs")),
                    m.cpu_us_per_op.map_or("-".into(), |v| format!("{v:.2}µs")),
                    m.errors
                );
            }))?;
            let ratios = report::ratios(&rows);
            let targets = forkless_bench::targets::targets(&rows);
            let load_after = loadavg();
            let sync_after = disk::sync_latency(&opts.scratch, SYNC_PROBES)?;
            let unix =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or(Duration::ZERO);
            // The machine's load matters on a shared box: it goes into both files.
            let header = format!(
                "forkless-bench run{}: finished at unix time {}, CPUs of the load generator: {}, servers pinned to CPU 0: {}, load average before / after: {} / {}, a 4 KiB write and fdatasync on the scratch disk before / after: {} / {}\n\n",
                if quick { " --quick" } else { "" },
                unix.as_secs(),
                std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                opts.pin,
                load_before,
                load_after,
                sync_before,
                sync_after,
            );
            let md = header + &report::markdown(&rows, &ratios, &targets);
            println!("{md}");
            let meta = serde_json::json!({
                "quick": quick,
                "load_average_before": load_before,
                "load_average_after": load_after,
                "sync_latency_before": sync_before,
                "sync_latency_after": sync_after,
                "pinned": opts.pin,
                "unix_time": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs(),
                "load_generator_cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            });
            let doc = report::Document { meta, rows: &rows, ratios: &ratios, targets: &targets };
            let json = serde_json::to_string_pretty(&doc).map_err(|e| Error::Load(e.to_string()))?;
            std::fs::write(out.join("results.json"), json)?;
            std::fs::write(out.join("results.md"), md)?;
            eprintln!("results: {}/results.{{json,md}}", out.display());
            Ok(())
        }
    }
}

fn which(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// Probes of the scratch disk's sync latency before and after a run (a fraction of a second
/// each on a disk that syncs in a few hundred microseconds).
const SYNC_PROBES: usize = 500;

/// The 1-minute load average (`/proc/loadavg`), or "?".
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}
