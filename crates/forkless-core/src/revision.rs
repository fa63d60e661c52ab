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

    /// Whether every request stands alone (2026-07-28): no session, no `initialize`, and a
    /// GET or DELETE on the endpoint means nothing.
    pub const fn is_stateless(self) -> bool {
        !self.has_sessions()
    }

    /// Whether the client sends `MCP-Protocol-Version` on every request after initialize.
    pub const fn sends_version_header(self) -> bool {
        !matches!(self, Self::V2025_03_26)
    }

    /// Whether a server may close a request's SSE stream before its answer and let the
    /// client poll for the rest with `Last-Event-ID` (after the `retry:` it was told).
    pub const fn allows_polling(self) -> bool {
        matches!(self, Self::V2025_11_25)
    }

    /// Whether a request gets log messages only when it opted in (its `_meta` names a level),
    /// rather than at the session's `logging/setLevel`.
    pub const fn logs_by_request(self) -> bool {
        self.is_stateless()
    }

    /// Whether a request may become a task (the tasks extension, when the client declared it).
    pub const fn has_tasks(self) -> bool {
        self.is_stateless()
    }

    /// Whether a request that needs input is answered `input_required` with a sealed
    /// `requestState` and retried by the client, rather than asking on its stream.
    pub const fn asks_by_retry(self) -> bool {
        self.is_stateless()
    }
}

/// A set of revisions: those a server offers (the operator's choice, PROTOCOL section 9).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RevisionSet(u8);

impl RevisionSet {
    /// Every revision this implementation speaks.
    pub const ALL: Self = Self(0b1111);
    /// The revisions with sessions and resumption (2025-03-26, 2025-06-18, 2025-11-25).
    pub const SESSIONS: Self = Self(0b0111);
    /// No revision.
    pub const EMPTY: Self = Self(0);

    const fn bit(r: Revision) -> u8 {
        1 << (r as u8)
    }

    /// The set holding `revisions`.
    pub fn of(revisions: impl IntoIterator<Item = Revision>) -> Self {
        Self(revisions.into_iter().fold(0, |bits, r| bits | Self::bit(r)))
    }

    /// Whether `r` is in the set.
    pub const fn contains(self, r: Revision) -> bool {
        self.0 & Self::bit(r) != 0
    }

    /// The revisions in both sets.
    pub const fn intersect(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The revisions in the set, newest first (as `supportedVersions` lists them).
    pub fn newest_first(self) -> impl Iterator<Item = Revision> {
        Revision::ALL.into_iter().rev().filter(move |r| self.contains(*r))
    }

    /// The newest revision with sessions in the set: what `initialize` answers a client asking
    /// for one the set lacks.
    pub fn newest_with_sessions(self) -> Option<Revision> {
        self.newest_first().find(|r| r.has_sessions())
    }
}

impl fmt::Debug for RevisionSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(Revision::ALL.iter().filter(|r| self.contains(**r)).map(|r| r.as_str()))
            .finish()
    }
}

impl fmt::Display for RevisionSet {
    /// Oldest first, comma-separated: the form [`FromStr`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for r in Revision::ALL.iter().filter(|r| self.contains(**r)) {
            if !first {
                f.write_str(",")?;
            }
            f.write_str(r.as_str())?;
            first = false;
        }
        Ok(())
    }
}

impl FromStr for RevisionSet {
    type Err = UnsupportedRevision;

    /// `all`, `sessions`, or revisions separated by commas (`2025-11-25,2026-07-28`).
    fn from_str(s: &str) -> Result<Self, UnsupportedRevision> {
        match s.trim() {
            "all" => Ok(Self::ALL),
            "sessions" => Ok(Self::SESSIONS),
            list => {
                let set =
                    list.split(',').map(|r| r.trim().parse::<Revision>()).collect::<Result<Vec<_>, _>>()?;
                let set = Self::of(set);
                if set.is_empty() { Err(UnsupportedRevision) } else { Ok(set) }
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_reads_back_as_written_and_knows_its_newest_session_revision() {
        for text in ["2025-03-26,2025-06-18,2025-11-25,2026-07-28", "2025-11-25", "2025-06-18,2026-07-28"] {
            let set: RevisionSet = text.parse().expect("a set");
            assert_eq!(set.to_string(), text);
        }
        assert_eq!("all".parse(), Ok(RevisionSet::ALL));
        assert_eq!("sessions".parse(), Ok(RevisionSet::SESSIONS));
        assert_eq!(RevisionSet::SESSIONS.newest_with_sessions(), Some(Revision::V2025_11_25));
        let only_2026 = RevisionSet::of([Revision::V2026_07_28]);
        assert_eq!(only_2026.newest_with_sessions(), None);
        assert!(!RevisionSet::SESSIONS.contains(Revision::V2026_07_28));
        assert_eq!(RevisionSet::ALL.intersect(RevisionSet::SESSIONS), RevisionSet::SESSIONS);
        for bad in ["", "2024-11-05", "2025-11-25,", "all,2025-11-25"] {
            assert_eq!(bad.parse::<RevisionSet>(), Err(UnsupportedRevision), "{bad:?}");
        }
    }

    /// What each revision changes, as PROTOCOL section 9 tabulates it: one row per revision,
    /// so a new revision must say what it does for every behaviour the server asks about.
    #[test]
    fn each_revision_behaves_as_the_table_says() {
        type Row = (Revision, [bool; 8]);
        // sessions, batches, priming, disconnect cancels, stateless, version header, polling,
        // logs/tasks/input by request
        let table: [Row; 4] = [
            (Revision::V2025_03_26, [true, true, false, false, false, false, false, false]),
            (Revision::V2025_06_18, [true, false, false, false, false, true, false, false]),
            (Revision::V2025_11_25, [true, false, true, false, false, true, true, false]),
            (Revision::V2026_07_28, [false, false, false, true, true, true, false, true]),
        ];
        for (r, row) in table {
            let by_request = r.logs_by_request();
            assert_eq!(by_request, r.has_tasks(), "{r}");
            assert_eq!(by_request, r.asks_by_retry(), "{r}");
            let got = [
                r.has_sessions(),
                r.accepts_batches(),
                r.sends_priming_event(),
                r.disconnect_cancels(),
                r.is_stateless(),
                r.sends_version_header(),
                r.allows_polling(),
                by_request,
            ];
            assert_eq!(got, row, "{r}");
        }
    }
}
