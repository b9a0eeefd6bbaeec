//! A device lost in the middle of a transcription. On wgpu (lavapipe here) the device is
//! really destroyed after the first window: the transcription opens a new one, says so once,
//! goes on from the window in work and ends with the transcript an undisturbed run gives.
//! The policy around it (how many losses are survived, what a failed reopening or another
//! error does) on a backend whose runs fail as a lost device's do when a test says so.

use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;
use std::rc::Rc;

use susurrus_core::exec::{Backend, Call, Wrap, Wrapped};
use susurrus_whisper::decode::transcribe::MAX_REOPENS;
use susurrus_whisper::load::files::load_files;
use susurrus_whisper::{Checkpoint, Error, Event, Pcm, Resume, TranscribeOptions, Transcript, Whisper};

/// The small random model (one-second windows) on `backend`.
fn small_model(backend: Box<dyn Backend>) -> Whisper {
    let (weights, tokenizer) = load_files(&susurrus_testkit::whisper::small_model_files(3).unwrap()).unwrap();
    pollster::block_on(Whisper::new(backend, &weights, tokenizer)).unwrap()
}

fn audio() -> Vec<f32> {
    susurrus_testkit::whisper::three_windows_of_tone()
}

/// Greedy with the temperature fallback (its random numbers must be replayed alike), text
/// only (the timestamp tokens suppressed: the random model's would jump to the end), so
/// each one-second window is decoded in turn.
fn options() -> TranscribeOptions {
    TranscribeOptions {
        beam_size: 1,
        best_of: 2,
        temperatures: vec![0.0, 1.0],
        suppress_tokens: Some(susurrus_testkit::whisper::small_model_text_only()),
        ..Default::default()
    }
}

fn quietly(w: &mut Whisper, pcm: &[f32]) -> Result<Transcript, Error> {
    let options = options();
    pollster::block_on(w.transcribe(pcm, &options, &mut |_| ControlFlow::Continue(())))
}

#[test]
fn a_destroyed_wgpu_device_is_replaced_and_the_transcript_is_unchanged() {
    let (backend, lose_device) = susurrus_testkit::backends::wgpu_and_its_loss();
    let mut w = small_model(backend);
    let pcm = audio();
    let want = quietly(&mut w, &pcm).unwrap();
    assert!(!want.segments.is_empty(), "the random model says something on this audio: {want:?}");
    assert!(
        want.segments.iter().any(|s| s.temperature > 0.0),
        "a window falls back to sampling (the random numbers a resumed window must replay)"
    );

    let mut destroyed_at = None;
    let mut lost = Vec::new();
    let options = options();
    let got = pollster::block_on(w.transcribe(&pcm, &options, &mut |event| {
        match event {
            Event::Progress { done, .. } if done > 0.0 && destroyed_at.is_none() => {
                lose_device();
                destroyed_at = Some(done);
            }
            Event::DeviceLost { reason, resume_at } => lost.push((reason.to_string(), resume_at)),
            _ => {}
        }
        ControlFlow::Continue(())
    }))
    .unwrap();
    let destroyed_at = destroyed_at.expect("a window ended before the last");
    assert!(destroyed_at < want.duration, "destroyed after the last window: {destroyed_at}");
    assert_eq!(lost.len(), 1, "{lost:?}");
    let (reason, resume_at) = &lost[0];
    assert!(reason.to_lowercase().contains("destroy"), "the reason names the destruction: {reason}");
    assert_eq!(*resume_at, destroyed_at, "resumed at the window after the last finished one");
    assert_eq!(got, want);
    // The new device stays the model's.
    assert_eq!(quietly(&mut w, &pcm).unwrap(), want);
}

