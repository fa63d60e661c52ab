//! Turning rows into the printed table, the markdown file and the JSON file, with the
//! ratios the targets are stated in.
//!
//! This module owns presentation only; every number comes from [`crate::suite::Row`].

use std::fmt::Write as _;

use serde::Serialize;

use crate::suite::Row;
use crate::targets::{Bar, Target};

/// forkless against a reference on one echo load point.
#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    /// `echo-json` or `echo-sse`.
    pub load: String,
    /// Concurrent clients.
    pub clients: usize,
    /// The forkless server compared.
    pub server: String,
    /// The reference (`hyper/...` or `rmcp/...`).
    pub reference: String,
    /// forkless throughput / reference throughput.
    pub throughput: f64,
    /// forkless server CPU per request / reference's.
    pub cpu_per_request: Option<f64>,
    /// forkless p99 / reference p99.
    pub p99: Option<f64>,
}

/// Ratios of forkless (memory store) to the bare hyper echo of the same answer mode and to
/// rmcp's stateful server, per echo load point.
pub fn ratios(rows: &[Row]) -> Vec<Ratio> {
    let find = |load: &str, server: &str, clients: usize| {
        rows.iter().find(|r| r.load == load && r.server == server && r.clients == clients)
    };
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| r.load.starts_with("echo-") && r.server.starts_with("forkless/memory")) {
        let mode = if r.load == "echo-sse" { "sse" } else { "json" };
        // rmcp's stateful server answers only over SSE: it is the reference for both modes
        // (the targets compare against it); its stateless JSON server is listed too.
        let references = [
            (r.load.as_str(), format!("hyper/{mode}")),
            ("echo-sse", "rmcp/stateful/sse".to_owned()),
            ("echo-json", "rmcp/stateless/json".to_owned()),
        ];
        for (load, reference) in references {
            if reference.ends_with("json") && mode == "sse" && reference.starts_with("rmcp") {
                continue;
            }
            let Some(base) = find(load, &reference, r.clients) else { continue };
            let div = |a: Option<f64>, b: Option<f64>| a.zip(b).filter(|(_, b)| *b > 0.0).map(|(a, b)| a / b);
            out.push(Ratio {
                load: r.load.clone(),
                clients: r.clients,
                server: r.server.clone(),
                reference,
                throughput: if base.measured.throughput > 0.0 {
                    r.measured.throughput / base.measured.throughput
                } else {
                    0.0
                },
                cpu_per_request: div(r.measured.cpu_us_per_op, base.measured.cpu_us_per_op),
                p99: div(r.measured.p99_us, base.measured.p99_us),
            });
        }
    }
    out
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn times(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}x"))
}

/// The markdown report: one table of every row, one of the idle figures, one of the ratios,
/// one of the targets.
pub fn markdown(rows: &[Row], ratios: &[Ratio], targets: &[Target]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| load | server | clients | throughput | p50 µs | p99 µs | server CPU µs/op | peak RSS MiB | errors |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows.iter().filter(|r| r.idle.is_none()) {
        let m = &r.measured;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} {}/s | {} | {} | {} | {} | {} |",
            r.load,
            r.server,
            r.clients,
            m.throughput,
            r.unit,
            opt(m.p50_us, 0),
            opt(m.p99_us, 0),
            opt(m.cpu_us_per_op, 2),
            opt(r.peak_rss_kib.map(|k| k as f64 / 1024.0), 1),
            m.errors,
        );
    }
    let idle: Vec<&Row> = rows.iter().filter(|r| r.idle.is_some()).collect();
    if !idle.is_empty() {
        let _ = writeln!(md);
        let _ = writeln!(
            md,
            "| idle | sessions | KiB / idle session | GET streams held | stream errors | KiB / open stream | RSS at end MiB |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|");
        for r in idle {
            let Some(i) = &r.idle else { continue };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.server,
                i.sessions,
                opt(i.bytes_per_session.map(|b| b / 1024.0), 2),
                i.streams_held,
                i.stream_errors,
                opt(i.bytes_per_stream.map(|b| b / 1024.0), 2),
                opt(i.rss_kib.map(|k| k as f64 / 1024.0), 1),
            );
        }
    }
    if !ratios.is_empty() {
        let _ = writeln!(md);
        let _ = writeln!(md, "| ratio | load | clients | throughput | CPU / request | p99 |");
        let _ = writeln!(md, "|---|---|---:|---:|---:|---:|");
        for q in ratios {
            let _ = writeln!(
                md,
                "| {} ÷ {} | {} | {} | {:.2}x | {} | {} |",
                q.server,
                q.reference,
                q.load,
                q.clients,
                q.throughput,
                times(q.cpu_per_request),
                times(q.p99),
            );
        }
    }
    if !targets.is_empty() {
        let _ = writeln!(md);
        let _ = writeln!(md, "| target (issue 11) | measured | bar | met |");
        let _ = writeln!(md, "|---|---:|---:|---|");
        for t in targets {
            let (measured, bar) = match t.bar {
                Bar::RatioAtLeast(bar) => (format!("{:.2}x", t.measured), format!("≥ {bar:.2}x")),
                Bar::MillisAtMost(bar) => (format!("{:.2} ms", t.measured), format!("≤ {bar:.2} ms")),
            };
            let met = if t.met() { "yes" } else { "**no**" };
            let _ = writeln!(md, "| {} | {measured} | {bar} | {met} |", t.what);
        }
    }
    md
}

/// The JSON document written next to the markdown.
#[derive(Debug, Serialize)]
pub struct Document<'a> {
    /// When, where and how the run was made.
    pub meta: serde_json::Value,
    /// Every measured row.
    pub rows: &'a [Row],
    /// forkless ÷ references.
    pub ratios: &'a [Ratio],
    /// The durable default's targets.
    pub targets: &'a [Target],
}
