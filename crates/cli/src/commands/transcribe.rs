//! `susurrus transcribe`: checks the options, loads the model once, then decodes and
//! transcribes each input in order. Segments show as they are decoded; a failing input is
//! reported and the rest go on.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use susurrus_core::Error as CoreError;
use susurrus_whisper::Error as WhisperError;
use susurrus_whisper::decode::options::{MAX_BEAM_SIZE, MAX_BEST_OF};
use susurrus_whisper::decode::subtitles::CueOptions;
use susurrus_whisper::vad::VadOptions;
use susurrus_whisper::{Audio, Event, Resume, Segment, Task, TranscribeOptions, Whisper};

use crate::args::{
    TaskChoice, parse_finite, parse_language, parse_non_negative, parse_positive, parse_positive_time,
    parse_probability, parse_time,
};
use crate::audio::{self, Samples};
use crate::backend::RunArgs;
use crate::error::{Error, Result};
use crate::output::{self, Format, Load, Meta, Timings};
use crate::{destination, handover, load};

const AFTER_HELP: &str = "\
Output:
  Without --output-dir, the transcript goes to standard output: with --format txt each segment
  is printed as soon as it is decoded; srt and vtt print each file's document when the file is
  done; json prints one object per file, one per line. With several files, txt, srt and vtt
  output starts each file with a line `==> FILE <==` (files after the first after an empty
  line).
  With --output-dir DIR, each FILE's transcript is written to DIR/<FILE's name without its
  extension>.<format> (standard input: DIR/stdin.<format>) and nothing goes to standard output.
  Each file is written whole through a temporary file, so a failed write leaves nothing behind;
  an existing transcript is replaced only with --overwrite, and never an input.
  Before the model loads, every input must exist, the output folder must be writable and
  standard output open; nothing is transcribed otherwise.
  When standard error is a terminal, it shows a progress bar per file, and the segments as they
  are decoded when standard output is not showing them. A file that is truncated or partly
  damaged is transcribed as far as it decodes, with a warning on standard error saying where.
  A file that cannot be read or transcribed is reported on standard error and the others go
  on; the exit status is 1 when any file failed. When the program reading standard output
  stops (as `| head` does), the command stops quietly with exit status 141.

Examples:
  susurrus transcribe talk.wav
  susurrus transcribe --format srt --output-dir subtitles/ *.mp3
  susurrus transcribe --format json --backend cpu a.flac b.ogg > transcripts.jsonl
  susurrus transcribe - < talk.mp3";