/// What the test tells the [`Losing`] backend's runs to do.
#[derive(Default)]
struct Faults {
    /// Runs so far (a chain of decoder steps is one).
    runs: Cell<usize>,
    /// The runs that fail, counted as `runs` counts them.
    fail_at: RefCell<Vec<usize>>,
    /// Whether a failure is a lost device (else another error of the device).
    as_loss: Cell<bool>,
    /// Whether reopening fails.
    reopen_fails: Cell<bool>,
    /// Devices opened again.
    reopened: Cell<usize>,
}

impl Faults {
    /// Counts a run; its error when it is to fail.
    fn run(&self) -> susurrus_core::Result<()> {
        let run = self.runs.get();
        self.runs.set(run + 1);
        if !self.fail_at.borrow().contains(&run) {
            return Ok(());
        }
        Err(if self.as_loss.get() {
            susurrus_core::Error::DeviceLost("Unknown: the driver reset the GPU".into())
        } else {
            susurrus_core::Error::Backend("out of memory".into())
        })
    }

    /// The next transcription's runs `runs` fail (counted from its start).
    fn fail(&self, runs: impl IntoIterator<Item = usize>) {
        self.runs.set(0);
        *self.fail_at.borrow_mut() = runs.into_iter().collect();
    }
}

/// What [`Wrapped`] changes for the device-loss tests: the reference executor's runs (a chain
/// of decoder steps is one) fail as [`Faults`] say; reopening gives the same.
#[derive(Clone)]
struct Losing(Rc<Faults>);

impl Wrap for Losing {
    fn name(&self, _inner: &dyn Backend) -> &'static str {
        "losing"
    }

    async fn reopen(&self, _inner: &dyn Backend) -> susurrus_core::Result<Box<dyn Backend>> {
        if self.0.reopen_fails.get() {
            return Err(susurrus_core::Error::Backend("no adapter found".into()));
        }
        self.0.reopened.set(self.0.reopened.get() + 1);
        Ok(susurrus_testkit::backends::reference())
    }

    async fn before(&self, call: Call) -> susurrus_core::Result<()> {
        match call {
            Call::Run | Call::RunChain => self.0.run(),
            Call::RunRepeatedly | Call::ReadState => Ok(()),
        }
    }
}

fn losing_model() -> (Whisper, Rc<Faults>) {
    let faults = Rc::new(Faults::default());
    let backend = Wrapped::new(susurrus_testkit::backends::reference(), Losing(faults.clone()));
    (small_model(Box::new(backend)), faults)
}

/// Transcribes with the runs `fail_at` failing; the times it resumed at and the result.
fn failing(
    w: &mut Whisper,
    faults: &Faults,
    fail_at: impl IntoIterator<Item = usize>,
) -> (Vec<f64>, Result<Transcript, Error>) {
    let pcm = audio();
    let mut lost = Vec::new();
    faults.fail(fail_at);
    let options = options();
    let result = pollster::block_on(w.transcribe(&pcm, &options, &mut |event| {
        if let Event::DeviceLost { resume_at, .. } = event {
            lost.push(resume_at);
        }
        ControlFlow::Continue(())
    }));
    faults.fail([]);
    (lost, result)
}

#[test]
fn losses_are_survived_up_to_a_limit_and_then_are_the_error() {
    let (mut w, faults) = losing_model();
    faults.fail([]);
    let want = quietly(&mut w, &audio()).unwrap();
    let runs = faults.runs.get();
    assert!(runs > 8, "{runs} runs");
    faults.as_loss.set(true);

    // Losses at a third and two thirds of the work: two new devices, the same transcript.
    let (lost, got) = failing(&mut w, &faults, [runs / 3, 2 * runs / 3]);
    assert_eq!(lost.len(), 2, "{lost:?}");
    assert!(lost[0] <= lost[1], "the second resumption at or after the first: {lost:?}");
    assert_eq!(got.unwrap(), want);
    assert_eq!(faults.reopened.get(), 2);

    // The first run on every new device lost too: after MAX_REOPENS new devices, the next loss
    // is the error.
    let (lost, got) = failing(&mut w, &faults, runs / 2..runs / 2 + MAX_REOPENS + 1);
    assert_eq!(lost.len(), MAX_REOPENS, "{lost:?}");
    assert!(lost.iter().all(|&t| t == lost[0]), "resumed at the same window each time: {lost:?}");
    assert_eq!(
        got.unwrap_err().to_string(),
        format!(
            "GPU device lost: Unknown: the driver reset the GPU (the device was lost {} times in this \
             transcription; not opening another)",
            MAX_REOPENS + 1
        )
    );
    // The model works on its last device.
    assert_eq!(quietly(&mut w, &audio()).unwrap(), want);
}

