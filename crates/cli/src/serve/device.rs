//! The device behind the transcription API: one thread owns the model (made there, so the
//! backend's context never moves between threads) and answers the device calls of every
//! transcription in work with whisper's `batch::Scheduler`, whose group beam search decodes
//! their windows together (`--batch` groups). Jobs come from a bounded queue in the order they
//! came; as many run at once as there are groups, plus one, each on a thread of its own that
//! runs the seek loop and hands its device calls to the model's thread. Handlers reserve a
//! place in the queue before they read the audio, so a full queue is answered at once and the
//! memory waiting jobs hold is bounded by the queue's length times the upload limit.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use susurrus_core::Error as CoreError;
use susurrus_whisper::decode::batch::{HostParts, RemoteModel, Reply, Request, Scheduler};
use susurrus_whisper::decode::transcribe::transcribe_on;
use susurrus_whisper::{Audio, Error as WhisperError, Event, Segment, TranscribeOptions, Transcript, Whisper};
use tokio::sync::mpsc;

use super::metrics::Metrics;
use crate::audio::Samples;
use crate::backend::RunArgs;
use crate::error::{Error, Result};
use crate::load::load_model;

/// One transcription in the queue.
pub struct Job {
    /// 16 kHz mono, in memory for two minutes, then in a temporary file.
    pub samples: Samples,
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
    /// Jobs in work.
    working: Arc<AtomicUsize>,
    /// The most jobs in work at once.
    pub concurrency: usize,
    pub info: ModelInfo,
}

/// A device call of one job, and where its answer goes.
struct Call {
    client: u64,
    request: Request,
    answer: std::sync::mpsc::Sender<susurrus_whisper::Result<Reply>>,
}

