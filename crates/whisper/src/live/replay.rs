//! A recording streamed as if it were being spoken, on a simulated clock: audio arrives in
//! chunks at the speed of speech, and while a look runs, time passes by what the look took (so
//! audio piles up behind a slow device, as it would from a microphone). The result gives every
//! word's latency — from the end of the word in the audio to its first appearance, partial or
//! committed, and to its commit — and the device's share of real time. This is what the
//! latency benchmark and the tests run; the clock is the caller's (wall time natively,
//! `performance.now()` in a browser), so only the looks' own durations are measured and a
//! 95 s clip replays in the time its looks take.

use crate::constants::SAMPLE_RATE;
use crate::decode::model::Whisper;
use crate::decode::words::Word;
use crate::error::Result;
use crate::text::wer::normalized_word;

use super::{LiveEvent, LiveTranscriber};

/// An event and when it came on the simulated clock (seconds from the start of the audio).
#[derive(Clone, Debug, PartialEq)]
pub struct Timed {
    pub at: f64,
    pub event: LiveEvent,
}

/// A committed word's latencies, in seconds after its end in the audio.
#[derive(Clone, Debug, PartialEq)]
pub struct WordLatency {
    pub word: Word,
    /// When it first appeared in any event (partial or committed).
    pub first_seen: f64,
    pub committed: f64,
}

/// What a replay gives.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    pub events: Vec<Timed>,
    /// Seconds the looks (and the VAD) took, in all.
    pub busy: f64,
    /// Seconds of audio.
    pub duration: f64,
}

impl Replay {
    /// The committed words' text, in order.
    pub fn committed_text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match &e.event {
                LiveEvent::Committed(text) => Some(text.text.as_str()),
                LiveEvent::Partial(_) => None,
            })
            .collect()
    }

    /// The device's time over the audio's: under 1, the stream keeps up.
    pub fn real_time_factor(&self) -> f64 {
        if self.duration > 0.0 { self.busy / self.duration } else { 0.0 }
    }

    /// Every committed word with when it was first seen and when committed: the first event
    /// with a word of the same text starting within half a second of it.
    pub fn latencies(&self) -> Vec<WordLatency> {
        let mut out = Vec::new();
        for (i, timed) in self.events.iter().enumerate() {
            let LiveEvent::Committed(text) = &timed.event else { continue };
            for word in &text.words {
                let same = |w: &Word| {
                    normalized_word(&w.word) == normalized_word(&word.word) && (w.start - word.start).abs() < 0.5
                };
                let first = self.events[..=i].iter().find(|e| {
                    let (LiveEvent::Partial(t) | LiveEvent::Committed(t)) = &e.event;
                    t.words.iter().any(same)
                });
                let first_seen = first.map_or(timed.at, |e| e.at);
                out.push(WordLatency {
                    word: word.clone(),
                    first_seen: first_seen - word.end,
                    committed: timed.at - word.end,
                });
            }
        }
        out
    }
}

/// Streams `samples` into `stream` in chunks of `chunk` samples arriving in real time, a
/// call of [`LiveTranscriber::process`] whenever it is ready, [`LiveTranscriber::finish`] at
/// the end. `now` reads a clock in seconds (any origin) to time the calls.
pub async fn replay(
    whisper: &mut Whisper,
    stream: &mut LiveTranscriber,
    samples: &[f32],
    chunk: usize,
    now: &mut dyn FnMut() -> f64,
) -> Result<Replay> {
    let chunk = chunk.max(1);
    let rate = SAMPLE_RATE as f64;
    let mut clock = 0.0f64;
    let mut pushed = 0;
    let mut events = Vec::new();
    let mut busy = 0.0;
    loop {
        // Every chunk that has arrived by now.
        while pushed < samples.len() && ((pushed + chunk).min(samples.len()) as f64) / rate <= clock {
            let end = (pushed + chunk).min(samples.len());
            stream.push(&samples[pushed..end])?;
            pushed = end;
        }
        let done = pushed == samples.len();
        if done || stream.ready() {
            let started = now();
            let out = if done { stream.finish(whisper).await? } else { stream.process(whisper).await? };
            let took = now() - started;
            busy += took;
            clock += took;
            events.extend(out.into_iter().map(|event| Timed { at: clock, event }));
            if done {
                break;
            }
        } else {
            // Nothing to do until the next chunk arrives.
            clock = clock.max(((pushed + chunk).min(samples.len()) as f64) / rate);
        }
    }
    Ok(Replay { events, busy, duration: samples.len() as f64 / rate })
}
