//! Live transcription: audio pushed in chunks of any size as it is recorded, text coming out
//! as it is spoken.
//!
//! The stream keeps a buffer of the audio since the last point it cut at (at most one 30 s
//! window). Every `hop` seconds of new audio it looks at the buffer again
//! ([`hypothesis`]): the words already committed inside the buffer are given as the start of
//! the transcript, the text committed before the buffer as the prompt, and the model decodes
//! what follows, its words timed from the cross-attention. A word is committed once two
//! consecutive looks agree on it and on everything before it ([`agreement`], LocalAgreement);
//! the rest is the partial text, which the next look may change. Committed words are never
//! taken back.
//!
//! Once the buffer is longer than `trim_after`, it is cut after its last committed sentence
//! (or word), whose tokens move to the prompt. With the VAD ([`speech`], run every 256 ms of
//! audio), a buffer the network found no speech in is dropped without a look (no text is made
//! up in pauses, and a silent stream costs only the network), and a silence of `min_silence`
//! after speech ends the utterance: the buffer up to the silence is looked at once more, all
//! its words are committed, and the buffer starts again after it. A look at new speech starts
//! `speech_pad` before where the network heard it start, wherever the stream's looks fell.
//!
//! What a stream keeps is bounded: the buffer (at most `max_buffer` seconds once the device
//! keeps up with the audio), the prompt (half the text context), the VAD's probabilities over
//! the buffer. The committed text goes out in events and is not kept.

mod agreement;
mod hypothesis;
pub mod replay;
mod speech;

use serde::{Deserialize, Serialize};
use susurrus_core::Error as CoreError;

use crate::constants::SAMPLE_RATE;
use crate::decode::model::Whisper;
use crate::decode::options::TranscribeOptions;
use crate::decode::transcribe::MAX_REOPENS;
use crate::decode::window::{NoiseRng, noise_rng};
use crate::decode::windows::WindowModel;
use crate::decode::words::Word;
use crate::error::{Error, Result};
use crate::vad::network::WINDOW;
use hypothesis::{Hypothesis, LiveWord, Look};
use speech::{LIVE_WINDOWS, Speech, SpeechRule, SpeechTracker};

/// Seconds before the end of a look's audio within which its words do not count towards an
/// agreement: a word cut off by the end of the buffer is often heard as another (tiny.en
/// heard "read the" as "breathed her" in the 5.3 s and 6.3 s looks at a clip, and never so in
/// the whole clip).
const SETTLE: f64 = 0.5;

/// Seconds of audio after an utterance's last word that are not looked at again once the
/// model said it had heard everything (see [`LiveTranscriber::commit_all`]).
const FINISHED_TAIL: f64 = 1.0;

/// The most audio one look decodes: Whisper's window.
const WINDOW_SAMPLES: usize = 30 * SAMPLE_RATE;

/// How a live stream looks, commits and cuts. `Default` gives the defaults below.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct LiveOptions {
    /// How each look decodes: language, task, prompt, beams, temperatures, thresholds. Word
    /// timestamps are needed (on by default here); `clip_timestamps`, `prefix`, `vad` and
    /// `hallucination_silence_threshold` are for whole recordings and are errors here.
    /// Greedy by default (`beam_size` 1) and without temperature fallback (`temperatures`
    /// `[0]`): a stream looks at its buffer every hop, so a look's cost is its latency (the
    /// reference's five samples at each of five temperatures made one look at a noisy buffer
    /// take a minute on two CPU cores), and a short buffer's text often fails the
    /// log-probability threshold, where samples differ from look to look and never agree.
    pub transcribe: TranscribeOptions,
    /// Seconds of new audio between looks (1).
    pub hop: f64,
    /// Drop what the Silero VAD network hears no speech in and end utterances at pauses
    /// (on; the network must be loaded, [`Whisper::load_vad`]).
    pub vad: bool,
    /// Seconds of silence after speech that end an utterance, with the VAD (0.5).
    pub min_silence: f64,
    /// Seconds of audio kept before speech and after its end, with the VAD (0.4, as a
    /// recording's VAD chunks are padded: tiny.en misheard more of an utterance's first and
    /// last words with 0.2, 9.0% against 6.4% word error over two golden clips streamed with
    /// the silence before them 47 samples longer each time, ten times).
    pub speech_pad: f64,
    /// Seconds of buffer after which committed words are cut out of it (20: the golden clips'
    /// committed text was furthest from the offline one with 10, 16.7% against 10.7% word
    /// error, as every cut takes context from the next looks).
    pub trim_after: f64,
    /// Seconds of buffer after which the partial words are committed without waiting for
    /// agreement and the buffer cut after them (25; under Whisper's 30 s window).
    pub max_buffer: f64,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            transcribe: TranscribeOptions {
                beam_size: 1,
                temperatures: vec![0.0],
                word_timestamps: true,
                ..TranscribeOptions::default()
            },
            hop: 1.0,
            vad: true,
            min_silence: 0.5,
            speech_pad: 0.4,
            trim_after: 20.0,
            max_buffer: 25.0,
        }
    }
}

