//! The checks every backend makes where it reads a stream's log (promise 5 of the crate
//! docs), so a shared database and the in-process engine refuse exactly the same reads. It
//! owns the refusal, not the reading: each backend fetches the events its own way.

use forkless_core::{Seq, Stream};

use crate::{Error, Reader, Result, StoredEvent};

/// Whether `reader` may read `stream`'s events after `after`, given the stream's metadata as
/// the same read sees it: a writer only while its epoch is current and the stream unfenced,
/// anyone only while nothing after the cursor was evicted.
pub fn check_read(stream: &Stream, after: Seq, reader: Reader) -> Result<()> {
    if let Reader::Attached(held) = reader {
        if stream.is_fenced() {
            return Err(Error::Core(forkless_core::Error::StreamFenced));
        }
        if stream.epoch() != held {
            return Err(Error::Core(forkless_core::Error::StaleEpoch { held, current: stream.epoch() }));
        }
    }
    let low_water = stream.low_water();
    if after.next() < low_water {
        return Err(Error::Evicted { low_water });
    }
    Ok(())
}

/// Whether `events`, read after `after` from `stream` (as the same read saw its metadata), are
/// the gap-free continuation a read promises: the first right after the cursor (or at the
/// low-water mark), each the one after the last. Anything else is a damaged log, refused rather
/// than sent with a gap.
pub fn check_continuation(stream: &Stream, after: Seq, events: &[StoredEvent]) -> Result<()> {
    let mut expected = after.next().max(stream.low_water());
    for e in events {
        if e.seq != expected {
            return Err(Error::Corrupt(format!("stream log has a gap before seq {}", e.seq)));
        }
        expected = expected.next();
    }
    Ok(())
}
