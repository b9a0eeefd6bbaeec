//! The VAD over a live stream: the Silero network run a block (about one second) at a time as
//! the audio comes, its state carried from block to block as over a whole recording, and the
//! speech probabilities of the buffer read as Silero's rule reads them to tell whether the
//! buffer holds speech and whether the speech in it has ended.

use std::collections::VecDeque;

use crate::decode::model::Whisper;
use crate::error::Result;
use crate::vad::Vad;
use crate::vad::network::{CONTEXT, ROW, WINDOW};

/// Windows per run of the network: 256 ms, so a stream knows within a quarter of a second
/// whether what it holds is speech (a recording's one-second blocks would delay every look
/// at the start of speech by up to a second).
pub(crate) const LIVE_WINDOWS: usize = 8;
/// Samples one run of the network takes.
const BLOCK_SAMPLES: usize = LIVE_WINDOWS * WINDOW;

/// What the probabilities from a point of the stream on say.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Speech {
    /// No window is speech.
    None,
    /// Speech from sample `from` of the stream that goes on up to the last window the network
    /// has seen.
    Ongoing { from: usize },
    /// Speech from sample `from` followed by silence at least as long as asked, up to the last
    /// window seen; the silence starts at sample `at` of the stream.
    Ended { from: usize, at: usize },
}

/// How the probabilities are read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SpeechRule {
    /// A window at least this likely is speech.
    pub threshold: f32,
    /// After speech, a window below this starts a silence; between the two, what came before
    /// goes on.
    pub neg_threshold: f32,
    /// Samples of silence that end speech.
    pub min_silence: usize,
}

/// The network's view of the stream so far.
pub(crate) struct SpeechTracker {
    /// The network for blocks of [`LIVE_WINDOWS`], its LSTM state the stream's.
    vad: Option<Vad>,
    /// Samples not yet run, from sample `run_to` of the stream on.
    pending: Vec<f32>,
    run_to: usize,
    /// The last [`CONTEXT`] samples run (the next window's context; zeros at the start).
    context: [f32; CONTEXT],
    /// The probability of every window from window `first` of the stream on.
    probabilities: VecDeque<f32>,
    first: usize,
    rule: SpeechRule,
}

impl SpeechTracker {
    /// A tracker without its network, which [`SpeechTracker::compile`] adds.
    pub fn new(rule: SpeechRule) -> SpeechTracker {
        SpeechTracker {
            vad: None,
            pending: Vec::new(),
            run_to: 0,
            context: [0.0; CONTEXT],
            probabilities: VecDeque::new(),
            first: 0,
            rule,
        }
    }

    /// Compiles the network on `whisper`'s device (again after a lost device: the LSTM state
    /// then starts from zeros at the next block).
    pub async fn compile(&mut self, whisper: &Whisper) -> Result<()> {
        self.vad = Some(whisper.vad_with_windows(LIVE_WINDOWS).await?);
        Ok(())
    }

    /// Takes the stream's next samples.
    pub fn push(&mut self, samples: &[f32]) {
        self.pending.extend_from_slice(samples);
    }

    /// The samples of the stream the network has seen.
    pub fn seen(&self) -> usize {
        self.run_to
    }

    /// Runs the network over every whole block that has come; with `last`, the rest too,
    /// zero-padded (the stream's end).
    pub async fn run(&mut self, whisper: &Whisper, last: bool) -> Result<()> {
        if self.vad.is_none() {
            self.compile(whisper).await?;
        }
        let Some(vad) = self.vad.as_mut() else { return Ok(()) };
        let mut rows = vec![0.0f32; LIVE_WINDOWS * ROW];
        while self.pending.len() >= BLOCK_SAMPLES || (last && !self.pending.is_empty()) {
            let count = self.pending.len().min(BLOCK_SAMPLES);
            let windows = count.div_ceil(WINDOW);
            let mut samples = self.context.to_vec();
            samples.extend_from_slice(&self.pending[..count]);
            samples.resize(CONTEXT + BLOCK_SAMPLES, 0.0);
            for (k, row) in rows.chunks_exact_mut(ROW).enumerate() {
                row.copy_from_slice(&samples[k * WINDOW..k * WINDOW + ROW]);
            }
            let probabilities = vad.block(&rows, self.run_to > 0).await?;
            self.probabilities.extend(&probabilities[..windows]);
            self.context.copy_from_slice(&samples[BLOCK_SAMPLES..BLOCK_SAMPLES + CONTEXT]);
            self.pending.drain(..count);
            self.run_to += windows * WINDOW;
        }
        Ok(())
    }