impl LiveOptions {
    /// Checks every option, naming the first that is wrong.
    pub fn validate(&self) -> Result<()> {
        let t = &self.transcribe;
        t.validate()?;
        let whole_recording = |name: &str| Err(Error::bad_option(format!("{name}: not for live streams")));
        if !t.clip_timestamps.is_empty() {
            return whole_recording("clip_timestamps");
        }
        if t.prefix.as_deref().is_some_and(|p| !p.is_empty()) {
            return whole_recording("prefix");
        }
        if t.hallucination_silence_threshold.is_some() {
            return whole_recording("hallucination_silence_threshold");
        }
        if t.vad {
            return Err(Error::bad_option("vad: a live stream's VAD is LiveOptions.vad, not the transcribe options'"));
        }
        if !t.word_timestamps {
            return Err(Error::bad_option("word_timestamps: a live stream needs them (it cuts its buffer at words)"));
        }
        let in_range = |name: &str, value: f64, lo: f64, hi: f64| {
            if value.is_finite() && (lo..=hi).contains(&value) {
                Ok(())
            } else {
                Err(Error::bad_option(format!("{name} must be between {lo} and {hi} seconds, not {value}")))
            }
        };
        in_range("hop", self.hop, 0.1, 10.0)?;
        in_range("min_silence", self.min_silence, 0.1, 10.0)?;
        in_range("speech_pad", self.speech_pad, 0.0, 1.0)?;
        in_range("max_buffer", self.max_buffer, 2.0, 28.0)?;
        in_range("trim_after", self.trim_after, 1.0, self.max_buffer)?;
        Ok(())
    }
}

/// Words of the stream and their times in it (seconds from the first sample pushed).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LiveText {
    /// The words' texts joined (each with its leading space).
    pub text: String,
    pub start: f64,
    pub end: f64,
    pub words: Vec<Word>,
}

/// What a stream says after a look.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum LiveEvent {
    /// The words after the committed ones as the last look heard them; they may change, and
    /// each partial replaces the one before (an empty one clears it).
    Partial(LiveText),
    /// Final words, after those committed before; never taken back.
    Committed(LiveText),
}

/// A live transcription. Push audio as it comes ([`LiveTranscriber::push`]); whenever
/// [`LiveTranscriber::ready`], [`LiveTranscriber::process`] looks at it; at the end,
/// [`LiveTranscriber::finish`] commits what is left. The model is passed to each call, so it
/// stays usable (and can run one stream at a time beside other work).
pub struct LiveTranscriber {
    options: LiveOptions,
    /// The audio from sample `start` of the stream on.
    buffer: Vec<f32>,
    start: usize,
    /// Samples pushed in all, and where the last look ended.
    pushed: usize,
    looked_to: usize,
    /// Committed words whose audio is still in the buffer, each with its span of the decoded
    /// sequence (timestamps included): each look's forced start.
    committed: Vec<LiveWord>,
    /// Tokens of the text committed before the buffer (at most half the text context).
    context: Vec<u32>,
    keep: usize,
    /// The last look's words after the committed ones, and the end of the audio it heard.
    tentative: Vec<LiveWord>,
    heard_to: usize,
    /// The text of the last partial reported.
    partial: String,
    language: Option<String>,
    speech: Option<SpeechTracker>,
    /// The model's first timestamp id and the seconds between timestamps.
    timestamp_begin: u32,
    timestamp_step: f64,
    /// Whether the last call found no speech: then the stream checks again after every
    /// VAD block rather than every hop, so a look follows the start of speech at once.
    listening: bool,
    rng: NoiseRng,
    reopens: usize,
}

