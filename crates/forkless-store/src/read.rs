//! The checks every backend makes where it reads a stream's log (promise 5 of the crate
//! docs), so a shared database and the in-process engine refuse exactly the same reads. It
//! owns the refusal, not the reading: each backend fetches the events its own way.

use forkless_core::{Seq, Stream};

use crate::{Error, Reader, Result};

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
