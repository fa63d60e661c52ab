//! The streams of one session, shared copy-on-write between versions of a record.
//!
//! This module owns how a session's [`Stream`] metadata is stored: ordered by id, cheap to
//! clone, and able to say what changed between two versions ([`StreamChange`]). It owns no
//! transition; those are in [`crate::session`] and [`crate::stream`].
//!
//! Why not a plain vector: a store loads a record, the core changes one or two of its streams,
//! and the store writes it back and looks for what changed. A session answering over SSE
//! retains up to `session_max_streams` (1,024) completed request streams, so with a flat vector
//! every load copied and every write compared all of them. Here streams live in sorted chunks
//! behind [`Arc`], and the list of chunks behind one more: a clone copies one pointer (a load
//! that changes nothing costs no more), the first change of a copy copies the list (one
//! pointer per chunk) and the chunk it touches, and two versions share every chunk neither
//! touched, which the change walk skips by pointer.

use std::sync::Arc;

use crate::id::StreamId;
use crate::stream::Stream;

/// Most streams in one chunk: a change copies at most this many (about 5 KiB).
const CHUNK: usize = 32;

/// Most ids [`Touched`] lists before it gives up and the change walk looks at every chunk.
const TOUCHED: usize = 8;

/// Streams ordered by id, in chunks shared between clones.
///
/// Invariants: no chunk is empty; each chunk is sorted; every id in a chunk is below every id
/// in the next; every stream that differs from the map's content when `clean` was taken is
/// listed in `touched` (or `touched` says it lost count).
#[derive(Clone, Debug, Default)]
pub(crate) struct StreamMap {
    /// Shared as a whole too: a copy that changes nothing (most loads) costs one pointer.
    chunks: Arc<Vec<Arc<Vec<Stream>>>>,
    len: usize,
    /// A token shared by every copy of this map taken since [`Self::mark_clean`].
    clean: Option<Arc<()>>,
    touched: Touched,
}

/// The streams changed since [`StreamMap::mark_clean`], so that the change walk from a clean
/// copy looks only at them (one or two streams, instead of a whole chunk each).
#[derive(Clone, Copy, Debug, Default)]
enum Touched {
    Few {
        n: usize,
        ids: [Option<StreamId>; TOUCHED],
    },
    #[default]
    Unknown,
}

impl Touched {
    fn add(&mut self, id: StreamId) {
        if let Self::Few { n, ids } = self {
            if ids[..*n].contains(&Some(id)) {
                return;
            }
            if *n == TOUCHED {
                *self = Self::Unknown;
                return;
            }
            ids[*n] = Some(id);
            *n += 1;
        }
    }
}

/// How one stream differs between two versions of a record (see
/// [`SessionRecord::changes_since`](crate::SessionRecord::changes_since)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamChange<'a> {
    /// Only the newer version holds it.
    Added(&'a Stream),
    /// Both hold it, with different metadata.
    Changed {
        /// As it was.
        before: &'a Stream,
        /// As it is.
        after: &'a Stream,
    },
    /// Only the older version holds it.
    Removed(&'a Stream),
}

impl StreamChange<'_> {
    /// The stream's id.
    pub fn id(&self) -> StreamId {
        match self {
            Self::Added(s) | Self::Removed(s) | Self::Changed { after: s, .. } => s.id(),
        }
    }
}

impl StreamMap {
    /// The chunk that holds `id` if any stream does: the first whose last id is not below it.
    fn chunk_of(&self, id: StreamId) -> usize {
        self.chunks.partition_point(|c| c.last().is_some_and(|s| s.id() < id))
    }

    fn position(&self, id: StreamId) -> Option<(usize, usize)> {
        let c = self.chunk_of(id);
        let at = self.chunks.get(c)?.binary_search_by_key(&id, Stream::id).ok()?;
        Some((c, at))
    }

    pub(crate) fn get(&self, id: StreamId) -> Option<&Stream> {
        self.position(id).map(|(c, at)| &self.chunks[c][at])
    }