/// Arguments of `susurrus transcribe`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct TranscribeArgs {
    /// Audio or video files (WAV, FLAC, MP3, M4A, MP4, WebM, OGG ...; any sample rate and channel count), in order;
    /// `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub run: RunArgs,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value = "txt")]
    pub format: Format,
    /// Write each file's transcript to DIR/<name>.<format> instead of standard output
    /// (DIR is created if missing).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// With --output-dir: replace transcripts that exist already (without it, the run stops
    /// before any work when one exists).
    #[arg(long, requires = "output_dir")]
    pub overwrite: bool,
    /// Decode without timestamp tokens: one segment per 30 s window, and text output without
    /// times.
    #[arg(long)]
    pub no_timestamps: bool,
    /// Spoken language code (en, de, fr, ...). Default: English on English-only (.en) models,
    /// detected on the first 30 s of audio on multilingual ones.
    #[arg(long, short = 'l', value_name = "L", value_parser = parse_language)]
    pub language: Option<String>,
    /// Transcribe in the spoken language, or translate to English (multilingual models only).
    #[arg(long, value_enum, default_value = "transcribe")]
    pub task: TaskChoice,
    /// Beams of the beam search at temperature 0; 1 decodes greedily (faster, and the same
    /// text most of the time). Default: 5.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=MAX_BEAM_SIZE as i64))]
    pub beam_size: Option<u16>,
    /// Beam search patience: it waits for round(beam size × P) finished hypotheses. Default: 1.
    #[arg(long, value_name = "P", value_parser = parse_positive)]
    pub patience: Option<f32>,
    /// Finished hypotheses are ranked by log-probability over length^L (0 ranks by the plain
    /// sum). Default: 1.
    #[arg(long, value_name = "L", allow_negative_numbers = true, value_parser = parse_non_negative)]
    pub length_penalty: Option<f32>,
    /// Time every word from the decoder's cross-attention: JSON segments get `words` (start,
    /// end, word, probability), and segment times follow their words.
    #[arg(long)]
    pub word_timestamps: bool,
    /// SRT/VTT from words (needs --word-timestamps): at most N characters a line.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_line_width: Option<u32>,
    /// SRT/VTT from words: at most N lines a cue (with --max-line-width, cues then ignore
    /// segment boundaries and break at pauses over 3 s).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_line_count: Option<u32>,
    /// SRT/VTT from words: at most N words a line.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_words_per_line: Option<u32>,
    /// SRT/VTT from words: a cue per word, the word underlined in its line.
    #[arg(long)]
    pub highlight_words: bool,
    /// Divide the logit of every token already chosen in a window by P (multiply it when
    /// negative): P above 1 discourages repetition. Default: 1.
    #[arg(long, value_name = "P", value_parser = parse_positive)]
    pub repetition_penalty: Option<f32>,
    /// Never repeat a sequence of N tokens within a window. Default: 0 (no limit).
    #[arg(long, value_name = "N")]
    pub no_repeat_ngram_size: Option<u16>,
    /// Samples drawn at each temperature above 0; the most likely is kept. Default: 5.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=MAX_BEST_OF as i64))]
    pub best_of: Option<u16>,
    /// Seed of the sampling at temperatures above 0, for reproducible fallback. Default: 0.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Text that prompts the first window: names, spelling, style.
    #[arg(long, value_name = "TEXT")]
    pub initial_prompt: Option<String>,
    /// Text the transcript starts with: the first window goes on from it.
    #[arg(long, value_name = "TEXT")]
    pub prefix: Option<String>,
    /// Words or phrases to expect (names, terms), given to every window before the previous
    /// text. Not with --prefix.
    #[arg(long, value_name = "TEXT")]
    pub hotwords: Option<String>,
    /// Token ids never to produce, separated by commas; -1 stands for the model's list of
    /// non-speech symbols. Default: -1.
    #[arg(
        long,
        value_name = "IDS",
        value_delimiter = ',',
        allow_hyphen_values = true,
        value_parser = clap::value_parser!(i64).range(-1..)
    )]
    pub suppress_tokens: Option<Vec<i64>>,
    /// With --word-timestamps: skip silences longer than S seconds around segments that look
    /// hallucinated (improbable, very short or very long words).
    #[arg(long, value_name = "S", value_parser = parse_time)]
    pub hallucination_silence_threshold: Option<f64>,
    /// Do not prompt each window with the text decoded before it (less repetition, less
    /// consistency).
    #[arg(long)]
    pub no_condition_on_previous_text: bool,
    /// Retry a window at the next temperature when its text compresses better than this
    /// gzip ratio (repetitive text). Default: 2.4.
    #[arg(long, value_name = "RATIO", value_parser = parse_positive)]
    pub compression_ratio_threshold: Option<f32>,
    /// Retry a window at the next temperature when its average token log-probability is
    /// below this. Default: -1.
    #[arg(long, value_name = "LOGPROB", allow_negative_numbers = true, value_parser = parse_finite)]
    pub log_prob_threshold: Option<f32>,
    /// Skip a window as silence when its no-speech probability is above this and its
    /// log-probability is below --log-prob-threshold. Default: 0.6.
    #[arg(long, value_name = "P", value_parser = parse_probability)]
    pub no_speech_threshold: Option<f32>,
    /// Transcribe only these stretches, as start,end times in seconds (`5,40.5,70,95`; a last
    /// start without an end runs to the end of the audio). Segments keep their times in the
    /// whole file.
    #[arg(long, value_name = "T", value_delimiter = ',', value_parser = parse_time)]
    pub clip_timestamps: Vec<f64>,
    /// Transcribe only speech: the Silero VAD network finds it and the silences between are
    /// cut out (faster-whisper's vad_filter); segment times stay the file's. Not with
    /// --clip-timestamps.
    #[arg(long)]
    pub vad: bool,
    /// The Silero VAD v6 network (ONNX) for --vad. Default:
    /// ~/.cache/susurrus/models/silero-vad-v6/silero_vad_v6.onnx, which
    /// `./scripts/models/fetch_model.sh silero-vad` fetches.
    #[arg(long, value_name = "FILE")]
    pub vad_model: Option<PathBuf>,
    /// --vad: a window with at least this speech probability is speech. Default: 0.5.
    #[arg(long, value_name = "P", value_parser = parse_probability)]
    pub vad_threshold: Option<f32>,
    /// --vad: below this probability a window is silence; between the two it continues what
    /// came before. Default: the threshold - 0.15.
    #[arg(long, value_name = "P", value_parser = parse_probability)]
    pub vad_neg_threshold: Option<f32>,
    /// --vad: speech shorter than this is dropped. Default: 0.
    #[arg(long, value_name = "MS")]
    pub vad_min_speech_ms: Option<u32>,
    /// --vad: speech longer than this is split (at a pause where there is one). Default: no
    /// limit.
    #[arg(long, value_name = "S", value_parser = parse_positive_time)]
    pub vad_max_speech_s: Option<f64>,
    /// --vad: silence shorter than this does not end speech. Default: 2000.
    #[arg(long, value_name = "MS")]
    pub vad_min_silence_ms: Option<u32>,
    /// --vad: audio kept on each side of speech. Default: 400.
    #[arg(long, value_name = "MS")]
    pub vad_speech_pad_ms: Option<u32>,
    /// Loses the GPU on purpose after this many windows of the first file, as a driver reset
    /// would (wgpu: the device destroyed; CUDA: a kernel that traps): what the device-loss
    /// suites run the command with. Not in `--help`.
    #[arg(long, value_name = "WINDOWS", hide = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub lose_gpu_after: Option<u32>,
    /// A hand-over folder ([`handover`]): the batch goes on from where a process that lost the
    /// GPU stood. Only the command passes it, to itself. Not in `--help`.
    #[arg(long = "resume-from", value_name = "DIR", hide = true)]
    pub resume_from: Option<PathBuf>,
}

