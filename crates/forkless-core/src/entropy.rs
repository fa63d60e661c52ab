//! Where identifiers' randomness comes from: the [`EntropySource`] trait, the OS CSPRNG
//! ([`OsEntropy`], drawn in blocks into a per-thread pool) and a seeded generator for tests
//! and simulations ([`SeededEntropy`]).
//!
//! This module owns only the bytes; what an identifier makes of them is [`crate::id`]'s.

/// A source of random bytes for identifiers.
pub trait EntropySource {
    /// Fill `dest` with random bytes.
    fn fill(&mut self, dest: &mut [u8]);
}

impl<E: EntropySource + ?Sized> EntropySource for &mut E {
    fn fill(&mut self, dest: &mut [u8]) {
        (**self).fill(dest);
    }
}

/// The operating system's CSPRNG.
///
/// Every byte comes from the OS, drawn [`OS_DRAW`] bytes at a time into a per-thread pool, so
/// a stream id per request costs no system call (figures: `docs/benchmarks.md`). Each byte is
/// handed out once and then zeroed. A process that forks would share its pool with the child;
/// this server never forks.
///
/// If the OS cannot provide randomness the process aborts through a panic: minting guessable
/// session ids instead would be a security hole, and there is no useful way to continue.
#[cfg(feature = "os-entropy")]
#[derive(Clone, Copy, Debug, Default)]
pub struct OsEntropy;

/// How many bytes [`OsEntropy`] draws from the OS at a time.
#[cfg(feature = "os-entropy")]
pub const OS_DRAW: usize = 4096;

#[cfg(feature = "os-entropy")]
struct Pool {
    bytes: [u8; OS_DRAW],
    /// Bytes before this offset were handed out (and zeroed).
    used: usize,
}

#[cfg(feature = "os-entropy")]
std::thread_local! {
    static POOL: core::cell::RefCell<Pool> = const {
        core::cell::RefCell::new(Pool { bytes: [0; OS_DRAW], used: OS_DRAW })
    };
}

#[cfg(feature = "os-entropy")]
fn os_fill(dest: &mut [u8]) {
    #[allow(clippy::expect_used)] // documented on OsEntropy: no safe fallback exists
    getrandom::fill(dest).expect("the OS CSPRNG failed; refusing to mint predictable ids");
}

#[cfg(feature = "os-entropy")]
impl EntropySource for OsEntropy {
    fn fill(&mut self, dest: &mut [u8]) {
        if dest.len() > OS_DRAW / 4 {
            return os_fill(dest);
        }
        POOL.with_borrow_mut(|pool| {
            if OS_DRAW - pool.used < dest.len() {
                os_fill(&mut pool.bytes);
                pool.used = 0;
            }
            let taken = &mut pool.bytes[pool.used..pool.used + dest.len()];
            dest.copy_from_slice(taken);
            taken.fill(0);
            pool.used += dest.len();
        });
    }
}

/// A deterministic generator (SplitMix64) for tests and simulations. Not for production.
#[derive(Clone, Debug)]
pub struct SeededEntropy {
    state: u64,
}

impl SeededEntropy {
    /// A generator whose output is a pure function of `seed`.
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl EntropySource for SeededEntropy {
    fn fill(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}
