//! The device behind the transcription API: one thread owns the model (made there, so the
//! backend's context never moves between threads) and transcribes the jobs of a bounded queue
//! in the order they came. Handlers reserve a place in the queue before they read the audio, so
//! a full queue is answered at once and the memory waiting jobs hold is bounded by the queue's
//! length times the upload limit.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use susurrus_core::Error as CoreError;
use susurrus_whisper::{Error as WhisperError, Event, Segment, TranscribeOptions, Transcript};
use tokio::sync::mpsc;

use super::metrics::Metrics;
use crate::backend::RunArgs;
use crate::error::{Error, Result};
use crate::transcribe::load_model;

/// One transcription in the queue.
pub struct Job {
    /// 16 kHz mono.
    pub samples: Vec<f32>,
    pub options: TranscribeOptions,
    /// When the request's time is up: a job still queued then is not started, one in work
    /// stops after the window in work.
    pub deadline: Instant,
    /// Where its segments go as they are decoded, then its end. A closed receiver (the client
    /// went away) stops the job.
    pub events: mpsc::UnboundedSender<Progress>,
}

/// What a job reports.
pub enum Progress {
    Segment(Segment),
    Done(std::result::Result<Transcript, JobError>),
}

/// Why a job gave no transcript.
pub enum JobError {
    /// The request's time limit passed.
    TimedOut,
    /// The options or the audio were refused by the model (a client error).
    Refused(String),
    /// The device failed.
    Failed(String),
    /// The device is lost to this process (a CUDA context does not come back): this job and
    /// every later one fail.
    Lost(String),
}

/// What the served model is.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// The model folder's name: the id `/v1/models` lists.
    pub id: String,
    pub multilingual: bool,
    /// Language codes the model knows (only "en" for English-only models).
    pub languages: Vec<String>,
    /// The backend's name, as `susurrus info` says it.
    pub backend: String,
}

/// The model on its thread and the queue into it.
pub struct Device {
    jobs: mpsc::Sender<Job>,
    thread: Option<JoinHandle<()>>,
    /// False once the device is lost to the process: every job after would fail, so the
    /// health check says so and a supervisor restarts the server.
    usable: Arc<AtomicBool>,
    /// Jobs the device is transcribing (0 or 1).
    working: Arc<AtomicUsize>,
    pub info: ModelInfo,
}

impl Device {
    /// Loads the model in `dir` on the backend `run` names, on a thread of its own, and starts
    /// taking jobs: at most `queue` wait at a time. Errors when the model or backend cannot be
    /// opened.
    pub fn start(run: RunArgs, dir: PathBuf, queue: usize, metrics: Arc<Metrics>) -> Result<Device> {
        let (jobs, mut queued) = mpsc::channel::<Job>(queue);
        let (loaded, ready) = std::sync::mpsc::channel();
        let usable = Arc::new(AtomicBool::new(true));
        let still_usable = usable.clone();
        let working = Arc::new(AtomicUsize::new(0));
        let at_work = working.clone();
        let thread = std::thread::Builder::new()
            .name("susurrus-device".into())
            .spawn(move || {
                let (mut whisper, _) = match load_model(&run, &dir, None) {
                    Ok(loaded) => loaded,
                    Err(e) => {
                        let _ = loaded.send(Err(e));
                        return;
                    }
                };
                let config = whisper.config();
                let languages = if config.is_multilingual() {
                    whisper.tokenizer().languages().iter().map(|(code, _)| code.clone()).collect()
                } else {
                    vec!["en".to_string()]
                };
                let id =
                    dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
                let info = ModelInfo {
                    id,
                    multilingual: config.is_multilingual(),
                    languages,
                    backend: whisper.backend_name().to_owned(),
                };
                if loaded.send(Ok(info)).is_err() {
                    return;
                }
                while let Some(job) = queued.blocking_recv() {
                    at_work.store(1, Ordering::Relaxed);
                    let started = Instant::now();
                    let seconds = job.samples.len() as f64 / f64::from(crate::audio::SAMPLE_RATE);
                    let done = run_job(&mut whisper, &job);
                    if let Err(JobError::Lost(_)) = &done {
                        still_usable.store(false, Ordering::Relaxed);
                    }
                    if done.is_ok() {
                        metrics.transcribed(seconds, started.elapsed().as_secs_f64());
                    }
                    at_work.store(0, Ordering::Relaxed);
                    let _ = job.events.send(Progress::Done(done));
                }
            })
            .map_err(|e| Error::Usage(format!("cannot start the device thread: {e}")))?;
        let info =
            ready.recv().map_err(|_| Error::Usage("the device thread ended while loading the model".into()))??;
        Ok(Device { jobs, thread: Some(thread), usable, working, info })
    }

    /// A place in the queue, held until the job is sent through it; `None` when the queue is
    /// full or the device has stopped.
    pub fn reserve(&self) -> Option<mpsc::OwnedPermit<Job>> {
        self.jobs.clone().try_reserve_owned().ok()
    }

    /// Jobs waiting (or with their place reserved), and the most that may.
    pub fn queue(&self) -> (usize, usize) {
        (self.jobs.max_capacity() - self.jobs.capacity(), self.jobs.max_capacity())
    }

    /// Jobs being transcribed (0 or 1).
    pub fn working(&self) -> usize {
        self.working.load(Ordering::Relaxed)
    }

    /// Whether the device still takes jobs and can run them.
    pub fn healthy(&self) -> bool {
        self.usable.load(Ordering::Relaxed) && self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for Device {
    /// Lets the queue empty: the thread ends once every sender (the handlers' permits
    /// included) is gone.
    fn drop(&mut self) {
        let (jobs, _) = mpsc::channel(1);
        drop(std::mem::replace(&mut self.jobs, jobs));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Transcribes one job, its segments sent as they come; stops when the client is gone or
/// the deadline passes (checked before it starts and after every window).
fn run_job(whisper: &mut susurrus_whisper::Whisper, job: &Job) -> std::result::Result<Transcript, JobError> {
    let over = || job.events.is_closed() || Instant::now() >= job.deadline;
    if over() {
        return Err(JobError::TimedOut);
    }
    let mut on_event = |event: Event| {
        if let Event::Segment(segment) = event {
            let _ = job.events.send(Progress::Segment(segment.clone()));
        }
        if over() { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    };
    match pollster::block_on(whisper.transcribe(&job.samples, &job.options, &mut on_event)) {
        Ok(transcript) => Ok(transcript),
        Err(e) if e == WhisperError::CANCELLED => Err(JobError::TimedOut),
        Err(e @ (WhisperError::Core(CoreError::BadOption(_)) | WhisperError::BadAudio(_))) => {
            Err(JobError::Refused(e.to_string()))
        }
        Err(WhisperError::Core(CoreError::DeviceLostToProcess(why))) => {
            Err(JobError::Lost(format!("the GPU device was lost to this server: {why}")))
        }
        Err(e) => Err(JobError::Failed(e.to_string())),
    }
}