impl LiveTranscriber {
    /// A stream on `whisper`, options checked; the VAD network must be loaded when
    /// `options.vad` is on; an initial prompt is encoded now.
    pub fn new(whisper: &Whisper, options: LiveOptions) -> Result<LiveTranscriber> {
        options.validate()?;
        let t = &options.transcribe;
        let speech = if options.vad {
            if !whisper.has_vad() {
                return Err(Error::bad_option(
                    "vad: the Silero VAD network is not loaded (load it, or stream with vad off)",
                ));
            }
            let neg = t.vad_options.neg_threshold.unwrap_or((t.vad_options.threshold - 0.15).max(0.01));
            Some(SpeechTracker::new(SpeechRule {
                threshold: t.vad_options.threshold as f32,
                neg_threshold: neg as f32,
                min_silence: seconds_to_samples(options.min_silence),
            }))
        } else {
            None
        };
        let mut context = Vec::new();
        if let Some(prompt) = t.initial_prompt.as_deref().filter(|p| !p.is_empty()) {
            let ids = whisper.tokenizer().encode(&format!(" {}", prompt.trim()));
            context = ids.map_err(|e| Error::bad_option(format!("initial_prompt: {e}")))?;
        }
        let keep = whisper.config().n_text_ctx / 2 - 1;
        context.drain(..context.len().saturating_sub(keep));
        Ok(LiveTranscriber {
            language: whisper.host().fixed_language(t)?,
            rng: noise_rng(t.seed),
            options,
            buffer: Vec::new(),
            start: 0,
            pushed: 0,
            looked_to: 0,
            committed: Vec::new(),
            context,
            keep,
            tentative: Vec::new(),
            heard_to: 0,
            partial: String::new(),
            timestamp_begin: whisper.tokenizer().special_ids().timestamp_begin,
            timestamp_step: whisper.tokenizer().special_ids().timestamp_step as f64,
            listening: speech.is_some(),
            speech,
            reopens: 0,
        })
    }

    /// Takes the next samples (16 kHz mono). A sample that is not a finite number is an error
    /// naming its time, and nothing of the chunk is taken.
    pub fn push(&mut self, samples: &[f32]) -> Result<()> {
        check_samples(samples, self.pushed as u64, SAMPLE_RATE as u32)?;
        self.buffer.extend_from_slice(samples);
        if let Some(speech) = &mut self.speech {
            speech.push(samples);
        }
        self.pushed += samples.len();
        Ok(())
    }

    /// Whether [`LiveTranscriber::process`] has something to do: a hop of audio since the
    /// last look, or, while the VAD hears no speech, a block of it since the last check.
    pub fn ready(&self) -> bool {
        let wait = if self.listening { LIVE_WINDOWS * WINDOW } else { seconds_to_samples(self.options.hop) };
        self.pushed - self.looked_to >= wait
    }

    /// Seconds of audio pushed so far.
    pub fn pushed_seconds(&self) -> f64 {
        self.pushed as f64 / SAMPLE_RATE as f64
    }

    /// Seconds of audio the stream holds (its buffer).
    pub fn buffered_seconds(&self) -> f64 {
        self.buffer.len() as f64 / SAMPLE_RATE as f64
    }

    /// Tokens the stream keeps as its prompt, and VAD probabilities it keeps: what bounds it.
    pub fn kept(&self) -> (usize, usize) {
        (self.context.len(), self.speech.as_ref().map_or(0, SpeechTracker::kept))
    }

    /// Looks at everything pushed so far: commits what two looks agree on, reports the rest as
    /// partial. A lost device is opened again and the look repeated (at most
    /// [`MAX_REOPENS`] times in a stream).
    pub async fn process(&mut self, whisper: &mut Whisper) -> Result<Vec<LiveEvent>> {
        self.on_device(whisper, false).await
    }

    /// The stream's end: looks at what is left and commits all of it (a window at a time
    /// when a slow device left more than one behind).
    pub async fn finish(&mut self, whisper: &mut Whisper) -> Result<Vec<LiveEvent>> {
        let mut events = Vec::new();
        loop {
            let before = self.start;
            events.extend(self.on_device(whisper, true).await?);
            if self.buffer.is_empty() {
                return Ok(events);
            }
            if self.start == before {
                // A look that took nothing of the rest (shorter than a mel frame): it goes.
                self.cut(self.pushed);
                return Ok(events);
            }
        }
    }

    async fn on_device(&mut self, whisper: &mut Whisper, last: bool) -> Result<Vec<LiveEvent>> {
        loop {
            match self.advance(whisper, last).await {
                Err(Error::Core(CoreError::DeviceLost(_))) if self.reopens < MAX_REOPENS => {
                    self.reopens += 1;
                    whisper.reopen_device().await?;
                    if let Some(speech) = &mut self.speech {
                        speech.compile(whisper).await?;
                    }
                }
                other => return other,
            }
        }
    }