impl TranscribeArgs {
    /// How SRT/VTT cues are cut from words; an error when asked for without
    /// `--word-timestamps` (there would be no words to cut them from).
    pub fn cue_options(&self) -> Result<CueOptions> {
        let cues = CueOptions {
            max_line_width: self.max_line_width.map(|n| n as usize),
            max_line_count: self.max_line_count.map(|n| n as usize),
            max_words_per_line: self.max_words_per_line.map(|n| n as usize),
            highlight_words: self.highlight_words,
        };
        if cues != CueOptions::default() && !self.word_timestamps {
            return Err(Error::Usage(
                "--max-line-width, --max-line-count, --max-words-per-line and --highlight-words cut cues from \
                 words: add --word-timestamps"
                    .into(),
            ));
        }
        Ok(cues)
    }

    /// How `--vad` finds speech; an error when a VAD setting comes without `--vad`.
    pub fn vad_options(&self) -> Result<VadOptions> {
        let d = VadOptions::default();
        let options = VadOptions {
            threshold: self.vad_threshold.map_or(d.threshold, f64::from),
            neg_threshold: self.vad_neg_threshold.map(f64::from),
            min_speech_duration_ms: self.vad_min_speech_ms.unwrap_or(d.min_speech_duration_ms),
            max_speech_duration_s: self.vad_max_speech_s,
            min_silence_duration_ms: self.vad_min_silence_ms.unwrap_or(d.min_silence_duration_ms),
            speech_pad_ms: self.vad_speech_pad_ms.unwrap_or(d.speech_pad_ms),
        };
        if !self.vad && (options != d || self.vad_model.is_some()) {
            return Err(Error::Usage("--vad-model and the --vad-* settings are for --vad: add --vad".into()));
        }
        Ok(options)
    }