impl Device {
    /// Loads the model in `dir` on the backend `run` names, on a thread of its own, and starts
    /// taking jobs: at most `queue` wait at a time. Errors when the model or backend cannot be
    /// opened.
    pub fn start(
        run: RunArgs,
        dir: PathBuf,
        id: String,
        queue: usize,
        batch: Option<usize>,
        metrics: Arc<Metrics>,
    ) -> Result<Device> {
        let (jobs, queued) = mpsc::channel::<Job>(queue);
        let (calls, called) = std::sync::mpsc::channel::<Call>();
        let (loaded, ready) = std::sync::mpsc::channel();
        let usable = Arc::new(AtomicBool::new(true));
        let working = Arc::new(AtomicUsize::new(0));
        let device_metrics = metrics.clone();
        let thread = std::thread::Builder::new()
            .name("susurrus-device".into())
            .spawn(move || {
                let whisper = load_model(&run, &dir, None).and_then(|(mut whisper, _)| {
                    let groups = batch.unwrap_or_else(|| default_batch(whisper.backend_name()));
                    // Every graph the API's options use, built once: a recompile would wait
                    // for the groups to empty.
                    let options = TranscribeOptions { word_timestamps: true, ..TranscribeOptions::default() };
                    pollster::block_on(whisper.compile_groups(groups, &options))?;
                    Ok((whisper, groups))
                });
                let (mut whisper, groups) = match whisper {
                    Ok(whisper) => whisper,
                    Err(e) => {
                        let _ = loaded.send(Err(e));
                        return;
                    }
                };
                let info = model_info(&whisper, id);
                if loaded.send(Ok((info, Arc::new(whisper.host_parts()), groups))).is_err() {
                    return;
                }
                answer_calls(&mut whisper, &called, &device_metrics);
            })
            .map_err(|e| Error::Usage(format!("cannot start the device thread: {e}")))?;
        let (info, host, groups) =
            ready.recv().map_err(|_| Error::Usage("the device thread ended while loading the model".into()))??;
        let concurrency = groups + 1;
        let dispatch = Dispatch { host, calls, usable: usable.clone(), working: working.clone(), metrics, concurrency };
        std::thread::Builder::new()
            .name("susurrus-jobs".into())
            .spawn(move || dispatch.run(queued))
            .map_err(|e| Error::Usage(format!("cannot start the job thread: {e}")))?;
        Ok(Device { jobs, thread: Some(thread), usable, working, concurrency, info })
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

    /// Jobs being transcribed.
    pub fn working(&self) -> usize {
        self.working.load(Ordering::Relaxed)
    }

    /// Whether the device still takes jobs and can run them.
    pub fn healthy(&self) -> bool {
        self.usable.load(Ordering::Relaxed) && self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for Device {
    /// Lets the queue empty: the job thread ends once every sender (the handlers' permits
    /// included) is gone and its jobs are done, and the model's thread once the jobs' calls
    /// are answered.
    fn drop(&mut self) {
        let (jobs, _) = mpsc::channel(1);
        drop(std::mem::replace(&mut self.jobs, jobs));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `--batch`'s default on a backend: 8 groups on a GPU, where they raise throughput (2-3x at
/// 16 and more clients on an H200); none on the CPU, where a group step costs as much per
/// window as a beam step alone and every free group costs too (README, "The transcription
/// API").
fn default_batch(backend: &str) -> usize {
    if backend.starts_with("cpu") { 1 } else { 8 }
}

/// What the served model is, for `/v1/models`: `id` is its name.
fn model_info(whisper: &Whisper, id: String) -> ModelInfo {
    let config = whisper.config();
    let languages = if config.is_multilingual() {
        whisper.tokenizer().languages().iter().map(|(code, _)| code.clone()).collect()
    } else {
        vec!["en".to_string()]
    };
    ModelInfo { id, multilingual: config.is_multilingual(), languages, backend: whisper.backend_name().to_owned() }
}

/// The model's thread: takes the jobs' calls as they come and answers them with the
/// scheduler, a group step at a time, until every job's caller is gone.
fn answer_calls(whisper: &mut Whisper, called: &std::sync::mpsc::Receiver<Call>, metrics: &Metrics) {
    let mut scheduler = Scheduler::new(whisper);
    loop {
        if scheduler.idle() {
            match called.recv() {
                Ok(call) => scheduler.submit(call.client, call.request, call.answer),
                Err(_) => return,
            }
        }
        while let Ok(call) = called.try_recv() {
            scheduler.submit(call.client, call.request, call.answer);
        }
        let started = Instant::now();
        let work = pollster::block_on(scheduler.work(whisper));
        metrics.device_busy(started.elapsed().as_secs_f64());
        if work.batch > 0 {
            metrics.group_step(work.batch);
        }
        if work.encoded > 0 {
            metrics.encoded_together(work.encoded);
        }
        for (answer, reply) in work.answers {
            let _ = answer.send(reply);
        }
    }
}

/// Takes jobs from the queue and runs each on a thread of its own, at most `concurrency` at
/// once.
struct Dispatch {
    host: Arc<HostParts>,
    calls: std::sync::mpsc::Sender<Call>,
    usable: Arc<AtomicBool>,
    working: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
    concurrency: usize,
}

impl Dispatch {
    fn run(self, mut queued: mpsc::Receiver<Job>) {
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let mut running = Vec::new();
        let mut client = 0u64;
        while let Some(job) = queued.blocking_recv() {
            while self.working.load(Ordering::Relaxed) >= self.concurrency {
                let _ = finished.recv();
            }
            client += 1;
            self.working.fetch_add(1, Ordering::Relaxed);
            let (host, calls, usable, working, metrics, done) = (
                self.host.clone(),
                self.calls.clone(),
                self.usable.clone(),
                self.working.clone(),
                self.metrics.clone(),
                done.clone(),
            );
            let thread = std::thread::Builder::new().name(format!("susurrus-job-{client}")).spawn(move || {
                let started = Instant::now();
                let seconds = Audio::len(&job.samples) as f64 / f64::from(crate::audio::SAMPLE_RATE);
                let outcome = run_job(host, calls, client, &job);
                if let Err(JobError::Lost(_)) = &outcome {
                    usable.store(false, Ordering::Relaxed);
                }
                if outcome.is_ok() {
                    metrics.transcribed(seconds, started.elapsed().as_secs_f64());
                }
                working.fetch_sub(1, Ordering::Relaxed);
                let _ = job.events.send(Progress::Done(outcome));
                let _ = done.send(());
            });
            match thread {
                Ok(thread) => running.push(thread),
                Err(e) => {
                    self.working.fetch_sub(1, Ordering::Relaxed);
                    log_failure(&format!("cannot start a job's thread: {e}"));
                }
            }
            running.retain(|t: &JoinHandle<()>| !t.is_finished());
        }
        for thread in running {
            let _ = thread.join();
        }
    }
}

fn log_failure(message: &str) {
    eprintln!("susurrus: {message}");
}

/// Transcribes one job on the model's thread through `calls`, its segments sent as they come;
/// stops when the client is gone or the deadline passes (checked before it starts and after
/// every window).
fn run_job(
    host: Arc<HostParts>,
    calls: std::sync::mpsc::Sender<Call>,
    client: u64,
    job: &Job,
) -> std::result::Result<Transcript, JobError> {
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
    let call = |request: Request| {
        let (answer, answered) = std::sync::mpsc::channel();
        let gone = || WhisperError::backend("the model's thread has stopped");
        calls.send(Call { client, request, answer }).map_err(|_| gone())?;
        answered.recv().map_err(|_| gone())?
    };
    let mut model = RemoteModel::new(host, call);
    match pollster::block_on(transcribe_on(&mut model, &job.samples, &job.options, &mut on_event)) {
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