    /// One look (at most; the state changes only after it succeeded, so a look that failed
    /// on a lost device can run again).
    async fn advance(&mut self, whisper: &mut Whisper, last: bool) -> Result<Vec<LiveEvent>> {
        let mut events = Vec::new();
        let pad = seconds_to_samples(self.options.speech_pad);
        if let Some(tracker) = &mut self.speech {
            tracker.run(whisper, last).await?;
            let seen = tracker.seen().min(self.pushed);
            let speech = tracker.speech_from(self.start);
            match speech {
                Speech::None => {
                    // Nothing said in what the network has heard: no look (nothing is made up
                    // in a pause), the words an earlier look found in it were noise, and the
                    // audio goes but for a little before what comes next.
                    self.tentative.clear();
                    self.retire_committed(self.committed.len());
                    self.cut(if last { self.pushed } else { seen.saturating_sub(pad) });
                    self.report_partial(&mut events);
                    self.looked_to = self.pushed;
                    self.listening = true;
                    return Ok(events);
                }
                Speech::Ongoing { from } | Speech::Ended { from, .. } => self.skip_to_speech(from, pad),
            }
            if let Speech::Ended { at, .. } = speech
                && (at + pad).min(seen) <= self.start + WINDOW_SAMPLES
            {
                // The utterance is over: its words are final. (One longer than a window, left
                // behind by a slow device, goes on a window at a time below.)
                let end = (at + pad).min(seen).max(self.start);
                let heard = self.look(whisper, end).await?;
                self.commit_all(heard, end, &mut events);
                self.looked_to = self.pushed;
                return Ok(events);
            }
            self.listening = false;
        }
        if self.buffer.is_empty() {
            self.looked_to = self.pushed;
            return Ok(events);
        }
        let heard = self.look(whisper, self.pushed).await?;
        if last {
            let looked = self.start + self.buffer.len().min(WINDOW_SAMPLES);
            self.commit_all(heard, looked, &mut events);
        } else {
            let mut words = heard.words;
            let tentative = self.tentative.iter().map(|w| w.word.word.as_str());
            let agreed = agreement::agreed(tentative, words.iter().map(|w| w.word.word.as_str()));
            // Only words the earlier look heard whole count as agreed.
            let settled = self.heard_to as f64 / SAMPLE_RATE as f64 - SETTLE;
            let agreed = words[..agreed].iter().take_while(|w| w.word.end <= settled).count();
            self.heard_to = self.pushed;
            self.tentative = words.split_off(agreed);
            self.commit(words, &mut events);
            self.trim(&mut events);
        }
        self.report_partial(&mut events);
        self.looked_to = self.pushed;
        Ok(events)
    }

    /// Drops the silence before speech that starts at sample `from`, but for `pad` samples, so
    /// that an utterance is looked at from where the VAD heard it start, as a recording's VAD
    /// chunks are, wherever the looks fell while the stream listened (tiny.en's words change
    /// with where the window starts: "goats wander out" heard as "boat swung around" with the
    /// silence before a clip cut 32 ms apart). Nothing goes while committed words are in the
    /// buffer: they are the utterance's.
    fn skip_to_speech(&mut self, from: usize, pad: usize) {
        if self.committed.is_empty() {
            self.cut(from.saturating_sub(pad));
        }
    }

    /// Looks at the buffer up to sample `end` of the stream (at most one window).
    async fn look(&mut self, whisper: &mut Whisper, end: usize) -> Result<Hypothesis> {
        let len = end.saturating_sub(self.start).min(self.buffer.len()).min(WINDOW_SAMPLES);
        let committed: Vec<u32> = self.committed.iter().flat_map(|w| w.tokens.iter().copied()).collect();
        let look = Look {
            samples: &self.buffer[..len],
            offset: self.start as f64 / SAMPLE_RATE as f64,
            context: &self.context,
            committed: &committed,
            language: self.language.as_deref(),
            options: &self.options.transcribe,
        };
        let hypothesis = whisper.look(&look, &mut self.rng).await?;
        self.language.get_or_insert(hypothesis.language.clone());
        Ok(hypothesis)
    }

