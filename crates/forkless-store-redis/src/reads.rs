//! Reads of a stream's events and metadata: the `READ` script (the row and the chunks after
//! a cursor, at one instant), the sizes of a stream's oldest events (for retention), a stream's
//! row alone. It owns decoding what those return, not what a read may return (the checks are
//! `forkless_store`'s).

use bytes::Bytes;
use forkless_core::{Seq, SessionId, Stream, StreamId};
use forkless_store::codec::{decode_stream, push_chunk_events, push_chunk_sizes};
use forkless_store::shared::Read;
use forkless_store::{Error, Result};
use redis::Value;

use crate::keys::hex;
use crate::{MAX_READ, Redis, backend, parse};

/// A chunk's member split into the seq of its first event and the chunk.
fn chunk(member: Vec<u8>) -> Result<(Seq, Bytes)> {
    let first = member.first_chunk::<8>().ok_or_else(|| Error::Corrupt("short chunk member".into()))?;
    let first = Seq::new(u64::from_be_bytes(*first));
    Ok((first, Bytes::from(member).slice(8..)))
}

impl Redis {
    pub(crate) async fn oldest_event_sizes(
        &self,
        session: SessionId,
        stream: StreamId,
        from: Seq,
        n: u64,
    ) -> Result<Vec<u64>> {
        // The chunks ending at or after `from`: at most `n` of them hold the `n` events wanted.
        let members: Vec<Vec<u8>> = redis::cmd("ZRANGEBYSCORE")
            .arg(self.keys.events(session, stream))
            .arg(from.get())
            .arg("+inf")
            .arg("LIMIT")
            .arg(0)
            .arg(n)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(backend)?;
        let want = usize::try_from(n).unwrap_or(usize::MAX);
        let mut sizes = Vec::new();
        for m in members {
            let (first, events) = chunk(m)?;
            push_chunk_sizes(first, &events, from, want, &mut sizes)?;
        }
        Ok(sizes)
    }

    pub(crate) async fn read_events(
        &self,
        session: SessionId,
        stream: StreamId,
        after: Seq,
        max: usize,
    ) -> Result<Read> {
        let mut invocation = self.read.key(self.keys.record(session));
        invocation.key(self.keys.streams(session)).key(self.keys.events(session, stream));
        let max = max.min(MAX_READ);
        let upto = after.get().saturating_add(max as u64);
        invocation.arg(hex(stream.as_bytes())).arg(after.get()).arg(upto);
        let mut reply: Vec<Value> = invocation.invoke_async(&mut self.conn.clone()).await.map_err(backend)?;
        let code: i64 =
            reply.first().map(redis::from_redis_value_ref).transpose().map_err(parse)?.unwrap_or(0);
        match code {
            -1 => return Err(Error::SessionUnknown),
            -2 => return Err(Error::StreamUnknown),
            _ => {}
        }
        let (Some(members), Some(row)) = (reply.pop(), reply.pop()) else {
            return Err(Error::Backend("redis: short reply from the read script".into()));
        };
        let row: Vec<u8> = redis::from_redis_value(row).map_err(parse)?;
        let members: Vec<Vec<u8>> = redis::from_redis_value(members).map_err(parse)?;
        let meta = decode_stream(&row)?.build();
        let mut events = Vec::with_capacity(max.min(256));
        for m in members {
            let (first, c) = chunk(m)?;
            push_chunk_events(first, &c, after, max, &mut events)?;
        }
        Ok(Read { meta, events })
    }

    pub(crate) async fn stream_row(&self, session: SessionId, stream: StreamId) -> Result<Stream> {
        let row: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(self.keys.streams(session))
            .arg(hex(stream.as_bytes()))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(backend)?;
        match row {
            Some(row) => Ok(decode_stream(&row)?.build()),
            None => Err(self.absent(session).await),
        }
    }
}
