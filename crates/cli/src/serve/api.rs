//! The transcription API `susurrus serve --api` adds beside the static files, shaped as
//! OpenAI's audio API so that its client libraries work unchanged:
//!
//! - `POST /v1/audio/transcriptions` and `/v1/audio/translations`: a multipart form with
//!   `file` (any format `susurrus transcribe` reads), `model` (`whisper-1` or the served
//!   model's id), `language`, `prompt`, `response_format` (json, text, srt, vtt,
//!   verbose_json), `temperature`, `timestamp_granularities[]` (segment, word) and `stream`
//!   (server-sent events, a `transcript.text.delta` per segment as it is decoded, then
//!   `transcript.text.done`);
//! - `GET /v1/models` (and `/v1/models/{id}`), `GET /health`, `GET /metrics`.
//!
//! An upload is bounded before it is read (a declared length over the limit is 413 before
//! `100 Continue`), while it is read (413 past the limit; 408 when nothing arrives for
//! [`UPLOAD_IDLE`]; at most `--max-uploads` read at once, more answered 503) and while it is
//! decoded (413 the moment its audio passes `--max-audio-minutes`; the samples move from memory
//! to a temporary file past two minutes). Only then does it take a place in the device's queue
//! (a full queue is 503 with `Retry-After` from the jobs that hold it), so a connection that
//! sends headers alone, or trickles its body, holds nothing a real request needs. A request
//! takes at most `--request-timeout` from its arrival (504). With `--api-key`, the `/v1`
//! routes want `Authorization: Bearer KEY` (401). Errors are OpenAI's shape:
//! `{"error": {"message", "type", "param", "code"}}`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::{DefaultBodyLimit, Path as UrlPath, Request, State};
use axum::http::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use http_body::Frame;
use serde::Serialize;
use serde_json::json;
use susurrus_whisper::decode::subtitles::{CueOptions, srt_with, vtt_with};
use susurrus_whisper::decode::view::SegmentView;
use susurrus_whisper::decode::words::Word;
use susurrus_whisper::{Task, TranscribeOptions, Transcript};
use tokio::sync::{Semaphore, mpsc};

use super::device::{Device, Job, JobError, ModelInfo, Progress};
use super::languages::language_name;
use super::metrics::Metrics;
use crate::audio::{self, Limited, SAMPLE_RATE, Samples};

/// The model name OpenAI's clients send by default, taken as the served model.
const OPENAI_MODEL: &str = "whisper-1";

/// Bytes a multipart form may take beyond its file (field names, boundaries, small fields).
const FORM_OVERHEAD: usize = 64 << 10;

/// The longest an upload may send nothing before it is answered 408: a body that stalls holds
/// an upload's place and its bytes, so it may not stall for long.
pub const UPLOAD_IDLE: Duration = Duration::from_secs(10);

/// Seconds a request refused because every upload place stayed taken for [`UPLOAD_IDLE`] is
/// told to wait: an upload ends, or stalls out, within [`UPLOAD_IDLE`] of its last bytes.
const UPLOADS_RETRY_AFTER: u64 = 2;

/// How the API is bounded.
#[derive(Clone, Debug)]
pub struct ApiLimits {
    /// The most bytes an uploaded file may have.
    pub max_upload: usize,
    /// The longest audio an upload may decode to (its bytes do not bound it: silence
    /// compresses a thousandfold).
    pub max_audio: Duration,
    /// Uploads that may be in flight at once (read and decoded), each holding up to
    /// `max_upload` bytes: what bounds the memory uploads take.
    pub uploads: Arc<Semaphore>,
    /// The longest a transcription request may take, from its arrival to its answer's end.
    pub timeout: Duration,
    /// The key `/v1` wants as `Authorization: Bearer KEY`, if any.
    pub key: Option<String>,
}

/// The API's state: the device, its metrics, the limits.
pub struct Api {
    pub device: Device,
    pub metrics: Arc<Metrics>,
    pub limits: ApiLimits,
}

