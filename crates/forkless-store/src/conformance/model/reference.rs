//! The reference model: streams as plain numbers in vectors, written from the decision
//! table, not from the core's code.

use forkless_core::{RejectReason, StreamKind};

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Life {
    Open,
    Completed,
    Fenced,
}

#[derive(Clone, Debug)]
pub(super) struct RStream {
    pub(super) kind: StreamKind,
    pub(super) high: u64,
    pub(super) low: u64,
    pub(super) epoch: u64,
    /// The liveness deadline while a connection is attached.
    pub(super) attached: Option<u64>,
    pub(super) ever_attached: bool,
    pub(super) life: Life,
    /// When the last connection went away (or the stream was created).
    pub(super) detached_at: u64,
    pub(super) completed_at: u64,
    pub(super) fenced_at: u64,
    /// Removed from the session by retention: unknown from then on.
    pub(super) dropped: bool,
}

impl RStream {
    pub(super) fn new(kind: StreamKind, now: u64) -> Self {
        Self {
            kind,
            high: 0,
            low: 1,
            epoch: 0,
            attached: None,
            ever_attached: false,
            life: Life::Open,
            detached_at: now,
            completed_at: 0,
            fenced_at: 0,
            dropped: false,
        }
    }

    pub(super) fn live(&self, now: u64) -> bool {
        self.life != Life::Fenced && self.attached.is_some_and(|d| d > now)
    }

    pub(super) fn detach(&mut self, at: u64) {
        self.attached = None;
        self.detached_at = at;
    }

    /// Since when nobody has used the stream (section 8's "detached or completed").
    pub(super) fn idle_since(&self) -> Option<u64> {
        match (self.life, self.attached) {
            (Life::Fenced, _) | (_, Some(_)) => None,
            (Life::Open, None) => Some(self.detached_at),
            (Life::Completed, None) => Some(self.completed_at.max(self.detached_at)),
        }
    }

    pub(super) fn attach(&mut self, now: u64) {
        self.epoch += 1;
        self.attached = Some(now + GRACE_MS);
        self.ever_attached = true;
    }

    pub(super) fn fence(&mut self, now: u64) {
        if self.life != Life::Fenced {
            self.life = Life::Fenced;
            self.fenced_at = now;
        }
        self.attached = None;
        self.low = self.high + 1;
    }
}

#[derive(Clone, Debug)]
pub(super) struct RSession {
    pub(super) reset_contract: bool,
    pub(super) ended: bool,
    pub(super) standalone: usize,
    pub(super) streams: Vec<RStream>,
    /// The client's cursor per stream: the last event it accepted.
    pub(super) client: Vec<u64>,
    pub(super) last_activity: u64,
}

