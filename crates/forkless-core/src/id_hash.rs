//! The hasher for maps keyed by identifiers this process minted ([`IdHasher`]).
//!
//! This module owns that hash and the reasoning for it; the identifiers are [`crate::id`]'s.

/// A [`Hasher`](core::hash::Hasher) for maps keyed by identifiers this process generated from
/// the CSPRNG ([`SessionId`](crate::SessionId), [`StreamId`](crate::StreamId) and tuples of them).
///
/// Their bytes are already uniformly random, so folding them is a good hash, and SipHash's
/// resistance to chosen keys buys nothing: a peer can look ids up but never choose the ones
/// inserted. Do not use it for keys a peer picks (JSON-RPC request ids, header values).
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl IdHasher {
    const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(26) ^ word).wrapping_mul(Self::MIX);
    }
}

impl core::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(word));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Builds [`IdHasher`]s: `HashMap<SessionId, V, IdHashBuilder>`.
pub type IdHashBuilder = core::hash::BuildHasherDefault<IdHasher>;
