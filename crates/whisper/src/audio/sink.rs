//! Where decoded 16 kHz samples go as a decoder produces them: a vector in memory, or a store
//! that moves a long recording out of memory (the native command's temporary file, the
//! browser's origin-private file), so that memory stays flat in the recording's length (an hour
//! is 230 MB of f32 samples).

/// Samples a store keeps in memory before it moves them out: two minutes (7.7 MB), so that
/// clips never leave memory.
pub const IN_MEMORY: usize = 2 * 60 * 16_000;

/// A growing store of 16 kHz samples a decoder writes to.
pub trait SampleSink: Sized {
    /// Appends samples; an error says what failed (the temporary file's disk is full).
    fn push(&mut self, samples: &[f32]) -> Result<(), String>;
    /// Samples stored.
    fn count(&self) -> usize;
    /// Keeps the first `len` samples.
    fn truncate(&mut self, len: usize);
    /// A hint that about `additional` samples follow (a container's frame count: it may lie, so
    /// a failed reservation is ignored).
    fn reserve(&mut self, additional: usize);
    /// The store once every sample is in.
    fn finish(self) -> Result<Self, String>;
}

impl SampleSink for Vec<f32> {
    fn push(&mut self, samples: &[f32]) -> Result<(), String> {
        self.extend_from_slice(samples);
        Ok(())
    }

    fn count(&self) -> usize {
        self.len()
    }

    fn truncate(&mut self, len: usize) {
        Vec::truncate(self, len);
    }

    fn reserve(&mut self, additional: usize) {
        let _ = self.try_reserve_exact(additional);
    }

    fn finish(mut self) -> Result<Self, String> {
        self.shrink_to_fit();
        Ok(self)
    }
}
