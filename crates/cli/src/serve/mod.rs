//! `susurrus serve`: a small HTTP server for the web demo, and with `--api` a transcription
//! service speaking OpenAI's audio API ([`api`]; the model on a thread of its own: [`device`]).
//! The page in `www/` loads ES modules, a `.wasm` file and the model with `fetch`, which
//! browsers allow only from an HTTP origin that sends the right MIME types (not from
//! `file://`); the Cache API and WebGPU need a secure context, which `http://127.0.0.1` and
//! `http://localhost` are. So it serves a folder at `/` (`--root`, by default `www/`), the model
//! folder at `/model/` and the Silero VAD network at `/vad/silero_vad_v6.onnx`, GET and HEAD
//! only, never a file a URL names outside those, and logs every request on stderr as `METHOD
//! PATH STATUS BYTES`. The API needs no page: with `--api` and no `--root`, a missing `www/`
//! leaves `/` out (404) instead of refusing to start.
//!
//! The routes are an axum [`Router`] (the static files are the API's fallback), served by hyper
//! connection by connection on a tokio runtime of one thread: that is where the limits on
//! header size and on slow or silent clients are set, and where a Ctrl-C or SIGTERM lets the
//! responses in flight finish before the command returns.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener as StdListener};
use std::path::{Component, Path, PathBuf};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use axum::http::{HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use percent_encoding::{CONTROLS, percent_decode_str, utf8_percent_encode};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Sleep;

use crate::backend::{BackendChoice, RunArgs};
use crate::error::{Error, Result};
use crate::hub::Hub;
use crate::load;

mod api;
mod device;
mod languages;
mod metrics;

/// Where the VAD network is served: one fixed URL, so the demo page can ask for it without
/// knowing the file's name on disk.
const VAD_PATH: &str = "/vad/silero_vad_v6.onnx";

/// The most bytes a request's line and headers may take. Browsers send a few KiB; without a
/// bound a client could make the server buffer a header of any size. hyper stops reading there,
/// answers 431 and closes the connection.
const MAX_HEADER_BYTES: usize = 64 << 10;

/// The most header fields a request may have (hyper's default, named so the bound is visible);
/// more is answered with 431.
const MAX_HEADERS: usize = 100;

/// How long a request's header may take to arrive, counted from when the connection opens or
/// its previous response ends. hyper's timer runs while it waits for the next request, so this
/// one bound closes half-sent requests, connections that never send one, and idle keep-alive
/// connections; a browser opens a new connection when it needs one.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a response may wait on a client that reads none of it before the connection is
/// dropped. A stalled download otherwise holds its connection and file forever, and would hold
/// up a graceful stop.
const SEND_STALL_TIMEOUT: Duration = Duration::from_secs(60);

/// How long to pause after an accept error that is not about one connection (out of file
/// descriptors, say) before accepting again, so the error does not spin the loop.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// The bytes of a file read for one chunk of a response body.
const FILE_CHUNK: usize = 256 << 10;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Folder served at `/` (a folder's URL gives its index.html): the demo page. Default: `www`
    /// in the current folder (the repository root holds it); with --api, when it is missing,
    /// only the API (and the model folder) is served. A given folder must exist.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Model folder served at `/model/` (and run by --api), or a model's name as faster-whisper
    /// names it (`susurrus models` lists them), found in the Hugging Face cache or downloaded
    /// there once. Default: the folder ./scripts/models/fetch_model.sh prepares, left out (with
    /// a note on stderr) when it is missing.
    #[arg(long, value_name = "DIR|NAME")]
    pub model: Option<PathBuf>,
    /// Never download a model by name: only the Hugging Face cache is read (as with
    /// HF_HUB_OFFLINE=1).
    #[arg(long)]
    pub offline: bool,
    /// The Silero VAD v6 network (ONNX) served at /vad/silero_vad_v6.onnx, for the page's
    /// "skip silence" option. Default: the file `./scripts/models/fetch_model.sh silero-vad` fetches,
    /// left out (with a note on stderr) when it is missing.
    #[arg(long, value_name = "FILE")]
    pub vad_model: Option<PathBuf>,
    /// Address to listen on. Browsers treat 127.0.0.1 and localhost as secure contexts (Cache
    /// API, WebGPU); other addresses are not, and are reachable from other machines (a warning
    /// says so).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on; 0 picks a free one (the URL on stdout names it).
    #[arg(long, value_name = "N", default_value_t = 8080)]
    pub port: u16,
    /// Also serve the transcription API with the model: OpenAI's `POST
    /// /v1/audio/transcriptions` and `/v1/audio/translations`, `GET /v1/models`, `/health` and
    /// `/metrics`. The model is loaded before the first request is answered.
    #[arg(long)]
    pub api: bool,
    /// Where the API's model runs.
    #[arg(long, value_enum, default_value = "auto", requires = "api")]
    pub backend: BackendChoice,
    /// Threads of the CPU backend. Default: one per core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..), requires = "api")]
    pub threads: Option<u16>,
    /// The key the API's `/v1` routes want as `Authorization: Bearer KEY` (default: none).
    /// Visible to every local user in the process list: prefer SUSURRUS_API_KEY or
    /// --api-key-file.
    #[arg(long, value_name = "KEY", requires = "api")]
    pub api_key: Option<String>,
    /// A file holding the API's key (its first line; a mounted secret).
    #[arg(long, value_name = "FILE", conflicts_with = "api_key", requires = "api")]
    pub api_key_file: Option<PathBuf>,
    /// Transcriptions that may wait for the device; more are answered 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096), requires = "api")]
    pub queue: u32,
    /// Windows of concurrent requests the API decodes together, as groups of one beam search
    /// (1: one request at a time). Each group holds its window's caches: for tiny.en about
    /// 46 MB, large-v3 about 1.2 GB. Default: 8 on a GPU (on an H200 it doubles tiny.en's
    /// throughput at 16 and more clients), 1 on the CPU (where it gains nothing; README, "The
    /// transcription API").
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64), requires = "api")]
    pub batch: Option<u32>,
    /// The largest audio file the API takes, in MB (OpenAI's limit: 25); larger is answered 413.
    #[arg(long, value_name = "MB", default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..=2048), requires = "api")]
    pub max_upload_mb: u32,
    /// The longest audio the API transcribes, in minutes: an upload that decodes to more is
    /// answered 413 as soon as its decoding passes it (a small compressed file can hold hours).
    #[arg(long, value_name = "MIN", default_value_t = 180, value_parser = clap::value_parser!(u32).range(1..=1440), requires = "api")]
    pub max_audio_minutes: u32,
    /// Uploads the API reads and decodes at once, each up to --max-upload-mb in memory; one
    /// more waits up to 10 s for a place, then is answered 503 with Retry-After. A connection takes a place when its form's first
    /// field arrives, so one that sends headers alone takes none, and a body that sends nothing
    /// for 10 s is answered 408.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024), requires = "api")]
    pub max_uploads: u32,
    /// Seconds a transcription request may take from its arrival to its answer (queueing
    /// included); longer is answered 504.
    #[arg(long, value_name = "S", default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..), requires = "api")]
    pub request_timeout: u32,
}

