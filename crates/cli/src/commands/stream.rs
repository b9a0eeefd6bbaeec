//! `susurrus stream`: live transcription of audio as it arrives — standard input, a named pipe
//! or a file (`arecord -f S16_LE -r 16000 | susurrus stream -`, or a file paced at speech
//! speed with `--realtime`). A thread decodes the input into a channel a decoded buffer at a
//! time; the main thread pushes what has come into whisper's [`LiveTranscriber`] and looks
//! whenever a hop of audio is in, printing committed text as lines that stay and, on a
//! terminal, the partial text after them, rewritten as it changes.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use susurrus_whisper::audio::{Mono, SampleSink};
use susurrus_whisper::decode::subtitles::timed_line;
use susurrus_whisper::decode::words::Word;
use susurrus_whisper::live::{LiveEvent, LiveOptions, LiveTranscriber, ends_sentence};
use susurrus_whisper::{Task, TranscribeOptions};

use crate::args::{TaskChoice, parse_language, parse_positive_time};
use crate::audio;
use crate::backend::RunArgs;
use crate::destination;
use crate::error::{Error, Result};
use crate::load;
use crate::load::load_model;

/// Committed text on one line before it breaks without a sentence end (a terminal line the
/// partial text still fits after).
const LINE_CHARS: usize = 60;
/// Columns the rewritten terminal line keeps within.
const TERMINAL_COLUMNS: usize = 100;

#[derive(Debug, clap::Args)]
pub struct StreamArgs {
    /// The audio, read as it arrives: `-` (standard input), a named pipe or a file; WAV, FLAC,
    /// MP3, AAC, OGG, WebM, an M4A/MP4 with its index first, or headerless PCM with --raw.
    #[arg(default_value = "-", value_name = "INPUT")]
    pub input: PathBuf,
    #[command(flatten)]
    pub run: RunArgs,
    /// The input is headerless PCM in this sample format, as `arecord -t raw -f S16_LE` or
    /// `ffmpeg -f s16le` write it.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub raw: Option<RawFormat>,
    /// --raw: samples per second of each channel. Default: 16000.
    #[arg(long, value_name = "HZ", requires = "raw", value_parser = clap::value_parser!(u32).range(1000..=768000))]
    pub rate: Option<u32>,
    /// --raw: interleaved channels (averaged). Default: 1.
    #[arg(long, value_name = "N", requires = "raw", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub channels: Option<u16>,
    /// text: committed lines with their times (on a terminal with the partial text after
    /// them); json: one object per event, `{"type": "partial" | "committed", "text", "start",
    /// "end", "words"}`.
    #[arg(long, short = 'f', value_enum, default_value = "text")]
    pub format: StreamFormat,
    /// Read the input no faster than it plays, so a file stands in for a microphone.
    #[arg(long)]
    pub realtime: bool,
    /// Seconds of new audio between looks at the buffer. Default: 1.
    #[arg(long, value_name = "S", value_parser = parse_positive_time)]
    pub hop: Option<f64>,
    /// Look at all the audio, pauses included, without the VAD network (which skips silence
    /// and ends utterances at pauses).
    #[arg(long)]
    pub no_vad: bool,
    /// The Silero VAD v6 network (ONNX). Default:
    /// ~/.cache/susurrus/models/silero-vad-v6/silero_vad_v6.onnx, which
    /// `./scripts/models/fetch_model.sh silero-vad` fetches.
    #[arg(long, value_name = "FILE", conflicts_with = "no_vad")]
    pub vad_model: Option<PathBuf>,
    /// Seconds of silence that end an utterance (its words are then final). Default: 0.5.
    #[arg(long, value_name = "S", conflicts_with = "no_vad", value_parser = parse_positive_time)]
    pub min_silence: Option<f64>,
    /// Spoken language code (en, de, ...). Default: English on English-only models, detected
    /// on the first speech on multilingual ones.
    #[arg(long, short = 'l', value_name = "L", value_parser = parse_language)]
    pub language: Option<String>,
    /// Transcribe in the spoken language, or translate to English (multilingual models only).
    #[arg(long, value_enum, default_value = "transcribe")]
    pub task: TaskChoice,
    /// Beams of the beam search at each look; 1 decodes greedily. Default: 1 (each look's
    /// time is the stream's latency).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=32))]
    pub beam_size: Option<u16>,
    /// Text that prompts the stream's first look: names, spelling, style.
    #[arg(long, value_name = "TEXT")]
    pub initial_prompt: Option<String>,
}

