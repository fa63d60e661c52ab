//! The pages `forkless check --report FILE.html` and `forkless chaos --report FILE.html`
//! write: one self-contained HTML file each (inline CSS and SVG, no script, nothing fetched),
//! readable in any browser and attachable to an issue.
//!
//! A check page has a section per scenario: its verdict, criterion and evidence, and a
//! timeline with a lane per connection the scenario opened (what was sent, the head, every
//! event it delivered as a mark, how it ended: closed by the server, failed, cut by the
//! check, or refused with its reason). A numbered notification is green when it continues
//! what came before, orange when it repeats a number already delivered, red when it skips
//! one. A chaos page has the run's figures, a histogram of resume latencies and the
//! rejections by reason.
//!
//! It owns the drawing; what was observed is `check`'s and `chaos`'s.

use std::fmt::Write as _;
use std::path::Path;

use crate::Error;
use crate::chaos::Summary;
use crate::check::{Carried, How, Lane, Report, ScenarioReport};

/// Left edge of the time axis (the lane labels are left of it), right edge, lane height.
const AXIS: (f64, f64) = (300.0, 1040.0);
const LANE: f64 = 30.0;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}\
h1{font-size:20px}h2{font-size:16px;margin:28px 0 4px}.verdict{font-weight:600;padding:1px 6px;border-radius:3px}\
.PASS{background:#d8f3dc}.FAIL{background:#ffd6d6}.UNSUPPORTED{background:#eee}\
.pass-if{color:#555}ul.evidence{color:#333;font-size:13px}svg{display:block;margin:8px 0}\
svg text{font:12px system-ui,sans-serif}.ok{fill:#2b9348}.repeat{fill:#f18701}.gap{fill:#d62828}\
.response{fill:#1d4ed8}.other{fill:#999}.closed{stroke:#222;stroke-width:2}.failed,.cut{stroke-width:2}\
.failed{stroke:#d62828}.cut{stroke:#7b2cbf}.refused{fill:#d62828}.line{stroke:#bbb}\
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #eee}";

/// Write the page `html` to `path`, saying so on stderr.
pub fn write(path: &Path, html: &str) -> Result<(), Error> {
    std::fs::write(path, html).map_err(|e| Error::Config(format!("--report {}: {e}", path.display())))?;
    eprintln!("wrote the report to {}", path.display());
    Ok(())
}

/// Text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{STYLE}</style></head><body><h1>{t}</h1>\n{body}</body></html>\n",
        t = esc(title)
    )
}

/// The check page.
pub fn check_page(report: &Report) -> String {
    let mut body = String::new();
    let server = report.server.as_ref().map_or_else(String::new, |s| {
        format!(" ({} {})", s["name"].as_str().unwrap_or("?"), s["version"].as_str().unwrap_or(""))
    });
    let _ = write!(
        body,
        "<p>Target <code>{}</code>{}: {} scenarios, {} PASS, {} FAIL, {} UNSUPPORTED.</p>{}",
        esc(&report.target),
        esc(&server),
        report.scenarios.len(),
        report.passed,
        report.failed,
        report.unsupported,
        legend()
    );
    for scenario in &report.scenarios {
        body.push_str(&section(scenario));
    }
    page(&format!("forkless check {}", report.target), &body)
}

fn legend() -> String {
    let item = |shape: &str, text: &str| {
        format!(
            "<svg width=\"14\" height=\"14\" style=\"display:inline;margin:0 4px 0 12px\">{shape}</svg>{text}"
        )
    };
    format!(
        "<p>{}{}{}{}{}{}{}{}</p>",
        item("<circle cx=\"7\" cy=\"7\" r=\"5\" class=\"ok\"/>", "next number"),
        item("<circle cx=\"7\" cy=\"7\" r=\"5\" class=\"repeat\"/>", "repeated"),
        item("<circle cx=\"7\" cy=\"7\" r=\"5\" class=\"gap\"/>", "skipped ahead"),
        item(
            "<rect x=\"2\" y=\"2\" width=\"10\" height=\"10\" class=\"response\" transform=\"rotate(45 7 7)\"/>",
            "response"
        ),
        item("<rect x=\"4\" y=\"4\" width=\"6\" height=\"6\" class=\"other\"/>", "other message"),
        item("<line x1=\"7\" y1=\"1\" x2=\"7\" y2=\"13\" class=\"closed\"/>", "closed by the server"),
        item("<path d=\"M2 2L12 12M12 2L2 12\" class=\"failed\"/>", "failed"),
        item("<path d=\"M2 2L12 12M12 2L2 12\" class=\"cut\"/>", "cut by the check"),
    )
}

fn section(s: &ScenarioReport) -> String {
    let mut out = format!(
        "<section class=\"scenario\" id=\"{n}\" data-lanes=\"{l}\"><h2>{n} <span class=\"verdict {v}\">{v}</span></h2>\
         <div>{t}</div><div class=\"pass-if\">pass if: {p}</div>",
        n = esc(s.name),
        l = s.lanes.len(),
        v = s.verdict.as_str(),
        t = esc(s.title),
        p = esc(s.pass_if),
    );
    out.push_str(&timeline(&s.lanes, s.millis));
    out.push_str("<ul class=\"evidence\">");
    for line in &s.evidence {
        let _ = write!(out, "<li>{}</li>", esc(line));
    }
    out.push_str("</ul></section>\n");
    out
}

/// Each numbered mark's class: continuing (`ok`), a repeat, or a gap, judged against the
/// same lane's previous number, or for a lane's first against every lane before it.
fn classes(lanes: &[Lane]) -> Vec<Vec<&'static str>> {
    let mut marks: Vec<(u64, usize, usize, u64)> = Vec::new();
    for (l, lane) in lanes.iter().enumerate() {
        for (m, mark) in lane.marks.iter().enumerate() {
            if let Carried::Numbered(n) = mark.what {
                marks.push((mark.at_ms, l, m, n));
            }
        }
    }
    marks.sort_unstable();
    let mut out: Vec<Vec<&'static str>> = lanes.iter().map(|l| vec![""; l.marks.len()]).collect();
    let (mut best, mut last) = (0u64, vec![None::<u64>; lanes.len()]);
    for (_, l, m, n) in marks {
        let after = last[l].unwrap_or(best);
        out[l][m] = match n {
            n if n == after + 1 || (last[l].is_none() && after == 0) => "ok",
            n if n <= after => "repeat",
            _ => "gap",
        };
        last[l] = Some(n);
        best = best.max(n);
    }
    out
}

fn timeline(lanes: &[Lane], millis: u64) -> String {
    if lanes.is_empty() {
        return "<p class=\"pass-if\">(no connection was opened)</p>".to_owned();
    }
    let span =
        millis.max(lanes.iter().filter_map(|l| l.end.as_ref().map(|e| e.at_ms)).max().unwrap_or(0)).max(1);
    let x = |ms: u64| AXIS.0 + (AXIS.1 - AXIS.0) * (ms.min(span) as f64) / (span as f64);
    let height = LANE * lanes.len() as f64 + 30.0;
    let mut svg = format!(
        "<svg class=\"timeline\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\" role=\"img\">",
        w = AXIS.1 + 20.0
    );
    let classes = classes(lanes);
    for (i, lane) in lanes.iter().enumerate() {
        let y = LANE * i as f64 + LANE / 2.0;
        let streamed = (200..300).contains(&lane.status) && lane.sse;
        let mut head = format!("{} → {}", shorten(&lane.label, 28), lane.status);
        if let Some(r) = &lane.resumed {
            let _ = write!(head, " resumed={r}");
        }
        let _ = write!(
            svg,
            "<g class=\"lane\" data-label=\"{l}\"><text x=\"4\" y=\"{ty}\">{t}</text>",
            l = esc(&lane.label),
            ty = y + 4.0,
            t = esc(&head)
        );
        let start = x(lane.opened_ms);
        if !streamed {
            let reason = lane.reason.as_deref().map_or_else(
                || format!("{} (not a stream)", lane.status),
                |r| format!("{} {r}", lane.status),
            );
            // The reason is written right of the mark, or left of it near the axis's end.
            let (tx, anchor) =
                if start > AXIS.1 - 260.0 { (start - 4.0, "end") } else { (start + 12.0, "start") };
            let _ = write!(
                svg,
                "<rect x=\"{start}\" y=\"{}\" width=\"8\" height=\"12\" class=\"refused\"><title>{r}</title></rect>\
                 <text x=\"{tx}\" y=\"{}\" text-anchor=\"{anchor}\" class=\"refused\">{r}</text></g>",
                y - 6.0,
                y + 4.0,
                r = esc(&shorten(&reason, 60))
            );
            continue;
        }
        // Open to the scenario's end, unless it ended, or was answered and left.
        let answered = lane.marks.last().filter(|m| m.what == Carried::Response).map(|m| m.at_ms);
        let end = lane.end.as_ref().map(|e| e.at_ms).or(answered).map_or(x(span), x);
        let _ = write!(svg, "<line x1=\"{start}\" y1=\"{y}\" x2=\"{end}\" y2=\"{y}\" class=\"line\"/>");
        for (m, mark) in lane.marks.iter().enumerate() {
            let cx = x(mark.at_ms);
            let _ = match mark.what {
                Carried::Numbered(n) => write!(
                    svg,
                    "<circle cx=\"{cx}\" cy=\"{y}\" r=\"4\" class=\"{}\"><title>#{n} at {} ms</title></circle>",
                    classes[i][m], mark.at_ms
                ),
                Carried::Response => write!(
                    svg,
                    "<rect x=\"{}\" y=\"{}\" width=\"9\" height=\"9\" class=\"response\" transform=\"rotate(45 {cx} {y})\"><title>response at {} ms</title></rect>",
                    cx - 4.5,
                    y - 4.5,
                    mark.at_ms
                ),
                Carried::Other => write!(
                    svg,
                    "<rect x=\"{}\" y=\"{}\" width=\"6\" height=\"6\" class=\"other\"><title>another message at {} ms</title></rect>",
                    cx - 3.0,
                    y - 3.0,
                    mark.at_ms
                ),
            };
        }
        if let Some(e) = &lane.end {
            let ex = x(e.at_ms);
            let _ = match e.how {
                How::Closed => write!(
                    svg,
                    "<line x1=\"{ex}\" y1=\"{}\" x2=\"{ex}\" y2=\"{}\" class=\"closed\"><title>closed by the server at {} ms</title></line>",
                    y - 8.0,
                    y + 8.0,
                    e.at_ms
                ),
                How::Failed | How::Cut => write!(
                    svg,
                    "<path d=\"M{a} {b}L{c} {d}M{c} {b}L{a} {d}\" class=\"{k}\"><title>{what} at {ms} ms</title></path>",
                    a = ex - 5.0,
                    b = y - 5.0,
                    c = ex + 5.0,
                    d = y + 5.0,
                    k = if e.how == How::Failed { "failed" } else { "cut" },
                    what = if e.how == How::Failed { "failed" } else { "cut by the check" },
                    ms = e.at_ms
                ),
            };
        }
        svg.push_str("</g>");
    }
    let axis_y = LANE * lanes.len() as f64 + 14.0;
    let _ = write!(
        svg,
        "<text x=\"{}\" y=\"{axis_y}\">0 ms</text><text x=\"{}\" y=\"{axis_y}\" text-anchor=\"end\">{span} ms</text></svg>",
        AXIS.0, AXIS.1
    );
    svg
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// The chaos page.
pub fn chaos_page(s: &Summary) -> String {
    let mut body = String::new();
    let _ = write!(body, "<p>Target <code>{}</code>.</p><table>", esc(&s.target));
    for (k, v) in crate::chaos::rows(s).into_iter().chain([("elapsed", format!("{:.1} s", s.elapsed_s))]) {
        let _ = write!(body, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    }
    body.push_str("</table><h2>Resume latency</h2>");
    body.push_str(&histogram(&s.resume_latency_histogram));
    body.push_str("<h2>Rejections by reason</h2>");
    if s.rejections.is_empty() {
        body.push_str("<p>none</p>");
    } else {
        body.push_str("<table class=\"rejections\"><tr><th>reason</th><th>count</th></tr>");
        for (reason, n) in &s.rejections {
            let _ = write!(body, "<tr><td>{}</td><td>{n}</td></tr>", esc(reason));
        }
        body.push_str("</table>");
    }
    page(&format!("forkless chaos {}", s.target), &body)
}

fn histogram(buckets: &[crate::chaos::Bucket]) -> String {
    let most = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let (w, h, bar) = (60.0, 160.0, 48.0);
    let width = w * buckets.len() as f64 + 20.0;
    let mut svg = format!("<svg class=\"histogram\" width=\"{width}\" height=\"{}\" role=\"img\">", h + 40.0);
    for (i, b) in buckets.iter().enumerate() {
        let bh = h * b.count as f64 / most as f64;
        let x0 = 10.0 + w * i as f64;
        let label = b.le_ms.map_or_else(|| "more".to_owned(), |le| format!("≤{le} ms"));
        let _ = write!(
            svg,
            "<g class=\"bucket\"><rect x=\"{x0}\" y=\"{}\" width=\"{bar}\" height=\"{bh}\" class=\"ok\"><title>{label}: {n}</title></rect>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{n}</text><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>",
            h - bh + 10.0,
            x0 + bar / 2.0,
            h - bh + 6.0,
            x0 + bar / 2.0,
            h + 28.0,
            esc(&label),
            n = b.count
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests;
