//! Which node's handler serves a session ([`Owner`]), and what a node taking over a lost
//! node's session does with it ([`Takeover`]), what names a node ([`NodeName`]) and where
//! other nodes reach it ([`Advertised`]).
//!
//! A store of one process owns every session it holds ([`Owner::Here`]). A store shared by
//! many nodes records the node whose lease created each session, and that node's advertised
//! address, so the server can send a request for a session to the node its handler runs on
//! (PROTOCOL section 10). This module owns the vocabulary, not the routing (the server's
//! cluster layer) nor the ownership records (a shared store's).

/// Where a session's handler runs, as the store knows it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// This node (or a store of one process): serve the session here.
    Here,
    /// Another node holding a live lease: send the session's requests there.
    Node {
        /// Its node id.
        node: NodeName,
        /// Its advertised base URL (`--advertise`), if it gave one.
        advertise: Option<Advertised>,
    },
    /// A node whose lease lapsed: its sessions wait to be taken over.
    Lapsed {
        /// Its node id.
        node: NodeName,
    },
}

/// What a node taking over a lost node's sessions does with each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takeover {
    /// Go on with the session here: its requests in flight are orphans to answer.
    Restore,
    /// End it (`owner_lost`): its handler's state died with its node.
    End,
}

/// A node's name: its lease's id when it holds one, its name in hints and in tail interest.
/// At most [`NodeName::MAX_LEN`] bytes of visible ASCII without spaces, since a hint is
/// `FROM …` (a name with a space sent hints no other node could read: its writes woke no
/// watcher elsewhere, silently).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeName(String);

/// Why a node name was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid node name {name:?}: {why}")]
pub struct InvalidNodeName {
    name: String,
    why: &'static str,
}

impl NodeName {
    /// The longest name.
    pub const MAX_LEN: usize = 128;

    /// `name`, checked.
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidNodeName> {
        let name = name.into();
        let why = if name.is_empty() {
            "it is empty"
        } else if name.len() > Self::MAX_LEN {
            "it is longer than 128 bytes"
        } else if !name.bytes().all(|b| b.is_ascii_graphic()) {
            "only visible ASCII without spaces may name a node"
        } else {
            return Ok(Self(name));
        };
        Err(InvalidNodeName { name, why })
    }

    /// A name for a node that was given none: 64 random bits in hex.
    pub fn random() -> Self {
        use std::hash::{BuildHasher, RandomState};
        Self(format!("{:016x}", RandomState::new().hash_one(std::time::SystemTime::now())))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for NodeName {
    type Err = InvalidNodeName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl std::fmt::Display for NodeName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The base URL a node advertises with its lease: where other nodes send the requests of the
/// sessions it owns. A plain `http://HOST:PORT` base, an internal address: other nodes add
/// the request's path, and the hop between nodes is plaintext HTTP/1.1 (PROTOCOL section 10).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Advertised(String);

/// Why an advertised address was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{url:?} must be an http://HOST:PORT base URL (no path; other nodes add the endpoint path)")]
pub struct InvalidAdvertised {
    url: String,
}

impl Advertised {
    /// `url`, checked: `http://`, a host, a port, nothing after but one `/`.
    pub fn new(url: impl Into<String>) -> Result<Self, InvalidAdvertised> {
        let url = url.into();
        let plain = url.strip_prefix("http://").is_some_and(|rest| {
            let authority = rest.strip_suffix('/').unwrap_or(rest);
            let outside = |c: char| matches!(c, '/' | '?' | '#' | '@') || c.is_ascii_whitespace();
            authority.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && !authority.contains(outside) && port.parse::<u16>().is_ok()
            })
        });
        if plain { Ok(Self(url)) } else { Err(InvalidAdvertised { url }) }
    }

    /// The base URL as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Advertised {
    type Err = InvalidAdvertised;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl std::fmt::Display for Advertised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_name_is_one_word_of_visible_ascii() {
        for good in ["a", "node-1", "eu-west.b:2", &"x".repeat(NodeName::MAX_LEN)] {
            assert_eq!(NodeName::new(good).map(|n| n.to_string()), Ok(good.to_owned()));
        }
        for bad in ["", "a b", "a\tb", "caf\u{e9}", &"x".repeat(NodeName::MAX_LEN + 1)] {
            assert!(NodeName::new(bad).is_err(), "{bad:?} is refused");
        }
        let random = NodeName::random();
        assert_eq!(NodeName::new(random.as_str()), Ok(random));
    }

    #[test]
    fn an_advertised_address_is_a_plain_http_base() {
        for good in ["http://10.0.0.1:8080", "http://10.0.0.1:8080/", "http://node-a:1", "http://[::1]:9000"]
        {
            assert_eq!(Advertised::new(good).map(|a| a.to_string()), Ok(good.to_owned()));
        }
        let bad = [
            "https://10.0.0.1:8080",
            "http://10.0.0.1",
            "http://10.0.0.1:8080/mcp",
            "http://10.0.0.1:8080?x=1",
            "http://u@10.0.0.1:8080",
            "http://:8080",
            "http://10.0.0.1:99999",
            "10.0.0.1:8080",
            "http://a b:80",
        ];
        for bad in bad {
            let refused = Advertised::new(bad).expect_err(bad).to_string();
            assert!(refused.contains("http://HOST:PORT"), "{refused}");
        }
    }
}
