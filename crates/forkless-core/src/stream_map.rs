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
    chunks: Arc<Chunks>,
    len: usize,
    /// A token shared by every copy of this map taken since [`Self::mark_clean`].
    clean: Option<Arc<()>>,
    touched: Touched,
}

/// The chunk list, and each chunk's last id beside it: finding a stream's chunk reads one
/// small array rather than two pointers per probe (a new request's stream is looked up
/// several times on its way into the store).
///
/// Invariant: `lasts[c]` is the id of `list[c]`'s last stream.
#[derive(Clone, Debug, Default)]
pub(crate) struct Chunks {
    list: Vec<Arc<Vec<Stream>>>,
    lasts: Vec<StreamId>,
}

impl std::ops::Deref for Chunks {
    type Target = [Arc<Vec<Stream>>];

    fn deref(&self) -> &Self::Target {
        &self.list
    }
}

impl Chunks {
    /// Chunk `c`, to change (copied first if another version shares it); its last id is
    /// read again by [`Self::changed`].
    fn chunk_mut(&mut self, c: usize) -> &mut Vec<Stream> {
        Arc::make_mut(&mut self.list[c])
    }

    /// Chunk `c`'s streams changed: its last id, read again.
    fn changed(&mut self, c: usize) {
        if let Some(last) = self.list[c].last() {
            self.lasts[c] = last.id();
        }
    }

    /// A new chunk at `c` (never an empty one: no chunk is).
    fn insert(&mut self, c: usize, chunk: Vec<Stream>) {
        let Some(last) = chunk.last().map(Stream::id) else { return };
        self.list.insert(c, Arc::new(chunk));
        self.lasts.insert(c, last);
    }

    fn remove(&mut self, c: usize) -> Arc<Vec<Stream>> {
        self.lasts.remove(c);
        self.list.remove(c)
    }
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
        self.chunks.lasts.partition_point(|&last| last < id)
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
        // The id stays: its chunk's last id needs no update.
        Some(&mut Arc::make_mut(&mut self.chunks).chunk_mut(c)[at])
    }

    /// Insert; false if the id is taken.
    pub(crate) fn insert(&mut self, stream: Stream) -> bool {
        let id = stream.id();
        if self.chunks.is_empty() {
            self.touched.add(id);
            Arc::make_mut(&mut self.chunks).insert(0, vec![stream]);
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
            let right = chunks.chunk_mut(c).split_off(CHUNK / 2);
            chunks.changed(c);
            chunks.insert(c + 1, right);
            if at > CHUNK / 2 {
                c += 1;
                at -= CHUNK / 2;
            }
        }
        chunks.chunk_mut(c).insert(at, stream);
        chunks.changed(c);
        self.len += 1;
        true
    }

    pub(crate) fn remove(&mut self, id: StreamId) -> Option<Stream> {
        let (c, at) = self.position(id)?;
        self.touched.add(id);
        let chunks = Arc::make_mut(&mut self.chunks);
        let removed = chunks.chunk_mut(c).remove(at);
        self.len -= 1;
        let left = chunks[c].len();
        if left == 0 {
            chunks.remove(c);
        } else {
            chunks.changed(c);
            if left < CHUNK / 4 {
                // Fold a small chunk into a neighbour so removals do not leave a trail of tiny
                // ones.
                let (a, b) = if c + 1 < chunks.len() { (c, c + 1) } else { (c.saturating_sub(1), c) };
                if a != b && chunks[a].len() + chunks[b].len() <= CHUNK {
                    let tail = chunks.remove(b);
                    chunks.chunk_mut(a).extend(tail.iter().cloned());
                    chunks.changed(a);
                }
            }
        }
        Some(removed)
    }

    /// Remove every stream named in `ids` (sorted, without repeats) in one pass: each chunk
    /// holding one is copied (if shared) and filtered once, where removing them one by one
    /// would look each up and shift its chunk each time. The streams removed, in id order.
    pub(crate) fn remove_sorted(&mut self, ids: &[StreamId]) -> Vec<Stream> {
        let mut removed = Vec::with_capacity(ids.len());
        if ids.is_empty() || self.len == 0 {
            return removed;
        }
        let chunks = Arc::make_mut(&mut self.chunks);
        let (mut rest, mut c) = (ids, 0);
        while c < chunks.len() && !rest.is_empty() {
            let (here, after) = rest.split_at(rest.partition_point(|&id| id <= chunks.lasts[c]));
            rest = after;
            if here.is_empty() || !chunks[c].iter().any(|s| here.binary_search(&s.id()).is_ok()) {
                c += 1;
                continue;
            }
            let (gone, kept): (Vec<Stream>, Vec<Stream>) = std::mem::take(chunks.chunk_mut(c))
                .into_iter()
                .partition(|s| here.binary_search(&s.id()).is_ok());
            for s in &gone {
                self.touched.add(s.id());
            }
            self.len -= gone.len();
            removed.extend(gone);
            if kept.is_empty() {
                chunks.remove(c);
            } else {
                *chunks.chunk_mut(c) = kept;
                chunks.changed(c);
                c += 1;
            }
        }
        // Fold small chunks into their neighbours, as single removals do.
        let mut c = 0;
        while c + 1 < chunks.len() {
            let (a, b) = (chunks[c].len(), chunks[c + 1].len());
            if (a < CHUNK / 4 || b < CHUNK / 4) && a + b <= CHUNK {
                let tail = chunks.remove(c + 1);
                chunks.chunk_mut(c).extend(tail.iter().cloned());
                chunks.changed(c);
            } else {
                c += 1;
            }
        }
        removed
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
                    // Same id (only metadata changes): the chunk's last id stays.
                    Arc::make_mut(&mut self.chunks).chunk_mut(c)[at] = s;
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