    /// Forgets the probabilities of the windows before sample `sample` (audio the stream no
    /// longer holds).
    pub fn forget(&mut self, sample: usize) {
        let window = sample / WINDOW;
        while self.first < window && self.probabilities.pop_front().is_some() {
            self.first += 1;
        }
    }

    /// The probabilities kept (bounded by the audio the stream holds).
    pub fn kept(&self) -> usize {
        self.probabilities.len()
    }

    /// What the windows from sample `from` on say, read as Silero's `get_speech_timestamps`:
    /// speech starts at a window at least `threshold` likely; after it a window below
    /// `neg_threshold` starts a silence, which a window at `threshold` again cancels; a
    /// silence of `min_silence` samples ends the speech, whatever comes after it (the next
    /// speech is the next utterance: a slow device's look may find both).
    pub fn speech_from(&self, from: usize) -> Speech {
        let first = (from / WINDOW).max(self.first);
        let mut triggered = None;
        let mut silence_from = None;
        for (w, &p) in self.probabilities.iter().enumerate().skip(first - self.first) {
            let window = self.first + w;
            if p >= self.rule.threshold {
                triggered.get_or_insert(window * WINDOW);
                silence_from = None;
            } else if triggered.is_some() && p < self.rule.neg_threshold && silence_from.is_none() {
                silence_from = Some(window * WINDOW);
            }
            if let (Some(from), Some(at)) = (triggered, silence_from)
                && (window + 1) * WINDOW - at >= self.rule.min_silence
            {
                return Speech::Ended { from, at };
            }
        }
        match triggered {
            None => Speech::None,
            Some(from) => Speech::Ongoing { from },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker(probabilities: &[f32]) -> SpeechTracker {
        let rule = SpeechRule { threshold: 0.5, neg_threshold: 0.35, min_silence: 3 * WINDOW };
        let mut t = SpeechTracker::new(rule);
        t.probabilities.extend(probabilities);
        t.run_to = probabilities.len() * WINDOW;
        t
    }

    #[test]
    fn speech_ends_after_enough_silence_and_between_thresholds_goes_on() {
        assert_eq!(tracker(&[0.1, 0.2, 0.4, 0.1]).speech_from(0), Speech::None);
        assert_eq!(tracker(&[0.1, 0.9, 0.4, 0.4, 0.4, 0.4]).speech_from(0), Speech::Ongoing { from: WINDOW });
        // Silence from window 2, three windows long: ended there.
        let ended = Speech::Ended { from: WINDOW, at: 2 * WINDOW };
        assert_eq!(tracker(&[0.1, 0.9, 0.2, 0.4, 0.1]).speech_from(0), ended);
        // Two windows of silence are not enough.
        assert_eq!(tracker(&[0.9, 0.9, 0.2, 0.1]).speech_from(0), Speech::Ongoing { from: 0 });
        // Speech again cancels the silence; the speech starts at its first window.
        assert_eq!(tracker(&[0.2, 0.9, 0.2, 0.1, 0.8, 0.1, 0.1]).speech_from(0), Speech::Ongoing { from: WINDOW });
        // A silence long enough ends the speech before it, whatever comes after.
        let first = Speech::Ended { from: 0, at: WINDOW };
        assert_eq!(tracker(&[0.9, 0.1, 0.4, 0.1, 0.9, 0.9]).speech_from(0), first);
        assert_eq!(
            tracker(&[0.9, 0.1, 0.4, 0.1, 0.9, 0.9]).speech_from(4 * WINDOW),
            Speech::Ongoing { from: 4 * WINDOW }
        );
        // Reading from later windows on sees only them.
        assert_eq!(tracker(&[0.9, 0.1, 0.1, 0.1, 0.1]).speech_from(WINDOW), Speech::None);
    }

    #[test]
    fn forgotten_windows_are_not_read() {
        let mut t = tracker(&[0.9, 0.9, 0.1, 0.1, 0.1, 0.1]);
        t.forget(2 * WINDOW + 10);
        assert_eq!(t.kept(), 4);
        assert_eq!(t.speech_from(0), Speech::None);
        t.forget(100 * WINDOW);
        assert_eq!(t.kept(), 0);
        assert_eq!(t.speech_from(0), Speech::None);
    }
}