/// The API's routes, with `files` as the fallback for every other path.
pub fn router(api: Arc<Api>, files: Router) -> Router {
    let body_limit = api.limits.max_upload + FORM_OVERHEAD;
    let v1 = Router::new()
        .route("/v1/audio/transcriptions", post(transcriptions))
        .route("/v1/audio/translations", post(translations))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route_layer(axum::middleware::from_fn_with_state(api.clone(), authorize))
        .layer(DefaultBodyLimit::max(body_limit));
    Router::new()
        .merge(v1)
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .with_state(api)
        .fallback_service(files)
}

/// An answer that is an error, in OpenAI's shape.
struct ApiError {
    status: StatusCode,
    message: String,
    kind: &'static str,
    param: Option<&'static str>,
    code: Option<&'static str>,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), kind, param: None, code: None, retry_after: None }
    }

    /// A 400 about the form field `param`.
    fn invalid(param: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { param: Some(param), ..ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message) }
    }

    fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    fn response(&self) -> Response {
        let body =
            json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}});
        let mut response = json_response(self.status, &body);
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

fn json_response(status: StatusCode, body: &impl Serialize) -> Response {
    let text = serde_json::to_string(body).unwrap_or_else(|e| format!("{{\"error\":{{\"message\":\"{e}\"}}}}"));
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn text_response(content_type: &'static str, text: String) -> Response {
    let mut response = Response::new(Body::from(text));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// `/v1` with `--api-key`: the request's bearer token must be the key (compared in time
/// independent of where they differ).
async fn authorize(State(api): State<Arc<Api>>, request: Request, next: Next) -> Response {
    let Some(key) = &api.limits.key else { return next.run(request).await };
    // RFC 9110: the scheme is case-insensitive, and one or more spaces follow it.
    let given = request.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| {
        let (scheme, token) = v.trim().split_once([' ', '\t'])?;
        scheme.eq_ignore_ascii_case("bearer").then(|| token.trim_start())
    });
    let matches = given.is_some_and(|given| {
        given.len() == key.len() && given.bytes().zip(key.bytes()).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
    });
    if matches {
        return next.run(request).await;
    }
    let route = if request.uri().path().starts_with("/v1/audio/translations") {
        "/v1/audio/translations"
    } else if request.uri().path().starts_with("/v1/audio/") {
        "/v1/audio/transcriptions"
    } else {
        "/v1/models"
    };
    let error = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "invalid_request_error",
        if given.is_some() { "incorrect API key" } else { "an API key is needed: Authorization: Bearer KEY" },
    )
    .with_code("invalid_api_key");
    api.metrics.answered(route, 401, None);
    error.response()
}

async fn transcriptions(
    State(api): State<Arc<Api>>,
    headers: HeaderMap,
    form: Result<Multipart, MultipartRejection>,
) -> Response {
    answer(&api, Task::Transcribe, "/v1/audio/transcriptions", &headers, form).await
}

async fn translations(
    State(api): State<Arc<Api>>,
    headers: HeaderMap,
    form: Result<Multipart, MultipartRejection>,
) -> Response {
    answer(&api, Task::Translate, "/v1/audio/translations", &headers, form).await
}

async fn answer(
    api: &Api,
    task: Task,
    route: &'static str,
    headers: &HeaderMap,
    form: Result<Multipart, MultipartRejection>,
) -> Response {
    let arrived = Instant::now();
    let response = match transcribe(api, task, headers, form, arrived).await {
        Ok(response) => response,
        Err(error) => error.response(),
    };
    api.metrics.answered(route, response.status().as_u16(), Some(arrived.elapsed().as_secs_f64()));
    response
}

/// The form's fields.
#[derive(Default)]
struct Form {
    file: Option<(Bytes, String)>,
    model: Option<String>,
    language: Option<String>,
    prompt: Option<String>,
    response_format: Option<String>,
    temperature: Option<String>,
    granularities: Vec<String>,
    stream: Option<String>,
    /// The upload's place among those in flight, held until the audio is decoded.
    upload: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// The fields a form may have.
const FIELDS: &str = "file, model, language, prompt, response_format, temperature, timestamp_granularities[], stream";

/// How the transcript is answered.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    Json,
    Text,
    Srt,
    Vtt,
    VerboseJson,
}