/// The folders requests may reach and the one VAD file, canonical so the banner names them
/// plainly. A file is opened through its folder, following links wherever they lead (a Hugging
/// Face snapshot's files are links into its `blobs/`): only the URL is checked, to name plain
/// files below the folder.
struct Mounts {
    /// `None` when only the API is served (`--api` without `--root` and no `www/`).
    root: Option<PathBuf>,
    model: Option<PathBuf>,
    vad: Option<PathBuf>,
}

/// The bounds on slow clients; tests shorten them.
#[derive(Clone, Copy, Debug)]
struct Limits {
    header_read: Duration,
    send_stall: Duration,
}

impl Limits {
    const SERVE: Limits = Limits { header_read: HEADER_READ_TIMEOUT, send_stall: SEND_STALL_TIMEOUT };
}

/// Serves until Ctrl-C or SIGTERM: prints `serving DIR at URL` (then `model DIR at URL/model/`
/// and `vad FILE at URL/vad/silero_vad_v6.onnx` for what is served) on stdout, answers requests
/// concurrently, and on the signal stops accepting, lets the responses in flight finish (a
/// second signal stops at once) and returns. Errors when the folders, the VAD file or the
/// address are unusable.
pub fn run(args: &ServeArgs) -> Result<()> {
    let key = if args.api { api_key(args)? } else { None };
    let hub = Hub::from_env(args.offline);
    let mounts = Arc::new(Mounts {
        root: served_root(args.root.as_deref(), args.api)?,
        model: served_model(args.model.as_deref(), &hub)?,
        vad: served_vad(args.vad_model.as_deref())?,
    });
    let host = url_host(&args.host);
    let listener = StdListener::bind((bind_host(&args.host), args.port))
        .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
        .map_err(|e| listen_error(&host, args.port, e))?;
    let local = listener.local_addr().map_err(|e| listen_error(&host, args.port, e))?;
    let addr = format!("{host}:{}", local.port());
    let start_error = |source| Error::Server { action: "cannot start serving on", addr: addr.clone(), source };
    let api = if args.api { Some(start_api(args, key, &hub)?) } else { None };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(start_error)?;
    runtime.block_on(async {
        let listener = TcpListener::from_std(listener).map_err(start_error)?;
        let mut signals = StopSignals::new().map_err(start_error)?;
        if let Some(warning) = reachability_warning(&host, local.ip()) {
            log(format_args!("{warning}"));
        }
        print_banner(&mounts, api.as_deref(), &addr)?;
        let (stop, stops) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                signals.next().await;
                if stop.send(()).is_err() {
                    break;
                }
            }
        });
        let api_in_flight = api.clone();
        if serve(listener, router(mounts, api), Limits::SERVE, stops).await == Stop::Forced {
            // Dropping the device would wait for the jobs in work, and the runtime for the
            // uploads being decoded: a second signal means now.
            let working = api_in_flight.map_or(0, |api| api.device.working());
            log(format_args!("susurrus: stopped at a second signal, abandoning the transcriptions in work: {working}"));
            std::process::exit(1);
        }
        Ok(())
    })
}

