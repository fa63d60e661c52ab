//! Unit tests of the report pages.

use super::*;
use crate::check::{Ending, Mark, Verdict};

fn lane(label: &str, opened_ms: u64, marks: &[(u64, Carried)], end: Option<(u64, How)>) -> Lane {
    Lane {
        label: label.into(),
        opened_ms,
        status: 200,
        sse: true,
        resumed: None,
        reason: None,
        marks: marks.iter().map(|&(at_ms, what)| Mark { at_ms, what }).collect(),
        end: end.map(|(at_ms, how)| Ending { at_ms, how }),
    }
}

#[test]
fn numbers_are_judged_against_their_lane_and_what_came_before_it() {
    use Carried::Numbered as N;
    let lanes = [
        lane("POST tools/call", 0, &[(1, N(1)), (2, N(2)), (3, N(3))], Some((4, How::Cut))),
        // A resume that repeats #3, goes on, then skips #6.
        lane("GET", 10, &[(11, N(3)), (12, N(4)), (13, N(5)), (14, N(7)), (15, Carried::Response)], None),
        // Another that starts past everything delivered.
        lane("GET", 20, &[(21, N(9))], None),
    ];
    let c = classes(&lanes);
    assert_eq!(c[0], ["ok", "ok", "ok"]);
    assert_eq!(c[1], ["repeat", "ok", "ok", "gap", ""]);
    assert_eq!(c[2], ["gap"]);
}

#[test]
fn a_check_page_is_self_contained_with_a_lane_per_connection_and_escaped_text() {
    let mut refused = lane("GET (Last-Event-ID: <x>)", 5, &[], None);
    refused.status = 404;
    refused.reason = Some("cursor_malformed".into());
    let report = Report {
        target: "http://127.0.0.1:1/mcp".into(),
        server: None,
        tool: None,
        background_tool: None,
        scenarios: vec![ScenarioReport {
            name: "bare-numeric-cursor",
            title: "t",
            verdict: Verdict::Pass,
            pass_if: "p & q",
            evidence: vec!["<script>alert(1)</script>".into()],
            millis: 30,
            lanes: vec![
                lane("POST tools/call", 0, &[(1, Carried::Numbered(1))], Some((2, How::Closed))),
                refused,
            ],
        }],
        passed: 1,
        failed: 0,
        unsupported: 0,
    };
    let html = check_page(&report);
    assert_eq!(html.matches("<g class=\"lane\"").count(), 2);
    assert!(html.contains("data-lanes=\"2\""));
    assert!(html.contains("404 cursor_malformed"));
    assert!(!html.contains("<script"), "evidence is escaped, and the page has no script");
    assert!(!html.contains("http://") || !html.contains("src="), "nothing is fetched");
    assert!(html.contains("&lt;x&gt;"));
}

#[test]
fn a_chaos_page_draws_a_bar_per_bucket_and_the_rejections() {
    let mut s = Summary { target: "t".into(), ..Summary::default() };
    s.resume_latency_histogram =
        crate::chaos::histogram(&[std::time::Duration::from_millis(3), std::time::Duration::from_secs(3)]);
    s.rejections.insert("stream_fenced".into(), 2);
    let html = chaos_page(&s);
    assert_eq!(html.matches("<g class=\"bucket\"").count(), 11);
    assert!(html.contains("stream_fenced</td><td>2"));
}
