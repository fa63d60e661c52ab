//! The steps a history is made of, and the cursors and tokens a GET may carry.

/// Which stream an emit goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    Standalone,
    /// A stream of the same session, by index.
    Stream(usize),
}

/// The `Last-Event-ID` header of a GET.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lei {
    Absent,
    /// One of [`MALFORMED`].
    Malformed(usize),
    /// `<stream>.<seq>` for stream `stream` of session `owner` (another session's: foreign).
    Event {
        owner: usize,
        stream: usize,
        seq: u64,
    },
}

/// Malformed cursors; `{}` is the session's current standalone stream id.
pub(super) const MALFORMED: [&str; 5] = ["41", "", "not-an-id", "{}", "{}.01"];

/// The `Mcp-Stream-Id` header of a GET.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Token {
    Absent,
    /// The stream named by the cursor (the session's standalone stream when there is none).
    Matching,
    /// Stream `stream` of session `owner`.
    Stream {
        owner: usize,
        stream: usize,
    },
    Garbage,
}

#[derive(Clone, Debug)]
pub(super) enum Step {
    Emit {
        session: usize,
        target: Target,
        complete: bool,
    },
    OpenRequest {
        session: usize,
    },
    /// Connection `conn`'s writer runs once: up to `max` events, or a keep-alive.
    Deliver {
        conn: usize,
        max: u64,
    },
    /// Connection `conn` goes away (the server notices and detaches).
    Drop {
        conn: usize,
    },
    Get {
        session: usize,
        lei: Lei,
        token: Token,
    },
    /// Two identical GETs that both load the record before either writes.
    RacingGets {
        session: usize,
        lei: Lei,
        token: Token,
    },
    /// The clock jumps by `ms` (backwards when negative); nothing else happens.
    Advance {
        ms: i64,
    },
    /// Timers fire: `on_tick` on every session.
    Tick,
    /// DELETE.
    End {
        session: usize,
    },
}
