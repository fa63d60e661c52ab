//! The write-ahead log: a fixed-size file beside the redb file that makes a group of writes
//! durable with one write and one `fdatasync`.
//!
//! The log is created full of zeros ([`LOG_SIZE`]) and then only overwritten, so a sync never
//! has to update the file's size or allocate blocks. It is two regions, its halves: entries
//! fill one region while a checkpoint copies the other's into redb on its own thread, and the
//! writer moves on to the other region's start once that checkpoint is done (see
//! [`super::journal`]), so a sync never waits for a checkpoint. Each entry is one group of
//! writes:
//!
//! ```text
//! entry : len:u32 lsn:u64 crc:u32 payload[len]      (big-endian; payload: codec::encode_op*)
//! crc   : CRC-32C of key:u64 lsn:u64 len:u32 payload
//! ```
//!
//! LSNs count up for the life of the data file (the last one applied to redb is in its META
//! table), and a scan accepts only the exact next LSN, so entries left over from an earlier
//! cycle, whose LSNs are all at or below the checkpoint, end the scan; a torn entry (a write
//! that the crash interrupted) fails its checksum and ends it too. A checkpoint covers whole
//! regions, so the entries after it start at a region's start, fill at most that region and
//! go on at the other's start: a scan starts at whichever region's start holds the entry
//! after the checkpoint and, where the chain ends, goes on at the other region's start if the
//! next entry is there. (A log written before regions existed is one chain from offset 0,
//! which this reads the same way.) The `key` is a random number stored in the data file when
//! it is created: a log that belongs to another data file (one
//! deleted and created again beside an old log) fails every checksum and is ignored.
//!
//! Entries are written in whole 4 KiB blocks, so that the file can take them around the page
//! cache ([`super::logfile`]): a write starts at the block the entry starts in, rewriting that
//! block's earlier bytes as they were (a torn write leaves them as they were, too), and is
//! padded with zeros to the end of the block the entry ends in.

use redb::StorageBackend;

use super::logfile::{AlignedBuf, BLOCK};

/// Size of a new log. Larger means fewer checkpoints under load but a longer replay after a
/// crash; 8 MiB holds about 30,000 appends of a typical notification.
pub(crate) const LOG_SIZE: u64 = 8 << 20;
/// An existing log at least this long is used at its length (a smaller log checkpoints more
/// often); a shorter one (new, or cut short by a crash while it was being created) is filled
/// up to [`LOG_SIZE`] with zeros.
pub(crate) const LOG_MIN_SIZE: u64 = 64 << 10;
/// Bytes of an entry's header.
const HEADER: usize = 16;

/// What follows the last entry a scan accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tail {
    /// Zeros, or an entry of this data file's from an earlier cycle: the log ends cleanly.
    Clean,
    /// An entry whose checksum fails: a write the crash interrupted.
    Torn,
    /// At the start of the log, an entry written with another key: the log belongs to
    /// another data file (or was overwritten), so what it held for this one is lost.
    Foreign,
}

/// One entry's header fields at the start of `bytes`, and whether its checksum holds under
/// `key` (`None`: no header there, or zeros).
fn entry_at(bytes: &[u8], key: u64) -> Option<(usize, u64, bool)> {
    let head = bytes.get(..HEADER)?;
    let len = u32::from_be_bytes(head[0..4].try_into().unwrap_or_default()) as usize;
    let lsn = u64::from_be_bytes(head[4..12].try_into().unwrap_or_default());
    let crc = u32::from_be_bytes(head[12..16].try_into().unwrap_or_default());
    if len == 0 && lsn == 0 {
        return None;
    }
    let ours = bytes.get(HEADER..HEADER + len).is_some_and(|payload| checksum(key, lsn, payload) == crc);
    Some((len, lsn, ours))
}

/// Classify the bytes after the accepted entries (`at_start`: none were accepted).
///
/// A crash can leave any bytes where the interrupted write was, so a single entry that fails
/// its checksum proves nothing. A log written for another data file is told by more: at the
/// start, a whole entry that fails ours, followed by another whole one with the next LSN that
/// fails it too (a chain no crash produces: this store's own older entries pass its
/// checksum).
fn tail(bytes: &[u8], key: u64, at_start: bool) -> Tail {
    let Some((len, lsn, ours)) = entry_at(bytes, key) else { return Tail::Clean };
    if ours {
        return Tail::Clean;
    }
    if !at_start {
        return Tail::Torn;
    }
    let whole = bytes.len() >= HEADER + len;
    let chained = whole
        && entry_at(&bytes[HEADER + len..], key)
            .is_some_and(|(len2, lsn2, ours2)| len2 > 0 && lsn2 == lsn.wrapping_add(1) && !ours2);
    if chained { Tail::Foreign } else { Tail::Torn }
}