async fn transcribe(
    api: &Api,
    task: Task,
    headers: &HeaderMap,
    form: Result<Multipart, MultipartRejection>,
    arrived: Instant,
) -> Result<Response, ApiError> {
    // A declared length over the limit is refused before a byte of the body is read (so before
    // `100 Continue` is sent to a client that waits for it).
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > (api.limits.max_upload + FORM_OVERHEAD) as u64) {
        return Err(broken_size(api.limits.max_upload));
    }
    let form = form.map_err(|e| ApiError::invalid("file", format!("the body must be a multipart form: {e}")))?;
    let deadline = arrived + api.limits.timeout;
    let mut form = tokio::time::timeout_at(deadline.into(), read_form(form, &api.limits)).await.map_err(|_| {
        ApiError::new(StatusCode::REQUEST_TIMEOUT, "invalid_request_error", "the upload took too long")
    })??;
    let (options, format, stream) = options(&form, task, &api.device.info)?;
    let (bytes, name) = form.file.take().ok_or_else(|| ApiError::invalid("file", "the form has no file"))?;
    let extension = std::path::Path::new(&name).extension().and_then(|e| e.to_str()).map(str::to_owned);
    let max_audio = api.limits.max_audio;
    let (decoded, over) = tokio::task::spawn_blocking(move || {
        let (store, over) = Limited::new(Samples::new(), max_audio.as_secs() as usize * SAMPLE_RATE as usize);
        (audio::decode_bytes_into(bytes.to_vec(), &name, extension.as_deref(), store), over)
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", format!("decoding failed: {e}")))?;
    let decoded = match decoded {
        Ok(decoded) => decoded,
        // Refused the moment the decoded audio passes the limit, before any more is decoded.
        Err(_) if over.hit() => return Err(too_long(max_audio)),
        Err(e) => return Err(ApiError::invalid("file", e.to_string())),
    };
    // The upload's place and bytes go now; a place in the device's queue is taken only by
    // audio ready to transcribe, so an upload, however slow, holds none.
    drop(form.upload);
    let Some(permit) = api.device.reserve() else {
        let (queued, capacity) = api.device.queue();
        let mut error = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            if api.device.healthy() {
                format!("the server is busy: {queued} of {capacity} places in its queue are taken; try again later")
            } else {
                "the server's device has stopped; try another replica".to_string()
            },
        )
        .with_code("server_busy");
        error.retry_after = Some(api.metrics.retry_after(queued, api.device.concurrency));
        return Err(error);
    };
    // Unbounded on purpose, and still bounded: the model thread sends one message per segment
    // and one at the end, no more than the transcript itself holds (of audio already capped by
    // --max-audio-minutes), and it must never wait on a slow client while other requests share
    // its device. A client that hangs up closes the channel, and the job stops at its next
    // window.
    let (events, mut progress) = mpsc::unbounded_channel();
    let duration = decoded.duration();
    let word_timestamps = options.word_timestamps;
    permit.send(Job { samples: decoded.samples.into_inner(), options, deadline, events });
    if stream {
        return Ok(sse(progress, deadline));
    }
    let transcript = loop {
        match tokio::time::timeout_at(deadline.into(), progress.recv()).await {
            Ok(Some(Progress::Segment(_))) => {}
            Ok(Some(Progress::Done(done))) => break done.map_err(job_error)?,
            Ok(None) => return Err(job_error(JobError::Failed("the device stopped".into()))),
            Err(_) => return Err(job_error(JobError::TimedOut)),
        }
    };
    Ok(render(format, task, &transcript, duration, word_timestamps))
}

fn job_error(error: JobError) -> ApiError {
    match error {
        JobError::TimedOut => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "server_error",
            "the transcription took longer than the server's --request-timeout",
        )
        .with_code("timeout"),
        JobError::Refused(message) => ApiError::invalid("file", message),
        JobError::Failed(message) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message),
        JobError::Lost(message) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message),
    }
}