/// How the server stopped.
#[derive(Debug, PartialEq)]
enum Stop {
    /// At the first stop request, once the responses in flight were sent.
    Finished,
    /// At a second stop request, with responses still in flight.
    Forced,
}

/// Loads the API's model (the `--model` folder, or the default one, which must then exist) on
/// its device thread.
fn start_api(args: &ServeArgs, key: Option<String>, hub: &Hub) -> Result<Arc<api::Api>> {
    let dir = load::resolve(args.model.as_deref(), hub)?;
    // The id `/v1/models` lists and requests name: the model's name, else its folder's.
    let id = match load::model_name(args.model.as_deref()) {
        Some((name, _)) => name.to_string(),
        None => dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned()),
    };
    let run = RunArgs {
        model: Some(dir.clone()),
        offline: true,
        backend: args.backend,
        threads: args.threads,
        temperatures: Vec::new(),
    };
    let metrics = Arc::new(metrics::Metrics::new().map_err(Error::Usage)?);
    let device =
        device::Device::start(run, dir, id, args.queue as usize, args.batch.map(|b| b as usize), metrics.clone())?;
    let limits = api::ApiLimits {
        max_upload: (args.max_upload_mb as usize) << 20,
        max_audio: Duration::from_secs(u64::from(args.max_audio_minutes) * 60),
        uploads: Arc::new(tokio::sync::Semaphore::new(args.max_uploads as usize)),
        timeout: Duration::from_secs(args.request_timeout.into()),
        key,
    };
    Ok(Arc::new(api::Api { device, metrics, limits }))
}

/// The API's key: from --api-key, the first line of --api-key-file, or SUSURRUS_API_KEY.
/// An empty one is refused: it would start a server that refuses every request.
fn api_key(args: &ServeArgs) -> Result<Option<String>> {
    let from_env = || std::env::var(KEY_VARIABLE).ok();
    let (key, from) = match (&args.api_key, &args.api_key_file) {
        (Some(key), _) => (key.clone(), "--api-key".to_string()),
        (None, Some(path)) => {
            let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
            if !meta.is_file() || meta.len() > KEY_FILE_LIMIT {
                return Err(Error::Usage(format!(
                    "--api-key-file {}: not a key file (a regular file of at most {KEY_FILE_LIMIT} bytes)",
                    path.display()
                )));
            }
            let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
            (text.lines().next().unwrap_or_default().to_string(), format!("--api-key-file {}", path.display()))
        }
        (None, None) => match from_env() {
            Some(key) => (key, KEY_VARIABLE.to_string()),
            None => return Ok(None),
        },
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(Error::Usage(format!("the API key from {from} is empty: every request would be refused")));
    }
    if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Usage(format!(
            "the API key from {from} holds a space or a control character, which no Authorization header can carry"
        )));
    }
    Ok(Some(key.to_string()))
}

/// The environment variable the API's key may come from (read only with `--api`, so that it may
/// be set where a plain `serve` runs too).
const KEY_VARIABLE: &str = "SUSURRUS_API_KEY";

/// The largest key file read: a key is a line.
const KEY_FILE_LIMIT: u64 = 4096;

/// The demo page's folder, canonical: a given `--root` must exist; without one, `www/` in the
/// current folder, which only the API can do without (left out, with a note, when missing).
fn served_root(root: Option<&Path>, api: bool) -> Result<Option<PathBuf>> {
    let dir = match root {
        Some(dir) if !dir.is_dir() => {
            return Err(Error::Usage(format!(
                "root folder {} not found: pass --root DIR with the demo page's folder (the repository's www/)",
                dir.display()
            )));
        }
        Some(dir) => dir,
        None => {
            let www = Path::new("www");
            if !www.is_dir() && api {
                log(format_args!(
                    "susurrus: serving the API without the demo page: no www/ folder here (run from the repository \
                     root or pass --root DIR to serve it)"
                ));
                return Ok(None);
            }
            if !www.is_dir() {
                return Err(Error::Usage(
                    "no www/ folder here: the demo page needs it; run from the repository root (www/ holds the demo \
                     page), pass --root DIR, or pass --api to serve only the transcription API"
                        .into(),
                ));
            }
            www
        }
    };
    dir.canonicalize().map(Some).map_err(|e| Error::io(dir, e))
}