/// The log, as the writer thread sees it: where the next entry goes and its LSN.
pub(crate) struct Log {
    backend: Box<dyn StorageBackend>,
    key: u64,
    capacity: u64,
    /// The region entries go to.
    region: Region,
    offset: u64,
    next_lsn: u64,
    /// The entry being built: header space, then the payload.
    entry: Vec<u8>,
    /// The bytes of the block `offset` is in, before it, as last written: the log is written
    /// in whole [`BLOCK`]s (see [`super::logfile`]), so an entry that starts inside a block
    /// rewrites these bytes with it, unchanged.
    tail: Vec<u8>,
    /// Where a write's blocks are put together.
    out: AlignedBuf,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("capacity", &self.capacity)
            .field("region", &self.region)
            .field("offset", &self.offset)
            .field("next_lsn", &self.next_lsn)
            .finish_non_exhaustive()
    }
}

impl Log {
    /// Open the log of a data file whose log key is `key` and whose last checkpoint applied
    /// LSN `checkpoint`, sizing it first if it is new. Returns the log and the payloads of the
    /// entries written after the checkpoint, in order; they must be applied (and the
    /// checkpoint moved past them) before the first [`Log::append`], which overwrites them.
    pub(crate) fn open(
        backend: Box<dyn StorageBackend>,
        key: u64,
        checkpoint: u64,
    ) -> std::io::Result<(Self, Vec<Vec<u8>>, Tail)> {
        let mut len = backend.len()?;
        if len < LOG_MIN_SIZE {
            // Written, not `set_len`: the blocks must be allocated now so that a later
            // `fdatasync` has no file metadata to update.
            let zeros = vec![0u8; 1 << 20];
            while len < LOG_SIZE {
                let n = (LOG_SIZE - len).min(zeros.len() as u64);
                backend.write(len, &zeros[..n as usize])?;
                len += n;
            }
            backend.sync_data()?;
        }
        let mut image = vec![0u8; usize::try_from(len).map_err(std::io::Error::other)?];
        backend.read(0, &mut image)?;
        let mut entries = Vec::new();
        let mut next_lsn = checkpoint + 1;
        let second = Region::Second.start(len);
        // The chain starts at a region's start; where it ends, it may go on at the other's.
        let (mut at, mut other) = match parse(&image, key, next_lsn) {
            None if parse(&image[second..], key, next_lsn).is_some() => (second, Some(0)),
            _ => (0, Some(second)),
        };
        loop {
            while let Some(payload) = parse(&image[at..], key, next_lsn) {
                at += HEADER + payload.len();
                entries.push(payload.to_vec());
                next_lsn += 1;
            }
            match other.take() {
                Some(start) if !entries.is_empty() && parse(&image[start..], key, next_lsn).is_some() => {
                    at = start;
                }
                _ => break,
            }
        }
        let tail = tail(&image[at..], key, entries.is_empty());
        let log = Self {
            backend,
            key,
            capacity: len,
            region: Region::First,
            offset: 0,
            next_lsn,
            entry: Vec::new(),
            tail: Vec::new(),
            out: AlignedBuf::default(),
        };
        Ok((log, entries, tail))
    }

    /// Start a new entry; returns the buffer to append the payload to.
    pub(crate) fn begin(&mut self) -> &mut Vec<u8> {
        self.entry.clear();
        self.entry.resize(HEADER, 0);
        &mut self.entry
    }

    /// Whether the entry begun holds no writes.
    pub(crate) fn is_empty(&self) -> bool {
        self.entry.len() <= HEADER
    }

    /// Whether the entry begun fits after the last one, in the region they are in.
    pub(crate) fn fits(&self) -> bool {
        self.offset + self.entry.len() as u64 <= self.region.end(self.capacity)
    }

    /// Whether the entry begun would fit in an empty region (the smaller, the first).
    pub(crate) fn fits_when_empty(&self) -> bool {
        self.entry.len() as u64 <= Region::First.end(self.capacity)
    }

