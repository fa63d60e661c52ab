//! MCP protocol revisions and what each one changes on the wire (PROTOCOL section 9).

use core::fmt;
use core::str::FromStr;

/// A protocol revision this implementation speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Revision {
    /// 2025-03-26: sessions, batches, no `MCP-Protocol-Version` header.
    V2025_03_26,
    /// 2025-06-18: `MCP-Protocol-Version` after initialize, no batches.
    V2025_06_18,
    /// 2025-11-25: priming events, `retry:`, polling; resumption always via GET.
    V2025_11_25,
    /// 2026-07-28: stateless; no sessions, no resumption.
    V2026_07_28,
}

/// A revision string this implementation does not speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unsupported MCP protocol revision")]
pub struct UnsupportedRevision;

impl Revision {
    /// Every revision, oldest first.
    pub const ALL: [Self; 4] = [Self::V2025_03_26, Self::V2025_06_18, Self::V2025_11_25, Self::V2026_07_28];
    /// The newest revision with sessions and resumption.
    pub const LATEST_WITH_SESSIONS: Self = Self::V2025_11_25;

    /// The wire form, e.g. `2025-11-25`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::V2025_03_26 => "2025-03-26",
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }

    /// Whether sessions, GET streams and `Last-Event-ID` exist in this revision.
    pub const fn has_sessions(self) -> bool {
        !matches!(self, Self::V2026_07_28)
    }

    /// Whether a POST body may be a JSON-RPC batch.
    pub const fn accepts_batches(self) -> bool {
        matches!(self, Self::V2025_03_26)
    }

    /// Whether a new SSE stream starts with an id-only priming event.
    pub const fn sends_priming_event(self) -> bool {
        matches!(self, Self::V2025_11_25)
    }

    /// Whether closing a response stream cancels its request.
    pub const fn disconnect_cancels(self) -> bool {
        !self.has_sessions()
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Revision {
    type Err = UnsupportedRevision;

    fn from_str(s: &str) -> Result<Self, UnsupportedRevision> {
        Self::ALL.into_iter().find(|r| r.as_str() == s).ok_or(UnsupportedRevision)
    }
}