impl RSession {
    pub(super) fn touch(&mut self, now: u64) {
        self.last_activity = self.last_activity.max(now);
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RConn {
    pub(super) session: usize,
    pub(super) stream: usize,
    pub(super) epoch: u64,
    pub(super) cursor: u64,
    pub(super) open: bool,
}

/// The answer to a GET.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// The session had already ended: 404 without a decision.
    Gone,
    Conflict,
    Reject(RejectReason),
    Resume {
        after: u64,
    },
    /// Row 1.
    New,
    /// Row 3.
    Reset,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EmitError {
    Ended,
    Unknown,
    Fenced,
    Completed,
}

/// What a tick did to one session: (liveness expiries, logs evicted, streams dropped, ended).
pub(super) type TickCounts = (usize, usize, usize, bool);

/// What the model predicts the last step returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Expect {
    Nothing,
    Emit(Result<u64, EmitError>),
    Open(bool),
    Get(Answer),
    Race(Answer, Answer),
    Detach(bool),
    End(bool),
    Tick(Vec<TickCounts>),
}

#[derive(Clone, Debug)]
pub(super) struct Model {
    pub(super) strict: bool,
    pub(super) max_events: u64,
    pub(super) stream_ttl: u64,
    pub(super) idle_ttl: u64,
    pub(super) now: u64,
    pub(super) sessions: Vec<RSession>,
    pub(super) conns: Vec<RConn>,
    pub(super) last: Expect,
}

impl Model {
    pub(super) fn decide(&self, s: usize, lei: Lei, token: Token) -> Answer {
        let session = &self.sessions[s];
        if session.ended {
            return Answer::Gone;
        }
        match lei {
            Lei::Absent => {
                let st = &session.streams[session.standalone];
                if token != Token::Absent {
                    Answer::Reject(RejectReason::CursorMissing)
                } else if st.live(self.now) {
                    Answer::Conflict
                } else if !st.ever_attached || st.high == 0 {
                    if st.low > 1 { Answer::Reject(RejectReason::CursorEvicted) } else { Answer::New }
                } else if session.reset_contract {
                    Answer::Reset
                } else {
                    Answer::Reject(RejectReason::CursorMissing)
                }
            }
            Lei::Malformed(_) => Answer::Reject(RejectReason::CursorMalformed),
            Lei::Event { owner, stream, seq } => {
                // Another session's stream, or one retention removed: not a stream of this session.
                if owner != s || session.streams[stream].dropped {
                    return Answer::Reject(RejectReason::StreamUnknown);
                }
                match token {
                    Token::Absent if self.strict => return Answer::Reject(RejectReason::TokenMissing),
                    Token::Absent | Token::Matching => {}
                    Token::Stream { owner: o, stream: k } if (o, k) == (owner, stream) => {}
                    Token::Stream { .. } | Token::Garbage => {
                        return Answer::Reject(RejectReason::TokenMismatch);
                    }
                }
                let st = &session.streams[stream];
                if st.life == Life::Fenced {
                    Answer::Reject(RejectReason::StreamFenced)
                } else if seq > st.high {
                    Answer::Reject(RejectReason::CursorAhead)
                } else if seq + 1 < st.low {
                    Answer::Reject(RejectReason::CursorEvicted)
                } else {
                    Answer::Resume { after: seq }
                }
            }
        }
    }

    pub(super) fn get(&mut self, s: usize, lei: Lei, token: Token) -> Answer {
        let answer = self.decide(s, lei, token);
        let now = self.now;
        let session = &mut self.sessions[s];
        let attach = |session: &mut RSession, stream: usize, cursor: u64, conns: &mut Vec<RConn>| {
            session.streams[stream].attach(now);
            session.touch(now);
            let epoch = session.streams[stream].epoch;
            conns.push(RConn { session: s, stream, epoch, cursor, open: true });
        };
        match answer {
            Answer::Gone | Answer::Conflict => {}
            Answer::Reject(_) => self.end(s),
            Answer::Resume { after } => {
                let Lei::Event { stream, .. } = lei else { unreachable!("a resume has a cursor") };
                attach(session, stream, after, &mut self.conns);
            }
            Answer::New => {
                let k = session.standalone;
                session.client[k] = 0;
                attach(session, k, 0, &mut self.conns);
            }
            Answer::Reset => {
                let old = session.standalone;
                session.streams[old].fence(now);
                session.streams.push(RStream::new(StreamKind::Standalone, now));
                session.client.push(0);
                session.standalone = session.streams.len() - 1;
                attach(session, session.standalone, 0, &mut self.conns);
            }
        }
        answer
    }

    pub(super) fn end(&mut self, s: usize) {
        let now = self.now;
        let session = &mut self.sessions[s];
        session.ended = true;
        session.streams.iter_mut().for_each(|st| st.fence(now));
    }