    /// Write the entry begun (which must fit) and sync it: one write, one `fdatasync`. The
    /// write covers whole blocks: from the start of the block the entry starts in (its bytes
    /// before the entry written again as they were) to the end of the block it ends in, padded
    /// with zeros (nothing after the last entry is ever read back), or to the log's end if
    /// that comes first.
    pub(crate) fn append(&mut self) -> std::io::Result<()> {
        let len = u32::try_from(self.entry.len() - HEADER).map_err(std::io::Error::other)?;
        let crc = checksum(self.key, self.next_lsn, &self.entry[HEADER..]);
        self.entry[..4].copy_from_slice(&len.to_be_bytes());
        self.entry[4..12].copy_from_slice(&self.next_lsn.to_be_bytes());
        self.entry[12..16].copy_from_slice(&crc.to_be_bytes());
        let start = self.offset - self.tail.len() as u64;
        let end = self.offset + self.entry.len() as u64;
        let padded = end.next_multiple_of(BLOCK as u64).min(self.region.end(self.capacity).max(end));
        let len = usize::try_from(padded - start).map_err(std::io::Error::other)?;
        let out = self.out.fill(&[&self.tail, &self.entry], len);
        self.backend.write(start, out)?;
        self.backend.sync_data()?;
        let last_block = end - end % BLOCK as u64;
        self.tail.clear();
        self.tail.extend_from_slice(&out[(last_block - start) as usize..(end - start) as usize]);
        self.offset = end;
        self.next_lsn += 1;
        Ok(())
    }

    /// The LSN of the last entry written (or replayed); a checkpoint records it.
    pub(crate) fn last_lsn(&self) -> u64 {
        self.next_lsn - 1
    }

    /// Go on at the other region's start, once a checkpoint has applied every entry that
    /// region holds to redb (whether this region's are applied yet does not matter: the
    /// scan goes on from its last entry to the other's first). Nothing is written: the old
    /// entries' LSNs are at or below the checkpoint's, so a scan rejects them.
    pub(crate) fn switch(&mut self) {
        self.region = self.region.other();
        self.offset = self.region.start(self.capacity) as u64;
        self.tail.clear();
    }
}

/// One of the log's two regions: its halves, split at the block boundary at or below the
/// middle. An entry never crosses from one into the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Region {
    First,
    Second,
}

impl Region {
    fn other(self) -> Self {
        match self {
            Self::First => Self::Second,
            Self::Second => Self::First,
        }
    }

    /// Where this region starts in a log of `capacity` bytes.
    fn start(self, capacity: u64) -> usize {
        match self {
            Self::First => 0,
            Self::Second => usize::try_from(capacity / 2 / BLOCK as u64 * BLOCK as u64).unwrap_or(usize::MAX),
        }
    }

    /// Where this region ends: the other's start, or the log's end.
    fn end(self, capacity: u64) -> u64 {
        match self {
            Self::First => Self::Second.start(capacity) as u64,
            Self::Second => capacity,
        }
    }
}

/// The payload of the entry at the start of `bytes` if it is whole and has LSN `lsn`.
fn parse(bytes: &[u8], key: u64, lsn: u64) -> Option<&[u8]> {
    let header = bytes.get(..HEADER)?;
    let len = u32::from_be_bytes(header[..4].try_into().ok()?) as usize;
    let found = u64::from_be_bytes(header[4..12].try_into().ok()?);
    let crc = u32::from_be_bytes(header[12..16].try_into().ok()?);
    let payload = bytes.get(HEADER..HEADER.checked_add(len)?)?;
    (len > 0 && found == lsn && checksum(key, lsn, payload) == crc).then_some(payload)
}

/// CRC-32C (Castagnoli) of the log key, the LSN, the payload's length and the payload (the
/// `crc32c` crate: hardware instructions where the CPU has them).
fn checksum(key: u64, lsn: u64, payload: &[u8]) -> u32 {
    let len = payload.len() as u32;
    let crc = crc32c::crc32c(&key.to_be_bytes());
    let crc = crc32c::crc32c_append(crc, &lsn.to_be_bytes());
    let crc = crc32c::crc32c_append(crc, &len.to_be_bytes());
    crc32c::crc32c_append(crc, payload)
}

#[cfg(test)]
mod tests;
