//! A store that refuses audio past a length: what bounds the decoded length of an upload, whose
//! encoded size says nothing of it (ten hours of digital silence are about 100 KB of FLAC).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use susurrus_whisper::audio::SampleSink;

use crate::SAMPLE_RATE;

/// `inner`, which takes at most `max` samples: the push that would pass it is an error, so the
/// decoding stops there, and the [`Over`] handed out with it says so.
#[derive(Debug)]
pub struct Limited<S> {
    inner: S,
    max: usize,
    over: Arc<AtomicBool>,
}

/// Whether a [`Limited`] store refused audio past its limit (the decoder's error was that).
#[derive(Clone, Debug)]
pub struct Over(Arc<AtomicBool>);

impl Over {
    pub fn hit(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl<S: SampleSink> Limited<S> {
    pub fn new(inner: S, max: usize) -> (Limited<S>, Over) {
        let over = Arc::new(AtomicBool::new(false));
        (Limited { inner, max, over: over.clone() }, Over(over))
    }

    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: SampleSink> SampleSink for Limited<S> {
    fn push(&mut self, samples: &[f32]) -> Result<(), String> {
        if self.inner.count() + samples.len() > self.max {
            self.over.store(true, Ordering::Relaxed);
            return Err(format!(
                "the audio is longer than the limit of {:.0} s",
                self.max as f64 / f64::from(SAMPLE_RATE)
            ));
        }
        self.inner.push(samples)
    }

    fn count(&self) -> usize {
        self.inner.count()
    }

    fn truncate(&mut self, len: usize) {
        self.inner.truncate(len);
    }

    /// A container's stated length is believed only up to the limit.
    fn reserve(&mut self, additional: usize) {
        self.inner.reserve(additional.min(self.max.saturating_sub(self.inner.count())));
    }

    fn finish(self) -> Result<Self, String> {
        let Limited { inner, max, over } = self;
        Ok(Limited { inner: inner.finish()?, max, over })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_up_to_the_limit_pass_and_the_one_past_it_is_refused() {
        let (mut store, over) = Limited::new(Vec::new(), 16_000);
        store.push(&[0.5; 10_000]).unwrap();
        store.push(&[0.5; 6_000]).unwrap();
        assert!(!over.hit());
        assert_eq!(store.push(&[0.5]), Err("the audio is longer than the limit of 1 s".to_string()));
        assert!(over.hit());
        assert_eq!(store.finish().unwrap().into_inner(), vec![0.5; 16_000]);
    }
}
