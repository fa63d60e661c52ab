//! `forkless`: the command line. One subcommand per module of the library; this file only
//! parses flags and dispatches.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

// mimalloc: a request allocates a few dozen small objects (headers, JSON values, tasks), and
// glibc's malloc/free were a fifth of the server's instructions per request
// (docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Fork-free SSE resumption for MCP Streamable HTTP.
#[derive(Debug, Parser)]
#[command(
    name = "forkless",
    version,
    about,
    propagate_version = true,
    after_help = "Logs go to stderr, filtered by RUST_LOG (default: info)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the demo MCP server (tools, resources, prompts) on the forkless transport.
    Serve(Box<forkless::serve::ServeArgs>),
    /// Put a stdio MCP server (`-- COMMAND ARGS…`) behind the fork-free transport.
    Gateway(Box<forkless::gateway::GatewayArgs>),
    /// Bridge an MCP host's stdio to a Streamable HTTP server, never handing it a fork.
    Connect(forkless::connect::ConnectArgs),
    /// Probe an MCP server for session forks: each scenario PASS, FAIL or UNSUPPORTED.
    Check(forkless::check::CheckArgs),
    /// The forkless-client driver of `forkless check --client` (calls `numbers` at URL).
    #[command(hide = true)]
    Drive {
        /// The probe's MCP endpoint.
        url: String,
    },
    /// Many sessions, random connection cuts and resumes; count duplicates, gaps and forks.
    Chaos(forkless::chaos::ChaosArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Serve(_) | Command::Gateway(_) => forkless::init_logging(),
        // The bridge tells the host (and stderr) what the client's warnings would repeat.
        Command::Connect(_) => forkless::init_logging_at("info,forkless_client=error"),
        // The client's own warnings (a session it closes, a stream it gives up) are counted in
        // the reports already.
        Command::Check(_) | Command::Chaos(_) | Command::Drive { .. } => {
            forkless::init_logging_at("warn,forkless_client=error");
        }
    }
    let result = match &cli.command {
        Command::Serve(args) => forkless::serve::run(args),
        Command::Gateway(args) => forkless::gateway::run(args),
        Command::Connect(args) => forkless::connect::run(args),
        Command::Check(args) => forkless::check::run(args),
        Command::Chaos(args) => forkless::chaos::run(args),
        Command::Drive { url } => forkless::check::clients::drive::run(url),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forkless: {e}");
            e.exit_code()
        }
    }
}
