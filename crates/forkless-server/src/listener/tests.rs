//! Unit tests of `listener`.

use super::*;
use deadline::Bound;

fn conn(registry: &Registry) -> Conn {
    Conn {
        in_flight: AtomicUsize::new(0),
        idle_since: AtomicU64::new(registry.now_ms()),
        head_since: AtomicU64::new(0),
        drop_now: CancellationToken::new(),
    }
}

#[test]
fn the_connection_task_wakes_at_its_deadlines_and_never_spins() {
    let registry = Registry::default();
    let bounds = Bounds {
        header_read_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(10),
        max_connections: 1,
        max_header_bytes: 1024,
    };
    let c = conn(&registry);
    let start = c.idle_start(&registry);
    // Idle, no head: first at the header timeout (a head may have begun), then at the idle one.
    assert_eq!(c.wake(&registry, &bounds, start), start + bounds.header_read_timeout);
    let later = start + Duration::from_secs(3);
    assert_eq!(c.wake(&registry, &bounds, later), start + bounds.idle_timeout, "not in the past");
    // A head arriving: its own deadline.
    c.head_arriving(&registry);
    assert_eq!(c.deadline(&registry, &bounds).1, Bound::Header);
    // In flight: nothing to enforce, looked at again later, never now.
    let busy = Busy::new(Arc::new(conn(&registry)), Arc::new(Registry::default()));
    let now = Instant::now();
    assert!(busy.conn.wake(&busy.registry, &bounds, now) > now);
    assert_eq!(busy.conn.deadline(&busy.registry, &bounds).1, Bound::Busy);
}

#[test]
fn only_a_request_that_may_initialize_or_create_a_task_carries_the_peer_address() {
    let request = |method: &str, headers: &[(&str, &str)]| {
        let mut b = Request::builder().method(method).uri("/mcp");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    };
    assert!(may_create_a_session(&request("POST", &[])));
    assert!(may_create_a_session(&request("POST", &[("mcp-protocol-version", "2025-11-25")])));
    assert!(!may_create_a_session(&request("POST", &[("mcp-session-id", "x")])));
    assert!(!may_create_a_session(&request("POST", &[("mcp-protocol-version", "2026-07-28")])));
    // A 2026-07-28 tool call may create a task, which counts against its client's share; a
    // task poll or a notification cannot.
    let v = ("mcp-protocol-version", "2026-07-28");
    assert!(may_create_a_session(&request("POST", &[v, ("mcp-method", "tools/call")])));
    assert!(!may_create_a_session(&request("POST", &[v, ("mcp-method", "tasks/get")])));
    assert!(!may_create_a_session(&request("POST", &[v, ("mcp-method", "notifications/cancelled")])));
    assert!(!may_create_a_session(&request("GET", &[])));
}
