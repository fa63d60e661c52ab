//! # forkless-bench: the end-to-end benchmark harness
//!
//! One command (`scripts/bench.sh`, which runs `forkless-bench run`) measures forkless
//! against the ceiling (a bare hyper 1 echo) and the peers (rmcp, and the TypeScript and
//! Python SDK v1 servers) on the same loads in one run; docs/benchmarks.md has the figures.
//!
//! ```text
//! forkless-bench run [--quick] [--out DIR] [--rmcp BIN] [--peers ROOT] [--only LOAD]...
//! forkless-bench serve --target forkless|hyper [--answer sse|json] [--store memory|redb:PATH]
//!                      [--durability immediate|batched] [--listen ADDR]
//! ```
//!
//! Servers under test run as separate processes pinned to CPU 0 (`taskset -c 0`); the load
//! generator runs on one thread, pinned to CPU 1 by the script, so neither starves the
//! other. Server CPU comes from `/proc/<pid>/stat`, peak memory from `VmHWM`.
//!
//! | module | owns |
//! |---|---|
//! | `servers` | the forkless bench server (bench handler, any store) and the bare hyper echo |
//! | `load` | the hyper 1 client, the SSE parser, the five loads |
//! | `procstat` | CPU time and memory of a process |
//! | `disk` | the scratch disk's sync latency, before and after a run |
//! | `suite` | the plan (servers × loads), server processes, result rows |
//! | `report` | ratios, markdown and JSON |
//! | `targets` | the durable default's bars against the memory store (issue 11), per run |
//! | `tasks` | the task loads (creation latency, `tasks/get` rate and CPU, polling live tasks) against a running `forkless serve` |

pub mod disk;
pub mod load;
pub mod procstat;
pub mod report;
pub mod retention;
pub mod servers;
pub mod suite;
pub mod targets;
pub mod tasks;
mod wire;

/// Why the harness failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket, file or process operation failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// A server under test could not be started or configured.
    #[error("server: {0}")]
    Server(String),
    /// The load could not be applied (connection refused, protocol failure during setup).
    #[error("load: {0}")]
    Load(String),
    /// A store measured in this process failed, or gave back other than what was written.
    #[error("store: {0}")]
    Store(String),
}