/// `--model`, canonical: a given folder must hold a model; the default one is left out, with
/// a note, when it does not.
fn served_model(dir: Option<&Path>, hub: &Hub) -> Result<Option<PathBuf>> {
    match load::resolve(dir, hub) {
        Ok(dir) => dir.canonicalize().map(Some).map_err(|e| Error::io(&dir, e)),
        Err(e) if dir.is_none() => {
            log(format_args!("susurrus: serving without /model/: {e}"));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// `--vad-model`, canonical: a given file must exist; the default one is left out, with a
/// note, when it does not.
fn served_vad(file: Option<&Path>) -> Result<Option<PathBuf>> {
    match load::resolve_vad(file) {
        Ok(path) => path.canonicalize().map(Some).map_err(|e| Error::io(&path, e)),
        Err(e) if file.is_none() => {
            log(format_args!("susurrus: serving without {VAD_PATH}: {e}"));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// `host` as the socket API takes it: an IPv6 address without the brackets a URL puts around it.
fn bind_host(host: &str) -> &str {
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

/// `host` as it goes in a URL: IPv6 addresses in brackets.
fn url_host(host: &str) -> String {
    let host = bind_host(host);
    if host.parse::<Ipv6Addr>().is_ok() { format!("[{host}]") } else { host.to_owned() }
}

fn listen_error(host: &str, port: u16, e: io::Error) -> Error {
    let source = if e.kind() == io::ErrorKind::AddrInUse {
        io::Error::new(e.kind(), "address in use (pass another --port, or --port 0 for a free one)")
    } else {
        e
    };
    Error::Server { action: "cannot listen on", addr: format!("{host}:{port}"), source }
}

/// The warning for an address other machines can reach (every interface, or one that is not
/// loopback): they can fetch the demo and the model, and a page loaded through that address is
/// not a secure context, so it gets neither WebGPU nor the Cache API.
fn reachability_warning(host: &str, ip: IpAddr) -> Option<String> {
    let what = if ip.is_unspecified() {
        "every interface"
    } else if ip.is_loopback() {
        return None;
    } else {
        "not a loopback address"
    };
    Some(format!(
        "susurrus: warning: listening on {host} ({what}): the demo page and the model are reachable from other \
         machines, and browsers treat origins other than localhost and 127.0.0.1 as insecure (no WebGPU, no Cache \
         API)"
    ))
}

/// `serving DIR at URL` (when the demo page is served), then the model's and the VAD network's
/// lines, and the API's, on stdout.
fn print_banner(mounts: &Mounts, api: Option<&api::Api>, addr: &str) -> Result<()> {
    let mut banner = String::new();
    if let Some(root) = &mounts.root {
        banner += &format!("serving {} at http://{addr}/\n", root.display());
    }
    if let Some(model) = &mounts.model {
        banner += &format!("model {} at http://{addr}/model/\n", model.display());
    }
    if let Some(vad) = &mounts.vad {
        banner += &format!("vad {} at http://{addr}{VAD_PATH}\n", vad.display());
    }
    if let Some(api) = api {
        let info = &api.device.info;
        banner += &format!("api {} on {} at http://{addr}/v1/\n", info.id, info.backend);
    }
    let mut stdout = io::stdout().lock();
    stdout.write_all(banner.as_bytes()).and_then(|()| stdout.flush()).map_err(|e| Error::io(Path::new("<stdout>"), e))
}

/// Writes one line to stderr; a closed stderr is ignored (`eprintln!` would panic).
fn log(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}

/// Ctrl-C, and SIGTERM where there is one: what stops the server. Registered before the banner,
/// so a signal sent once the URL is out is never missed.
struct StopSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(windows)]
    ctrl_c: tokio::signal::windows::CtrlC,
}

impl StopSignals {
    fn new() -> io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(StopSignals { interrupt: signal(SignalKind::interrupt())?, terminate: signal(SignalKind::terminate())? })
        }
        #[cfg(windows)]
        {
            Ok(StopSignals { ctrl_c: tokio::signal::windows::ctrl_c()? })
        }
    }

    /// Waits for the next signal.
    async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        #[cfg(windows)]
        self.ctrl_c.recv().await;
    }
}

/// The server's routes: the transcription API's when it is served, every other path a static
/// file. Every request is logged.
fn router(mounts: Arc<Mounts>, api: Option<Arc<api::Api>>) -> Router {
    let files = Router::new().fallback(files).with_state(mounts);
    let app = match api {
        Some(api) => api::router(api, files),
        None => files,
    };
    app.layer(axum::middleware::from_fn(log_request))
}

/// Accepts connections and serves each on a task of its own until the first stop request (or
/// until no one can send one); then stops accepting, asks every connection to close once its
/// response in flight is sent (idle ones close at once) and returns when they all have, or at a
/// second stop request.
async fn serve(listener: TcpListener, app: Router, limits: Limits, mut stops: mpsc::UnboundedReceiver<()>) -> Stop {
    let (stopping, stop_seen) = watch::channel(false);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(connection(stream, peer, app.clone(), limits, stop_seen.clone()));
                }
                Err(e) => accept_failed(e).await,
            },
            Some(_) = connections.join_next() => {}
            _ = stops.recv() => break,
        }
    }
    drop(listener);
    let _ = stopping.send(true);
    tokio::select! {
        () = async { while connections.join_next().await.is_some() {} } => Stop::Finished,
        Some(()) = stops.recv() => Stop::Forced,
    }
}

