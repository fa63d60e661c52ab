//! Unit tests of `load`.

use super::*;

#[test]
fn sse_events_across_chunks() {
    let mut p = SseParser::default();
    let mut seen = Vec::new();
    let wire = b"id: s.0\nretry: 1000\ndata: \n\nid: s.1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\r\n\r\n: keep-alive\n\nid: s.2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
    for chunk in wire.chunks(7) {
        p.push(chunk, |k, id| seen.push((k, id.map(str::to_owned))));
    }
    assert_eq!(
        seen,
        vec![
            (EventKind::Other, Some("s.0".into())),
            (EventKind::Notification, Some("s.1".into())),
            (EventKind::Other, None),
            (EventKind::Response, Some("s.2".into())),
        ]
    );
}

#[test]
fn endpoints_from_announced_urls() {
    let ep = Endpoint::from_url("http://127.0.0.1:8080/mcp").expect("url");
    assert_eq!(ep.addr, "127.0.0.1:8080".parse().expect("addr"));
    assert_eq!(ep.path, "/mcp");
    assert!(Endpoint::from_url("https://x").is_none());
}