    /// The transcription options the flags ask for; flags left out keep the reference
    /// defaults of [`TranscribeOptions::default`].
    pub fn options(&self) -> Result<TranscribeOptions> {
        let defaults = TranscribeOptions::default();
        Ok(TranscribeOptions {
            language: self.language.clone(),
            task: match self.task {
                TaskChoice::Transcribe => Task::Transcribe,
                TaskChoice::Translate => Task::Translate,
            },
            timestamps: !self.no_timestamps,
            temperatures: self.run.temperatures_or(&defaults.temperatures),
            compression_ratio_threshold: self.compression_ratio_threshold.or(defaults.compression_ratio_threshold),
            log_prob_threshold: self.log_prob_threshold.or(defaults.log_prob_threshold),
            no_speech_threshold: self.no_speech_threshold.or(defaults.no_speech_threshold),
            condition_on_previous_text: !self.no_condition_on_previous_text,
            initial_prompt: self.initial_prompt.clone(),
            prefix: self.prefix.clone(),
            hotwords: self.hotwords.clone(),
            suppress_tokens: self.suppress_tokens.clone(),
            hallucination_silence_threshold: self.hallucination_silence_threshold,
            beam_size: self.beam_size.map_or(defaults.beam_size, usize::from),
            patience: self.patience.unwrap_or(defaults.patience),
            length_penalty: self.length_penalty.unwrap_or(defaults.length_penalty),
            best_of: self.best_of.map_or(defaults.best_of, usize::from),
            repetition_penalty: self.repetition_penalty.unwrap_or(defaults.repetition_penalty),
            no_repeat_ngram_size: self.no_repeat_ngram_size.map_or(defaults.no_repeat_ngram_size, usize::from),
            word_timestamps: self.word_timestamps,
            seed: self.seed.unwrap_or(defaults.seed),
            clip_timestamps: self.clip_timestamps.clone(),
            vad: self.vad,
            vad_options: self.vad_options()?,
            ..defaults
        })
    }
}

/// Runs `susurrus transcribe`: every check that needs no audio comes first, so bad options
/// fail before any file is read.
pub fn run(args: &TranscribeArgs) -> Result<()> {
    let options = args.options()?;
    options.validate()?;
    let cues = args.cue_options()?;
    let taken = args.resume_from.as_deref().map(handover::take).transpose()?;
    let start = taken.as_ref().map_or(0, |t| t.state.file);
    check_inputs(args)?;
    // A handed-over batch: the files before the one in work are written already.
    check_outputs(args, start)?;
    let dir = crate::load::model_dir(&args.run)?;
    let vad = if args.vad { Some(load::resolve_vad(args.vad_model.as_deref())?) } else { None };

    let (whisper, load) = {
        let _spinner = Clear(spinner(format!("loading {}", dir.display())));
        load::load_model(&args.run, &dir, vad.as_deref())?
    };
    check_model_options(&whisper, &options, &dir)?;

    let printed = taken.as_ref().is_some_and(|t| t.state.printed);
    // Lost once, in the first process.
    let lose_gpu_after = if taken.is_some() { None } else { args.lose_gpu_after };
    let mut failed = taken.as_ref().map_or(0, |t| t.state.failed);
    let mut unfinished =
        taken.map(|t| Unfinished { samples: t.samples, segments: t.state.segments, resume: t.state.resume });
    let mut session = Session { whisper, options, cues, load, args, printed, lose_gpu_after };
    for (index, input) in args.files.iter().enumerate().skip(start) {
        match session.transcribe(input, unfinished.take()) {
            Ok(()) => {}
            Err(Failure::Lost(lost)) => {
                let state = handover::State {
                    file: index,
                    samples: lost.samples.len(),
                    segments: lost.segments,
                    resume: lost.resume,
                    failed,
                    printed: session.printed,
                };
                // The lost context's memory goes back to the device before the new process
                // takes its own.
                drop(session);
                return match handover::continue_in_new_process(&state, &lost.samples)? {
                    0 => Ok(()),
                    code => Err(Error::HandedOver { code }),
                };
            }
            // A reader that stopped reading (`| head`) wants no more.
            Err(Failure::Output(Error::Io { source, .. })) if source.kind() == std::io::ErrorKind::BrokenPipe => {
                return Err(Error::ReaderGone);
            }
            Err(Failure::Output(e)) => return Err(e),
            Err(Failure::Input(e)) => {
                failed += 1;
                eprintln!("susurrus: error: {}", naming_input(&input_name(input), &e));
            }
        }
    }
    match failed {
        0 => Ok(()),
        failed => Err(Error::FilesFailed { failed, total: args.files.len() }),
    }
}