    /// Commits `words` (reported as one event).
    fn commit(&mut self, words: Vec<LiveWord>, events: &mut Vec<LiveEvent>) {
        if let Some(text) = live_text(words.iter().map(|w| &w.word)) {
            events.push(LiveEvent::Committed(text));
        }
        self.committed.extend(words);
    }

    /// Commits all of a look's new words (a look at an utterance's or the stream's end) and
    /// cuts the buffer after the last of them, so that the audio after it is looked at again
    /// (the model may end its text at a segment boundary before the audio's end, as a window
    /// of the reference's seek loop does, or stop short on a slow device's long buffer) —
    /// unless the model said it had heard all there is and less than [`FINISHED_TAIL`] is
    /// left up to `looked`: then the buffer is cut at `looked`. (Looked at again, the last
    /// 0.6 s of a clip gave a sentence of the prompt, "It is a text on your own computer.",
    /// and the last 0.24 s of another " you" 200 times.)
    fn commit_all(&mut self, heard: Hypothesis, looked: usize, events: &mut Vec<LiveEvent>) {
        self.tentative.clear();
        self.commit(heard.words, events);
        self.report_partial(events);
        let end = self.committed.last().map_or(self.start, |w| seconds_to_samples(w.word.end));
        if heard.heard_all && looked.saturating_sub(end) < seconds_to_samples(FINISHED_TAIL) {
            self.retire_committed(self.committed.len());
            self.cut(looked);
        } else {
            self.restart_after_committed(looked);
        }
    }

    /// Moves every committed word to the prompt and starts the buffer after the last of them
    /// (at `otherwise` when none is in the buffer).
    fn restart_after_committed(&mut self, otherwise: usize) {
        let end = self.committed.last().map(|w| seconds_to_samples(w.word.end)).filter(|&end| end > self.start);
        self.retire_committed(self.committed.len());
        self.cut(end.unwrap_or(otherwise));
    }

    /// Reports the partial words when they changed since the last report.
    fn report_partial(&mut self, events: &mut Vec<LiveEvent>) {
        let text: String = self.tentative.iter().map(|w| w.word.word.as_str()).collect();
        if text == self.partial {
            return;
        }
        self.partial.clone_from(&text);
        let now = self.pushed as f64 / SAMPLE_RATE as f64;
        let text = live_text(self.tentative.iter().map(|w| &w.word)).unwrap_or(LiveText {
            text,
            start: now,
            end: now,
            words: Vec::new(),
        });
        events.push(LiveEvent::Partial(text));
    }

    /// Cuts the buffer after committed words: when the look found nothing after them, or once
    /// the buffer is long: after its last committed sentence (else its last
    /// committed word) past `trim_after`; past `max_buffer`, the partial words are committed
    /// too (no agreement came in time) and the buffer is cut after them, or to the last
    /// `speech_pad` when it has no words at all.
    fn trim(&mut self, events: &mut Vec<LiveEvent>) {
        // A look that heard nothing after the committed words while a second more came: the
        // model ended its text at them (as at a segment boundary); the next look starts after
        // them, with them as the prompt.
        let committed_end = self.committed.last().map(|w| seconds_to_samples(w.word.end));
        if self.tentative.is_empty() && committed_end.is_some_and(|end| self.pushed > end + SAMPLE_RATE) {
            self.restart_after_committed(self.start);
        }
        let held = self.pushed - self.start;
        if held > seconds_to_samples(self.options.trim_after) && !self.committed.is_empty() {
            let last = self.committed.len() - 1;
            let k = self.committed.iter().rposition(|w| ends_sentence(&w.word.word)).unwrap_or(last);
            let end = seconds_to_samples(self.committed[k].word.end);
            self.retire_committed(k + 1);
            self.cut(end);
        }
        if self.pushed - self.start > seconds_to_samples(self.options.max_buffer) {
            let words = std::mem::take(&mut self.tentative);
            self.commit(words, events);
            let pad = seconds_to_samples(self.options.speech_pad);
            // Without words, the audio the look heard goes (not more: a slow device may have
            // left more than a window behind).
            let heard = (self.start + WINDOW_SAMPLES).min(self.pushed.saturating_sub(pad));
            let end = match self.committed.last().map(|w| seconds_to_samples(w.word.end)) {
                Some(end) if end > self.start => end,
                _ => heard,
            };
            self.retire_committed(self.committed.len());
            self.cut(end);
        }
    }