    pub(super) fn emit(&mut self, s: usize, target: Target, complete: bool) -> Result<u64, EmitError> {
        let (max, now) = (self.max_events, self.now);
        let session = &mut self.sessions[s];
        if session.ended {
            return Err(EmitError::Ended);
        }
        let k = match target {
            Target::Standalone => session.standalone,
            Target::Stream(k) => k,
        };
        let st = &mut session.streams[k];
        match st.life {
            _ if st.dropped => return Err(EmitError::Unknown),
            Life::Completed => return Err(EmitError::Completed),
            Life::Fenced => return Err(EmitError::Fenced),
            Life::Open => {}
        }
        st.high += 1;
        if st.high + 1 - st.low > max {
            st.low = st.high + 1 - max;
        }
        if complete {
            st.life = Life::Completed;
            st.completed_at = now;
        }
        Ok(st.high)
    }

    pub(super) fn deliver(&mut self, c: usize, max: u64) {
        let now = self.now;
        let conn = &mut self.conns[c];
        if !conn.open {
            return;
        }
        let session = &mut self.sessions[conn.session];
        let st = &mut session.streams[conn.stream];
        let current = !session.ended && !st.dropped && st.life != Life::Fenced && st.epoch == conn.epoch;
        if !current || st.attached.is_none() {
            conn.open = false;
            return;
        }
        if conn.cursor + 1 < st.low {
            // Retention overtook a slow connection: it cannot continue gap-free.
            st.detach(now);
            session.touch(now);
            conn.open = false;
            return;
        }
        conn.cursor += max.min(st.high - conn.cursor);
        let client = &mut session.client[conn.stream];
        *client = (*client).max(conn.cursor);
        if st.life == Life::Completed && conn.cursor == st.high {
            st.detach(now);
            conn.open = false;
        } else {
            st.attached = st.attached.map(|d| d.max(now + GRACE_MS));
        }
        session.touch(now);
    }

    pub(super) fn drop_conn(&mut self, c: usize) -> bool {
        let now = self.now;
        let conn = &mut self.conns[c];
        if !conn.open {
            return false;
        }
        conn.open = false;
        let session = &mut self.sessions[conn.session];
        let st = &mut session.streams[conn.stream];
        let ok = !session.ended
            && !st.dropped
            && st.life != Life::Fenced
            && st.epoch == conn.epoch
            && st.attached.is_some();
        if ok {
            st.detach(now);
            session.touch(now);
        }
        ok
    }

    /// Section 6 liveness and section 8 retention by time.
    pub(super) fn tick(&mut self) -> Vec<TickCounts> {
        let (now, ttl, idle) = (self.now, self.stream_ttl, self.idle_ttl);
        let mut counts = Vec::new();
        for s in 0..self.sessions.len() {
            let session = &mut self.sessions[s];
            let mut c: TickCounts = (0, 0, 0, false);
            if session.ended {
                counts.push(c);
                continue;
            }
            let standalone = session.standalone;
            for (k, st) in session.streams.iter_mut().enumerate().filter(|(_, st)| !st.dropped) {
                if let Some(deadline) = st.attached.filter(|d| *d <= now && st.life != Life::Fenced) {
                    // Liveness expired: detached (not fenced) as of the deadline.
                    st.detach(deadline);
                    c.0 += 1;
                }
                let expired = st.idle_since().is_some_and(|t| now.saturating_sub(t) >= ttl);
                if expired && st.kind == StreamKind::Request && st.life == Life::Completed {
                    st.dropped = true;
                    c.2 += 1;
                } else if expired && st.high + 1 > st.low {
                    st.low = st.high + 1;
                    c.1 += 1;
                }
                let stale_fence = st.life == Life::Fenced && now.saturating_sub(st.fenced_at) >= ttl;
                if stale_fence && k != standalone {
                    st.dropped = true;
                    c.2 += 1;
                }
            }
            let live = session.streams.iter().any(|st| !st.dropped && st.live(now));
            if live {
                // Attached counts as activity: the idle clock starts when the last stream
                // stops being live.
                session.touch(now);
            } else if now.saturating_sub(session.last_activity) >= idle {
                self.end(s);
                c.3 = true;
            }
            counts.push(c);
        }
        counts
    }
}