    /// The stream, its chunk copied first if another version shares it.
    pub(crate) fn get_mut(&mut self, id: StreamId) -> Option<&mut Stream> {
        let (c, at) = self.position(id)?;
        self.touched.add(id);
        Some(&mut Arc::make_mut(&mut Arc::make_mut(&mut self.chunks)[c])[at])
    }

    /// Insert; false if the id is taken.
    pub(crate) fn insert(&mut self, stream: Stream) -> bool {
        let id = stream.id();
        if self.chunks.is_empty() {
            self.touched.add(id);
            Arc::make_mut(&mut self.chunks).push(Arc::new(vec![stream]));
            self.len = 1;
            return true;
        }
        // Past the last chunk, the stream joins the last one.
        let c = self.chunk_of(id).min(self.chunks.len() - 1);
        let Err(mut at) = self.chunks[c].binary_search_by_key(&id, Stream::id) else { return false };
        self.touched.add(id);
        let chunks = Arc::make_mut(&mut self.chunks);
        let mut c = c;
        if chunks[c].len() >= CHUNK {
            let right = Arc::make_mut(&mut chunks[c]).split_off(CHUNK / 2);
            chunks.insert(c + 1, Arc::new(right));
            if at > CHUNK / 2 {
                c += 1;
                at -= CHUNK / 2;
            }
        }
        Arc::make_mut(&mut chunks[c]).insert(at, stream);
        self.len += 1;
        true
    }

    pub(crate) fn remove(&mut self, id: StreamId) -> Option<Stream> {
        let (c, at) = self.position(id)?;
        self.touched.add(id);
        let chunks = Arc::make_mut(&mut self.chunks);
        let removed = Arc::make_mut(&mut chunks[c]).remove(at);
        self.len -= 1;
        let left = chunks[c].len();
        if left == 0 {
            chunks.remove(c);
        } else if left < CHUNK / 4 {
            // Fold a small chunk into a neighbour so removals do not leave a trail of tiny ones.
            let (a, b) = if c + 1 < chunks.len() { (c, c + 1) } else { (c.saturating_sub(1), c) };
            if a != b && chunks[a].len() + chunks[b].len() <= CHUNK {
                let tail = chunks.remove(b);
                Arc::make_mut(&mut chunks[a]).extend(tail.iter().cloned());
            }
        }
        Some(removed)
    }

    pub(crate) const fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Stream> {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// Run `f` on a copy of every stream and keep the result; only chunks holding a stream
    /// that `f` changed are copied (a tick that expires nothing copies nothing).
    pub(crate) fn update_each(&mut self, mut f: impl FnMut(&mut Stream)) {
        for c in 0..self.chunks.len() {
            for at in 0..self.chunks[c].len() {
                let mut s = self.chunks[c][at].clone();
                f(&mut s);
                if s != self.chunks[c][at] {
                    self.touched.add(s.id());
                    Arc::make_mut(&mut Arc::make_mut(&mut self.chunks)[c])[at] = s;
                }
            }
        }
    }

    /// Start counting changes from the current content: copies taken from now on can report
    /// their differences from this one by the streams they touched. A store calls this on
    /// the version it keeps.
    pub(crate) fn mark_clean(&mut self) {
        // A token no copy holds can be kept: nobody can claim to share this origin. (This
        // keeps a stream of appends to a stored record free of allocations.)
        if self.clean.as_ref().is_none_or(|t| Arc::strong_count(t) != 1) {
            self.clean = Some(Arc::new(()));
        }
        self.touched = Touched::Few { n: 0, ids: [None; TOUCHED] };
    }

    /// What changed from `before` to `self`, in id order. Exact for any two maps: when
    /// `before` is an unchanged copy of the clean version `self` descends from, only the
    /// streams `self` touched are compared; otherwise chunks the two share are skipped
    /// without looking inside and the rest compared.
    pub(crate) fn changes_since<'a>(&'a self, before: &'a Self) -> Changes<'a> {
        let same_origin = match (&self.clean, &before.clean) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        if same_origin
            && let (Touched::Few { n: 0, .. }, Touched::Few { n, ids }) = (before.touched, self.touched)
        {
            let mut ids = ids;
            ids[..n].sort_unstable();
            return Changes::Touched { before, after: self, ids, next: 0, n };
        }
        if Arc::ptr_eq(&self.chunks, &before.chunks) {
            return Changes::Walk { before: Cursor::new(&[]), after: Cursor::new(&[]) };
        }
        Changes::Walk { before: Cursor::new(&before.chunks), after: Cursor::new(&self.chunks) }
    }
}

impl PartialEq for StreamMap {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.changes_since(other).next().is_none()
    }
}

