//! Long-form transcription: the seek loop over 30 s windows, segments between timestamp
//! pairs, the previous text as prompt, the no-speech skip — the reference `transcribe()`.
//!
//! The recording's log-mel (with 160 zero samples appended, as the reference does) is
//! computed a window at a time: its maximum in one pass first, then each window of up to
//! 3000 frames at `seek`, zero-padded, when the encoder needs it (bit for bit the frames of
//! the whole spectrogram, without holding it).
//! After a window, `seek` moves to the last closed timestamp pair (the text after it is
//! decoded again with the next window) or past the whole window.

use std::ops::ControlFlow;

use susurrus_core::Error as CoreError;

use crate::audio::{Audio, Pcm, SCAN_BLOCK};
use crate::constants::HOP_LENGTH;
use crate::decode::checkpoint::{Checkpoint, Resume, rng_position, set_rng_position};
use crate::decode::hallucination::{Guard, WindowTimes, guard};
use crate::decode::model::Whisper;
use crate::decode::options::{Task, TranscribeOptions};
use crate::decode::window::{Decoded, NoiseRng, noise_rng};
use crate::decode::windows::{DecodeRequest, Host, WindowModel};
use crate::decode::words::{Draft, Weights, Word, add_word_timestamps, find_alignment};
use crate::error::{Error, Result};
use crate::text::tokenizer::SpecialTokens;
use crate::vad::{TimeMap, collect, speech_chunks};
use susurrus_core::tensor::Tensor;

use crate::constants::{FRAMES_PER_SECOND, SAMPLE_RATE};

/// Zero samples the reference appends before computing the log-mel.
pub(crate) const TAIL_PADDING: usize = 160;
/// Mel frames per encoder position (the encoder's second convolution has stride 2).
const INPUT_STRIDE: usize = 2;

/// A piece of the transcript between two timestamps. Its serde (every field) is the state
/// handed to another process; users see it in JSON as [`crate::decode::view::SegmentView`] shows it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Segment {
    /// Start and end in seconds from the start of the audio.
    pub start: f64,
    pub end: f64,
    pub text: String,
    /// The segment's tokens, its timestamp tokens included.
    pub tokens: Vec<u32>,
    /// The window's average token log-probability.
    pub avg_logprob: f64,
    /// The window's probability of no speech.
    pub no_speech_prob: f32,
    /// The temperature the window was decoded at.
    pub temperature: f32,
    /// The window's text compression ratio.
    pub compression_ratio: f64,
    /// The mel frame the window started at.
    pub seek: usize,
    /// The segment's words with their times, when word timestamps were asked for.
    pub words: Option<Vec<Word>>,
}

/// The result of a transcription.
#[derive(Clone, Debug, PartialEq)]
pub struct Transcript {
    pub segments: Vec<Segment>,
    /// The segments' texts joined.
    pub text: String,
    /// The language code decoded in.
    pub language: String,
    /// The detected language's probability among all languages; 1 when the language was
    /// given (or the model is English-only).
    pub language_probability: f32,
    /// Seconds of audio.
    pub duration: f64,
}

