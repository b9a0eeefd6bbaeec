//! Token-exact transcription: every golden clip, transcribed with the reference's options,
//! gives the reference's segments — the same token ids, the same text, start and end within
//! 0.02 s — on the CPU reference executor and on wgpu. The fixtures (audio made with
//! espeak-ng, transcripts from faster-whisper 1.2.1 / CTranslate2 4.8.5 greedy) come from
//! tests/golden/make_golden.sh.

mod golden;

use std::ops::ControlFlow;
use std::time::Instant;

use serde_json::Value;
use susurrus_core::exec::Backend;
use susurrus_core::whisper::{Event, TranscribeOptions, Whisper};

const CLIPS: [&str; 6] = ["short_1", "short_2", "short_3", "noisy", "silence", "long"];

/// The reference run's options as ours (greedy, English, the reference defaults otherwise).
fn options(run: &Value) -> TranscribeOptions {
    let o = &run["options"];
    assert_eq!(o["beam_size"], 1, "the fixtures are greedy runs");
    TranscribeOptions {
        language: o["language"].as_str().map(str::to_string),
        timestamps: !o["without_timestamps"].as_bool().unwrap_or(false),
        initial_prompt: o["initial_prompt"].as_str().map(str::to_string),
        ..TranscribeOptions::default()
    }
}

/// Compares one run; returns the differences found.
fn check_run(whisper: &mut Whisper, clip: &str, run: &Value, pcm: &[f32]) -> Vec<String> {
    let name = format!("{clip}/{}", run["name"].as_str().unwrap());
    let started = Instant::now();
    let mut streamed = 0;
    let mut on_event = |e: Event| {
        if let Event::Segment(_) = e {
            streamed += 1;
        }
        ControlFlow::Continue(())
    };
    let transcript = match pollster::block_on(whisper.transcribe(pcm, &options(run), &mut on_event)) {
        Ok(t) => t,
        Err(e) => return vec![format!("{name}: {e}")],
    };
    println!(
        "{} {name}: {:.1} s for {:.1} s of audio, {} segments",
        whisper.backend_name(),
        started.elapsed().as_secs_f64(),
        transcript.duration,
        transcript.segments.len()
    );
    let mut problems = Vec::new();
    let want = run["segments"].as_array().unwrap();
    if transcript.segments.len() != want.len() || streamed != want.len() {
        problems.push(format!(
            "{name}: {} segments ({streamed} streamed), reference has {}",
            transcript.segments.len(),
            want.len()
        ));
    }
    for (i, (got, want)) in transcript.segments.iter().zip(want).enumerate() {
        let tokens: Vec<u32> = want["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
        if got.tokens != tokens {
            problems.push(format!("{name} segment {i}: tokens {:?}\n  reference {:?}", got.tokens, tokens));
        }
        if got.text != want["text"].as_str().unwrap() {
            problems.push(format!("{name} segment {i}: text {:?}, reference {:?}", got.text, want["text"]));
        }
        for (what, value) in [("start", got.start), ("end", got.end)] {
            let reference = want[what].as_f64().unwrap();
            if (value - reference).abs() > 0.02 {
                problems.push(format!("{name} segment {i}: {what} {value}, reference {reference}"));
            }
        }
        let reference_nsp = want["no_speech_prob"].as_f64().unwrap();
        if (got.no_speech_prob as f64 - reference_nsp).abs() > 2e-3 {
            problems
                .push(format!("{name} segment {i}: no_speech_prob {}, reference {reference_nsp}", got.no_speech_prob));
        }
        let reference_lp = want["avg_logprob"].as_f64().unwrap();
        if (got.avg_logprob - reference_lp).abs() > 2e-3 {
            problems.push(format!("{name} segment {i}: avg_logprob {}, reference {reference_lp}", got.avg_logprob));
        }
        if got.temperature as f64 != want["temperature"].as_f64().unwrap() {
            problems.push(format!(
                "{name} segment {i}: temperature {}, reference {}",
                got.temperature, want["temperature"]
            ));
        }
    }
    if transcript.text != run["text"].as_str().unwrap() {
        problems.push(format!("{name}: text {:?}\n  reference {:?}", transcript.text, run["text"]));
    }
    problems
}

fn transcripts_match_reference(backend: Box<dyn Backend>) {
    let mut whisper = pollster::block_on(Whisper::load_dir(backend, &golden::model_dir())).unwrap();
    let mut problems = Vec::new();
    for clip in CLIPS {
        let record = golden::fixture(clip);
        let pcm = golden::read_wav(record["audio"]["file"].as_str().unwrap());
        for run in record["runs"].as_array().unwrap() {
            problems.extend(check_run(&mut whisper, clip, run, &pcm));
        }
    }
    assert!(problems.is_empty(), "{} differences from the reference:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn cpu_transcripts_match_reference() {
    transcripts_match_reference(Box::new(golden::cpu()));
}

#[test]
fn wgpu_transcripts_match_reference() {
    transcripts_match_reference(Box::new(golden::wgpu()));
}
