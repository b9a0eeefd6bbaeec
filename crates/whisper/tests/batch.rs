//! Many transcriptions on one model through the batch scheduler, as `serve --api --batch`
//! runs them (each on a thread of its own, the model on this one): each transcription gets
//! the transcript it gets alone (scores to f32 rounding), with its windows encoded and
//! decoded in groups beside the others', and a device destroyed between two group steps is
//! replaced with every transcript unchanged.

use std::ops::ControlFlow;

use susurrus_testkit::batch::{Together, assert_same_transcripts, transcribe_together};
use susurrus_whisper::load::files::load_files;
use susurrus_whisper::{TranscribeOptions, Transcript, Whisper};

/// Beam search (5 beams, the groups'), with the temperature fallback, text only (the random
/// model's timestamps would jump to the end), so each one-second window is decoded in turn.
fn options() -> TranscribeOptions {
    TranscribeOptions {
        best_of: 2,
        temperatures: vec![0.0, 1.0],
        suppress_tokens: Some(susurrus_testkit::whisper::small_model_text_only()),
        ..Default::default()
    }
}

/// Three recordings of three one-second windows each, all different.
fn clips() -> Vec<Vec<f32>> {
    let tone = susurrus_testkit::whisper::three_windows_of_tone();
    (0..3)
        .map(|k| {
            tone.iter()
                .enumerate()
                .map(|(i, s)| s * (1.0 + 0.2 * k as f32) + ((i * (k + 3)) % 7) as f32 * 1e-3)
                .collect()
        })
        .collect()
}

fn small_model(backend: Box<dyn susurrus_core::exec::Backend>) -> Whisper {
    let (weights, tokenizer) = load_files(&susurrus_testkit::whisper::small_model_files(3).unwrap()).unwrap();
    pollster::block_on(Whisper::new(backend, &weights, tokenizer)).unwrap()
}

/// The transcripts of `clips` one at a time, then the model compiled with 3 groups.
fn alone_then_grouped(w: &mut Whisper, clips: &[Vec<f32>]) -> Vec<Transcript> {
    let alone: Vec<Transcript> = clips
        .iter()
        .map(|pcm| pollster::block_on(w.transcribe(pcm, &options(), &mut |_| ControlFlow::Continue(()))).unwrap())
        .collect();
    assert!(alone.iter().all(|t| !t.segments.is_empty()), "the random model says something: {alone:?}");
    pollster::block_on(w.compile_groups(3, &options())).unwrap();
    alone
}

#[test]
fn transcriptions_decoded_together_each_get_their_own_transcript() {
    let mut w = small_model(susurrus_testkit::backends::wgpu());
    let clips = clips();
    let alone = alone_then_grouped(&mut w, &clips);
    let Together { transcripts, steps, windows, encoded } = transcribe_together(&mut w, &clips, &options(), |_| {});
    assert_same_transcripts(&transcripts, &alone, 1e-5);
    assert!(windows > steps, "group steps decoded several windows at once: {windows} windows in {steps} steps");
    assert!(encoded >= clips.len(), "the first windows, held until all came, were encoded together: {encoded}");
}

#[test]
fn a_device_destroyed_between_group_steps_is_replaced_and_every_transcript_is_unchanged() {
    let (backend, lose_device) = susurrus_testkit::backends::wgpu_and_its_loss();
    let mut w = small_model(backend);
    let clips = clips();
    let alone = alone_then_grouped(&mut w, &clips);
    let mut destroyed = false;
    let together = transcribe_together(&mut w, &clips, &options(), |steps| {
        if steps == 2 && !destroyed {
            lose_device();
            destroyed = true;
        }
    });
    assert!(destroyed);
    assert_same_transcripts(&together.transcripts, &alone, 1e-5);
}