/// Logs an accept error; one that is not about a single connection pauses accepting a little.
async fn accept_failed(e: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted};
    if !matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted) {
        log(format_args!("susurrus: cannot accept a connection: {e}"));
        tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
    }
}

/// Serves one connection with HTTP/1.1 under the header limits and [`Limits`] until the client
/// closes it, a limit ends it, or the server stops (then after the response in flight).
async fn connection(stream: TcpStream, peer: SocketAddr, app: Router, limits: Limits, mut stop: watch::Receiver<bool>) {
    let io = TokioIo::new(Watched { stream, stall: None, limit: limits.send_stall });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .max_header_size(MAX_HEADER_BYTES)
        .max_headers(MAX_HEADERS);
    let mut served = pin!(builder.serve_connection(io, TowerToHyperService::new(app)));
    let result = tokio::select! {
        result = served.as_mut() => result,
        // The one change is to stopping (or the server is gone).
        _ = stop.changed() => {
            served.as_mut().graceful_shutdown();
            served.await
        }
    };
    if let Err(e) = result {
        connection_failed(peer, &e);
    }
}

/// Logs a request hyper refused before it reached the routes (a header too large, a malformed
/// request line); hyper has answered it with 431 or 400. Clients that hang up or time out are
/// not logged: the request log's byte count shows a cut response.
fn connection_failed(peer: SocketAddr, e: &hyper::Error) {
    if e.is_parse() {
        log(format_args!("susurrus: refused a request from {peer}: {e}"));
    }
}

/// A connection's socket that fails a write the client has not let through for
/// [`Limits::send_stall`] (the kernel's send buffer stays full because the client reads nothing).
struct Watched {
    stream: TcpStream,
    stall: Option<Pin<Box<Sleep>>>,
    limit: Duration,
}

