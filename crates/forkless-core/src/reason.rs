//! Why a reconnect is refused: the typed reasons of PROTOCOL section 4, and their wire codes
//! (`error.data.reason`). Shared by the decision ([`crate::decision`]), the session model and
//! the errors, so none of them needs the others for these names.

/// Why a reconnect is refused and the session ended (decision (b)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Row 1: the standalone log the client never saw was partly evicted. Row 10: events
    /// after the cursor were evicted.
    CursorEvicted,
    /// Row 4: no cursor, yet the client may have seen content and made no reset promise.
    CursorMissing,
    /// Row 5: `Last-Event-ID` is not `<stream>.<seq>`.
    CursorMalformed,
    /// Row 6: the cursor's stream is not a stream of this session.
    StreamUnknown,
    /// Row 7: `Mcp-Stream-Id` disagrees with the cursor's stream.
    TokenMismatch,
    /// Row 7, strict mode: `Mcp-Stream-Id` is absent.
    TokenMissing,
    /// Row 8: the stream is fenced.
    StreamFenced,
    /// Row 9: the cursor is beyond the stream's high-water mark.
    CursorAhead,
}

impl RejectReason {
    /// Every reason.
    pub const ALL: [Self; 8] = [
        Self::CursorEvicted,
        Self::CursorMissing,
        Self::CursorMalformed,
        Self::StreamUnknown,
        Self::TokenMismatch,
        Self::TokenMissing,
        Self::StreamFenced,
        Self::CursorAhead,
    ];

    /// The wire code (`error.data.reason`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::CursorEvicted => "cursor_evicted",
            Self::CursorMissing => "cursor_missing",
            Self::CursorMalformed => "cursor_malformed",
            Self::StreamUnknown => "stream_unknown",
            Self::TokenMismatch => "token_mismatch",
            Self::TokenMissing => "token_missing",
            Self::StreamFenced => "stream_fenced",
            Self::CursorAhead => "cursor_ahead",
        }
    }
}

/// Why a reconnect is refused while the session and the live connection stay untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConflictReason {
    /// Row 2: the standalone stream has a live connection.
    StreamAttached,
}

impl ConflictReason {
    /// The wire code.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::StreamAttached => "stream_attached",
        }
    }
}
