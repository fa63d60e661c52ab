//! Numbered streams and what a connection delivered of them.
//!
//! A *numbered stream* is the output of a tool such as `start-notification-stream`: log
//! notifications whose text ends in `#1`, `#2`, … `#N`. The check judges a server only by these
//! numbers, the SSE event ids and the JSON-RPC response, which is what any client can observe,
//! whether or not the server speaks the forkless headers.

use serde_json::Value;
use tokio::time::Instant;

use super::probe::{Conn, Stop};

/// Where a numbered stream's events travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The SSE answer to the `tools/call` request (ends with the JSON-RPC response).
    Request,
    /// The session's standalone GET stream (ends with `#N`).
    Standalone,
}

/// What one connection delivered, in order.
#[derive(Clone, Debug)]
pub(crate) struct Tape {
    /// The payload numbers of numbered notifications.
    pub(crate) nums: Vec<u64>,
    /// Whether the JSON-RPC response to the tool call arrived.
    pub(crate) response: bool,
    /// How many numbered events had arrived when the response did.
    pub(crate) response_at: Option<usize>,
    /// Other JSON-RPC messages (not numbered, not our response): on a stream the client
    /// should never have been given, these are someone else's.
    pub(crate) others: usize,
    /// The last SSE `id:` seen (what a client would send as `Last-Event-ID`).
    pub(crate) last_id: Option<String>,
    /// The ids of the events that carried a message, in order (for the idempotence check).
    pub(crate) ids: Vec<String>,
    /// The data of those events, in the same order (what each id named when it was read).
    pub(crate) data: Vec<String>,
    /// Why reading stopped.
    pub(crate) stop: Stop,
}

impl Default for Tape {
    fn default() -> Self {
        Self {
            nums: Vec::new(),
            response: false,
            response_at: None,
            others: 0,
            last_id: None,
            ids: Vec::new(),
            data: Vec::new(),
            stop: Stop::Met,
        }
    }
}

/// The number at the end of a notification's text (`"... #12"` → 12), if any.
pub(crate) fn payload_number(message: &Value) -> Option<u64> {
    let params = message.get("params")?;
    // A progress notification is numbered by its progress (a whole number from 1).
    if message.get("method").and_then(Value::as_str) == Some("notifications/progress") {
        let n = params.get("progress").and_then(Value::as_f64)?;
        return (n >= 1.0 && n.fract() == 0.0 && n < 1e15).then_some(n as u64);
    }
    let text = match params.get("data") {
        Some(Value::String(s)) => s.clone(),
        _ => params.to_string(),
    };
    let hash = text.rfind('#')?;
    let digits: String = text[hash + 1..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

impl Tape {
    /// Read `conn` into this tape until `done(self)` holds, the body ends, or `deadline`.
    /// `request` is the JSON-RPC id of the tool call whose response ends a request stream.
    pub(crate) async fn read(
        &mut self,
        conn: &mut Conn,
        request: Option<&Value>,
        deadline: Instant,
        done: impl Fn(&Self) -> bool,
    ) {
        self.stop = Stop::Met;
        while !done(self) {
            let event = match conn.next_event(deadline).await {
                Ok(event) => event,
                Err(stop) => {
                    self.stop = stop;
                    return;
                }
            };
            if let Some(id) = &event.id {
                self.last_id = Some(id.clone());
            }
            let Ok(message) = serde_json::from_str::<Value>(&event.data) else { continue };
            // Ids of priming events (empty data) are per connection; only content counts.
            if let Some(id) = &event.id {
                self.ids.push(id.clone());
                self.data.push(event.data.clone());
            }
            if message.get("method").is_some() {
                match payload_number(&message) {
                    Some(n) if message.get("id").is_none() => self.nums.push(n),
                    _ => self.others += 1,
                }
            } else if request.is_some() && message.get("id") == request {
                self.response = true;
                self.response_at.get_or_insert(self.nums.len());
            } else {
                self.others += 1;
            }
        }
    }

    /// Whether the whole stream `1..=count` has been delivered to its natural end.
    pub(crate) fn complete(&self, kind: Kind, count: u64) -> bool {
        match kind {
            Kind::Request => self.response,
            Kind::Standalone => self.nums.last() == Some(&count),
        }
    }

    /// Numbered events that arrived after the response (a reordering).
    pub(crate) fn late(&self) -> &[u64] {
        self.response_at.map_or(&[], |i| &self.nums[i.min(self.nums.len())..])
    }

    /// Add what a later connection delivered.
    pub(crate) fn append(&mut self, later: &Self) {
        if let Some(i) = later.response_at {
            self.response_at.get_or_insert(self.nums.len() + i);
        }
        self.nums.extend_from_slice(&later.nums);
        self.ids.extend_from_slice(&later.ids);
        self.data.extend_from_slice(&later.data);
        self.response |= later.response;
        self.others += later.others;
        self.stop = later.stop;
        if later.last_id.is_some() {
            self.last_id.clone_from(&later.last_id);
        }
    }

    /// `#9-#20 + response`, `#1-#8, #1-#20`, `#3-#19 + response + #20`, or `nothing`.
    pub(crate) fn summary(&self) -> String {
        let early = &self.nums[..self.nums.len() - self.late().len()];
        let mut s = ranges(early);
        if self.response {
            s.push_str(if early.is_empty() { " (only the response)" } else { " + response" });
        }
        if !self.late().is_empty() {
            s.push_str(&format!(" + {}", ranges(self.late())));
        }
        if self.others > 0 {
            s.push_str(&format!(" and {} other message(s)", self.others));
        }
        s
    }

    /// How reading ended, for the evidence.
    pub(crate) fn ending(&self) -> &'static str {
        match self.stop {
            Stop::Met => "",
            Stop::Ended => ", then the server closed it",
            Stop::Failed => ", then the connection failed",
            Stop::Timeout => ", then nothing more arrived",
        }
    }
}

/// Consecutive ascending runs: `[1,2,3,7,1,2]` → `#1-#3, #7, #1-#2`.
pub(crate) fn ranges(nums: &[u64]) -> String {
    if nums.is_empty() {
        return "nothing".to_owned();
    }
    let mut parts = Vec::new();
    let mut start = nums[0];
    let mut prev = nums[0];
    for &n in &nums[1..] {
        if n == prev + 1 {
            prev = n;
            continue;
        }
        parts.push(run(start, prev));
        start = n;
        prev = n;
    }
    parts.push(run(start, prev));
    parts.join(", ")
}

fn run(a: u64, b: u64) -> String {
    if a == b { format!("#{a}") } else { format!("#{a}-#{b}") }
}

/// How a delivery compares with the exact continuation `after+1 ..= count`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Continuation {
    /// Numbers delivered again (at or below `after`, or twice).
    pub(crate) duplicates: Vec<u64>,
    /// Numbers of `after+1 ..= count` never delivered.
    pub(crate) missing: Vec<u64>,
    /// Whether the numbers came out of order.
    pub(crate) reordered: bool,
}

