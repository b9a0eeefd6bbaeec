//! Many transcriptions on one model through the batch scheduler, as `serve --api --batch`
//! runs them (each on a thread of its own, the model on the caller's), and the comparison of
//! their transcripts with each one's alone: what the batch suites of every backend assert.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::mpsc;

use susurrus_whisper::decode::batch::{RemoteModel, Reply, Request, Scheduler};
use susurrus_whisper::decode::transcribe::transcribe_on;
use susurrus_whisper::{Error, Pcm, TranscribeOptions, Transcript, Whisper};

struct Call {
    client: u64,
    request: Request,
    answer: mpsc::Sender<Result<Reply, Error>>,
}

/// What [`transcribe_together`] did: the transcripts in the order of the clips, the group
/// steps run and the windows they decoded, and the windows encoded together.
pub struct Together {
    pub transcripts: Vec<Transcript>,
    pub steps: u64,
    pub windows: u64,
    pub encoded: usize,
}

/// Transcribes `clips` with `options` at once, each on a thread with a [`RemoteModel`], `w`
/// answering here; the first windows' decodings are held until all have come, so that they
/// are encoded and decoded together. `after_work` sees the group steps run so far after
/// every round.
pub fn transcribe_together(
    w: &mut Whisper,
    clips: &[Vec<f32>],
    options: &TranscribeOptions,
    mut after_work: impl FnMut(u64),
) -> Together {
    let host = Arc::new(w.host_parts());
    let (calls, called) = mpsc::channel::<Call>();
    let threads: Vec<_> = clips
        .iter()
        .cloned()
        .enumerate()
        .map(|(client, pcm)| {
            let (calls, host, options) = (calls.clone(), host.clone(), options.clone());
            std::thread::spawn(move || {
                let call = |request| {
                    let (answer, answered) = mpsc::channel();
                    calls.send(Call { client: client as u64, request, answer }).expect("the model thread");
                    answered.recv().expect("an answer")
                };
                let mut model = RemoteModel::new(host, call);
                pollster::block_on(transcribe_on(&mut model, &Pcm(&pcm), &options, &mut |_| ControlFlow::Continue(())))
            })
        })
        .collect();
    drop(calls);
    let mut scheduler = Scheduler::new(w);
    let mut held = Vec::new();
    let mut first_round = true;
    let mut encoded = 0;
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
        encoded += work.encoded;
        for (answer, reply) in work.answers {
            let _ = answer.send(reply);
        }
        after_work(scheduler.steps().0);
    }
    let transcripts = threads
        .into_iter()
        .map(|t| t.join().expect("a transcription thread").unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let (steps, windows) = scheduler.steps();
    Together { transcripts, steps, windows, encoded }
}

/// `got` is `want` in every token, text, time and choice; the window scores (an average
/// log-probability, the no-speech probability) may differ by `tolerance`: a group's ring
/// cache holds a window's keys in other slots than its cache alone, so attention sums them
/// in another order, and a backend may round products of more rows otherwise.
pub fn assert_same_transcripts(got: &[Transcript], want: &[Transcript], tolerance: f64) {
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
            let close = (g_lp - w_lp).abs() < tolerance && (g_ns - w_ns).abs() < tolerance / 10.0;
            assert!(close, "scores {got:?} against {want:?}");
        }
    }
}