/// Reads the form's fields; an unknown field, a repeated one or a file over the upload limit
/// is an error naming it. The form takes an upload's place once its first field arrives (a
/// connection that sends headers and nothing more holds none), waiting up to [`UPLOAD_IDLE`]
/// for one (503 after), and gives it back with [`Form::upload`]; a body that sends nothing for
/// [`UPLOAD_IDLE`] is 408.
async fn read_form(mut multipart: Multipart, limits: &ApiLimits) -> Result<Form, ApiError> {
    let max_upload = limits.max_upload;
    let mut form = Form::default();
    let broken = |e: axum::extract::multipart::MultipartError| {
        let status = e.status();
        let (status, message) = if status == StatusCode::PAYLOAD_TOO_LARGE {
            (status, format!("the upload is larger than the server's limit of {} MB", max_upload >> 20))
        } else if status.is_server_error() {
            // The body itself failed to arrive: the client hung up or its connection broke. A
            // client's doing, counted in /metrics as a client error, not the server's.
            (StatusCode::BAD_REQUEST, format!("the upload broke off: {}", e.body_text()))
        } else {
            (status, format!("the multipart form cannot be read: {}", e.body_text()))
        };
        ApiError { param: Some("file"), ..ApiError::new(status, "invalid_request_error", message) }
    };
    while let Some(mut field) = idle(multipart.next_field()).await?.map_err(broken)? {
        if form.upload.is_none() {
            match tokio::time::timeout(UPLOAD_IDLE, limits.uploads.clone().acquire_owned()).await {
                Ok(Ok(place)) => form.upload = Some(place),
                // Read to its end (and dropped), so that the client, still sending, reads the
                // answer rather than a connection cut under it.
                _ => {
                    discard(field).await;
                    while let Ok(Ok(Some(field))) = tokio::time::timeout(UPLOAD_IDLE, multipart.next_field()).await {
                        discard(field).await;
                    }
                    return Err(uploads_busy());
                }
            }
        }
        let name = field.name().unwrap_or_default().to_owned();
        if name == "file" {
            if form.file.is_some() {
                return Err(repeated(&name));
            }
            let file_name = field.file_name().unwrap_or("upload").to_owned();
            let mut bytes = Vec::new();
            while let Some(chunk) = idle(field.chunk()).await?.map_err(broken)? {
                if bytes.len() + chunk.len() > max_upload {
                    return Err(broken_size(max_upload));
                }
                bytes.extend_from_slice(&chunk);
            }
            form.file = Some((Bytes::from(bytes), file_name));
            continue;
        }
        let value = idle(field.text()).await?.map_err(broken)?;
        let slot = match name.as_str() {
            "model" => &mut form.model,
            "language" => &mut form.language,
            "prompt" => &mut form.prompt,
            "response_format" => &mut form.response_format,
            "temperature" => &mut form.temperature,
            "stream" => &mut form.stream,
            "timestamp_granularities[]" | "timestamp_granularities" => {
                form.granularities.push(value);
                continue;
            }
            _ => {
                return Err(ApiError::invalid("file", format!("unknown form field {name:?}: the fields are {FIELDS}")));
            }
        };
        if slot.is_some() {
            return Err(repeated(&name));
        }
        *slot = Some(value);
    }
    Ok(form)
}

/// The 400 for a field the form gives twice: which of the two was meant cannot be known.
fn repeated(name: &str) -> ApiError {
    ApiError::invalid("file", format!("form field {name:?} is given twice: give it once"))
}

/// Reads what is left of a field and drops it, until it ends, stalls or breaks.
async fn discard(mut field: axum::extract::multipart::Field<'_>) {
    while let Ok(Ok(Some(_))) = tokio::time::timeout(UPLOAD_IDLE, field.chunk()).await {}
}

/// `read`, or a 408 when the body sends nothing for [`UPLOAD_IDLE`].
async fn idle<T>(read: impl std::future::Future<Output = T>) -> Result<T, ApiError> {
    tokio::time::timeout(UPLOAD_IDLE, read).await.map_err(|_| {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            format!("the upload stalled: nothing arrived for {} s", UPLOAD_IDLE.as_secs()),
        )
    })
}

/// The 503 when every upload's place is taken.
fn uploads_busy() -> ApiError {
    let mut error = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "server_error",
        "the server is busy: every upload place is taken (--max-uploads); try again later",
    )
    .with_code("server_busy");
    error.retry_after = Some(UPLOADS_RETRY_AFTER);
    error
}

/// The 413 for audio longer than `--max-audio-minutes`.
fn too_long(max_audio: Duration) -> ApiError {
    ApiError {
        param: Some("file"),
        ..ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!(
                "the audio is longer than the server's limit of {} minutes (--max-audio-minutes)",
                max_audio.as_secs() / 60
            ),
        )
    }
}