/// Sample formats of headerless PCM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RawFormat {
    /// 16-bit signed little-endian integers.
    S16le,
    /// 32-bit little-endian floats.
    F32le,
}

impl RawFormat {
    fn bytes(self) -> usize {
        match self {
            RawFormat::S16le => 2,
            RawFormat::F32le => 4,
        }
    }

    fn sample(self, b: &[u8]) -> f32 {
        match self {
            RawFormat::S16le => f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0,
            RawFormat::F32le => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StreamFormat {
    Text,
    Json,
}

impl StreamArgs {
    /// The stream's options; flags left out keep [`LiveOptions::default`].
    pub fn options(&self) -> Result<LiveOptions> {
        let d = LiveOptions::default();
        let transcribe = TranscribeOptions {
            language: self.language.clone(),
            task: match self.task {
                TaskChoice::Transcribe => Task::Transcribe,
                TaskChoice::Translate => Task::Translate,
            },
            temperatures: self.run.temperatures_or(&d.transcribe.temperatures),
            beam_size: self.beam_size.map_or(d.transcribe.beam_size, usize::from),
            initial_prompt: self.initial_prompt.clone(),
            ..d.transcribe.clone()
        };
        Ok(LiveOptions {
            transcribe,
            hop: self.hop.unwrap_or(d.hop),
            vad: !self.no_vad,
            min_silence: self.min_silence.unwrap_or(d.min_silence),
            ..d
        })
    }
}

/// What the decoding thread sends: samples at 16 kHz, then the end (with the decoder's
/// warnings) or what went wrong.
/// Decoded buffers the reader may have sent ahead of the transcriber: then it waits, so that an
/// input faster than the transcription (a file, a pipe from `/dev/zero`) waits in its pipe or
/// on disk, not in memory. A buffer is at most a few thousand samples.
const QUEUED_BUFFERS: usize = 64;

enum Message {
    Samples(Vec<f32>),
    End(std::result::Result<Vec<String>, Error>),
}

/// Runs `susurrus stream`: options and input checked before the model loads; committed text
/// is printed as it comes, so an input that breaks off loses nothing before it.
pub fn run(args: &StreamArgs) -> Result<()> {
    let options = args.options()?;
    options.validate()?;
    let stdin = args.input.as_os_str() == "-";
    if stdin && std::io::stdin().is_terminal() {
        return Err(Error::Usage(
            "standard input (-) is a terminal: pipe audio into it, as in \
             `arecord -f S16_LE -r 16000 | susurrus stream -`"
                .into(),
        ));
    }
    if !stdin {
        audio::check_input(&args.input)?;
    }
    // Everything the stream says goes to standard output: closed (`>&-`), it would all vanish.
    destination::check_stdout("redirect it to a file (> captions.txt)")?;
    let dir = load::model_dir(&args.run)?;
    let vad = if options.vad { Some(load::resolve_vad(args.vad_model.as_deref())?) } else { None };
    let (mut whisper, _) = load_model(&args.run, &dir, vad.as_deref())?;
    let mut live = LiveTranscriber::new(&whisper, options)?;

    let (tx, rx) = sync_channel(QUEUED_BUFFERS);
    let input = args.input.clone();
    let (raw, rate, channels, realtime) =
        (args.raw, args.rate.unwrap_or(16000), usize::from(args.channels.unwrap_or(1)), args.realtime);
    let reader = std::thread::spawn(move || {
        let sink = Channel { tx: tx.clone(), sent: 0, pace: realtime.then(Instant::now) };
        let result = match raw {
            Some(format) => decode_raw(&input, format, rate, channels, sink),
            None => decode(&input, sink),
        };
        // The receiver is gone only when the main thread stopped on an error of its own.
        let _ = tx.send(Message::End(result));
    });

    let mut printer = Printer::new(args.format, std::io::stdout().is_terminal());
    let ended = listen(&mut whisper, &mut live, &rx, &mut printer);
    let finished = ended.and_then(|warnings| {
        printer.show(&pollster::block_on(live.finish(&mut whisper))?)?;
        printer.end()?;
        Ok(warnings)
    });
    drop(rx);
    let _ = reader.join();
    let finished = match finished {
        // A reader that stopped reading (`| head -1`) wants no more: a quiet exit, as transcribe's.
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => Err(Error::ReaderGone),
        other => other,
    };
    for warning in finished? {
        eprintln!("susurrus: warning: {}: {warning}", input_name(&args.input));
    }
    Ok(())
}

/// Pushes what arrives and looks whenever the stream is ready, until the input ends; returns
/// the decoder's warnings.
fn listen(
    whisper: &mut susurrus_whisper::Whisper,
    live: &mut LiveTranscriber,
    rx: &Receiver<Message>,
    printer: &mut Printer,
) -> Result<Vec<String>> {
    loop {
        let mut message = rx.recv().map_err(|_| Error::Usage("the input's decoder stopped".into()))?;
        loop {
            match message {
                Message::Samples(samples) => live.push(&samples)?,
                Message::End(result) => return result,
            }
            match rx.try_recv() {
                Ok(next) => message = next,
                Err(_) => break,
            }
        }
        if live.ready() {
            printer.show(&pollster::block_on(live.process(whisper))?)?;
        }
    }
}

fn input_name(input: &Path) -> String {
    if input.as_os_str() == "-" { "-".into() } else { input.display().to_string() }
}

/// A file format symphonia reads, decoded as it is read.
fn decode(input: &Path, sink: Channel) -> std::result::Result<Vec<String>, Error> {
    let decoded = if input.as_os_str() == "-" {
        audio::decode_reader_into(std::io::stdin(), "-", sink)?
    } else {
        audio::decode_file_into(input, sink)?
    };
    Ok(decoded.warnings)
}

/// Headerless PCM: read as it comes, whole frames at a time, through whisper's downmix and
/// resampler (the same as every decoded format).
fn decode_raw(
    input: &Path,
    format: RawFormat,
    rate: u32,
    channels: usize,
    sink: Channel,
) -> std::result::Result<Vec<String>, Error> {
    let name = input_name(input);
    let mut reader: Box<dyn Read> = if input.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(input).map_err(|e| Error::io(input, e))?)
    };
    let frame = format.bytes() * channels;
    let mut mono = Mono::new(Some(rate), Some(channels), None, sink);
    let mut bytes = vec![0u8; frame * (rate as usize / 10).max(1)];
    let mut filled = 0;
    let mut samples = Vec::new();
    loop {
        let n = match reader.read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(input, e)),
        };
        filled += n;
        let whole = filled / frame * frame;
        samples.clear();
        samples.extend(bytes[..whole].chunks_exact(format.bytes()).map(|b| format.sample(b)));
        mono.push_interleaved(rate, channels, &samples).map_err(|e| Error::audio(&name, e))?;
        bytes.copy_within(whole..filled, 0);
        filled -= whole;
    }
    let mut warnings = Vec::new();
    if filled > 0 {
        warnings.push(format!("the last {filled} bytes are not a whole frame of {channels} channels and were dropped"));
    }
    if mono.frames_in() == 0 {
        return Err(Error::audio(&name, "no audio: the input was empty"));
    }
    mono.finish().map_err(|e| Error::audio(&name, e))?;
    Ok(warnings)
}