/// Standard input at most once and not a terminal, every input file present, and no two
/// inputs writing the same output file.
fn check_inputs(args: &TranscribeArgs) -> Result<()> {
    if args.files.iter().filter(|f| is_stdin(f)).count() > 1 {
        return Err(Error::Usage("standard input (-) can be read only once".into()));
    }
    if args.files.iter().any(|f| is_stdin(f)) && std::io::stdin().is_terminal() {
        return Err(Error::Usage(
            "standard input (-) is a terminal: pipe audio into it, as in `susurrus transcribe - < talk.wav`".into(),
        ));
    }
    for input in args.files.iter().filter(|f| !is_stdin(f)) {
        audio::check_input(input)?;
    }
    let mut outputs: HashMap<PathBuf, &Path> = HashMap::new();
    for (input, path) in output_paths(args)? {
        if let Some(first) = outputs.insert(path.clone(), input) {
            return Err(Error::Usage(format!(
                "{} and {} would both be written to {}; transcribe them in separate runs",
                first.display(),
                input.display(),
                path.display()
            )));
        }
    }
    Ok(())
}

/// Each input with the file its transcript goes to (none without `--output-dir`).
fn output_paths(args: &TranscribeArgs) -> Result<Vec<(&Path, PathBuf)>> {
    let Some(dir) = &args.output_dir else { return Ok(Vec::new()) };
    args.files.iter().map(|input| Ok((input.as_path(), dir.join(output_name(input, args.format)?)))).collect()
}

/// Where the transcripts of the files from `from` on go, checked before the model loads: the
/// output folder writable and no transcript replacing an input or (without `--overwrite`) an
/// existing file; else standard output open.
fn check_outputs(args: &TranscribeArgs, from: usize) -> Result<()> {
    match &args.output_dir {
        Some(dir) => {
            destination::check_dir(dir)?;
            let paths: Vec<_> = output_paths(args)?.into_iter().skip(from).collect();
            destination::check_outputs(&paths, &args.files, args.overwrite)
        }
        None => destination::check_stdout("redirect it to a file (> transcript.txt) or pass --output-dir"),
    }
}

/// Options the model must support: a language it knows, translation on multilingual models.
fn check_model_options(whisper: &Whisper, options: &TranscribeOptions, dir: &Path) -> Result<()> {
    let multilingual = whisper.config().is_multilingual();
    if let Some(language) = &options.language {
        if !multilingual && language != "en" {
            return Err(Error::Usage(format!(
                "--language {language}: the model in {} is English-only; leave --language out or pass a \
                 multilingual model with --model",
                dir.display()
            )));
        }
        if multilingual && whisper.tokenizer().language_id(language).is_none() {
            let known: Vec<&str> = whisper.tokenizer().languages().iter().map(|l| l.0.as_str()).collect();
            return Err(Error::Usage(format!(
                "--language {language}: not a language the model knows ({})",
                known.join(", ")
            )));
        }
    }
    if options.task == Task::Translate && !multilingual {
        return Err(Error::Usage(format!(
            "--task translate needs a multilingual model; the model in {} is English-only",
            dir.display()
        )));
    }
    Ok(())
}

/// How one input failed: the input alone (reported, the batch goes on), the output every
/// input needs (standard output closed: the batch stops), or the GPU, lost to this process
/// (the batch goes on in a new one, [`handover`]).
enum Failure {
    Input(Error),
    Output(Error),
    Lost(Box<Unfinished>),
}

/// A file whose transcription stopped part way: its samples, the segments reported, where
/// the seek loop stood.
struct Unfinished {
    samples: Samples,
    segments: Vec<Segment>,
    resume: Resume,
}

struct Session<'a> {
    whisper: Whisper,
    options: TranscribeOptions,
    cues: CueOptions,
    load: Load,
    args: &'a TranscribeArgs,
    /// Whether a file's output has gone to standard output yet (for the separating line).
    printed: bool,
    /// `--lose-gpu-after`, until the file it applies to (the first) takes it.
    lose_gpu_after: Option<u32>,
}