fn broken_size(max_upload: usize) -> ApiError {
    ApiError {
        param: Some("file"),
        ..ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("the upload is larger than the server's limit of {} MB", max_upload >> 20),
        )
    }
}

/// The decoding options, answer format and streaming a form asks for, checked against the
/// served model.
fn options(form: &Form, task: Task, model: &ModelInfo) -> Result<(TranscribeOptions, Format, bool), ApiError> {
    if let Some(name) = form.model.as_deref().filter(|m| *m != OPENAI_MODEL && *m != model.id) {
        return Err(ApiError {
            status: StatusCode::NOT_FOUND,
            ..ApiError::invalid(
                "model",
                format!(
                    "model {name:?} is not served here: this server serves {:?} (or ask for {OPENAI_MODEL})",
                    model.id
                ),
            )
        }
        .with_code("model_not_found"));
    }
    let mut options = TranscribeOptions { task, ..TranscribeOptions::default() };
    if task == Task::Translate && !model.multilingual {
        return Err(ApiError::invalid("model", format!("{} is English-only: it cannot translate", model.id)));
    }
    if let Some(language) = form.language.as_deref().map(str::trim).filter(|l| !l.is_empty()) {
        if !model.languages.iter().any(|l| l == language) {
            return Err(ApiError::invalid(
                "language",
                format!("language {language:?} is not one {} knows ({})", model.id, model.languages.join(", ")),
            ));
        }
        options.language = Some(language.to_owned());
    }
    options.initial_prompt = form.prompt.clone().filter(|p| !p.trim().is_empty());
    if let Some(t) = form.temperature.as_deref() {
        let t: f32 = t
            .trim()
            .parse()
            .ok()
            .filter(|t: &f32| (0.0..=1.0).contains(t))
            .ok_or_else(|| ApiError::invalid("temperature", format!("temperature {t:?}: a number from 0 to 1")))?;
        // 0 (the default) lets the fallback raise it window by window as it needs; above 0
        // the fallback starts there.
        if t > 0.0 {
            options.temperatures = (0..).map(|k| t + 0.2 * k as f32).take_while(|t| *t <= 1.0 + 1e-6).collect();
        }
    }
    let format = match form.response_format.as_deref().unwrap_or("json") {
        "json" => Format::Json,
        "text" => Format::Text,
        "srt" => Format::Srt,
        "vtt" => Format::Vtt,
        "verbose_json" => Format::VerboseJson,
        other => {
            return Err(ApiError::invalid(
                "response_format",
                format!("response_format {other:?}: one of json, text, srt, vtt, verbose_json"),
            ));
        }
    };
    for granularity in &form.granularities {
        match granularity.as_str() {
            "segment" => {}
            "word" => options.word_timestamps = true,
            other => {
                return Err(ApiError::invalid(
                    "timestamp_granularities",
                    format!("timestamp granularity {other:?}: segment or word"),
                ));
            }
        }
    }
    if !form.granularities.is_empty() && format != Format::VerboseJson {
        return Err(ApiError::invalid(
            "timestamp_granularities",
            "timestamp_granularities needs response_format verbose_json",
        ));
    }
    let stream = match form.stream.as_deref().map(str::trim) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(ApiError::invalid("stream", format!("stream {other:?}: true or false"))),
    };
    if stream && format != Format::Json && format != Format::Text {
        return Err(ApiError::invalid("stream", "a streamed answer is events of text: response_format json or text"));
    }
    options.validate().map_err(|e| ApiError::invalid("file", e.to_string()))?;
    Ok((options, format, stream))
}

/// The transcript as `format` asks.
fn render(format: Format, task: Task, transcript: &Transcript, duration: f64, words: bool) -> Response {
    let text = transcript.text.trim();
    match format {
        Format::Json => json_response(StatusCode::OK, &json!({ "text": text })),
        Format::Text => text_response("text/plain; charset=utf-8", format!("{text}\n")),
        Format::Srt => {
            text_response("text/plain; charset=utf-8", srt_with(&transcript.segments, &CueOptions::default()))
        }
        Format::Vtt => text_response("text/vtt; charset=utf-8", vtt_with(&transcript.segments, &CueOptions::default())),
        Format::VerboseJson => json_response(StatusCode::OK, &verbose_json(task, transcript, duration, words)),
    }
}

