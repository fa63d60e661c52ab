//! Exhaustive small-scope model check of racing resumes.
//!
//! Two connections of one client resume the same stream with the same cursor while a
//! background task emits events onto it and, in some scenarios, the original connection (which
//! the server still counts as attached) keeps writing. Each actor is a sequence of atomic steps:
//!
//! - a resuming connection: load a snapshot, decide with the real [`SessionRecord::on_get`] and
//!   compare-and-set (retry from the load when the version moved), then, as a writer:
//!   *check* (atomically read its epoch and the next event from the store) and *send* (write
//!   that event to its socket) — two steps, so a fence can land between them;
//! - a writer granted with `displaced: true` starts only after every writer with an older
//!   epoch has stopped (PROTOCOL section 6);
//! - the background task: [`SessionRecord::append`] plus the log push, one atomic step.
//!
//! The store is modelled as a versioned record plus the stream's log, every transition is the
//! real core's. A breadth-first search visits every interleaving (with a visited set) and checks
//! in every reachable state: at most one writer may write (checked-but-unsent or current and
//! not waiting); each connection delivers a gap-free, duplicate-free run from its cursor; the
//! client, reading both connections and dropping duplicates as section 7 says, never sees a gap.
//! In every terminal state the winning connection has delivered the whole stream.
//!
//! A negative control removes the wait for the displaced writer and must find a violation, so
//! the check cannot pass vacuously.

use forkless_core::EventKind;
use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use forkless_core::{
    AppendTarget, Attachment, Config, Epoch, GetOutcome, GetRequest, Limits, NewSession, Revision,
    SeededEntropy, Seq, SessionId, SessionRecord, StreamId, StreamState, Timestamp,
};