impl Watched {
    /// `poll` as it is, with its stall timer stopped when it is ready and started (or checked)
    /// while it is pending.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stall = None;
            return poll;
        }
        let limit = self.limit;
        let stall = self.stall.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(stall.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the client stopped reading the response")))
    }
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Logs every request as `METHOD PATH STATUS BYTES` (the target as requested, the body bytes
/// the connection took; 0 for HEAD) once its response is sent or cut.
async fn log_request(request: Request, next: Next) -> Response {
    let (method, target) = (request.method().clone(), request.uri().to_string());
    let response = next.run(request).await;
    let status = response.status().as_u16();
    response.map(|body| Body::new(Logged { body, sent: 0, method, target, status }))
}

/// A response body that counts the bytes taken from it and writes the request's log line when
/// it is dropped: after its end, or when the connection is gone.
struct Logged {
    body: Body,
    sent: u64,
    method: Method,
    target: String,
    status: u16,
}

impl http_body::Body for Logged {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let frame = ready!(Pin::new(&mut self.body).poll_frame(cx));
        if let Some(Ok(frame)) = &frame {
            self.sent += frame.data_ref().map_or(0, |data| data.len() as u64);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        log(format_args!("{} {} {} {}", self.method, self.target, self.status, self.sent));
    }
}

/// The static files: GET and HEAD of a file below the root, the model folder or the VAD URL.
async fn files(State(mounts): State<Arc<Mounts>>, method: Method, uri: Uri) -> Response {
    if method != Method::GET && method != Method::HEAD {
        let mut reply = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed: GET and HEAD only\n");
        reply.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return reply;
    }
    match locate(&mounts, uri.path()).await {
        Ok(path) => file(&path).await,
        Err(reply) => reply,
    }
}

/// The file a GET or HEAD of `path` names, or the reply that refuses it: 400 for a path that is
/// not plain, 404 for nothing there, 301 to add the `/` a folder's URL needs (so the links in
/// its index.html resolve inside it). With a VAD file, `/vad/` holds that one file and nothing
/// else; without a root (the API alone), every other path is 404.
async fn locate(mounts: &Mounts, path: &str) -> Result<PathBuf, Response> {
    let (segments, folder_url) =
        segments(path).ok_or_else(|| text(StatusCode::BAD_REQUEST, "bad request: not a plain path below /\n"))?;
    let (base, rest) = match (segments.first().map(String::as_str), &mounts.model, &mounts.vad, &mounts.root) {
        (Some("vad"), _, Some(vad), _) => {
            let exact = !folder_url && format!("/{}", segments.join("/")) == VAD_PATH;
            return if exact { Ok(vad.clone()) } else { Err(not_found()) };
        }
        (Some("model"), Some(model), _, _) => (model, &segments[1..]),
        (_, _, _, Some(root)) => (root, &segments[..]),
        _ => return Err(not_found()),
    };
    let found = rest.iter().fold(base.clone(), |dir, name| dir.join(name));
    let is_dir = tokio::fs::metadata(&found).await.map_err(|_| not_found())?.is_dir();
    if !is_dir {
        return Ok(found);
    }
    if !folder_url {
        let location = utf8_percent_encode(path, CONTROLS).to_string() + "/";
        let location = HeaderValue::try_from(location).map_err(|_| not_found())?;
        let mut reply = text(StatusCode::MOVED_PERMANENTLY, "moved: a folder's URL ends with /\n");
        reply.headers_mut().insert(LOCATION, location);
        return Err(reply);
    }
    Ok(found.join("index.html"))
}

/// The percent-decoded names in a request path and whether it ends with `/`; `None` for a path
/// that does not start with `/`, is not UTF-8, or holds a name that is not one plain file name:
/// `..`, `.`, empty (`//`), with a backslash or NUL, or a Windows drive. Decoding before
/// splitting makes an encoded slash (`%2f`) a separator, so `..%2f` is refused like `../`.
fn segments(path: &str) -> Option<(Vec<String>, bool)> {
    let decoded = percent_decode_str(path.strip_prefix('/')?).decode_utf8().ok()?;
    let (names, folder_url) = match decoded.strip_suffix('/') {
        Some(names) => (names, true),
        None => (&*decoded, decoded.is_empty()),
    };
    if names.is_empty() {
        return Some((Vec::new(), folder_url));
    }
    let plain = |name: &str| {
        !name.contains(['\\', '\0'])
            && matches!(Path::new(name).components().collect::<Vec<_>>()[..], [Component::Normal(_)])
    };
    let segments = names.split('/').map(|name| plain(name).then(|| name.to_owned())).collect::<Option<_>>()?;
    Some((segments, folder_url))
}

/// A 200 streaming the file at `path` (through its folder, links followed), or the error reply
/// for it: 404 for nothing there or not a regular file, 403 for a file that cannot be read.
async fn file(path: &Path) -> Response {
    // Checked before opening: opening a FIFO would block until something writes to it.
    match tokio::fs::metadata(path).await {
        Ok(meta) if meta.is_file() => {}
        _ => return not_found(),
    }
    let file = match tokio::fs::File::open(path).await {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return text(StatusCode::FORBIDDEN, "forbidden: not readable\n");
        }
        Err(_) => return not_found(),
    };
    match file.metadata().await {
        Ok(meta) => {
            let len = meta.len();
            reply(StatusCode::OK, content_type(path), len, Body::new(FileBody { file, left: len, buf: Vec::new() }))
        }
        Err(_) => not_found(),
    }
}

/// The Content-Type for a file: fixed for what browsers are strict about (module scripts,
/// `WebAssembly.instantiateStreaming`), else mime_guess's, else `application/octet-stream`.
fn content_type(path: &Path) -> &'static str {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("wasm") => "application/wasm",
        Some("js" | "mjs") => "text/javascript",
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("json") => "application/json",
        Some("wav") => "audio/wav",
        Some("txt") => "text/plain; charset=utf-8",
        Some("bin") => "application/octet-stream",
        _ => mime_guess::from_path(path).first_raw().unwrap_or("application/octet-stream"),
    }
}

/// A response with what every reply carries: its type, its length (always Content-Length,
/// never chunked: the page's download progress needs the total), `Cache-Control: no-cache`,
/// and the two headers that make the page cross-origin isolated (`Cross-Origin-Opener-Policy:
/// same-origin`, `Cross-Origin-Embedder-Policy: require-corp`), without which a browser gives
/// WebAssembly no shared memory and the package runs its CPU backend on one thread.
fn reply(status: StatusCode, content_type: &'static str, len: u64, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    headers.insert("cross-origin-embedder-policy", HeaderValue::from_static("require-corp"));
    response
}

