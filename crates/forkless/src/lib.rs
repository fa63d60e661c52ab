//! The `forkless` command line, as a library so its parts can be tested and reused.
//!
//! ```text
//! forkless serve ──► serve::run ──► forkless_server::Server<MemoryStore, demo::DemoHandler>
//! ```
//!
//! - [`demo`] owns the demo MCP server: its tools, resources, prompts and the fixtures the MCP
//!   conformance suite expects. It knows nothing about HTTP or the store.
//! - [`serve`] owns `forkless serve`: flags, configuration checks, the listener, logging, and a
//!   clean stop on Ctrl-C or SIGTERM. It makes no protocol decision itself.
//!
//! The transport (sessions, streams, resumption) lives in `forkless-server` and below; this
//! crate only wires it up.

pub mod demo;
mod error;
pub mod serve;

pub use error::Error;
