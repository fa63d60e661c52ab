//! One-time keys (promise 9): [`SpendKey`], what spending one found ([`Spent`]), and the
//! [`Ledger`] the stores of one process keep them in.
//!
//! A one-time key is what a caller must accept at most once, whichever node it reaches (the
//! id sealed inside a `requestState`). The store does not know what a key stands for; it only
//! answers, atomically, whether this is its first spend.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use forkless_core::Timestamp;

use crate::{Error, Result};

/// A one-time key: 128 bits the caller drew from a CSPRNG.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpendKey(pub [u8; 16]);

/// What spending a key found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spent {
    /// Its first spend: the caller may act on it.
    Now,
    /// Spent before (a replay): the caller must refuse it.
    Before,
    /// Issued before the store's memory of spent keys began: it may have been spent and
    /// forgotten, so the caller must refuse it.
    Unvouched,
}

/// The keys spent in this process, each kept until its time passes; a store of one process
/// holds one and answers [`crate::Spending::spend`] from it.
#[derive(Debug)]
pub struct Ledger {
    used: Mutex<HashMap<SpendKey, Timestamp>>,
    since: Timestamp,
    max: usize,
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX)
    }
}

impl Ledger {
    /// Live keys held by default: about 60 MiB at most, far beyond what a server's
    /// multi-round-trip requests spend within a state's time to live.
    pub const DEFAULT_MAX: usize = 1_000_000;

    /// An empty ledger holding at most `max` unexpired keys, complete from now on.
    pub fn new(max: usize) -> Self {
        let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let since = Timestamp::from_millis(u64::try_from(ms).unwrap_or(u64::MAX));
        Self { used: Mutex::default(), since, max }
    }

    /// Spend `key` (issued at `issued`, good until `until`). At the limit, expired keys make
    /// room; a ledger full of live ones refuses with [`Error::SpendFull`] rather than forget
    /// one early.
    pub fn spend(&self, key: SpendKey, issued: Timestamp, until: Timestamp, now: Timestamp) -> Result<Spent> {
        if issued < self.since {
            return Ok(Spent::Unvouched);
        }
        // Each change is one insert or one retain: a panic elsewhere leaves it whole.
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        if used.get(&key).is_some_and(|t| *t > now) {
            return Ok(Spent::Before);
        }
        if used.len() >= self.max {
            used.retain(|_, t| *t > now);
            if used.len() >= self.max {
                return Err(Error::SpendFull(self.max));
            }
        }
        used.insert(key, until);
        Ok(Spent::Now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_spent_once_and_a_full_ledger_forgets_only_expired_keys() {
        let ledger = Ledger::new(2);
        let at = ledger.since;
        let (now, soon, later) = (at, at.saturating_add(ms(10)), at.saturating_add(ms(90)));
        let spend = |k: u8, until, now| ledger.spend(SpendKey([k; 16]), at, until, now).ok();
        assert_eq!(spend(1, soon, now), Some(Spent::Now));
        assert_eq!(spend(1, soon, now), Some(Spent::Before));
        assert_eq!(spend(2, later, now), Some(Spent::Now));
        assert!(matches!(ledger.spend(SpendKey([3; 16]), at, soon, now), Err(Error::SpendFull(2))));
        assert_eq!(spend(3, later, soon), Some(Spent::Now), "the expired key made room");
        assert_eq!(spend(2, later, soon), Some(Spent::Before), "a live key stays");
    }

    #[test]
    fn a_key_issued_before_the_ledger_began_is_unvouched() {
        let ledger = Ledger::default();
        let before = Timestamp::from_millis(ledger.since.as_millis() - 1);
        let until = ledger.since.saturating_add(ms(60_000));
        assert_eq!(ledger.spend(SpendKey([9; 16]), before, until, ledger.since).ok(), Some(Spent::Unvouched));
    }

    fn ms(n: u64) -> std::time::Duration {
        std::time::Duration::from_millis(n)
    }
}