/// Where decoded samples go: the channel to the main thread, paced at speech speed with
/// `--realtime`.
struct Channel {
    tx: SyncSender<Message>,
    sent: usize,
    /// When the first sample was sent, with `--realtime`.
    pace: Option<Instant>,
}

impl SampleSink for Channel {
    fn push(&mut self, samples: &[f32]) -> std::result::Result<(), String> {
        self.sent += samples.len();
        if let Some(started) = self.pace {
            // A buffer is there once its last sample has been spoken.
            let due = started + Duration::from_secs_f64(self.sent as f64 / 16000.0);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        self.tx.send(Message::Samples(samples.to_vec())).map_err(|_| "the transcription stopped".to_string())
    }

    fn count(&self) -> usize {
        self.sent
    }

    /// Samples already sent are transcribed: what a decoder trims at the end (an encoder's
    /// padding) is silence.
    fn truncate(&mut self, _len: usize) {}

    fn reserve(&mut self, _additional: usize) {}

    fn finish(self) -> std::result::Result<Self, String> {
        Ok(self)
    }
}

/// Prints a stream's events: JSON lines, or committed text as timed lines (broken at sentence
/// ends) with, on a terminal, the line in progress and the partial text rewritten in place.
struct Printer {
    format: StreamFormat,
    terminal: bool,
    /// Committed words of the line not yet printed.
    line: Vec<Word>,
    partial: String,
    out: std::io::Stdout,
}

impl Printer {
    fn new(format: StreamFormat, terminal: bool) -> Printer {
        Printer { format, terminal, line: Vec::new(), partial: String::new(), out: std::io::stdout() }
    }

