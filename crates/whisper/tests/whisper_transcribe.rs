//! The transcription API's behaviour at its edges, with the real tiny.en model on the CPU
//! executor: empty and non-finite audio, bad options, cancellation (the model stays usable),
//! events.

use susurrus_testkit::golden;

use std::ops::ControlFlow;

use susurrus_whisper::Error;
use susurrus_whisper::{Event, TranscribeOptions, Whisper};

fn whisper() -> Whisper {
    pollster::block_on(Whisper::load_dir(susurrus_testkit::backends::reference(), &golden::model_dir())).unwrap()
}

fn run(w: &mut Whisper, pcm: &[f32], options: &TranscribeOptions) -> Result<susurrus_whisper::Transcript, Error> {
    pollster::block_on(w.transcribe(pcm, options, &mut |_| ControlFlow::Continue(())))
}

/// The segments' tokens of `clip`'s reference run with faster-whisper's defaults (beam 5, as
/// `TranscribeOptions::default()`).
fn reference_tokens(clip: &str) -> Vec<Vec<u32>> {
    let record = golden::fixture(clip);
    let run = record["runs"].as_array().unwrap().iter().find(|r| r["name"] == "beam_5").unwrap().clone();
    run["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect())
        .collect()
}

#[test]
fn empty_and_tiny_audio_give_empty_transcripts() {
    let mut w = whisper();
    for len in [0, 1, 159] {
        let t = run(&mut w, &vec![0.0; len], &TranscribeOptions::default()).unwrap();
        assert!(t.segments.is_empty() && t.text.is_empty(), "{len} samples: {t:?}");
        assert_eq!(t.language, "en");
        assert_eq!(t.duration, len as f64 / 16000.0);
    }
}

#[test]
fn non_finite_audio_is_an_error_naming_the_sample() {
    let mut w = whisper();
    let mut pcm = vec![0.0f32; 32000];
    pcm[16000] = f32::NAN;
    let err = run(&mut w, &pcm, &TranscribeOptions::default()).unwrap_err();
    assert_eq!(err.to_string(), "bad audio: sample 16000 (1.000 s) is NaN; audio must be finite numbers");
    pcm[16000] = 0.0;
    pcm[5] = f32::NEG_INFINITY;
    let err = run(&mut w, &pcm, &TranscribeOptions::default()).unwrap_err();
    assert_eq!(err.to_string(), "bad audio: sample 5 (0.000 s) is -inf; audio must be finite numbers");
}

#[test]
fn bad_options_are_errors() {
    let mut w = whisper();
    let pcm = vec![0.0f32; 1600];
    let cases = [
        (
            TranscribeOptions { temperatures: vec![], ..Default::default() },
            "invalid option: temperatures: at least one temperature is needed",
        ),
        (
            TranscribeOptions { temperatures: vec![0.0, f32::NAN], ..Default::default() },
            "invalid option: temperatures: NaN is not 0 or a value from 0.001 to 100",
        ),
        (TranscribeOptions { best_of: 0, ..Default::default() }, "invalid option: best_of: 0 is not 1 to 32"),
        (TranscribeOptions { best_of: 65535, ..Default::default() }, "invalid option: best_of: 65535 is not 1 to 32"),
        (
            TranscribeOptions { language: Some("de".into()), ..Default::default() },
            "invalid option: language 'de': this model is English-only",
        ),
        (
            TranscribeOptions { suppress_tokens: Some(vec![60000]), ..Default::default() },
            "invalid option: suppress_tokens: 60000 is outside the vocabulary of 51864",
        ),
        (
            TranscribeOptions { suppress_tokens: Some(vec![-1, -2]), ..Default::default() },
            "invalid option: suppress_tokens: -2 is not a token id (-1 stands for the model's list)",
        ),
    ];
    for (options, want) in cases {
        let pcm = if options.language.is_some() { vec![0.1f32; 16000] } else { pcm.clone() };
        assert_eq!(run(&mut w, &pcm, &options).unwrap_err().to_string(), want);
    }
}

#[test]
fn cancelling_stops_with_an_error_and_the_model_stays_usable() {
    let mut w = whisper();
    let record = golden::fixture("short_3");
    let pcm = golden::read_wav(record["audio"]["file"].as_str().unwrap());
    let mut seen = 0;
    let err = pollster::block_on(w.transcribe(&pcm, &TranscribeOptions::default(), &mut |e| {
        if let Event::Segment(_) = e {
            seen += 1;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }))
    .unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(seen, 1);
    let t = run(&mut w, &pcm, &TranscribeOptions::default()).unwrap();
    let tokens: Vec<Vec<u32>> = t.segments.iter().map(|s| s.tokens.clone()).collect();
    assert_eq!(tokens, reference_tokens("short_3"));
}

#[test]
fn progress_reaches_the_end_and_segments_stream_in_order() {
    let mut w = whisper();
    let record = golden::fixture("short_3");
    let pcm = golden::read_wav(record["audio"]["file"].as_str().unwrap());
    let mut events = Vec::new();
    let t = pollster::block_on(w.transcribe(&pcm, &TranscribeOptions::default(), &mut |e| {
        events.push(match e {
            Event::Segment(s) => format!("segment {:.2}", s.start),
            Event::Progress { done, total } => format!("progress {done:.2}/{total:.2}"),
            Event::DeviceLost { reason, .. } => format!("device lost: {reason}"),
            Event::Checkpoint(c) => format!("checkpoint {:.2}", c.seconds()),
        });
        ControlFlow::Continue(())
    }))
    .unwrap();
    let total = pcm.len() / 160;
    let want_total = format!("{:.2}", total as f64 / 100.0);
    assert_eq!(events.last().unwrap(), &format!("progress {want_total}/{want_total}"));
    let starts: Vec<String> = t.segments.iter().map(|s| format!("segment {:.2}", s.start)).collect();
    let streamed: Vec<String> = events.iter().filter(|e| e.starts_with("segment")).cloned().collect();
    assert_eq!(streamed, starts);
    assert!(events.iter().filter(|e| e.starts_with("progress")).count() >= 2, "{events:?}");
    // Every window ends with where it leaves the transcription, then the progress to there
    // (the last window's seek may pass the content's end).
    for (i, event) in events.iter().enumerate().filter(|(_, e)| e.starts_with("progress")) {
        let (done, total) = event.trim_start_matches("progress ").split_once('/').unwrap();
        let checkpoint = events[i - 1].strip_prefix("checkpoint ").unwrap_or_else(|| panic!("{events:?}"));
        if done != total {
            assert_eq!(checkpoint, done, "{events:?}");
        }
    }
}

/// Weights that bypass the loaders' check (built in memory) with a NaN: the window's scores
/// are not finite, and the transcription is an error naming the window, not garbage text.
#[test]
fn non_finite_scores_are_an_error_naming_the_window() {
    let (weights, tokenizer) =
        susurrus_whisper::load::files::load_files(&susurrus_testkit::whisper::small_model_files(1).unwrap()).unwrap();
    let mut made = 0;
    let damaged = susurrus_whisper::load::weights::WhisperWeights::from_fn(
        weights.config().clone(),
        susurrus_core::ir::DType::F32,
        |ty| {
            made += 1;
            let mut values = vec![0.01; ty.shape.numel()];
            if made == 5 {
                values[0] = f32::NAN;
            }
            susurrus_core::tensor::Tensor::f32(ty.shape.clone(), values).unwrap()
        },
    )
    .unwrap();
    let mut w = pollster::block_on(Whisper::new(susurrus_testkit::backends::reference(), &damaged, tokenizer)).unwrap();
    let options = TranscribeOptions { beam_size: 1, temperatures: vec![0.0], ..Default::default() };
    let err = run(&mut w, &vec![0.1; 16000], &options).unwrap_err().to_string();
    assert!(
        err.starts_with("the model: the window at 0.00 s gave non-finite scores (average log-probability NaN"),
        "{err}"
    );
}

/// A timestamp token may name any time of the 30 s window, and over silence or at a high
/// temperature the model names times after the last sample. A window over 2 s of audio whose
/// decoder names 1.0 to 1.5 s and then 25 to 29 s gets its second segment at the audio's end.
#[test]
fn times_never_pass_the_end_of_the_audio() {
    use std::sync::Arc;
    use susurrus_whisper::decode::batch::{RemoteModel, Reply, Request};
    use susurrus_whisper::decode::transcribe::transcribe_on;
    use susurrus_whisper::decode::window::Decoded;

    let host = Arc::new(whisper().host_parts());
    let ids = host.tokenizer.special_ids().clone();
    let ts = |seconds: f64| ids.timestamp_begin + (seconds / 0.02).round() as u32;
    let (hello, there) = (host.tokenizer.encode(" Hello").unwrap(), host.tokenizer.encode(" there").unwrap());
    let tokens = [vec![ts(1.0)], hello, vec![ts(1.5), ts(25.0)], there, vec![ts(29.0)]].concat();
    let mut model = RemoteModel::new(host, |request| match request {
        Request::Prepare { .. } => Ok(Reply::Prepared),
        Request::Decode(job) => {
            let decoded = Decoded {
                tokens: tokens.clone(),
                avg_logprob: -0.2,
                score: -1.0,
                no_speech_prob: 0.0,
                temperature: 0.0,
                compression_ratio: 1.0,
            };
            Ok(Reply::Decoded(decoded, Box::new(job.rng)))
        }
        _ => Err(Error::backend("only windows are decoded here")),
    });
    let audio = vec![0.01f32; 2 * 16_000];
    let options = TranscribeOptions::default();
    let transcript =
        pollster::block_on(transcribe_on(&mut model, &audio, &options, &mut |_| ControlFlow::Continue(()))).unwrap();
    // Timestamps are multiples of an f32 0.02 s: to the millisecond.
    let ms = |t: f64| (t * 1000.0).round() / 1000.0;
    let times: Vec<(f64, f64, &str)> =
        transcript.segments.iter().map(|s| (ms(s.start), ms(s.end), s.text.as_str())).collect();
    assert_eq!(times, [(1.0, 1.5, " Hello"), (2.0, 2.0, " there")]);
}
