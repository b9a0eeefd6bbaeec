//! A source that watches what its reader reads: the furthest byte (so that a truncated stream
//! can be reported with the byte where it ends, and a stream that gave nothing called empty),
//! the last bytes (to look at the end of an MP3 after its reader stopped), OGG pages (to
//! find those the reader drops) and MP4's index (for the edit lists the reader leaves out).

use std::sync::{Arc, Mutex, MutexGuard};

use symphonia_core::io::MediaSource;

use crate::mp4::{Boxes, Edit};
use crate::ogg::{Lost, Pages};

/// How many of the last bytes read are kept: more than the longest MPEG audio frame (2881
/// bytes for layer III, 4 KB for free-format layer II) with the frame before it.
const TAIL: usize = 16 << 10;

/// How many of the first bytes are kept: Matroska's EBML header and its segment's size.
const HEAD: usize = 256;

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
    boxes: Boxes,
    /// The stream's first bytes, for messages about a container.
    head: Vec<u8>,
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

    /// Whether the stream starts with `magic`.
    pub(crate) fn starts_with(&self, magic: &[u8]) -> bool {
        self.watch().head.starts_with(magic)
    }

    /// Whether a Matroska stream was read to its segment's end, or states no size (a live
    /// recording, which ends where the stream ends).
    pub(crate) fn matroska_read_whole(&self) -> bool {
        let watch = self.watch();
        segment_end(&watch.head).is_none_or(|end| watch.furthest >= end)
    }

    /// Whether the stream is an MP4 whose index was not reached.
    pub(crate) fn mp4_index_missing(&self) -> bool {
        self.watch().boxes.index_missing()
    }

    /// The edit of MP4 track `track`, where the index read so far has one.
    pub(crate) fn mp4_edit(&self, track: u32) -> Option<Edit> {
        self.watch().boxes.edit(track)
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
        watch.boxes.feed(at, bytes);
        if at == 0 && watch.head.is_empty() {
            watch.head.extend_from_slice(&bytes[..n.min(HEAD)]);
        }
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
    /// An MP4 with its index first, and any Matroska file, are read as streams: measuring a
    /// seekable file, symphonia's MP4 reader passes over a media-data box that runs past the
    /// file's end and its Matroska reader refuses a segment that does (or seeks to the index at
    /// the end, past a cut), so a cut file would give no audio at all; read as streams, their
    /// packets are read up to the cut, which the decode loop reports. Neither needs to seek to
    /// decode. The readers ask once the probe has read the file's first bytes, which tell.
    fn is_seekable(&self) -> bool {
        self.inner.is_seekable() && !self.read_as_stream()
    }

    fn byte_len(&self) -> Option<u64> {
        if self.read_as_stream() {
            return None;
        }
        self.inner.byte_len()
    }
}

impl Counted<'_> {
    fn read_as_stream(&self) -> bool {
        let watch = self.seen.watch();
        watch.boxes.index_first() || watch.head.starts_with(&MATROSKA)
    }
}

/// The EBML header's ID, which starts every Matroska and WebM file.
const MATROSKA: [u8; 4] = [0x1A, 0x45, 0xDF, 0xA3];

/// Where a Matroska file's segment ends, from its first bytes: the EBML header element, then
/// the segment element's ID and size. `None` for a size the file leaves unknown (all ones) or
/// first bytes that are not Matroska's.
fn segment_end(head: &[u8]) -> Option<u64> {
    /// An EBML variable-length integer at `at`: its value (marker removed) and length.
    fn vint(head: &[u8], at: usize) -> Option<(u64, usize)> {
        let first = *head.get(at)?;
        let len = first.leading_zeros() as usize + 1;
        if len > 8 {
            return None;
        }
        let mut value = u64::from(first) & (0xFF >> len);
        for i in 1..len {
            value = (value << 8) | u64::from(*head.get(at + i)?);
        }
        let unknown = value == (1u64 << (7 * len)) - 1;
        Some((if unknown { u64::MAX } else { value }, len))
    }
    if !head.starts_with(&MATROSKA) {
        return None;
    }
    let (header_size, len) = vint(head, 4)?;
    let segment = 4 + len + usize::try_from(header_size).ok()?;
    if head.get(segment..segment + 4)? != [0x18, 0x53, 0x80, 0x67] {
        return None;
    }
    let (size, len) = vint(head, segment + 4)?;
    (size != u64::MAX).then(|| (segment + 4 + len) as u64 + size)
}