/// What a transcription reports while it runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Event<'a> {
    /// A segment was decoded.
    Segment(&'a Segment),
    /// Seconds of audio done out of the total.
    Progress { done: f64, total: f64 },
    /// The device was lost (`reason`, as the driver or browser said it); a new one is being
    /// opened and the transcription goes on from `resume_at` seconds of the recording, the
    /// start of the window in work (segments already reported stand; the rest comes out as
    /// it would have).
    DeviceLost { reason: &'a str, resume_at: f64 },
    /// A window is done (its segments reported): where the transcription stands, for a
    /// caller that may have to go on in another process ([`Whisper::transcribe_resuming`]).
    Checkpoint(&'a Checkpoint),
}

/// Lost devices one transcription opens a new device after; the next loss is its error (a
/// device lost on every window does not come back by trying again).
pub const MAX_REOPENS: usize = 3;

/// Checks the audio, a block at a time: any length (empty gives an empty transcript), finite
/// samples only.
fn check_audio(audio: &dyn Audio) -> Result<()> {
    for start in (0..audio.len()).step_by(SCAN_BLOCK) {
        let block = audio.read_range(start, (start + SCAN_BLOCK).min(audio.len()))?;
        if let Some(k) = block.iter().position(|s| !s.is_finite()) {
            let i = start + k;
            return Err(Error::BadAudio(format!(
                "sample {i} ({:.3} s) is {}; audio must be finite numbers",
                i as f64 / SAMPLE_RATE as f64,
                block[k]
            )));
        }
    }
    Ok(())
}

impl Whisper {
    /// Transcribes 16 kHz mono samples in memory: [`Whisper::transcribe_audio`] of them.
    pub async fn transcribe(
        &mut self,
        pcm: &[f32],
        options: &TranscribeOptions,
        on_event: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<Transcript> {
        self.transcribe_audio(&Pcm(pcm), options, on_event).await
    }

    /// Transcribes 16 kHz mono audio, read a window at a time (memory holds the windows in
    /// work, not the recording). `on_event` sees each segment as soon as it is decoded and the
    /// progress after every window; returning `ControlFlow::Break` from it stops the work with
    /// [`Error::CANCELLED`] (the model stays usable).
    ///
    /// With `options.vad` only the speech the VAD network finds is transcribed, as
    /// faster-whisper's `vad_filter`: the speech stretches joined, transcribed as one
    /// recording, and every time mapped back to the recording (rounded to 0.01 s, as the
    /// reference). The network must be loaded ([`Whisper::load_vad`]).
    pub async fn transcribe_audio(
        &mut self,
        audio: &dyn Audio,
        options: &TranscribeOptions,
        on_event: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<Transcript> {
        self.transcribe_resuming(audio, options, &Resume::default(), on_event).await
    }

    /// [`Whisper::transcribe_audio`] from where `resume` says an earlier run of the same
    /// audio and options stood: after its checkpoint, the windows (and segments) that run
    /// would have gone on with; the transcript holds the segments from there on. With the
    /// VAD, the network runs again (the speech it finds is the same).
    pub async fn transcribe_resuming(
        &mut self,
        audio: &dyn Audio,
        options: &TranscribeOptions,
        resume: &Resume,
        on_event: &mut dyn FnMut(Event) -> ControlFlow<()>,
    ) -> Result<Transcript> {
        options.validate()?;
        check_audio(audio)?;
        let duration = audio.len() as f64 / SAMPLE_RATE as f64;
        if !options.vad {
            return transcribe_speech(self, audio, options, None, resume, on_event).await;
        }
        let mut resume = resume.clone();
        let reopens = &mut resume.devices_lost;
        let probabilities = loop {
            let vad = self.vad.as_mut().ok_or_else(|| {
                Error::bad_option("vad: the Silero VAD network is not loaded (load it before transcribing with vad)")
            })?;
            // Cancellation points while the network runs; no audio is transcribed yet.
            let mut on_block = |_: usize| on_event(Event::Progress { done: 0.0, total: duration });
            match vad.probabilities(audio, &mut on_block).await {
                Ok(probabilities) => break probabilities,
                Err(error) => reopen_after(self, error, reopens, 0.0, on_event).await?,
            }
        };
        let chunks = speech_chunks(&probabilities, audio.len(), &options.vad_options);
        let speech = collect(audio, &chunks);
        let map = (!chunks.is_empty()).then(|| TimeMap::new(&chunks));
        let mut transcript = transcribe_speech(self, &speech, options, map.as_ref(), &resume, on_event).await?;
        transcript.duration = duration;
        Ok(transcript)
    }
}

/// Transcribes 16 kHz mono `audio` on any [`WindowModel`] (a server's [`crate::decode::batch::RemoteModel`]),
/// as [`Whisper::transcribe_audio`] does on its own program; without the VAD, which needs the
/// model's network.
pub async fn transcribe_on<M: WindowModel>(
    model: &mut M,
    audio: &dyn Audio,
    options: &TranscribeOptions,
    on_event: &mut dyn FnMut(Event) -> ControlFlow<()>,
) -> Result<Transcript> {
    options.validate()?;
    if options.vad {
        return Err(Error::bad_option("vad: this model has no VAD network"));
    }
    check_audio(audio)?;
    transcribe_speech(model, audio, options, None, &Resume::default(), on_event).await
}

/// Transcribes `audio` (checked); `map`, when given, maps segment and word times from
/// `audio` (the joined speech) back to the recording before they are reported. `resume`:
/// the checkpoint to go on from, and the devices already lost in this transcription.
///
/// A lost device is opened again ([`reopen_after`]) and the window in work runs
/// again from the state it started with (its seek, the pause rule's last speech, the
/// fallback's random numbers): decoding is deterministic, so the transcript is the one an
/// undisturbed run gives.
pub(crate) async fn transcribe_speech<M: WindowModel>(
    model: &mut M,
    audio: &dyn Audio,
    options: &TranscribeOptions,
    map: Option<&TimeMap>,
    resume: &Resume,
    on_event: &mut dyn FnMut(Event) -> ControlFlow<()>,
) -> Result<Transcript> {
    let mut reopens = resume.devices_lost;
    let checkpoint = resume.checkpoint.as_ref();
    let duration = audio.len() as f64 / SAMPLE_RATE as f64;
    model.prepare(options).await?;
    let host = model.host();
    let ids = host.tokenizer.special_ids().clone();
    let config = host.config.clone();

    // A copy of the front end (its plan and filterbank, a few kilobytes) for the
    // spectrogram to read from while the model runs.
    let front_end = host.mel.clone();
    let mel = front_end.spectrogram(audio, TAIL_PADDING)?;
    let content_frames = audio.len() / HOP_LENGTH;
    let n_frames = config.n_frames();
    let frame_seconds = HOP_LENGTH as f64 / SAMPLE_RATE as f64;
    let time_precision = ids.timestamp_step as f64;
    let clips = seek_clips(&options.clip_timestamps, content_frames);

    let mut all_tokens: Vec<u32> = Vec::new();
    if let Some(checkpoint) = checkpoint {
        all_tokens.clone_from(&checkpoint.previous);
    } else if let Some(prompt) = &options.initial_prompt {
        let ids = model.host().tokenizer.encode(&format!(" {}", prompt.trim()));
        all_tokens.extend(ids.map_err(|e| Error::bad_option(format!("initial_prompt: {e}")))?);
    }
    // Empty texts are none, as the reference's truth tests make them; hotwords go
    // unused with a prefix.
    let encode = |text: &Option<String>, what: &str| -> Result<Option<Vec<u32>>> {
        let Some(text) = text.as_deref().filter(|t| !t.is_empty()) else { return Ok(None) };
        let mut ids = model
            .host()
            .tokenizer
            .encode(&format!(" {}", text.trim()))
            .map_err(|e| Error::bad_option(format!("{what}: {e}")))?;
        // At most half the context, as the reference cuts them.
        if ids.len() >= config.n_text_ctx / 2 {
            ids.truncate(config.n_text_ctx / 2 - 1);
        }
        Ok(Some(ids))
    };
    let prefix = encode(&options.prefix, "prefix")?;
    let hotwords = if prefix.is_some() { None } else { encode(&options.hotwords, "hotwords")? };
    let mut prompt_reset_since = 0;
    let mut segments: Vec<Segment> = Vec::new();
    let mut rng = noise_rng(options.seed);
    if let Some(checkpoint) = checkpoint {
        set_rng_position(&mut rng, checkpoint.rng_position);
    }

    // The window the encoder holds, as (start, frames).
    let mut encoded = None;
    let fixed = match checkpoint {
        Some(checkpoint) => Some((checkpoint.language.clone(), checkpoint.language_probability)),
        None => model.host().fixed_language(options)?.map(|language| (language, 1.0)),
    };
    let (language, language_probability) = match fixed {
        Some(fixed) => fixed,
        None if content_frames == 0 => ("en".to_string(), 1.0),
        None => {
            // The reference detects on the first 3000 frames of the whole log-mel from
            // the first clip's start, the frame of the appended padding included, where
            // the first window stops at the content: for audio under 30 s the two differ
            // by that one frame.
            let start = options.clip_timestamps.first().map_or(0.0, |t| t * FRAMES_PER_SECOND);
            let start = if start < content_frames as f64 { start as usize } else { 0 };
            let frames = (mel.frames() - start).min(n_frames);
            let window = mel.window(start, frames, n_frames)?;
            loop {
                match model.detect_language(&window, true).await {
                    Ok(detected) => {
                        encoded = Some((start, frames));
                        break detected;
                    }
                    Err(error) => {
                        let at = recording_time(map, start as f64 * frame_seconds);
                        reopen_after(model, error, &mut reopens, at, on_event).await?;
                    }
                }
            }
        }
    };
    let sot_sequence = model.host().sot_sequence(&language, options.task)?;

    // Where speech last ended (word timestamps' pause rule).
    let mut last_speech = checkpoint.map_or(0.0, |c| c.last_speech);
    let mut clip = checkpoint.map_or(0, |c| c.clip);
    let mut seek = checkpoint.map_or(clips[0].0, |c| c.seek);
    // Where the loop stands after a window, as a checkpoint.
    let keep = config.n_text_ctx / 2 - 1;
    let stands = |clip: usize, seek: usize, last_speech: f64, rng: &NoiseRng, previous: &[u32]| Checkpoint {
        clip,
        seek,
        last_speech,
        rng_position: rng_position(rng),
        previous: previous[previous.len().saturating_sub(keep)..].to_vec(),
        language: language.clone(),
        language_probability,
    };
    while let Some(&(clip_start, clip_end)) = clips.get(clip) {
        let clip_end = clip_end.min(content_frames);
        seek = seek.max(clip_start);
        if seek >= clip_end {
            clip += 1;
            if let Some(next) = clips.get(clip) {
                seek = next.0;
            }
            continue;
        }
        let time_offset = seek as f64 * frame_seconds;
        let segment_size = n_frames.min(content_frames - seek).min(clip_end - seek);
        let segment_duration = segment_size as f64 * frame_seconds;
        // What the window starts from, restored when it runs again on a new device.
        let resume = (seek, last_speech, rng.clone());
        // A step on the device; a lost one is opened again and the window started over.
        macro_rules! on_device {
            ($step:expr) => {
                match $step {
                    Ok(value) => value,
                    Err(error) => {
                        let at = recording_time(map, time_offset);
                        reopen_after(model, error, &mut reopens, at, on_event).await?;
                        (seek, last_speech, rng) = resume;
                        encoded = None;
                        continue;
                    }
                }
            };
        }
        let window = mel.window(seek, segment_size, n_frames)?;
        let fresh = encoded != Some((seek, segment_size));

        let previous = &all_tokens[prompt_reset_since..];
        let mut prompt = Vec::new();
        if !previous.is_empty() || hotwords.is_some() {
            prompt.push(ids.start_of_prev);
            prompt.extend(hotwords.iter().flatten());
            prompt.extend_from_slice(&previous[previous.len().saturating_sub(keep)..]);
        }
        let sot = prompt.len();
        prompt.extend_from_slice(&sot_sequence);
        if !options.timestamps {
            prompt.push(ids.no_timestamps);
        }
        // The first window's transcript starts with the prefix (the reference's `seek == 0`).
        let mut forced = Vec::new();
        if let Some(prefix) = prefix.as_ref().filter(|_| seek == 0) {
            if options.timestamps {
                forced.push(ids.timestamp_begin);
            }
            forced.extend_from_slice(prefix);
        }
        prompt.extend_from_slice(&forced);

        let request = DecodeRequest { prompt: &prompt, sot, forced: &forced, options };
        let result = on_device!(model.decode(&window, fresh, &request, &mut rng).await);
        encoded = Some((seek, segment_size));
        if is_silence(&result, options, time_offset)? {
            seek += segment_size;
            let stand = stands(clip, seek, last_speech, &rng, &all_tokens[prompt_reset_since..]);
            window_done(on_event, &stand, content_frames, frame_seconds)?;
            continue;
        }

        let window_seek = seek;
        let (mut pieces, mut next_seek) = split_segments(
            &result.tokens,
            ids.timestamp_begin,
            seek,
            segment_size,
            segment_duration,
            time_offset,
            time_precision,
        );
        let mut drafts: Vec<Draft> = pieces
            .iter()
            .map(|(start, end, tokens)| Draft {
                start: *start,
                end: *end,
                text_tokens: tokens.iter().copied().filter(|&t| t < ids.end_of_text).collect(),
                words: Vec::new(),
                word_tokens: Vec::new(),
            })
            .collect();
        if options.word_timestamps {
            let text = WindowText { sot_sequence: &sot_sequence, language: &language, frames: segment_size };
            on_device!(time_words(model, (&window, false), &mut drafts, &text, time_offset, last_speech).await);
            let n = result.tokens.len();
            let single_ending =
                n >= 2 && result.tokens[n - 2] < ids.timestamp_begin && result.tokens[n - 1] >= ids.timestamp_begin;
            if let Some(end) = last_end(&drafts).filter(|&end| !single_ending && end > time_offset) {
                next_seek = (end * FRAMES_PER_SECOND).round_ties_even() as usize;
            }
            if let Some(threshold) = options.hallucination_silence_threshold {
                let times = WindowTimes {
                    offset: time_offset,
                    duration: segment_duration,
                    full_end: (seek + n_frames) as f64 * frame_seconds,
                    content: content_frames as f64 * frame_seconds,
                    last_speech,
                };
                match guard(&drafts, threshold, &times, content_frames) {
                    Guard::Keep => {}
                    Guard::SkipLeading { gap } => {
                        seek = window_seek + (gap * FRAMES_PER_SECOND).round_ties_even() as usize;
                        let stand = stands(clip, seek, last_speech, &rng, &all_tokens[prompt_reset_since..]);
                        window_done(on_event, &stand, content_frames, frame_seconds)?;
                        continue;
                    }
                    Guard::Cut { index, seek } => {
                        drafts.truncate(index);
                        pieces.truncate(index);
                        next_seek = seek;
                    }
                }
            }
            last_speech = last_end(&drafts).unwrap_or(last_speech);
        }
        seek = next_seek;
        for ((_, _, tokens), draft) in pieces.into_iter().zip(drafts) {
            let text = model.host().tokenizer.decode(&draft.text_tokens, SpecialTokens::Skip)?;
            if draft.start == draft.end || text.trim().is_empty() {
                continue;
            }
            all_tokens.extend_from_slice(&tokens);
            let words = options.word_timestamps.then(|| draft.words.clone());
            let mut segment = segment_of(&result, &draft, text, tokens, window_seek, words);
            end_by(&mut segment, duration);
            if let Some(map) = map {
                restore_times(&mut segment, map);
            }
            if on_event(Event::Segment(&segment)).is_break() {
                return Err(Error::CANCELLED);
            }
            segments.push(segment);
        }
        if !options.condition_on_previous_text || result.temperature > options.prompt_reset_on_temperature {
            prompt_reset_since = all_tokens.len();
        }
        let stand = stands(clip, seek, last_speech, &rng, &all_tokens[prompt_reset_since..]);
        window_done(on_event, &stand, content_frames, frame_seconds)?;
    }
    let text = segments.iter().map(|s| s.text.as_str()).collect();
    Ok(Transcript { segments, text, language, language_probability, duration })
}

/// What follows `error` from a step on the device: a lost device (fewer than
/// [`MAX_REOPENS`] times in this transcription) is reported as [`Event::DeviceLost`] and
/// replaced by a new one with the model compiled on it, and the caller runs the step again;
/// any other error is returned as it is.
pub(crate) async fn reopen_after<M: WindowModel>(
    model: &mut M,
    error: Error,
    reopens: &mut usize,
    resume_at: f64,
    on_event: &mut dyn FnMut(Event) -> ControlFlow<()>,
) -> Result<()> {
    let Error::Core(CoreError::DeviceLost(reason)) = &error else { return Err(error) };
    if *reopens == MAX_REOPENS {
        return Err(Error::Core(CoreError::DeviceLost(format!(
            "{reason} (the device was lost {} times in this transcription; not opening another)",
            MAX_REOPENS + 1
        ))));
    }
    *reopens += 1;
    if on_event(Event::DeviceLost { reason, resume_at }).is_break() {
        return Err(Error::CANCELLED);
    }
    model.reopen().await
}

/// Reports a finished window: where the transcription stands, then the progress.
fn window_done(
    on_event: &mut dyn FnMut(Event) -> ControlFlow<()>,
    stand: &Checkpoint,
    content_frames: usize,
    frame_seconds: f64,
) -> Result<()> {
    if on_event(Event::Checkpoint(stand)).is_break() {
        return Err(Error::CANCELLED);
    }
    let done = stand.seek.min(content_frames) as f64 * frame_seconds;
    let total = content_frames as f64 * frame_seconds;
    if on_event(Event::Progress { done, total }).is_break() {
        return Err(Error::CANCELLED);
    }
    Ok(())
}

impl Host<'_> {
    /// `<|startoftranscript|>`, then on multilingual models the language and task tokens.
    pub fn sot_sequence(&self, language: &str, task: Task) -> Result<Vec<u32>> {
        let ids = self.tokenizer.special_ids();
        let mut seq = vec![ids.start_of_transcript];
        if self.config.is_multilingual() {
            let lang = self
                .tokenizer
                .language_id(language)
                .ok_or_else(|| Error::bad_option(format!("language '{language}' is not one this model knows")))?;
            seq.push(lang);
            seq.push(match task {
                Task::Transcribe => ids.transcribe,
                Task::Translate => ids.translate,
            });
        }
        Ok(seq)
    }
}

/// Whether a decoded window is silence, as the reference skips one: its no-speech probability
/// above the threshold and its average log-probability not above its own. Non-finite scores
/// are an error (the model's weights hold values it cannot compute with).
pub(crate) fn is_silence(result: &Decoded, options: &TranscribeOptions, time_offset: f64) -> Result<bool> {
    if !(result.avg_logprob.is_finite() && result.no_speech_prob.is_finite()) {
        return Err(Error::Model {
            file: "the model".into(),
            msg: format!(
                "the window at {time_offset:.2} s gave non-finite scores (average log-probability {}, \
                 no-speech probability {}): its weights hold values it cannot compute with",
                result.avg_logprob, result.no_speech_prob
            ),
        });
    }
    Ok(options.no_speech_threshold.is_some_and(|th| result.no_speech_prob > th)
        && !options.log_prob_threshold.is_some_and(|th| result.avg_logprob > th as f64))
}

/// `time` in the joined speech as a time of the recording (the same without a VAD map).
fn recording_time(map: Option<&TimeMap>, time: f64) -> f64 {
    map.map_or(time, |map| map.original_time(time, None, false))
}

/// The stretches of log-mel frames to transcribe, as faster-whisper makes them from
/// `clip_timestamps`: the times rounded to frames (half to even, as Python's `round`), paired
/// as (start, end), a last unpaired start running to `content_frames`; none given is the whole.
fn seek_clips(clip_timestamps: &[f64], content_frames: usize) -> Vec<(usize, usize)> {
    let mut points: Vec<usize> =
        clip_timestamps.iter().map(|t| (t * FRAMES_PER_SECOND).round_ties_even() as usize).collect();
    if points.is_empty() {
        points.push(0);
    }
    if points.len() % 2 == 1 {
        points.push(content_frames);
    }
    points.chunks_exact(2).map(|p| (p[0], p[1])).collect()
}

/// Moves a segment of the joined speech to its times in the recording, as faster-whisper's
/// `restore_speech_timestamps`: each word within the chunk its middle falls in, the segment
/// from its first to its last word; a segment without words by its own start and end.
fn restore_times(segment: &mut Segment, map: &TimeMap) {
    match segment.words.as_mut().filter(|words| !words.is_empty()) {
        Some(words) => {
            for word in words.iter_mut() {
                let chunk = map.chunk_index((word.start + word.end) / 2.0, false);
                word.start = map.original_time(word.start, Some(chunk), false);
                word.end = map.original_time(word.end, Some(chunk), false);
            }
            segment.start = words.first().map_or(segment.start, |w| w.start);
            segment.end = words.last().map_or(segment.end, |w| w.end);
        }
        None => {
            segment.start = map.original_time(segment.start, None, false);
            segment.end = map.original_time(segment.end, None, true);
        }
    }
}

/// Keeps a segment's and its words' times within the audio (`duration` seconds long). A
/// timestamp token may name any time in the 30 s window, and over silence or at high
/// temperatures the model names times after the last sample (a cue at 204 s of a 180 s file):
/// such times are the audio's end.
fn end_by(segment: &mut Segment, duration: f64) {
    segment.start = segment.start.min(duration);
    segment.end = segment.end.min(duration);
    for word in segment.words.iter_mut().flatten() {
        word.start = word.start.min(duration);
        word.end = word.end.min(duration);
    }
}

/// Where a window's speech ends: its last word's end, else its last segment's.
fn last_end(drafts: &[Draft]) -> Option<f64> {
    drafts.iter().rev().find_map(|d| d.words.last().map(|w| w.end)).or(drafts.last().map(|d| d.end))
}

/// What word timing needs of a decoded window besides its segments.
pub(crate) struct WindowText<'a> {
    pub sot_sequence: &'a [u32],
    pub language: &'a str,
    /// The window's log-mel frames.
    pub frames: usize,
}

/// Times the words of one window's segments as the reference's `add_word_timestamps`:
/// aligns the window's whole text on the device (`window`: its log-mel and whether it is
/// fresh, as [`WindowModel`] takes them), then places the words ([`crate::decode::words`]).
pub(crate) async fn time_words<M: WindowModel>(
    model: &mut M,
    (window, fresh): (&Tensor, bool),
    drafts: &mut [Draft],
    text: &WindowText<'_>,
    time_offset: f64,
    last_speech: f64,
) -> Result<()> {
    let ids = model.host().tokenizer.special_ids().clone();
    let tokens: Vec<u32> = drafts.iter().flat_map(|d| d.text_tokens.iter().copied()).collect();
    let frames = text.frames / INPUT_STRIDE;
    let timings = if tokens.is_empty() || frames == 0 {
        Vec::new()
    } else {
        let mut sequence = text.sot_sequence.to_vec();
        sequence.push(ids.no_timestamps);
        sequence.extend_from_slice(&tokens);
        sequence.push(ids.end_of_text);
        let aligned = model.align(window, fresh, &sequence, frames).await?;
        let weights = Weights { values: &aligned.weights, heads: aligned.heads, rows: sequence.len(), frames };
        let sot_len = text.sot_sequence.len();
        let probs = &aligned.next_probs[sot_len..sot_len + tokens.len()];
        find_alignment(model.host().tokenizer, text.language, &tokens, &weights, sot_len, probs)?
    };
    add_word_timestamps(drafts, timings, time_offset, last_speech);
    Ok(())
}

fn segment_of(
    result: &Decoded,
    draft: &Draft,
    text: String,
    tokens: Vec<u32>,
    seek: usize,
    words: Option<Vec<Word>>,
) -> Segment {
    Segment {
        start: draft.start,
        end: draft.end,
        text,
        tokens,
        avg_logprob: result.avg_logprob,
        no_speech_prob: result.no_speech_prob,
        temperature: result.temperature,
        compression_ratio: result.compression_ratio,
        seek,
        words,
    }
}

/// Cuts a window's tokens into `(start, end, tokens)` pieces at consecutive timestamp pairs
/// and returns them with the next seek (in frames).
pub(crate) fn split_segments(
    tokens: &[u32],
    tb: u32,
    seek: usize,
    segment_size: usize,
    segment_duration: f64,
    time_offset: f64,
    precision: f64,
) -> (Vec<(f64, f64, Vec<u32>)>, usize) {
    let is_ts = |t: u32| t >= tb;
    let n = tokens.len();
    let single_ending = n >= 2 && !is_ts(tokens[n - 2]) && is_ts(tokens[n - 1]);
    let consecutive: Vec<usize> = (1..n).filter(|&i| is_ts(tokens[i]) && is_ts(tokens[i - 1])).collect();
    let time = |t: u32| time_offset + (i64::from(t) - i64::from(tb)) as f64 * precision;
    let mut pieces = Vec::new();
    if !consecutive.is_empty() {
        let mut slices = consecutive;
        if single_ending {
            slices.push(n);
        }
        let mut last = 0;
        for &c in &slices {
            let piece = &tokens[last..c];
            pieces.push((time(piece[0]), time(piece[piece.len() - 1]), piece.to_vec()));
            last = c;
        }
        let next = if single_ending {
            seek + segment_size
        } else {
            seek + tokens[last - 1].saturating_sub(tb) as usize * INPUT_STRIDE
        };
        (pieces, next)
    } else {
        let mut duration = segment_duration;
        if let Some(&t) = tokens.iter().rev().find(|&&t| is_ts(t))
            && t != tb
        {
            duration = (t - tb) as f64 * precision;
        }
        pieces.push((time_offset, time_offset + duration, tokens.to_vec()));
        (pieces, seek + segment_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clips_pair_the_times_as_frames_like_the_reference() {
        assert_eq!(seek_clips(&[], 500), [(0, 500)]);
        assert_eq!(seek_clips(&[0.0], 500), [(0, 500)]);
        assert_eq!(seek_clips(&[1.0], 500), [(100, 500)]);
        // Python's round: halves go to the even frame (0.125 s is frame 12.5 -> 12).
        assert_eq!(seek_clips(&[0.125, 2.0, 3.0], 500), [(12, 200), (300, 500)]);
        assert_eq!(seek_clips(&[0.135, 6.72, 26.0, 44.4], 5000), [(14, 672), (2600, 4440)]);
        // A clip ending before it starts, or past the audio, is kept as given: the seek loop
        // skips the one and stops the other at the end of the audio.
        assert_eq!(seek_clips(&[3.0, 2.0, 4.0, 9.0], 500), [(300, 200), (400, 900)]);
    }
}
