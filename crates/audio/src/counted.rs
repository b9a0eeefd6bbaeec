//! A source that records the furthest byte read from it, so that a truncated stream can be
//! reported with the byte where it ends, and a stream that gave nothing can be called empty.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use symphonia_core::io::MediaSource;

/// How far into the source the reader got, shared with the [`Counted`] source that the format
/// reader owns.
#[derive(Clone, Debug, Default)]
pub(crate) struct Furthest(Arc<AtomicU64>);

impl Furthest {
    pub(crate) fn furthest(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

pub(crate) struct Counted<'a> {
    inner: Box<dyn MediaSource + 'a>,
    position: u64,
    furthest: Furthest,
}

impl<'a> Counted<'a> {
    pub(crate) fn new(inner: Box<dyn MediaSource + 'a>) -> (Self, Furthest) {
        let furthest = Furthest::default();
        (Counted { inner, position: 0, furthest: furthest.clone() }, furthest)
    }
}

impl std::io::Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.position += n as u64;
        self.furthest.0.fetch_max(self.position, Ordering::Relaxed);
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
