//! The log's own checks: entries, checksums, cycles, torn and foreign tails, block writes.

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

/// Records the span of every write, over an [`Image`].
#[derive(Debug, Clone, Default)]
struct Spans(Image, std::sync::Arc<std::sync::Mutex<Vec<(u64, usize)>>>);

impl StorageBackend for Spans {
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.1.lock().unwrap().push((offset, data.len()));
        self.0.write(offset, data)
    }
}

#[test]
fn entries_are_written_in_whole_blocks_and_read_back_across_block_boundaries() {
    // Sizes that start and end entries at every kind of place in a block, some longer
    // than a block; and a log whose length is not a multiple of a block, filled through
    // both its regions.
    let sizes: Vec<usize> = (0..60).map(|i| 1 + (i * 977 + i * i * 31) % 9_000).collect();
    for capacity in [LOG_SIZE, 300_000 + 123] {
        let spans = Spans::default();
        spans.set_len(capacity).unwrap();
        let (mut log, _, _) = Log::open(Box::new(spans.clone()), 5, 0).unwrap();
        spans.1.lock().unwrap().clear();
        let mut written = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            let payload: Vec<u8> = (0..size).map(|b| (b * 7 + i) as u8 | 1).collect();
            log.begin().extend_from_slice(&payload);
            if !log.fits() {
                if log.region == Region::Second {
                    break;
                }
                log.switch();
                assert!(log.fits());
            }
            log.append().unwrap();
            written.push(payload);
        }
        assert!(written.len() > 30, "the test writes across many blocks");
        for &(offset, len) in spans.1.lock().unwrap().iter() {
            let end = offset + len as u64;
            assert!(offset.is_multiple_of(BLOCK as u64), "a write starts on a block boundary: {offset}");
            assert!(
                end.is_multiple_of(BLOCK as u64) || end == capacity,
                "a write ends on one or at the log's end: {end}"
            );
        }
        let (_, entries, tail) = Log::open(Box::new(spans.clone()), 5, 0).unwrap();
        assert_eq!((entries.len(), tail), (written.len(), Tail::Clean));
        assert!(entries == written, "every entry reads back as written");
    }
}

#[test]
fn an_entry_in_the_other_region_after_a_checkpoint_reads_back_alone() {
    let image = Image::default();
    let (mut log, _) = open(&image, 7, 0);
    append(&mut log, &[9; 5_000]);
    append(&mut log, b"two");
    log.switch();
    append(&mut log, b"first of the next region");
    let (_, entries) = open(&image, 7, 2);
    assert_eq!(entries, vec![b"first of the next region".to_vec()]);
}

#[test]
fn the_regions_are_the_log_s_halves_on_block_boundaries() {
    assert_eq!(Region::Second.start(LOG_SIZE) as u64, LOG_SIZE / 2);
    assert_eq!(Region::Second.start(300_000 + 123), 36 * BLOCK);
    let image = Image::default();
    let (mut log, _) = open(&image, 7, 0);
    log.switch();
    assert_eq!((log.region, log.offset), (Region::Second, LOG_SIZE / 2));
    log.switch();
    assert_eq!((log.region, log.offset), (Region::First, 0));
    // An entry never crosses into the other region: one that fills the first region exactly
    // fits, a byte more does not (it goes to the other region once that one is free).
    let room = LOG_SIZE as usize / 2 - HEADER;
    log.begin().extend_from_slice(&vec![1; room]);
    assert!(log.fits() && log.fits_when_empty());
    log.begin().extend_from_slice(&vec![1; room + 1]);
    assert!(!log.fits() && !log.fits_when_empty());
}

#[test]
fn the_chain_after_a_checkpoint_goes_on_in_the_other_region_and_back() {
    let image = Image::default();
    let (mut log, _) = open(&image, 7, 0);
    append(&mut log, b"1");
    append(&mut log, b"2");
    log.switch();
    append(&mut log, b"3");
    append(&mut log, b"4");
    let read = |checkpoint| -> Vec<Vec<u8>> { open(&image, 7, checkpoint).1 };
    let of = |items: &[&str]| -> Vec<Vec<u8>> { items.iter().map(|i| i.as_bytes().to_vec()).collect() };
    // A checkpoint covers whole regions, so the chain after it starts at a region's start:
    // from the first region on into the second, or in the second.
    assert_eq!(read(0), of(&["1", "2", "3", "4"]));
    assert_eq!(read(2), of(&["3", "4"]));
    // Once the first region is checkpointed (to 2), the writer goes back to its start: the
    // chain runs from the second region on into the first.
    log.switch();
    append(&mut log, b"5");
    append(&mut log, b"6");
    assert_eq!(read(2), of(&["3", "4", "5", "6"]));
    assert_eq!(read(4), of(&["5", "6"]));
    assert_eq!(read(6), of(&[]));
    // The second region's entries, checkpointed, are never read after the first's.
    log.switch();
    append(&mut log, b"7");
    log.switch();
    append(&mut log, b"8");
    assert_eq!(read(7), of(&["8"]), "7 is below the checkpoint, so the chain does not go on into it");
    assert_eq!(read(6), of(&["7", "8"]));
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
    // A checkpoint at LSN 4, then the log comes back to this region's start (by way of the
    // other one, empty): the third slot still holds "c", a whole entry with a valid
    // checksum, but of the earlier cycle.
    log.switch();
    log.switch();
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
    log.switch();
    log.switch();
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

#[test]
fn a_torn_write_never_damages_an_entry_already_in_its_block() {
    // The second entry starts inside the first's block, so its write rewrites that block's
    // start. A device tears a write at sector boundaries: whatever prefix of the write's
    // sectors lands, the first entry reads back, and the second only if all of it landed.
    const SECTOR: usize = 512;
    let image = Image::default();
    let (mut log, _) = open(&image, 7, 0);
    append(&mut log, &[3; 700]);
    let before = image.0.lock().unwrap().clone();
    append(&mut log, &[5; 2_000]);
    let after = image.0.lock().unwrap().clone();
    // Both entries and their headers fit in the first block: the write covers that block.
    for landed in 0..=BLOCK / SECTOR {
        let mut torn = before.clone();
        torn[..landed * SECTOR].copy_from_slice(&after[..landed * SECTOR]);
        *image.0.lock().unwrap() = torn;
        let (_, entries) = open(&image, 7, 0);
        assert_eq!(entries.first(), Some(&vec![3; 700]), "{landed} sectors landed");
        let whole = (HEADER * 2 + 2_700).div_ceil(SECTOR);
        assert_eq!(entries.len(), if landed >= whole { 2 } else { 1 }, "{landed} sectors landed");
    }
}