impl Session<'_> {
    /// Transcribes `input`, or goes on with it from where `unfinished` says another process
    /// stopped.
    fn transcribe(&mut self, input: &Path, unfinished: Option<Unfinished>) -> std::result::Result<(), Failure> {
        let name = input_name(input);
        let audio_started = Instant::now();
        let resumed = unfinished.is_some();
        let Unfinished { samples, mut segments, mut resume } = match unfinished {
            Some(unfinished) => unfinished,
            None => {
                // A long recording's samples wait in a temporary file, so memory stays flat in
                // its length.
                let decoded = if is_stdin(input) {
                    audio::decode_reader_into(std::io::stdin(), "-", Samples::new())
                } else {
                    audio::decode_file_into(input, Samples::new())
                }
                .map_err(Failure::Input)?;
                for warning in &decoded.warnings {
                    eprintln!("susurrus: warning: {name}: {warning}");
                }
                Unfinished { samples: decoded.samples, segments: Vec::new(), resume: Resume::default() }
            }
        };
        let audio_time = audio_started.elapsed();

        let duration = samples.len() as f64 / f64::from(audio::SAMPLE_RATE);
        let bar = Clear(progress_bar(&name, duration));
        let format = self.args.format;
        let to_stdout_live = format == Format::Txt && self.args.output_dir.is_none();
        if to_stdout_live && !resumed {
            let header = self.header(&name);
            bar.0.suspend(|| write_stdout(&header)).map_err(Failure::Output)?;
        }
        let timestamps = self.options.timestamps;
        let mut stdout_error = None;
        let mut lose_after = self.lose_gpu_after.take();
        let started = Instant::now();
        let result = loop {
            // Where the transcription stands after each window, and the devices lost.
            let mut latest = resume.clone();
            let mut windows = 0;
            let mut on_event = |event: Event| -> ControlFlow<()> {
                match event {
                    Event::Segment(segment) => {
                        let line = output::txt_line(segment, timestamps);
                        if to_stdout_live {
                            if let Err(e) = bar.0.suspend(|| write_stdout(&line)) {
                                stdout_error = Some(e);
                                return ControlFlow::Break(());
                            }
                        } else {
                            bar.0.println(line.trim_end());
                        }
                        segments.push(segment.clone());
                    }
                    // `total` counts whole mel frames; the bar counts the samples' duration.
                    Event::Progress { done, total } => {
                        let done = if done >= total { duration } else { done };
                        bar.0.set_message(format!("{done:.1}/{duration:.1} s"));
                        bar.0.set_position(milliseconds(done));
                    }
                    // Never silent: the transcript is whole, but the user learns the GPU went away.
                    Event::DeviceLost { reason, resume_at } => {
                        latest.devices_lost += 1;
                        bar.0.suspend(|| {
                            eprintln!(
                                "susurrus: warning: {name}: the GPU device was lost ({reason}); opening it again and \
                                 resuming at {resume_at:.1} s"
                            )
                        });
                    }
                    Event::Checkpoint(checkpoint) => {
                        latest.checkpoint = Some(checkpoint.clone());
                        windows += 1;
                        if lose_after == Some(windows) {
                            return ControlFlow::Break(());
                        }
                    }
                }
                ControlFlow::Continue(())
            };
            let result =
                pollster::block_on(self.whisper.transcribe_resuming(&samples, &self.options, &resume, &mut on_event));
            resume = latest;
            // Stopped to lose the device: lost, and the transcription goes on from there.
            if lose_after.is_some_and(|n| n == windows) && result.as_ref().err() == Some(&WhisperError::CANCELLED) {
                lose_after = None;
                self.whisper.lose_device().map_err(|e| Failure::Input(e.into()))?;
                continue;
            }
            break result;
        };
        let transcribe_time = started.elapsed();
        if let Some(e) = stdout_error {
            return Err(Failure::Output(e));
        }
        let mut transcript = match result {
            Err(WhisperError::Core(CoreError::DeviceLostToProcess(why))) => {
                bar.0.suspend(|| eprintln!("susurrus: warning: {name}: {why}; going on in a new process"));
                return Err(Failure::Lost(Box::new(Unfinished { samples, segments, resume })));
            }
            result => result.map_err(|e| Failure::Input(e.into()))?,
        };
        // With the segments of the runs before (another process's, a device's lost).
        transcript.text = segments.iter().map(|s| s.text.as_str()).collect();
        transcript.segments = segments;

        let timings = Timings::new(&self.load, audio_time, transcribe_time, transcript.duration);
        let meta =
            Meta { file: &name, backend: self.whisper.backend_name(), timings: &timings, timestamps, cues: self.cues };
        let text = output::render(format, &transcript, &meta);
        let written = match &self.args.output_dir {
            Some(dir) => {
                let path = dir.join(output_name(input, format).map_err(Failure::Input)?);
                destination::write_whole(&path, &text, self.args.overwrite).map_err(Failure::Input)?;
                format!(" -> {}", path.display())
            }
            None if to_stdout_live => String::new(),
            None => {
                let document = self.header(&name) + &text;
                bar.0.suspend(|| write_stdout(&document)).map_err(Failure::Output)?;
                String::new()
            }
        };
        bar.0.println(format!(
            "{name}: {:.1} s of audio in {:.1} s{written}",
            transcript.duration,
            transcribe_time.as_secs_f64()
        ));
        Ok(())
    }
}