fn text(status: StatusCode, text: &'static str) -> Response {
    reply(status, "text/plain; charset=utf-8", text.len() as u64, Body::from(text))
}

fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "not found\n")
}

/// A file's bytes as a response body, [`FILE_CHUNK`] at a time and never more than the length
/// sent as Content-Length (a file that grew since is cut there; one that shrank ends the
/// connection with an error).
struct FileBody {
    file: tokio::fs::File,
    left: u64,
    buf: Vec<u8>,
}

impl http_body::Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let this = &mut *self;
        if this.left == 0 {
            return Poll::Ready(None);
        }
        let want = usize::try_from(this.left).map_or(FILE_CHUNK, |left| left.min(FILE_CHUNK));
        this.buf.resize(want, 0);
        let mut buf = ReadBuf::new(&mut this.buf[..want]);
        ready!(Pin::new(&mut this.file).poll_read(cx, &mut buf))?;
        let read = buf.filled();
        if read.is_empty() {
            let shrank = io::Error::new(io::ErrorKind::UnexpectedEof, "the file shrank while it was sent");
            return Poll::Ready(Some(Err(shrank)));
        }
        this.left -= read.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(read)))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{Ipv4Addr, TcpStream as StdStream};

    use super::*;

    #[test]
    fn request_paths_split_into_plain_names() {
        let names = |path| segments(path).map(|(names, folder)| (names.join("|"), folder));
        assert_eq!(names("/"), Some((String::new(), true)));
        assert_eq!(names("/a/b.js"), Some(("a|b.js".into(), false)));
        assert_eq!(names("/a/"), Some(("a".into(), true)));
        assert_eq!(names("/my%20file.txt"), Some(("my file.txt".into(), false)));
        for bad in [
            "",
            "a",
            "/..",
            "/a/../b",
            "/%2e%2e/x",
            "/a/..%2f..%2fx",
            "/a%2f..%2f..%2fx",
            "/.",
            "//etc",
            "/a//b",
            "/a%2f%2fb",
            "/a\\b",
            "/%5c",
            "/%00",
        ] {
            assert_eq!(names(bad), None, "{bad}");
        }
        assert_eq!(names("/%ff"), None, "not UTF-8");
    }

    #[test]
    fn browsers_get_the_types_they_insist_on() {
        for (file, want) in [
            ("a.wasm", "application/wasm"),
            ("a.mjs", "text/javascript"),
            ("A.JS", "text/javascript"),
            ("index.html", "text/html; charset=utf-8"),
            ("style.css", "text/css"),
            ("icon.svg", "image/svg+xml"),
            ("model.bin", "application/octet-stream"),
            ("README", "application/octet-stream"),
        ] {
            assert_eq!(content_type(Path::new(file)), want, "{file}");
        }
    }

    #[test]
    fn addresses_other_machines_reach_are_warned_about() {
        let warning = |host: &str| reachability_warning(&url_host(host), bind_host(host).parse().unwrap());
        for host in ["127.0.0.1", "::1", "[::1]", "127.0.0.2"] {
            assert_eq!(warning(host), None, "{host}");
        }
        for (host, shown) in [("0.0.0.0", "0.0.0.0"), ("::", "[::]"), ("[::]", "[::]")] {
            let warning = warning(host).unwrap_or_else(|| panic!("no warning for {host}"));
            assert!(warning.starts_with(&format!("susurrus: warning: listening on {shown} (every interface): ")));
            assert!(warning.contains("reachable from other machines"), "{warning}");
            assert!(warning.contains("insecure (no WebGPU, no Cache API)"), "{warning}");
        }
        let lan = warning("192.168.1.5").unwrap();
        assert!(lan.starts_with("susurrus: warning: listening on 192.168.1.5 (not a loopback address): "), "{lan}");
    }

    /// A server on a free port over a temporary root with `index.html` and a `big.bin` larger
    /// than the sockets' buffers, with `limits`, on a thread of its own.
    struct TestServer {
        addr: SocketAddr,
        stop: mpsc::UnboundedSender<()>,
        done: std::sync::mpsc::Receiver<()>,
        _root: tempfile::TempDir,
    }

    const INDEX: &[u8] = b"<!doctype html><title>index</title>\n";
    const BIG_LEN: usize = 48 << 20;

    impl TestServer {
        fn start(limits: Limits) -> TestServer {
            let root = tempfile::tempdir().unwrap();
            std::fs::write(root.path().join("index.html"), INDEX).unwrap();
            std::fs::write(root.path().join("big.bin"), vec![7; BIG_LEN]).unwrap();
            let mounts = Arc::new(Mounts { root: Some(root.path().to_owned()), model: None, vad: None });
            let listener = StdListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            listener.set_nonblocking(true).unwrap();
            let addr = listener.local_addr().unwrap();
            let (stop, stops) = mpsc::unbounded_channel();
            let (finished, done) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                runtime.block_on(async {
                    let listener = TcpListener::from_std(listener).unwrap();
                    serve(listener, router(mounts, None), limits, stops).await;
                });
                let _ = finished.send(());
            });
            TestServer { addr, stop, done, _root: root }
        }

        fn connect(&self) -> StdStream {
            let stream = StdStream::connect(self.addr).unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            stream
        }

        /// GET `target` on a connection of its own; the status line and the body.
        fn get(&self, target: &str) -> (String, Vec<u8>) {
            let mut stream = self.connect();
            write!(stream, "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
            let mut raw = Vec::new();
            stream.read_to_end(&mut raw).unwrap();
            let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a header end");
            let status = String::from_utf8_lossy(&raw[..end]).lines().next().unwrap().to_owned();
            (status, raw[end + 4..].to_vec())
        }

        /// Asks the server to stop (as the first Ctrl-C does).
        fn stop(&self) {
            self.stop.send(()).unwrap();
        }

        /// Waits (up to 10 s) for the server to return.
        fn wait(&self) {
            self.done.recv_timeout(Duration::from_secs(10)).expect("the server returned after its stop");
        }

        /// Waits (up to 10 s) until the server refuses connections: it has seen the stop.
        fn wait_until_refused(&self) {
            let start = std::time::Instant::now();
            while StdStream::connect(self.addr).is_ok() {
                assert!(start.elapsed() < Duration::from_secs(10), "connections still accepted after the stop");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    impl Drop for TestServer {
        fn drop(&mut self) {
            let _ = self.stop.send(());
        }
    }

    const SHORT: Limits = Limits { header_read: Duration::from_millis(300), send_stall: Duration::from_millis(300) };

    /// Reads what the server sends until it closes the connection; `None` if it keeps it open
    /// past the read timeout.
    fn read_until_closed(stream: &mut StdStream) -> Option<Vec<u8>> {
        let mut got = Vec::new();
        let mut buf = [0; 64 << 10];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return Some(got),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return None,
                Err(_) => return Some(got),
            }
        }
    }

    #[test]
    fn half_sent_and_silent_connections_are_dropped_while_others_are_answered() {
        let server = TestServer::start(SHORT);
        let mut half = server.connect();
        half.write_all(b"GET /index.html HTTP/1.1\r\nHost: x\r\nUser-Ag").unwrap();
        let mut silent = server.connect();
        let mut idle = server.connect();
        idle.write_all(b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let (status, body) = server.get("/index.html");
        assert_eq!((status.as_str(), body.as_slice()), ("HTTP/1.1 200 OK", INDEX));
        assert_eq!(read_until_closed(&mut half), Some(Vec::new()), "the half-sent request's connection stayed open");
        assert_eq!(read_until_closed(&mut silent), Some(Vec::new()), "the silent connection stayed open");
        // A kept-alive connection gets its response, then is closed once idle.
        let answered = read_until_closed(&mut idle).expect("the idle keep-alive connection stayed open");
        assert!(answered.starts_with(b"HTTP/1.1 200 OK\r\n") && answered.ends_with(INDEX));
        let (status, body) = server.get("/index.html");
        assert_eq!((status.as_str(), body.as_slice()), ("HTTP/1.1 200 OK", INDEX));
    }

    #[test]
    fn a_client_that_stops_reading_is_dropped_and_holds_up_no_stop() {
        let server = TestServer::start(SHORT);
        let mut stalled = server.connect();
        stalled.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut start = [0; 4096];
        stalled.read_exact(&mut start).unwrap();
        assert!(start.starts_with(b"HTTP/1.1 200 OK\r\n"));
        let (status, body) = server.get("/index.html");
        assert_eq!((status.as_str(), body.as_slice()), ("HTTP/1.1 200 OK", INDEX));
        // The stop waits for responses in flight; this one's reader never reads again.
        server.stop();
        server.wait();
        let rest = read_until_closed(&mut stalled).expect("the stalled connection stayed open");
        assert!(start.len() + rest.len() < BIG_LEN, "the whole file was sent");
    }

    #[test]
    fn a_stop_lets_the_response_in_flight_finish() {
        let server = TestServer::start(Limits::SERVE);
        let mut download = server.connect();
        download.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut start = [0; 4096];
        download.read_exact(&mut start).unwrap();
        server.stop();
        // The file is larger than the sockets' buffers: the response is still being sent.
        server.wait_until_refused();
        let rest = read_until_closed(&mut download).expect("the connection closed after its response");
        server.wait();
        let got = [&start[..], &rest].concat();
        let end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        assert_eq!(got.len() - end - 4, BIG_LEN, "the whole file came");
        assert!(got[end + 4..].iter().all(|&b| b == 7));
    }
}
