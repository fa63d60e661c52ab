//! Fair shares of the server's sessions: whose share a new session counts against, and which
//! session makes room when the server is full.
//!
//! A principal is the verified subject (with OAuth, or the configured principal function);
//! without one, the client's address: the connection's peer, or, for a connection from one of
//! [`Quotas::trusted_proxies`], the nearest address in `X-Forwarded-For` that is not one of
//! them. A principal holding [`Quotas::max_sessions_per_principal`] sessions on this node is
//! refused more with 429 and `Retry-After`; at `max_sessions`, the longest-idle session of the
//! principal holding the most is ended with reason `reclaimed` (its client's next request gets
//! 404 `reclaimed`) to make room for a principal holding fewer; one holding as many as anyone
//! is refused with 503 as before ([`AtCapacity`]).
//!
//! It owns those rules and the peer address requests carry; counting the sessions is
//! [`crate::node::LiveSessions`]', ending one is the caller's.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::http::HeaderMap;

/// The per-principal limits. Every one is a setting with a documented default.
#[derive(Clone, Debug)]
pub struct Quotas {
    /// Sessions one principal may hold on this node; the next `initialize` gets 429
    /// `max_sessions_per_principal` with `Retry-After`. Default 5,000 (a tenth of the default
    /// `max_sessions`).
    pub max_sessions_per_principal: usize,
    /// Peers whose `X-Forwarded-For` names the client (a load balancer, a reverse proxy);
    /// from any other peer the header is ignored. Default: none.
    pub trusted_proxies: Vec<IpAddr>,
    /// What `initialize` does at `max_sessions`. Default [`AtCapacity::Reclaim`].
    pub at_capacity: AtCapacity,
    /// Payload bytes the live sessions of one principal may retain on this node (each session
    /// as its last append left it): at it, the principal's notifications are refused with the
    /// typed `max_retained_bytes_per_principal` (responses always land) and its `initialize`
    /// gets 429. Default 128 MiB (an eighth of the default `max_retained_bytes`).
    pub max_retained_bytes_per_principal: u64,
}

impl Default for Quotas {
    fn default() -> Self {
        Self {
            max_sessions_per_principal: 5_000,
            trusted_proxies: Vec::new(),
            at_capacity: AtCapacity::Reclaim,
            max_retained_bytes_per_principal: 128 << 20,
        }
    }
}

/// What a new session does when the server holds `max_sessions`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AtCapacity {
    /// End the longest-idle session of the principal holding the most (not the one asking)
    /// with reason `reclaimed`, and take its place.
    #[default]
    Reclaim,
    /// Refuse with 503 `max_sessions` and `Retry-After` (one principal can then lock every
    /// other one out for the idle time to live).
    Refuse,
}

/// The connection's peer, carried by requests that may create a session.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PeerAddr(pub(crate) SocketAddr);

/// Whose share a session created by this request counts against: the principal, else the
/// client's address; `None` when neither is known (a router served by something else).
pub(crate) fn key(
    principal: Option<&str>,
    headers: &HeaderMap,
    peer: Option<PeerAddr>,
    quotas: &Quotas,
) -> Option<Arc<str>> {
    if let Some(principal) = principal {
        return Some(Arc::from(format!("principal:{principal}")));
    }
    let peer = peer?.0.ip();
    Some(Arc::from(format!("address:{}", client_address(peer, headers, &quotas.trusted_proxies))))
}

/// The client's address: `peer`, or behind trusted proxies the nearest untrusted address of
/// `X-Forwarded-For` (read from the right: every hop appends the address it heard from).
fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> IpAddr {
    if !trusted.contains(&peer) {
        return peer;
    }
    let hops = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|hop| hop.trim().parse::<IpAddr>().ok())
        .collect::<Vec<_>>();
    hops.iter().rev().find(|hop| !trusted.contains(hop)).or(hops.first()).copied().unwrap_or(peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn forwarded(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", value.parse().unwrap());
        h
    }

    #[test]
    fn forwarded_for_is_believed_only_from_a_trusted_proxy() {
        let trusted = [ip("10.0.0.1")];
        let h = forwarded("203.0.113.7, 10.0.0.1");
        assert_eq!(client_address(ip("10.0.0.1"), &h, &trusted), ip("203.0.113.7"));
        assert_eq!(
            client_address(ip("198.51.100.2"), &h, &trusted),
            ip("198.51.100.2"),
            "an untrusted peer's header is ignored"
        );
        // A client's own forged entry sits left of what the trusted proxy appended.
        let h = forwarded("1.1.1.1, 203.0.113.7");
        assert_eq!(client_address(ip("10.0.0.1"), &h, &trusted), ip("203.0.113.7"));
        assert_eq!(client_address(ip("10.0.0.1"), &HeaderMap::new(), &trusted), ip("10.0.0.1"));
    }

    #[test]
    fn a_principal_wins_over_the_address() {
        let peer = Some(PeerAddr("192.0.2.1:5000".parse().unwrap()));
        let q = Quotas::default();
        assert_eq!(key(Some("iss sub"), &HeaderMap::new(), peer, &q).as_deref(), Some("principal:iss sub"));
        assert_eq!(key(None, &HeaderMap::new(), peer, &q).as_deref(), Some("address:192.0.2.1"));
        assert_eq!(key(None, &HeaderMap::new(), None, &q), None);
    }
}
