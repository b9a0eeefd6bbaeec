//! A source that watches what its reader reads: the furthest byte (so that a truncated stream
//! can be reported with the byte where it ends, and a stream that gave nothing called empty),
//! the last bytes (to look at the end of an MP3 after its reader stopped), and OGG pages (to
//! find those the reader drops).

use std::sync::{Arc, Mutex, MutexGuard};

use symphonia_core::io::MediaSource;

use crate::ogg::{Lost, Pages};

/// How many of the last bytes read are kept: more than the longest MPEG audio frame (2881
/// bytes for layer III, 4 KB for free-format layer II) with the frame before it.
const TAIL: usize = 16 << 10;

/// What the reader has read, shared with the [`Counted`] source that the format reader owns.
#[derive(Clone, Debug, Default)]
pub(crate) struct Seen(Arc<Mutex<Watch>>);

#[derive(Debug, Default)]
struct Watch {
    furthest: u64,
    /// The last bytes read, and the source position just after them.
    tail: Vec<u8>,
    tail_end: u64,
    pages: Pages,
}

impl Seen {
    fn watch(&self) -> MutexGuard<'_, Watch> {
        // A panic while holding the lock leaves plain data; what was recorded stays usable.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn furthest(&self) -> u64 {
        self.watch().furthest
    }

    /// The last bytes of the stream, when the last read reached the furthest byte (the reader
    /// did not seek back after it).
    pub(crate) fn tail(&self) -> Option<Vec<u8>> {
        let watch = self.watch();
        (watch.tail_end == watch.furthest).then(|| watch.tail.clone())
    }

    /// Whether an OGG stream read so far ends after its last page or in damage.
    pub(crate) fn ogg_ends_without_a_cut(&self) -> bool {
        self.watch().pages.ends_without_a_cut()
    }

    /// The OGG pages found missing (none for a stream that is not OGG).
    pub(crate) fn lost_pages(&self) -> Lost {
        self.watch().pages.lost()
    }
}

pub(crate) struct Counted<'a> {
    inner: Box<dyn MediaSource + 'a>,
    position: u64,
    seen: Seen,
}

impl<'a> Counted<'a> {
    pub(crate) fn new(inner: Box<dyn MediaSource + 'a>) -> (Self, Seen) {
        let seen = Seen::default();
        (Counted { inner, position: 0, seen: seen.clone() }, seen)
    }
}

impl std::io::Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 {
            return Ok(0);
        }
        let (at, bytes) = (self.position, &buf[..n]);
        self.position += n as u64;
        let mut watch = self.seen.watch();
        watch.furthest = watch.furthest.max(self.position);
        if watch.tail_end != at {
            watch.tail.clear();
        }
        watch.tail.extend_from_slice(&bytes[n.saturating_sub(TAIL)..]);
        let excess = watch.tail.len().saturating_sub(TAIL);
        watch.tail.drain(..excess);
        watch.tail_end = self.position;
        watch.pages.feed(at, bytes);
        Ok(n)
    }
}

impl std::io::Seek for Counted<'_> {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        self.position = self.inner.seek(pos)?;
        Ok(self.position)
    }
}

impl MediaSource for Counted<'_> {
    fn is_seekable(&self) -> bool {
        self.inner.is_seekable()
    }

    fn byte_len(&self) -> Option<u64> {
        self.inner.byte_len()
    }
}