impl Session<'_> {
    /// The line that starts a file's output on standard output in a batch of several files,
    /// as `head` and `tail` mark theirs (after an empty line from the second file on); empty
    /// for one file, for JSON lines (which name their file) and with `--output-dir`.
    fn header(&mut self, name: &str) -> String {
        if self.args.files.len() < 2 || self.args.format == Format::Json || self.args.output_dir.is_some() {
            return String::new();
        }
        let separator = if std::mem::replace(&mut self.printed, true) { "\n" } else { "" };
        format!("{separator}==> {name} <==\n")
    }
}

/// A progress bar or spinner that clears itself from the terminal when dropped, whichever
/// way the work ends.
struct Clear(ProgressBar);

impl Drop for Clear {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

fn spinner(message: String) -> ProgressBar {
    let spinner = ProgressBar::new_spinner().with_message(message);
    spinner.enable_steady_tick(Duration::from_millis(100));
    spinner
}

/// A bar over the audio's `seconds` in milliseconds, labelled with the input's name; hidden
/// when standard error is not a terminal. It moves a 30 s window at a time, too coarsely for
/// an estimate of the time left, so it shows the time spent.
fn progress_bar(name: &str, seconds: f64) -> ProgressBar {
    let style = ProgressStyle::with_template("{prefix} [{wide_bar}] {msg} ({elapsed})")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    ProgressBar::new(milliseconds(seconds))
        .with_style(style)
        .with_prefix(name.to_string())
        .with_message(format!("0.0/{seconds:.1} s"))
}

fn milliseconds(seconds: f64) -> u64 {
    (seconds * 1e3).round().max(0.0) as u64
}

fn is_stdin(input: &Path) -> bool {
    input.as_os_str() == "-"
}

/// The input as the user named it: the path as given, `-` for standard input.
fn input_name(input: &Path) -> String {
    input.display().to_string()
}

/// `<stem>.<extension>` for an input's output file; `stdin.<extension>` for `-`.
fn output_name(input: &Path, format: Format) -> Result<String> {
    let stem = if is_stdin(input) {
        "stdin".to_string()
    } else {
        input
            .file_stem()
            .ok_or_else(|| Error::Usage(format!("{}: no file name to name the output after", input.display())))?
            .to_string_lossy()
            .into_owned()
    };
    Ok(format!("{stem}.{}", format.extension()))
}

/// `error`'s message, prefixed with the input's name unless the message starts with it.
fn naming_input(name: &str, error: &Error) -> String {
    let message = error.to_string();
    if message.starts_with(&format!("{name}: ")) { message } else { format!("{name}: {message}") }
}

fn write_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| Error::io(Path::new("<stdout>"), e))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::backend::BackendChoice;
    use crate::{Cli, Command};

    fn parse(args: &[&str]) -> std::result::Result<TranscribeArgs, String> {
        let argv = ["susurrus", "transcribe"].iter().chain(args);
        match Cli::try_parse_from(argv).map_err(|e| e.to_string())?.command {
            Command::Transcribe(args) => Ok(*args),
            other => Err(format!("parsed as {other:?}")),
        }
    }

    #[test]
    fn flags_left_out_keep_the_reference_defaults() {
        let args = parse(&["a.wav"]).unwrap();
        assert_eq!(args.options().unwrap(), TranscribeOptions::default());
        assert_eq!((args.run.backend, args.format), (BackendChoice::Auto, Format::Txt));
    }

    #[test]
    fn every_flag_reaches_the_options() {
        let args = parse(&[
            "a.wav",
            "-",
            "--language",
            "DE",
            "--task",
            "translate",
            "--no-timestamps",
            "--temperature",
            "0,0.5",
            "--temperature",
            "0.75",
            "--best-of",
            "3",
            "--seed",
            "7",
            "--initial-prompt",
            "Names: Clara.",
            "--no-condition-on-previous-text",
            "--compression-ratio-threshold",
            "2",
            "--log-prob-threshold",
            "-0.5",
            "--no-speech-threshold",
            "0.25",
        ])
        .unwrap();
        assert_eq!(args.files, [PathBuf::from("a.wav"), PathBuf::from("-")]);
        let want = TranscribeOptions {
            language: Some("de".into()),
            task: Task::Translate,
            timestamps: false,
            temperatures: vec![0.0, 0.5, 0.75],
            compression_ratio_threshold: Some(2.0),
            log_prob_threshold: Some(-0.5),
            no_speech_threshold: Some(0.25),
            condition_on_previous_text: false,
            initial_prompt: Some("Names: Clara.".into()),
            best_of: 3,
            seed: 7,
            ..TranscribeOptions::default()
        };
        assert_eq!(args.options().unwrap(), want);
    }

    #[test]
    fn out_of_range_values_are_refused_by_the_parser() {
        for (flag, value, why) in [
            ("--temperature", "-0.1", "a temperature is 0 (greedy decoding) or a number from 0.001 to 100"),
            ("--temperature", "nan", "a temperature is 0 (greedy decoding) or a number from 0.001 to 100"),
            ("--temperature", "1e-40", "a temperature is 0 (greedy decoding) or a number from 0.001 to 100"),
            ("--temperature", "1e30", "a temperature is 0 (greedy decoding) or a number from 0.001 to 100"),
            ("--no-speech-threshold", "1.5", "not a probability from 0 to 1"),
            ("--compression-ratio-threshold", "0", "not a number > 0"),
            ("--log-prob-threshold", "inf", "not a finite number"),
            ("--language", "e1", "a language is a code of letters such as en, de or yue"),
        ] {
            let err = parse(&["a.wav", &format!("{flag}={value}")]).unwrap_err();
            assert!(err.contains(&format!("invalid value '{value}'")) && err.contains(why), "{flag} {value}: {err}");
        }
        assert!(parse(&["a.wav", "--threads", "0"]).unwrap_err().contains("invalid value '0'"));
        assert!(parse(&[]).unwrap_err().contains("<FILE>..."));
    }

    #[test]
    fn stdin_once_and_one_output_file_per_input() {
        let err = check_inputs(&parse(&["-", "a.wav", "-"]).unwrap()).unwrap_err();
        assert_eq!(err.to_string(), "standard input (-) can be read only once");
        let dir = std::env::temp_dir().join(format!("susurrus-check-inputs-{}", std::process::id()));
        for name in ["x/a.wav", "y/a.mp3", "y/b.wav"] {
            std::fs::create_dir_all(dir.join(name).parent().unwrap()).unwrap();
            std::fs::write(dir.join(name), b"RIFF").unwrap();
        }
        let at = |name: &str| dir.join(name).display().to_string();
        let args = parse(&[&at("x/a.wav"), &at("y/a.mp3"), "-o", "out", "-f", "srt"]).unwrap();
        let err = check_inputs(&args).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{} and {} would both be written to out/a.srt; transcribe them in separate runs",
                at("x/a.wav"),
                at("y/a.mp3")
            )
        );
        assert!(check_inputs(&parse(&[&at("x/a.wav"), &at("y/b.wav"), "-o", "out"]).unwrap()).is_ok());
        assert!(check_inputs(&parse(&[&at("x/a.wav"), &at("y/a.mp3")]).unwrap()).is_ok());
        let err = check_inputs(&parse(&[&at("x/a.wav"), &at("x/c.wav")]).unwrap()).unwrap_err().to_string();
        assert_eq!(err, format!("{}: No such file or directory (os error 2)", at("x/c.wav")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn outputs_are_named_after_the_input() {
        assert_eq!(output_name(Path::new("dir/talk.final.wav"), Format::Vtt).unwrap(), "talk.final.vtt");
        assert_eq!(output_name(Path::new("-"), Format::Json).unwrap(), "stdin.json");
        assert_eq!(
            output_name(Path::new("/"), Format::Txt).unwrap_err().to_string(),
            "/: no file name to name the output after"
        );
    }

    #[test]
    fn errors_name_their_input_once() {
        let audio = Error::audio("a.wav", "not audio");
        assert_eq!(naming_input("a.wav", &audio), "a.wav: not audio");
        let core = Error::Whisper(susurrus_whisper::Error::BadAudio("sample 3 is NaN".into()));
        assert_eq!(naming_input("a.wav", &core), "a.wav: bad audio: sample 3 is NaN");
    }
}