const NOW: Timestamp = Timestamp::from_millis(1_000_000);
/// The client's cursor when its connection dropped: it had event 1.
const CURSOR: u64 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Scenario {
    /// The original connection is still attached (the server has not noticed the drop).
    ZombieOriginal,
    /// The server noticed the drop and detached the original connection.
    DetachedOriginal,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// About to load a snapshot.
    Start,
    /// Holds a snapshot read at `version`.
    Loaded { version: u64, snapshot: Box<SessionRecord> },
    /// A writer: the last event written is `cursor`.
    Writing { epoch: Epoch, cursor: u64, displaced: bool },
    /// Passed the epoch check and read `next`; about to write it.
    Checked { epoch: Epoch, cursor: u64, next: u64, displaced: bool },
    /// Saw its epoch superseded (or the stream fenced) and stopped.
    Stopped,
    /// Delivered the completed stream to its end, or got no stream (conflict / rejection).
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Conn {
    phase: Phase,
    /// What this connection wrote to its socket.
    sent: Vec<u64>,
    /// Where it started.
    after: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct World {
    version: u64,
    record: SessionRecord,
    /// Seqs in the stream's log.
    log: Vec<u64>,
    /// conns[0] is the original connection (only written to a socket nobody reads).
    conns: Vec<Conn>,
    emitted: usize,
    /// What the client accepted from the resuming connections, in order (duplicates dropped).
    client: Vec<u64>,
    /// The client's cursor.
    client_cursor: u64,
}

/// A hash over the fields that matter; consistent with `Eq` (equal worlds hash equally).
impl Hash for World {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.version.hash(h);
        hash_record(&self.record, h);
        self.log.hash(h);
        self.emitted.hash(h);
        self.client.hash(h);
        for c in &self.conns {
            c.sent.hash(h);
            match &c.phase {
                Phase::Start => 0u8.hash(h),
                Phase::Loaded { version, snapshot } => {
                    (1u8, version).hash(h);
                    hash_record(snapshot, h);
                }
                Phase::Writing { epoch, cursor, displaced } => (2u8, epoch, cursor, displaced).hash(h),
                Phase::Checked { epoch, cursor, next, displaced } => {
                    (3u8, epoch, cursor, next, displaced).hash(h)
                }
                Phase::Stopped => 4u8.hash(h),
                Phase::Done => 5u8.hash(h),
            }
        }
    }
}

fn hash_record<H: Hasher>(r: &SessionRecord, h: &mut H) {
    r.session().ended().is_some().hash(h);
    for s in r.streams() {
        (s.id(), s.high_water(), s.low_water(), s.epoch(), s.ever_attached()).hash(h);
        match s.state() {
            StreamState::Open(_) => 0u8.hash(h),
            StreamState::Completed(_) => 1u8.hash(h),
            StreamState::Fenced(_) => 2u8.hash(h),
        }
        matches!(s.attachment(), Some(Attachment::Attached(_))).hash(h);
    }
}

struct Model {
    stream: StreamId,
    cfg: Config,
    /// Events the background task emits after the first; the last one completes the stream.
    emits: usize,
    complete_at_end: bool,
    /// Whether a displaced writer's successor waits for it (the rule under test).
    wait_for_displaced: bool,
}

impl Model {
    fn initial(&self, scenario: Scenario, resumers: usize) -> World {
        let mut entropy = SeededEntropy::new(11);
        let id = SessionId::generate(&mut entropy);
        let new = NewSession {
            id,
            revision: Revision::V2025_11_25,
            reset_contract: false,
            principal: None,
            client: Default::default(),
        };
        let mut record = SessionRecord::create(new, NOW, &mut entropy).expect("create");
        // A POST answered with SSE: the original connection, epoch 1, which delivered event 1.
        let grant = record.open_request_stream(self.stream, NOW, &self.cfg).expect("open");
        record
            .append(AppendTarget::Stream(self.stream), 8, EventKind::Intermediate, NOW, &Limits::default())
            .expect("append");
        let original = match scenario {
            Scenario::ZombieOriginal => {
                Phase::Writing { epoch: grant.epoch, cursor: CURSOR, displaced: false }
            }
            Scenario::DetachedOriginal => {
                record.on_detach(self.stream, grant.epoch, NOW).expect("detach");
                Phase::Stopped
            }
        };
        let mut conns = vec![Conn { phase: original, sent: vec![1], after: Some(0) }];
        conns.extend((0..resumers).map(|_| Conn { phase: Phase::Start, sent: Vec::new(), after: None }));
        World {
            version: 1,
            record,
            log: vec![1],
            conns,
            emitted: 0,
            client: Vec::new(),
            client_cursor: CURSOR,
        }
    }

    fn epoch_now(&self, w: &World) -> Option<Epoch> {
        w.record.stream(self.stream).filter(|s| !s.is_fenced()).map(|s| s.epoch())
    }

    /// A writer whose successor must wait: running (not stopped) with an older epoch.
    fn older_writer_running(&self, w: &World, epoch: Epoch) -> bool {
        w.conns.iter().any(|c| match c.phase {
            Phase::Writing { epoch: e, .. } | Phase::Checked { epoch: e, .. } => e < epoch,
            _ => false,
        })
    }

    fn waiting(&self, w: &World, phase: &Phase) -> bool {
        match *phase {
            Phase::Writing { epoch, displaced, .. } => {
                self.wait_for_displaced && displaced && self.older_writer_running(w, epoch)
            }
            _ => false,
        }
    }

    /// Every world one atomic step away.
    fn successors(&self, w: &World) -> Vec<World> {
        let mut next = Vec::new();
        if w.emitted < self.emits {
            let mut n = w.clone();
            let complete = self.complete_at_end && n.emitted + 1 == self.emits;
            let target = AppendTarget::Stream(self.stream);
            if let Ok(id) =
                n.record.append(target, 8, EventKind::ending_if(complete), NOW, &Limits::default())
            {
                n.log.push(id.seq.get());
                n.version += 1;
            }
            // A refused append (stream fenced, session ended) stores nothing, and is the typed
            // error the emitter sees; the task is done with that event either way.
            n.emitted += 1;
            next.push(n);
        }
        for i in 0..w.conns.len() {
            if let Some(n) = self.step(w, i) {
                next.push(n);
            }
        }
        next
    }

    fn step(&self, w: &World, i: usize) -> Option<World> {
        let mut n = w.clone();
        let lei = format!("{}.{CURSOR}", self.stream);
        let phase = w.conns[i].phase.clone();
        n.conns[i].phase = match phase {
            Phase::Start => Phase::Loaded { version: w.version, snapshot: Box::new(w.record.clone()) },
            Phase::Loaded { version, snapshot } => {
                let mut decided = *snapshot;
                let req = GetRequest { last_event_id: Some(&lei), stream_token: None };
                let outcome = decided.on_get(&req, NOW, &self.cfg, &mut SeededEntropy::new(5));
                if version != w.version {
                    // Compare-and-set lost: retry from a fresh load.
                    Phase::Start
                } else {
                    match outcome {
                        Ok(out) => {
                            n.record = decided;
                            n.version += 1;
                            match out {
                                GetOutcome::Attached(g) => {
                                    assert!(
                                        g.resumed && g.stream == self.stream && g.after == Seq::new(CURSOR)
                                    );
                                    n.conns[i].after = Some(g.after.get());
                                    Phase::Writing {
                                        epoch: g.epoch,
                                        cursor: g.after.get(),
                                        displaced: g.displaced,
                                    }
                                }
                                GetOutcome::Conflict(_) | GetOutcome::Rejected(_) => Phase::Done,
                            }
                        }
                        Err(_) => Phase::Done,
                    }
                }
            }
            Phase::Writing { epoch, cursor, displaced } => {
                if self.waiting(w, &w.conns[i].phase) {
                    return None;
                }
                let stream = w.record.stream(self.stream)?;
                if self.epoch_now(w) != Some(epoch) {
                    Phase::Stopped
                } else if w.log.contains(&(cursor + 1)) {
                    Phase::Checked { epoch, cursor, next: cursor + 1, displaced }
                } else if stream.is_completed() && cursor == stream.high_water().get() {
                    Phase::Done
                } else {
                    // Nothing to write yet: wait for an append.
                    return None;
                }
            }
            Phase::Checked { epoch, cursor, next, displaced } => {
                assert_eq!(next, cursor + 1);
                n.conns[i].sent.push(next);
                if i > 0 {
                    // Section 7: drop duplicates, fail on a gap.
                    assert!(
                        next <= n.client_cursor + 1,
                        "gap: client at {}, received {next}",
                        n.client_cursor
                    );
                    if next == n.client_cursor + 1 {
                        n.client_cursor = next;
                        n.client.push(next);
                    }
                }
                Phase::Writing { epoch, cursor: next, displaced }
            }
            Phase::Stopped | Phase::Done => return None,
        };
        Some(n)
    }

    /// The invariant, in one reachable world. Returns a description of the violation.
    fn violation(&self, w: &World) -> Option<String> {
        let current = self.epoch_now(w);
        let writers = w
            .conns
            .iter()
            .filter(|c| match &c.phase {
                Phase::Checked { .. } => true,
                Phase::Writing { epoch, .. } => Some(*epoch) == current && !self.waiting(w, &c.phase),
                _ => false,
            })
            .count();
        if writers > 1 {
            return Some(format!("{writers} connections may write at once"));
        }
        let holders = w
            .conns
            .iter()
            .filter(|c| matches!(&c.phase, Phase::Writing { epoch, .. } | Phase::Checked { epoch, .. } if Some(*epoch) == current))
            .count();
        if holders > 1 {
            return Some(format!("{holders} connections hold the current epoch"));
        }
        for (i, c) in w.conns.iter().enumerate() {
            let Some(after) = c.after else { continue };
            let want: Vec<u64> = (after + 1..=after + c.sent.len() as u64).collect();
            if c.sent != want {
                return Some(format!("connection {i} sent {:?}, not a gap-free run after {after}", c.sent));
            }
        }
        let want: Vec<u64> = (CURSOR + 1..=w.client_cursor).collect();
        if w.client != want {
            return Some(format!("the client accepted {:?}", w.client));
        }
        None
    }

    /// In a world with no step left: the client has every event, exactly one writer (the
    /// winner) remains and it has delivered the whole stream; every other writer stopped.
    fn check_terminal(&self, w: &World) {
        let stream = w.record.stream(self.stream).expect("stream kept");
        let high = stream.high_water().get();
        assert_eq!(w.emitted, self.emits);
        assert_eq!(w.client_cursor, high, "the client ends with every event: {w:?}");
        let mut writers = 0;
        for c in &w.conns {
            match c.phase {
                Phase::Writing { epoch, cursor, .. } => {
                    writers += 1;
                    assert_eq!((epoch, cursor), (stream.epoch(), high), "a leftover writer: {w:?}");
                }
                Phase::Checked { .. } | Phase::Start | Phase::Loaded { .. } => panic!("not terminal: {w:?}"),
                Phase::Stopped | Phase::Done => {}
            }
        }
        assert!(writers <= 1);
        assert!(
            !matches!(w.conns[0].phase, Phase::Writing { .. }),
            "the displaced original still writes: {w:?}"
        );
    }

    /// Breadth-first over every interleaving. Returns (states, terminal states, first violation).
    fn explore(&self, scenario: Scenario, resumers: usize) -> (usize, usize, Option<String>) {
        let start = self.initial(scenario, resumers);
        let mut seen: HashSet<World> = HashSet::new();
        let mut queue = VecDeque::new();
        seen.insert(start.clone());
        queue.push_back(start);
        let mut terminals = 0;
        while let Some(w) = queue.pop_front() {
            if let Some(v) = self.violation(&w) {
                return (seen.len(), terminals, Some(v));
            }
            let next = self.successors(&w);
            if next.is_empty() {
                terminals += 1;
                self.check_terminal(&w);
            }
            for n in next {
                if seen.insert(n.clone()) {
                    queue.push_back(n);
                }
            }
        }
        (seen.len(), terminals, None)
    }
}

fn model(emits: usize, complete_at_end: bool, wait_for_displaced: bool) -> Model {
    Model {
        stream: StreamId::generate(&mut SeededEntropy::new(77)),
        cfg: Config::default(),
        emits,
        complete_at_end,
        wait_for_displaced,
    }
}

#[test]
fn racing_resumes_never_let_two_writers_write_or_the_client_see_a_gap() {
    let mut total = 0;
    for scenario in [Scenario::ZombieOriginal, Scenario::DetachedOriginal] {
        for emits in [2, 3] {
            for complete_at_end in [false, true] {
                let m = model(emits, complete_at_end, true);
                let (states, terminals, violation) = m.explore(scenario, 2);
                eprintln!(
                    "{scenario:?}, {emits} emits, complete={complete_at_end}: {states} states, {terminals} terminal"
                );
                assert_eq!(violation, None, "{scenario:?} emits={emits} complete={complete_at_end}");
                assert!(terminals > 0);
                total += states;
            }
        }
    }
    eprintln!("{total} states explored in total");
    assert!(total > 5_000, "the search must not be trivially small: {total} states");
}

#[test]
fn without_waiting_for_the_displaced_writer_the_check_finds_two_writers() {
    // Negative control: drop the rule of section 6 and the search must find the race.
    let m = model(3, true, false);
    let (states, _, violation) = m.explore(Scenario::ZombieOriginal, 2);
    eprintln!("negative control: violation after {states} states: {violation:?}");
    assert!(violation.is_some_and(|v| v.contains("may write at once")), "the model check is not sensitive");
}