    /// Moves the first `count` committed words out of the forced start into the prompt.
    fn retire_committed(&mut self, count: usize) {
        for word in self.committed.drain(..count) {
            self.context.extend_from_slice(&word.tokens);
        }
        self.context.drain(..self.context.len().saturating_sub(self.keep));
    }

    /// Drops the buffer's audio before sample `sample` of the stream (clamped to what it holds).
    /// The committed words left in the buffer keep their timestamps, moved to its new start.
    fn cut(&mut self, sample: usize) {
        let sample = sample.clamp(self.start, self.pushed);
        let steps = ((sample - self.start) as f64 / SAMPLE_RATE as f64 / self.timestamp_step).round() as u32;
        let tb = self.timestamp_begin;
        for token in self.committed.iter_mut().flat_map(|w| w.tokens.iter_mut()).filter(|t| **t >= tb) {
            *token = tb + (*token - tb).saturating_sub(steps);
        }
        self.buffer.drain(..sample - self.start);
        self.start = sample;
        if let Some(speech) = &mut self.speech {
            speech.forget(sample);
        }
    }
}

/// Checks a chunk of a stream before it is taken: every sample a finite number. `first` is the
/// chunk's first frame in the stream at `rate` Hz, so the error names the sample and its time
/// (a browser stream checks its chunks at the microphone's rate, before resampling).
pub fn check_samples(samples: &[f32], first: u64, rate: u32) -> Result<()> {
    match samples.iter().position(|s| !s.is_finite()) {
        None => Ok(()),
        Some(k) => {
            let i = first + k as u64;
            Err(Error::BadAudio(format!(
                "sample {i} ({:.3} s) of the stream is {}; audio must be finite numbers",
                i as f64 / f64::from(rate),
                samples[k]
            )))
        }
    }
}

/// Whether a word ends a sentence.
pub fn ends_sentence(word: &str) -> bool {
    word.trim_end_matches(['"', '\'', ')', '\u{201d}']).ends_with(['.', '?', '!', '\u{3002}', '\u{ff1f}', '\u{ff01}'])
}

fn seconds_to_samples(seconds: f64) -> usize {
    (seconds * SAMPLE_RATE as f64).round().max(0.0) as usize
}

/// The words as one text with their span; `None` for no words.
fn live_text<'a>(words: impl Iterator<Item = &'a Word> + Clone) -> Option<LiveText> {
    let first = words.clone().next()?;
    let last = words.clone().last()?;
    Some(LiveText {
        text: words.clone().map(|w| w.word.as_str()).collect(),
        start: first.start,
        end: last.end,
        words: words.cloned().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_end_at_their_marks_before_closing_quotes() {
        assert!(ends_sentence(" field."));
        assert!(ends_sentence(" now?\""));
        assert!(ends_sentence(" 終わり。"));
        assert!(!ends_sentence(" train,"));
        assert!(!ends_sentence(" Mr"));
    }

    #[test]
    fn options_for_whole_recordings_are_errors() {
        let bad = |f: fn(&mut LiveOptions)| {
            let mut o = LiveOptions::default();
            f(&mut o);
            o.validate().unwrap_err().to_string()
        };
        assert!(LiveOptions::default().validate().is_ok());
        assert!(bad(|o| o.transcribe.clip_timestamps = vec![1.0]).contains("clip_timestamps: not for live streams"));
        assert!(bad(|o| o.transcribe.prefix = Some("x".into())).contains("prefix: not for live streams"));
        assert!(bad(|o| o.transcribe.vad = true).contains("LiveOptions.vad"));
        assert!(bad(|o| o.transcribe.word_timestamps = false).contains("word_timestamps"));
        assert!(bad(|o| o.hop = 0.0).contains("hop must be between 0.1 and 10 seconds, not 0"));
        assert!(bad(|o| o.max_buffer = 40.0).contains("max_buffer"));
        assert!(bad(|o| o.trim_after = 26.0).contains("trim_after must be between 1 and 25 seconds"));
        assert!(bad(|o| o.min_silence = f64::NAN).contains("min_silence"));
    }

    #[test]
    fn events_are_json_objects_with_their_type() {
        let word = Word { start: 1.0, end: 1.5, word: " Hello".into(), probability: 0.9 };
        let text = live_text([word].iter()).unwrap();
        let json = serde_json::to_value(LiveEvent::Committed(text)).unwrap();
        assert_eq!(json["type"], "committed");
        assert_eq!(json["text"], " Hello");
        assert_eq!((json["start"].as_f64(), json["end"].as_f64()), (Some(1.0), Some(1.5)));
    }
}
