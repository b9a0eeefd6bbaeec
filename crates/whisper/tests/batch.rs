//! Many transcriptions on one model through the batch scheduler, as `serve --api --batch`
//! runs them (each on a thread of its own, the model on this one): each transcription gets
//! the transcript it gets alone (scores to f32 rounding), with its windows encoded and
//! decoded in groups beside the others', and a device destroyed between two group steps is
//! replaced with every transcript unchanged.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::mpsc;

use susurrus_testkit::golden;
use susurrus_whisper::batch::{RemoteModel, Reply, Request, Scheduler};
use susurrus_whisper::files::load_files;
use susurrus_whisper::transcribe::transcribe_on;
use susurrus_whisper::{Error, Pcm, TranscribeOptions, Transcript, Whisper};

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

struct Call {
    client: u64,
    request: Request,
    answer: mpsc::Sender<Result<Reply, Error>>,
}

/// Transcribes `clips` at once, each on a thread with a [`RemoteModel`], `w` answering
/// here; the first windows' decodings are held until all have come, so that they are decoded
/// together. `after_work` sees the group steps run so far after every round.
/// Returns the transcripts, the scheduler's (group steps, windows they decoded) and the
/// windows encoded together.
fn transcribe_together(
    w: &mut Whisper,
    clips: &[Vec<f32>],
    mut after_work: impl FnMut(u64),
) -> (Vec<Transcript>, (u64, u64), usize) {
    let host = Arc::new(w.host_parts());
    let (calls, called) = mpsc::channel::<Call>();
    let threads: Vec<_> =
        clips
            .iter()
            .cloned()
            .enumerate()
            .map(|(client, pcm)| {
                let (calls, host) = (calls.clone(), host.clone());
                std::thread::spawn(move || {
                    let call = |request| {
                        let (answer, answered) = mpsc::channel();
                        calls.send(Call { client: client as u64, request, answer }).unwrap();
                        answered.recv().unwrap()
                    };
                    let mut model = RemoteModel::new(host, call);
                    pollster::block_on(transcribe_on(&mut model, &Pcm(&pcm), &options(), &mut |_| {
                        ControlFlow::Continue(())
                    }))
                })
            })
            .collect();
    drop(calls);
    let mut scheduler = Scheduler::new(w);
    let mut held = Vec::new();
    let mut first_round = true;
    let mut encoded_together = 0;
    loop {
        if scheduler.idle() {
            let Ok(call) = called.recv() else { break };
            if first_round && matches!(call.request, Request::Decode(_)) {
                held.push(call);
                if held.len() == clips.len() {
                    first_round = false;
                    for call in held.drain(..) {
                        scheduler.submit(call.client, call.request, call.answer);
                    }
                }
                continue;
            }
            scheduler.submit(call.client, call.request, call.answer);
        }
        while let Ok(call) = called.try_recv() {
            scheduler.submit(call.client, call.request, call.answer);
        }
        let work = pollster::block_on(scheduler.work(w));
        encoded_together += work.encoded;
        for (answer, reply) in work.answers {
            let _ = answer.send(reply);
        }
        after_work(scheduler.steps().0);
    }
    let transcripts = threads.into_iter().map(|t| t.join().unwrap().unwrap()).collect();
    (transcripts, scheduler.steps(), encoded_together)
}

/// `got` is `want` in every token, text, time and choice; the window scores (an average
/// log-probability, the no-speech probability) may differ in their last f32 bits, since a
/// group's ring cache holds a window's keys in other slots than its cache alone, and
/// attention then sums them in another order.
fn assert_same_transcripts(got: &[Transcript], want: &[Transcript]) {
    let scores =
        |t: &Transcript| t.segments.iter().map(|s| (s.avg_logprob, s.no_speech_prob as f64)).collect::<Vec<_>>();
    let exact = |t: &Transcript| {
        let mut t = t.clone();
        for s in &mut t.segments {
            (s.avg_logprob, s.no_speech_prob) = (0.0, 0.0);
        }
        t
    };
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(exact(g), exact(w));
        for ((g_lp, g_ns), (w_lp, w_ns)) in scores(g).into_iter().zip(scores(w)) {
            assert!((g_lp - w_lp).abs() < 1e-5 && (g_ns - w_ns).abs() < 1e-6, "scores {got:?} against {want:?}");
        }
    }
}

fn small_model(backend: susurrus_core::exec::wgpu::WgpuBackend) -> Whisper {
    let (weights, tokenizer) = load_files(&susurrus_testkit::whisper::small_model_files(3).unwrap()).unwrap();
    pollster::block_on(Whisper::new(Box::new(backend), &weights, tokenizer)).unwrap()
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
    let mut w = small_model(golden::wgpu());
    let clips = clips();
    let alone = alone_then_grouped(&mut w, &clips);
    let (together, (steps, windows), encoded) = transcribe_together(&mut w, &clips, |_| {});
    assert_same_transcripts(&together, &alone);
    assert!(windows > steps, "group steps decoded several windows at once: {windows} windows in {steps} steps");
    assert!(encoded >= clips.len(), "the first windows, held until all came, were encoded together: {encoded}");
}

#[test]
fn a_device_destroyed_between_group_steps_is_replaced_and_every_transcript_is_unchanged() {
    let backend = golden::wgpu();
    let device = backend.device().clone();
    let mut w = small_model(backend);
    let clips = clips();
    let alone = alone_then_grouped(&mut w, &clips);
    let mut destroyed = false;
    let (together, ..) = transcribe_together(&mut w, &clips, |steps| {
        if steps == 2 && !destroyed {
            device.destroy();
            destroyed = true;
        }
    });
    assert!(destroyed);
    assert_same_transcripts(&together, &alone);
}