impl Continuation {
    /// Compare `nums` with `after+1 ..= count`.
    pub(crate) fn of(nums: &[u64], after: u64, count: u64) -> Self {
        let mut seen = std::collections::BTreeSet::new();
        let mut duplicates = Vec::new();
        let mut firsts = Vec::new();
        for &n in nums {
            if n <= after || !seen.insert(n) {
                duplicates.push(n);
            } else {
                firsts.push(n);
            }
        }
        let missing = (after + 1..=count).filter(|n| !seen.contains(n)).collect();
        let reordered = firsts.windows(2).any(|w| w[0] > w[1]);
        Self { duplicates, missing, reordered }
    }

    /// Exactly once each, in order.
    pub(crate) fn exact(&self) -> bool {
        self.duplicates.is_empty() && self.missing.is_empty() && !self.reordered
    }

    /// The problems, e.g. `duplicates #1-#8; missing #9-#11`, empty when exact.
    pub(crate) fn problems(&self) -> String {
        let mut p = Vec::new();
        if !self.duplicates.is_empty() {
            p.push(format!("duplicates {}", ranges(&self.duplicates)));
        }
        if !self.missing.is_empty() {
            p.push(format!("missing {}", ranges(&self.missing)));
        }
        if self.reordered {
            p.push("out of order".to_owned());
        }
        p.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn payload_numbers_come_from_the_text() {
        let m = json!({"method": "notifications/message", "params": {"data": "Periodic notification #12"}});
        assert_eq!(payload_number(&m), Some(12));
        let m = json!({"method": "notifications/message", "params": {"data": "no number"}});
        assert_eq!(payload_number(&m), None);
        let m =
            json!({"method": "notifications/progress", "params": {"progressToken": "t#3", "progress": 7}});
        assert_eq!(payload_number(&m), Some(7), "progress by its value, not the token's text");
        let m =
            json!({"method": "notifications/progress", "params": {"progressToken": "t", "progress": 0.5}});
        assert_eq!(payload_number(&m), None);
    }

    #[test]
    fn ranges_compress_runs() {
        assert_eq!(ranges(&[1, 2, 3, 7, 1, 2]), "#1-#3, #7, #1-#2");
        assert_eq!(ranges(&[]), "nothing");
    }

    #[test]
    fn a_notification_after_the_response_shows_in_the_summary() {
        let mut first = Tape { nums: vec![3, 4], ..Tape::default() };
        let later = Tape { nums: vec![5, 6], response: true, response_at: Some(1), ..Tape::default() };
        first.append(&later);
        assert_eq!(first.late(), &[6]);
        assert_eq!(first.summary(), "#3-#5 + response + #6");
    }

    #[test]
    fn continuations_find_duplicates_gaps_and_reordering() {
        assert!(Continuation::of(&[9, 10, 11], 8, 11).exact());
        let c = Continuation::of(&[1, 2, 9, 11], 8, 11);
        assert_eq!(c.duplicates, vec![1, 2]);
        assert_eq!(c.missing, vec![10]);
        assert!(!c.reordered);
        assert!(Continuation::of(&[10, 9, 11], 8, 11).reordered);
        assert_eq!(Continuation::of(&[9, 9], 8, 9).problems(), "duplicates #9");
    }
}