impl Eq for StreamMap {}

/// A position in a chunk list.
#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    chunks: &'a [Arc<Vec<Stream>>],
    chunk: usize,
    at: usize,
}

impl<'a> Cursor<'a> {
    const fn new(chunks: &'a [Arc<Vec<Stream>>]) -> Self {
        Self { chunks, chunk: 0, at: 0 }
    }

    fn peek(&self) -> Option<&'a Stream> {
        self.chunks.get(self.chunk).and_then(|c| c.get(self.at))
    }

    fn advance(&mut self) {
        self.at += 1;
        if self.chunks.get(self.chunk).is_some_and(|c| self.at >= c.len()) {
            self.chunk += 1;
            self.at = 0;
        }
    }

    /// The chunk starting here, if the cursor is at the start of one.
    fn whole_chunk(&self) -> Option<&'a Arc<Vec<Stream>>> {
        if self.at == 0 { self.chunks.get(self.chunk) } else { None }
    }

    fn skip_chunk(&mut self) {
        self.chunk += 1;
        self.at = 0;
    }
}

/// The walk behind [`StreamMap::changes_since`].
#[derive(Clone, Debug)]
pub(crate) enum Changes<'a> {
    /// Both maps, chunk by chunk.
    Walk { before: Cursor<'a>, after: Cursor<'a> },
    /// Only the streams the newer map touched since its clean origin.
    Touched {
        before: &'a StreamMap,
        after: &'a StreamMap,
        ids: [Option<StreamId>; TOUCHED],
        next: usize,
        n: usize,
    },
}

/// How one stream compares between two versions; `None` if it did not change.
fn compare<'a>(old: Option<&'a Stream>, new: Option<&'a Stream>) -> Option<StreamChange<'a>> {
    match (old, new) {
        (Some(before), Some(after)) if before != after => Some(StreamChange::Changed { before, after }),
        (Some(old), None) => Some(StreamChange::Removed(old)),
        (None, Some(new)) => Some(StreamChange::Added(new)),
        _ => None,
    }
}

impl<'a> Iterator for Changes<'a> {
    type Item = StreamChange<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::Touched { before, after, ids, next, n } => {
                while *next < *n {
                    let id = ids[*next]?;
                    *next += 1;
                    if let Some(change) = compare(before.get(id), after.get(id)) {
                        return Some(change);
                    }
                }
                None
            }
            Self::Walk { before, after } => loop {
                if let (Some(a), Some(b)) = (before.whole_chunk(), after.whole_chunk())
                    && Arc::ptr_eq(a, b)
                {
                    before.skip_chunk();
                    after.skip_chunk();
                    continue;
                }
                let (old, new) = (before.peek(), after.peek());
                match (old, new) {
                    (None, None) => return None,
                    (Some(o), Some(n)) if o.id() == n.id() => {
                        before.advance();
                        after.advance();
                    }
                    (Some(o), Some(n)) if o.id() < n.id() => {
                        before.advance();
                        return compare(old, None);
                    }
                    (Some(_), None) => {
                        before.advance();
                        return compare(old, None);
                    }
                    _ => {
                        after.advance();
                        return compare(None, new);
                    }
                }
                if let Some(change) = compare(old, new) {
                    return Some(change);
                }
            },
        }
    }
}

#[cfg(test)]
mod tests;