/// OpenAI's `verbose_json`: the task, the language's name, the duration, the trimmed text, the
/// numbered segments and, with word timestamps, every word (trimmed) in one list. A
/// `serde_json::Value`, so its keys come out sorted and its f32 numbers as f64 ones.
fn verbose_json(task: Task, transcript: &Transcript, duration: f64, words: bool) -> serde_json::Value {
    let segments: Vec<_> = transcript
        .segments
        .iter()
        .enumerate()
        .map(|(id, s)| VerboseSegment { id, seek: s.seek, segment: SegmentView::new(s).without_words() })
        .collect();
    let mut body = json!({
        "task": if task == Task::Translate { "translate" } else { "transcribe" },
        "language": language_name(&transcript.language).unwrap_or(&transcript.language),
        "duration": duration,
        "text": transcript.text.trim(),
        "segments": segments,
    });
    if words {
        // OpenAI's words have no leading space.
        let words: Vec<Word> = transcript
            .segments
            .iter()
            .flat_map(|s| s.words.iter().flatten())
            .map(|w| Word { word: w.word.trim().to_owned(), ..*w })
            .collect();
        body["words"] = json!(words);
    }
    body
}

/// A segment of `verbose_json`: the segment view every JSON output shows (its words are the
/// answer's own list), numbered and with its window's `seek`, as OpenAI's are.
#[derive(Serialize)]
struct VerboseSegment<'a> {
    id: usize,
    seek: usize,
    #[serde(flatten)]
    segment: SegmentView<'a>,
}

/// A streamed answer: server-sent events, one `transcript.text.delta` per segment as it is
/// decoded (with its `start` and `end`), then `transcript.text.done` with the whole text, or
/// an `error` event.
fn sse(progress: mpsc::UnboundedReceiver<Progress>, deadline: Instant) -> Response {
    let body = Events {
        progress,
        deadline: Box::pin(tokio::time::sleep_until(deadline.into())),
        text: String::new(),
        ended: false,
    };
    let mut response = Response::new(Body::new(body));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The events of a streamed answer.
struct Events {
    progress: mpsc::UnboundedReceiver<Progress>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    text: String,
    ended: bool,
}

impl Events {
    fn event(value: &serde_json::Value) -> Frame<Bytes> {
        Frame::data(Bytes::from(format!("data: {value}\n\n")))
    }

    fn error(&mut self, error: ApiError) -> Frame<Bytes> {
        self.ended = true;
        Events::event(
            &json!({"type": "error", "error": {"message": error.message, "type": error.kind, "code": error.code}}),
        )
    }
}

impl http_body::Body for Events {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            let frame = self.error(job_error(JobError::TimedOut));
            return Poll::Ready(Some(Ok(frame)));
        }
        let frame = match std::task::ready!(self.progress.poll_recv(cx)) {
            Some(Progress::Segment(segment)) => {
                self.text += &segment.text;
                Events::event(&json!({
                    "type": "transcript.text.delta",
                    "delta": segment.text,
                    "start": segment.start,
                    "end": segment.end,
                }))
            }
            Some(Progress::Done(Ok(_))) => {
                self.ended = true;
                Events::event(&json!({"type": "transcript.text.done", "text": self.text.trim()}))
            }
            Some(Progress::Done(Err(error))) => self.error(job_error(error)),
            None => self.error(job_error(JobError::Failed("the device stopped".into()))),
        };
        Poll::Ready(Some(Ok(frame)))
    }
}

async fn models(State(api): State<Arc<Api>>) -> Response {
    api.metrics.answered("/v1/models", 200, None);
    json_response(StatusCode::OK, &json!({"object": "list", "data": [model_json(&api.device.info)]}))
}

async fn model(State(api): State<Arc<Api>>, UrlPath(id): UrlPath<String>) -> Response {
    let info = &api.device.info;
    let response = if id == info.id || id == OPENAI_MODEL {
        json_response(StatusCode::OK, &model_json(info))
    } else {
        ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", format!("model {id:?} is not served here"))
            .with_code("model_not_found")
            .response()
    };
    api.metrics.answered("/v1/models", response.status().as_u16(), None);
    response
}