    fn show(&mut self, events: &[LiveEvent]) -> Result<()> {
        let mut text = String::new();
        for event in events {
            match (self.format, event) {
                (StreamFormat::Json, event) => {
                    let json = serde_json::to_string(event).map_err(|e| Error::Usage(e.to_string()))?;
                    text.push_str(&json);
                    text.push('\n');
                }
                (StreamFormat::Text, LiveEvent::Committed(committed)) => {
                    self.line.extend(committed.words.iter().cloned());
                    text.push_str(&self.finished_lines(false));
                }
                (StreamFormat::Text, LiveEvent::Partial(partial)) => self.partial.clone_from(&partial.text),
            }
        }
        self.write(text)
    }

    /// The stream's end: the rest of the committed text.
    fn end(&mut self) -> Result<()> {
        self.partial.clear();
        let text = self.finished_lines(true);
        self.write(text)
    }

    /// Takes the lines the committed words complete (all of them at the end) as text.
    fn finished_lines(&mut self, all: bool) -> String {
        let mut text = String::new();
        loop {
            let mut chars = 0;
            let mut cut = None;
            for (i, word) in self.line.iter().enumerate() {
                chars += word.word.chars().count();
                if ends_sentence(&word.word) || chars > LINE_CHARS {
                    cut = Some(i + 1);
                    break;
                }
            }
            let cut = match cut {
                Some(cut) => cut,
                None if all && !self.line.is_empty() => self.line.len(),
                None => return text,
            };
            let words: Vec<Word> = self.line.drain(..cut).collect();
            let joined: String = words.iter().map(|w| w.word.as_str()).collect();
            text.push_str(&timed_line(words[0].start, words[words.len() - 1].end, joined.trim()));
        }
    }

    /// Writes `text`; on a terminal, after clearing the line in progress, and then that line
    /// again with the partial text dimmed after it.
    fn write(&mut self, text: String) -> Result<()> {
        let mut out = self.out.lock();
        let result = if self.terminal && self.format == StreamFormat::Text {
            let committed: String = self.line.iter().map(|w| w.word.as_str()).collect();
            let committed = committed.trim_start();
            let room = TERMINAL_COLUMNS.saturating_sub(committed.chars().count() + 1);
            let partial: String = {
                let chars: Vec<char> = self.partial.chars().collect();
                chars[chars.len().saturating_sub(room)..].iter().collect()
            };
            write!(out, "\r\x1b[2K{text}{committed}\x1b[2m{partial}\x1b[0m").and_then(|()| out.flush())
        } else {
            out.write_all(text.as_bytes()).and_then(|()| out.flush())
        };
        result.map_err(|e| Error::io(Path::new("<stdout>"), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(start: f64, text: &str) -> Word {
        Word { start, end: start + 0.5, word: text.into(), probability: 1.0 }
    }

    #[test]
    fn committed_words_print_as_timed_lines_broken_at_sentence_ends() {
        let mut printer = Printer::new(StreamFormat::Text, false);
        printer.line = vec![word(0.0, " Good"), word(0.5, " evening."), word(1.2, " Welcome"), word(1.8, " to")];
        assert_eq!(printer.finished_lines(false), "[00:00.000 --> 00:01.000] Good evening.\n");
        assert_eq!(printer.line.len(), 2);
        assert_eq!(printer.finished_lines(true), "[00:01.200 --> 00:02.300] Welcome to\n");
        assert!(printer.line.is_empty());
    }

    #[test]
    fn raw_samples_are_read_as_their_format_says() {
        assert_eq!(RawFormat::S16le.sample(&[0x00, 0x80]), -1.0);
        assert_eq!(RawFormat::S16le.sample(&[0x00, 0x40]), 0.5);
        assert_eq!(RawFormat::F32le.sample(&0.25f32.to_le_bytes()), 0.25);
    }
}
