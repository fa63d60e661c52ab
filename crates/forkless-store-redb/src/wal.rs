//! The write-ahead log: a fixed-size file beside the redb file that makes a group of writes
//! durable with one write and one `fdatasync`.
//!
//! The log is created full of zeros ([`LOG_SIZE`]) and then only overwritten, from offset 0
//! after every checkpoint, so a sync never has to update the file's size or allocate blocks.
//! Each entry is one group of writes:
//!
//! ```text
//! entry : len:u32 lsn:u64 crc:u32 payload[len]      (big-endian; payload: codec::encode_op*)
//! crc   : CRC-32C of key:u64 lsn:u64 len:u32 payload
//! ```
//!
//! LSNs count up for the life of the data file (the last one applied to redb is in its META
//! table), and a scan accepts only the exact next LSN, so entries left over from an earlier
//! cycle, whose LSNs are all at or below the checkpoint, end the scan; a torn entry (a write
//! that the crash interrupted) fails its checksum and ends it too. The `key` is a random number
//! stored in the data file when it is created: a log that belongs to another data file (one
//! deleted and created again beside an old log) fails every checksum and is ignored.

use redb::StorageBackend;

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
    offset: u64,
    next_lsn: u64,
    /// The entry being built: header space, then the payload.
    entry: Vec<u8>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("capacity", &self.capacity)
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
        let mut at = 0;
        let mut next_lsn = checkpoint + 1;
        while let Some(payload) = parse(&image[at..], key, next_lsn) {
            at += HEADER + payload.len();
            entries.push(payload.to_vec());
            next_lsn += 1;
        }
        let tail = tail(&image[at..], key, entries.is_empty());
        let log = Self { backend, key, capacity: len, offset: 0, next_lsn, entry: Vec::new() };
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

    /// Whether the entry begun fits after the last one.
    pub(crate) fn fits(&self) -> bool {
        self.offset + self.entry.len() as u64 <= self.capacity
    }

    /// Whether the entry begun would fit in the log once it restarts.
    pub(crate) fn fits_when_empty(&self) -> bool {
        self.entry.len() as u64 <= self.capacity
    }

    /// Write the entry begun (which must fit) and sync it: one write, one `fdatasync`.
    pub(crate) fn append(&mut self) -> std::io::Result<()> {
        let len = u32::try_from(self.entry.len() - HEADER).map_err(std::io::Error::other)?;
        let crc = checksum(self.key, self.next_lsn, &self.entry[HEADER..]);
        self.entry[..4].copy_from_slice(&len.to_be_bytes());
        self.entry[4..12].copy_from_slice(&self.next_lsn.to_be_bytes());
        self.entry[12..16].copy_from_slice(&crc.to_be_bytes());
        self.backend.write(self.offset, &self.entry)?;
        self.backend.sync_data()?;
        self.offset += self.entry.len() as u64;
        self.next_lsn += 1;
        Ok(())
    }

    /// The LSN of the last entry written (or replayed); a checkpoint records it.
    pub(crate) fn last_lsn(&self) -> u64 {
        self.next_lsn - 1
    }

    /// Whether entries were written since the last restart.
    pub(crate) fn has_entries(&self) -> bool {
        self.offset > 0
    }

    /// Start over at offset 0, once a checkpoint has applied every entry to redb. Nothing is
    /// written: the old entries' LSNs are now at or below the checkpoint's, so a scan rejects
    /// them.
    pub(crate) fn restart(&mut self) {
        self.offset = 0;
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
mod tests {
    use super::*;

    /// The CRC-32C this log has always used, one byte at a time: what entries already on disk
    /// were written with.
    fn reference_crc(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
            }
        }
        !crc
    }

    #[test]
    fn crc32c_matches_the_standard_check_value_and_the_values_logs_were_written_with() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        let data: Vec<u8> = (0u32..300).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for len in 0..data.len() {
            assert_eq!(crc32c::crc32c(&data[..len]), reference_crc(&data[..len]), "length {len}");
        }
        // The entry checksum covers key, LSN and length before the payload.
        let (key, lsn, payload) = (0x0123_4567_89ab_cdef_u64, 42u64, &data[..100]);
        let mut whole = key.to_be_bytes().to_vec();
        whole.extend_from_slice(&lsn.to_be_bytes());
        whole.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        whole.extend_from_slice(payload);
        assert_eq!(checksum(key, lsn, payload), reference_crc(&whole));
    }

    /// A log image shared between opens, so a test can reopen what it wrote.
    #[derive(Debug, Clone, Default)]
    struct Image(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl StorageBackend for Image {
        fn len(&self) -> std::io::Result<u64> {
            Ok(self.0.lock().unwrap().len() as u64)
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            let image = self.0.lock().unwrap();
            out.copy_from_slice(&image[offset as usize..offset as usize + out.len()]);
            Ok(())
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.0.lock().unwrap().resize(len as usize, 0);
            Ok(())
        }
        fn sync_data(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
            let mut image = self.0.lock().unwrap();
            let end = offset as usize + data.len();
            if image.len() < end {
                image.resize(end, 0);
            }
            image[offset as usize..end].copy_from_slice(data);
            Ok(())
        }
    }

    fn open(image: &Image, key: u64, checkpoint: u64) -> (Log, Vec<Vec<u8>>) {
        let (log, entries, _) = Log::open(Box::new(image.clone()), key, checkpoint).unwrap();
        (log, entries)
    }

    fn append(log: &mut Log, payload: &[u8]) {
        log.begin().extend_from_slice(payload);
        assert!(log.fits());
        log.append().unwrap();
    }

    #[test]
    fn a_new_log_is_zero_filled_to_its_size() {
        let image = Image::default();
        let (log, entries) = open(&image, 1, 0);
        assert!(entries.is_empty());
        assert_eq!(image.len().unwrap(), LOG_SIZE);
        assert_eq!((log.capacity, log.last_lsn()), (LOG_SIZE, 0));
    }

    #[test]
    fn entries_after_the_checkpoint_are_read_back_in_order() {
        let image = Image::default();
        let (mut log, _) = open(&image, 7, 40);
        for p in [&b"one"[..], b"two", b"three"] {
            append(&mut log, p);
        }
        let (log, entries) = open(&image, 7, 40);
        assert_eq!(entries, vec![b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]);
        assert_eq!(log.last_lsn(), 43);
        // Once checkpointed, they are not read again.
        let (_, entries) = open(&image, 7, 43);
        assert!(entries.is_empty());
        // Nor by a data file with another key.
        let (_, entries) = open(&image, 8, 40);
        assert!(entries.is_empty());
    }

    #[test]
    fn a_torn_entry_ends_the_scan() {
        let image = Image::default();
        let (mut log, _) = open(&image, 7, 0);
        append(&mut log, b"whole");
        append(&mut log, b"torn by the crash");
        append(&mut log, b"after");
        let torn = HEADER + 5 + HEADER + 3;
        image.0.lock().unwrap()[torn] ^= 0x20;
        let (log, entries) = open(&image, 7, 0);
        assert_eq!(entries, vec![b"whole".to_vec()]);
        assert_eq!(log.last_lsn(), 1);
    }

    #[test]
    fn entries_of_an_earlier_cycle_are_not_read_back() {
        let image = Image::default();
        let (mut log, _) = open(&image, 7, 0);
        for p in [&b"a"[..], b"b", b"c", b"d"] {
            append(&mut log, p);
        }
        // A checkpoint at LSN 4, then the log starts over: the third slot still holds "c",
        // a whole entry with a valid checksum, but of the earlier cycle.
        log.restart();
        append(&mut log, b"e");
        append(&mut log, b"f");
        let (_, entries) = open(&image, 7, 4);
        assert_eq!(entries, vec![b"e".to_vec(), b"f".to_vec()]);
    }

    #[test]
    fn only_a_chain_of_another_keys_entries_is_foreign_never_crash_damage() {
        let tail_of = |image: &Image, key: u64, checkpoint: u64| {
            Log::open(Box::new(image.clone()), key, checkpoint).unwrap().2
        };
        // Another data file's log: two whole entries under its key.
        let theirs = Image::default();
        let (mut log, _) = open(&theirs, 99, 0);
        append(&mut log, b"their first");
        append(&mut log, b"their second");
        assert_eq!(tail_of(&theirs, 7, 0), Tail::Foreign);
        assert_eq!(tail_of(&theirs, 7, 10), Tail::Foreign, "whatever our checkpoint");
        // Our log, its first entry after a checkpoint torn in every way one byte can be.
        let ours = Image::default();
        let (mut log, _) = open(&ours, 7, 0);
        for p in [&b"a"[..], b"b", b"c"] {
            append(&mut log, p);
        }
        log.restart();
        append(&mut log, b"new entry, torn");
        let clean = ours.0.lock().unwrap().clone();
        for at in 0..HEADER + 15 {
            for flip in [0x01u8, 0x80, 0xff] {
                *ours.0.lock().unwrap() = clean.clone();
                ours.0.lock().unwrap()[at] ^= flip;
                let tail = tail_of(&ours, 7, 3);
                assert_ne!(tail, Tail::Foreign, "byte {at} ^ {flip:#x} read as another store's log");
            }
        }
    }
}