fn model_json(info: &ModelInfo) -> serde_json::Value {
    json!({"id": info.id, "object": "model", "created": 0, "owned_by": "susurrus", "backend": info.backend})
}

/// 200 while the device takes jobs (a readiness and liveness probe), 503 once it cannot.
async fn health(State(api): State<Arc<Api>>) -> Response {
    let (queued, capacity) = api.device.queue();
    let healthy = api.device.healthy();
    let status = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    api.metrics.answered("/health", status.as_u16(), None);
    json_response(
        status,
        &json!({
            "status": if healthy { "ok" } else { "device stopped" },
            "model": api.device.info.id,
            "queued": queued,
            "working": api.device.working(),
            "capacity": capacity,
        }),
    )
}

async fn metrics(State(api): State<Arc<Api>>) -> Response {
    let (queued, capacity) = api.device.queue();
    match api.metrics.render(queued, capacity, api.device.working(), api.device.healthy()) {
        Ok(text) => {
            api.metrics.answered("/metrics", 200, None);
            text_response("text/plain; version=0.0.4; charset=utf-8", text)
        }
        Err(message) => {
            api.metrics.answered("/metrics", 500, None);
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message).response()
        }
    }
}

#[cfg(test)]
mod tests {
    use susurrus_whisper::Segment;

    use super::*;

    fn transcript() -> Transcript {
        let word = |start, end, word: &str, probability| Word { start, end, word: word.into(), probability };
        let segment = |start, end, text: &str, tokens: &[u32], scores: (f64, f32, f32, f64), seek, words| Segment {
            start,
            end,
            text: text.into(),
            tokens: tokens.to_vec(),
            avg_logprob: scores.0,
            no_speech_prob: scores.1,
            temperature: scores.2,
            compression_ratio: scores.3,
            seek,
            words: Some(words),
        };
        let segments = vec![
            segment(
                0.0,
                1.5,
                " Hi you.",
                &[50363, 17250, 345, 13, 50438],
                (-0.25, 0.125, 0.2, 1.5),
                0,
                vec![word(0.0, 0.4, " Hi", 0.75), word(0.4, 1.5, " you.", 0.5)],
            ),
            segment(
                1.5,
                2.0,
                " Bye.",
                &[50438, 25301, 13, 50463],
                (-0.5, 0.0625, 0.0, 0.75),
                150,
                vec![word(1.5, 2.0, " Bye.", 1.0)],
            ),
        ];
        Transcript {
            segments,
            text: " Hi you. Bye.".into(),
            language: "en".into(),
            language_probability: 1.0,
            duration: 2.0,
        }
    }

    /// OpenAI's client parses these bytes: keys sorted, segments numbered with their `seek`, an
    /// f32 written as the f64 it widens to, words trimmed and listed apart from the segments.
    #[test]
    fn verbose_json_is_openais_shape() {
        let segments = r#""segments":[{"avg_logprob":-0.25,"compression_ratio":1.5,"end":1.5,"id":0,"no_speech_prob":0.125,"seek":0,"start":0.0,"temperature":0.20000000298023224,"text":" Hi you.","tokens":[50363,17250,345,13,50438]},{"avg_logprob":-0.5,"compression_ratio":0.75,"end":2.0,"id":1,"no_speech_prob":0.0625,"seek":150,"start":1.5,"temperature":0.0,"text":" Bye.","tokens":[50438,25301,13,50463]}]"#;
        let with_words = serde_json::to_string(&verbose_json(Task::Transcribe, &transcript(), 2.5, true)).unwrap();
        assert_eq!(
            with_words,
            format!(
                r#"{{"duration":2.5,"language":"english",{segments},"task":"transcribe","text":"Hi you. Bye.","words":[{{"end":0.4,"probability":0.75,"start":0.0,"word":"Hi"}},{{"end":1.5,"probability":0.5,"start":0.4,"word":"you."}},{{"end":2.0,"probability":1.0,"start":1.5,"word":"Bye."}}]}}"#
            )
        );
        let without = serde_json::to_string(&verbose_json(Task::Translate, &transcript(), 2.5, false)).unwrap();
        assert_eq!(
            without,
            format!(r#"{{"duration":2.5,"language":"english",{segments},"task":"translate","text":"Hi you. Bye."}}"#)
        );
    }
}