#[test]
fn a_failed_reopening_or_another_error_ends_the_transcription() {
    let (mut w, faults) = losing_model();
    faults.as_loss.set(true);
    faults.reopen_fails.set(true);
    let (lost, got) = failing(&mut w, &faults, [2]);
    assert_eq!(lost, vec![0.0], "reported before the new device is asked for");
    assert_eq!(got.unwrap_err().to_string(), "backend error: no adapter found");

    faults.reopen_fails.set(false);
    faults.as_loss.set(false);
    let (lost, got) = failing(&mut w, &faults, [2]);
    assert!(lost.is_empty(), "{lost:?}");
    assert_eq!(got.unwrap_err().to_string(), "backend error: out of memory");
    assert_eq!(faults.reopened.get(), 0);
}

/// Where a process whose device is lost for good (CUDA after a sticky error) hands over: the
/// checkpoint after each window, serialised as it travels to a new process, resumes a model
/// loaded afresh with the rest of the transcript, segment for segment (the fallback's random
/// numbers included).
#[test]
fn a_checkpoint_resumes_a_new_model_with_the_rest_of_the_transcript() {
    let pcm = audio();
    let mut w = small_model(susurrus_testkit::backends::reference());
    let options = options();
    // Each checkpoint with the number of segments reported before it.
    let mut checkpoints = Vec::new();
    let mut reported = 0;
    let want = pollster::block_on(w.transcribe(&pcm, &options, &mut |event| {
        match event {
            Event::Segment(_) => reported += 1,
            Event::Checkpoint(c) => checkpoints.push((serde_json::to_string(c).unwrap(), reported)),
            _ => {}
        }
        ControlFlow::Continue(())
    }))
    .unwrap();
    assert_eq!(checkpoints.len(), 3, "one per one-second window: {checkpoints:?}");
    assert!(want.segments.iter().any(|s| s.temperature > 0.0), "a window samples: {want:?}");

    for (json, reported) in &checkpoints[..2] {
        let checkpoint: Checkpoint = serde_json::from_str(json).unwrap();
        let resume = Resume { checkpoint: Some(checkpoint.clone()), devices_lost: 1 };
        let mut fresh = small_model(susurrus_testkit::backends::reference());
        let mut first = None;
        let rest = pollster::block_on(fresh.transcribe_resuming(&Pcm(&pcm), &options, &resume, &mut |event| {
            if let Event::Checkpoint(c) = event {
                first.get_or_insert(c.seconds());
            }
            ControlFlow::Continue(())
        }))
        .unwrap();
        assert_eq!(rest.segments, want.segments[*reported..], "resumed at {} s", checkpoint.seconds());
        assert_eq!(rest.language, want.language);
        assert!(first.unwrap() > checkpoint.seconds(), "the next window after the checkpoint's");
    }

    // The losses of earlier processes count towards the limit: one more is the error.
    let (mut w, faults) = losing_model();
    faults.as_loss.set(true);
    faults.fail([0]);
    let resume = Resume { checkpoint: None, devices_lost: MAX_REOPENS };
    let got =
        pollster::block_on(w.transcribe_resuming(&Pcm(&pcm), &options, &resume, &mut |_| ControlFlow::Continue(())));
    assert!(got.unwrap_err().to_string().contains("the device was lost 4 times in this transcription"));
    assert_eq!(faults.reopened.get(), 0);
}
