//! Reconnect pacing: exponential backoff with jitter, a floor from the server's `retry:` field
//! and a total budget.
//!
//! Pure arithmetic: the caller passes the time elapsed since the connection was lost and a
//! source of randomness, and gets back how long to wait before the next attempt, or `None`
//! when the budget would be overrun. Sleeping is the caller's business.

use std::time::Duration;

use forkless_core::EntropySource;

/// How reconnects are paced. `ClientBuilder` exposes every field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Delay before the first reconnect when the server sent no `retry:`.
    pub initial: Duration,
    /// Upper bound for the exponential part.
    pub max_delay: Duration,
    /// Growth factor per failed attempt.
    pub multiplier: u32,
    /// Random extra delay, as a fraction in per mille of the computed delay (0..=1000), so
    /// many clients cut by one outage do not reconnect in lockstep.
    pub jitter_permille: u32,
    /// Total time from losing a connection to giving up. Must exceed the server's grace
    /// window (PROTOCOL section 6).
    pub budget: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            multiplier: 2,
            jitter_permille: 250,
            budget: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt number `attempt` (0 for the first reconnect), or `None` if
    /// waiting that long would end past the budget.
    ///
    /// `server_retry` is the last `retry:` value the server sent; it is a floor, because the
    /// specification says the client MUST wait at least that long. Jitter only ever adds.
    pub fn delay(
        &self,
        attempt: u32,
        server_retry: Option<Duration>,
        elapsed: Duration,
        entropy: &mut (impl EntropySource + ?Sized),
    ) -> Option<Duration> {
        let factor = u64::from(self.multiplier.max(1)).checked_pow(attempt).unwrap_or(u64::MAX);
        let exp = ms(self.initial).saturating_mul(factor).min(ms(self.max_delay));
        let base = exp.max(server_retry.map_or(0, ms));
        let spread = base.saturating_mul(u64::from(self.jitter_permille.min(1000))) / 1000;
        let jitter = if spread == 0 { 0 } else { random_u64(entropy) % (spread + 1) };
        let delay = Duration::from_millis(base.saturating_add(jitter));
        let ends = elapsed.saturating_add(delay);
        if ends > self.budget {
            // A shorter wait still fits: use the rest of the budget once, unless even the
            // server's mandatory floor does not fit.
            let rest = self.budget.saturating_sub(elapsed);
            let floor = server_retry.unwrap_or_default();
            return (rest >= floor && rest > Duration::ZERO).then_some(rest);
        }
        Some(delay)
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn random_u64(entropy: &mut (impl EntropySource + ?Sized)) -> u64 {
    let mut b = [0u8; 8];
    entropy.fill(&mut b);
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use forkless_core::SeededEntropy;

    fn no_jitter() -> RetryPolicy {
        RetryPolicy { jitter_permille: 0, ..RetryPolicy::default() }
    }

    #[test]
    fn grows_exponentially_and_caps() {
        let p = no_jitter();
        let mut e = SeededEntropy::new(1);
        let got: Vec<u128> =
            (0..8).map(|a| p.delay(a, None, Duration::ZERO, &mut e).unwrap().as_millis()).collect();
        assert_eq!(got, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
    }

    #[test]
    fn huge_attempt_numbers_do_not_overflow() {
        let p = no_jitter();
        let d = p.delay(u32::MAX, None, Duration::ZERO, &mut SeededEntropy::new(1));
        assert_eq!(d, Some(p.max_delay));
    }

    #[test]
    fn server_retry_is_a_floor() {
        let p = no_jitter();
        let mut e = SeededEntropy::new(1);
        let d = p.delay(0, Some(Duration::from_millis(1500)), Duration::ZERO, &mut e);
        assert_eq!(d, Some(Duration::from_millis(1500)));
        // and never undercut by jitter
        let p = RetryPolicy { jitter_permille: 1000, ..p };
        for seed in 0..200 {
            let d =
                p.delay(0, Some(Duration::from_millis(700)), Duration::ZERO, &mut SeededEntropy::new(seed));
            let d = d.unwrap();
            assert!(d >= Duration::from_millis(700) && d <= Duration::from_millis(1400), "{d:?}");
        }
    }

    #[test]
    fn jitter_is_bounded_deterministic_and_spread() {
        let p = RetryPolicy { jitter_permille: 500, ..RetryPolicy::default() };
        let samples: Vec<Duration> =
            (0..100).map(|s| p.delay(2, None, Duration::ZERO, &mut SeededEntropy::new(s)).unwrap()).collect();
        assert!(samples.iter().all(|d| *d >= Duration::from_millis(400) && *d <= Duration::from_millis(600)));
        let distinct: std::collections::BTreeSet<_> = samples.iter().collect();
        assert!(distinct.len() > 10, "jitter should spread reconnects");
        let again = p.delay(2, None, Duration::ZERO, &mut SeededEntropy::new(7));
        assert_eq!(again, Some(samples[7]));
    }

    #[test]
    fn budget_limits_the_total() {
        let p = RetryPolicy { budget: Duration::from_millis(1000), ..no_jitter() };
        let mut e = SeededEntropy::new(1);
        // fits
        assert_eq!(p.delay(1, None, Duration::from_millis(700), &mut e), Some(Duration::from_millis(200)));
        // does not fit: the remaining 100 ms are used once
        assert_eq!(p.delay(2, None, Duration::from_millis(900), &mut e), Some(Duration::from_millis(100)));
        // budget spent
        assert_eq!(p.delay(2, None, Duration::from_millis(1000), &mut e), None);
        // the server's floor does not fit in what is left
        assert_eq!(p.delay(0, Some(Duration::from_millis(500)), Duration::from_millis(800), &mut e), None);
    }
}
