//! `susurrus serve`: a small static HTTP server for the web demo. The page in `www/` loads ES
//! modules, a `.wasm` file and the model with `fetch`, which browsers allow only from an HTTP
//! origin that sends the right MIME types (not from `file://`); the Cache API and WebGPU need a
//! secure context, which `http://127.0.0.1` and `http://localhost` are. So it serves a folder at
//! `/`, the model folder at `/model/` and the Silero VAD network at `/vad/silero_vad_v6.onnx`,
//! GET and HEAD only, never a file outside those, and logs every request on stderr as `METHOD
//! PATH STATUS BYTES`.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv6Addr, TcpListener};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use percent_encoding::{CONTROLS, percent_decode_str, utf8_percent_encode};
use tiny_http::{Header, Method, Request, Response, Server};

use crate::error::{Error, Result};
use crate::model_dir;

/// Where the VAD network is served: one fixed URL, so the demo page can ask for it without
/// knowing the file's name on disk.
const VAD_PATH: &str = "/vad/silero_vad_v6.onnx";

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Folder served at `/` (a folder's URL gives its index.html).
    #[arg(long, value_name = "DIR", default_value = "www")]
    pub root: PathBuf,
    /// Model folder served at `/model/`. Default: the folder ./scripts/fetch-model.sh prepares,
    /// left out (with a note on stderr) when it is missing.
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// The Silero VAD v6 network (ONNX) served at /vad/silero_vad_v6.onnx, for the page's
    /// "skip silence" option. Default: the file `./scripts/fetch-model.sh silero-vad` fetches,
    /// left out (with a note on stderr) when it is missing.
    #[arg(long, value_name = "FILE")]
    pub vad_model: Option<PathBuf>,
    /// Address to listen on. Browsers treat 127.0.0.1 and localhost as secure contexts (Cache
    /// API, WebGPU); other addresses are not.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on; 0 picks a free one (the URL on stdout names it).
    #[arg(long, value_name = "N", default_value_t = 8080)]
    pub port: u16,
}

/// The folders requests may reach, canonical, so that a resolved file can be checked to lie
/// inside one, and the one VAD file, canonical.
struct Mounts {
    root: PathBuf,
    model: Option<PathBuf>,
    vad: Option<PathBuf>,
}

/// Serves until killed: prints `serving DIR at URL` (then `model DIR at URL/model/` and `vad
/// FILE at URL/vad/silero_vad_v6.onnx` for what is served) on stdout, then answers every
/// request on a thread of its own, so a slow or vanished client holds up no other. Returns
/// only with an error: the folders, the VAD file or the address are unusable, or the server
/// stopped accepting connections.
pub fn run(args: &ServeArgs) -> Result<()> {
    let mounts = Arc::new(Mounts {
        root: served_root(&args.root)?,
        model: served_model(args.model.as_deref())?,
        vad: served_vad(args.vad_model.as_deref())?,
    });
    let host = url_host(&args.host);
    let listener = TcpListener::bind((args.host.as_str(), args.port)).map_err(|e| listen_error(&host, args.port, e))?;
    let port = listener.local_addr().map_err(|e| listen_error(&host, args.port, e))?.port();
    let server = Server::from_listener(listener, None).map_err(|e| listen_error(&host, port, io::Error::other(e)))?;

    let mut banner = format!("serving {} at http://{host}:{port}/\n", mounts.root.display());
    if let Some(model) = &mounts.model {
        banner += &format!("model {} at http://{host}:{port}/model/\n", model.display());
    }
    if let Some(vad) = &mounts.vad {
        banner += &format!("vad {} at http://{host}:{port}{VAD_PATH}\n", vad.display());
    }
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(banner.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| Error::io(Path::new("<stdout>"), e))?;
    drop(stdout);

    loop {
        let request = server.recv().map_err(|source| Error::Server {
            action: "stopped accepting connections on",
            addr: format!("{host}:{port}"),
            source,
        })?;
        let mounts = Arc::clone(&mounts);
        // A request that gets no thread is dropped, and tiny_http answers it with a 500.
        if let Err(e) = std::thread::Builder::new().name("serve".into()).spawn(move || answer(&mounts, request)) {
            log(format_args!("susurrus: cannot start a thread for a request: {e}"));
        }
    }
}

/// `--root`, canonical; a missing one says where the demo page lives.
fn served_root(dir: &Path) -> Result<PathBuf> {
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "root folder {} not found: run from the repository root (www/ holds the demo page) or pass --root DIR",
            dir.display()
        )));
    }
    dir.canonicalize().map_err(|e| Error::io(dir, e))
}

/// `--model`, canonical: a given folder must hold a model; the default one is left out, with
/// a note, when it does not.
fn served_model(dir: Option<&Path>) -> Result<Option<PathBuf>> {
    match model_dir::resolve(dir) {
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
    match model_dir::resolve_vad(file) {
        Ok(path) => path.canonicalize().map(Some).map_err(|e| Error::io(&path, e)),
        Err(e) if file.is_none() => {
            log(format_args!("susurrus: serving without {VAD_PATH}: {e}"));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// `host` as it goes in a URL: IPv6 addresses in brackets.
fn url_host(host: &str) -> String {
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

/// Writes one line to stderr; a closed stderr is ignored (`eprintln!` would panic).
fn log(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}

/// Answers one request and logs it as `METHOD PATH STATUS BYTES` (the path as requested, the
/// body bytes the connection took; 0 for HEAD).
fn answer(mounts: &Mounts, request: Request) {
    let method = request.method().clone();
    let target = request.url().to_owned();
    let reply = match method {
        Method::Get | Method::Head => match locate(mounts, &target) {
            Ok(file) => Reply::file(&file),
            Err(reply) => reply,
        },
        _ => Reply::text(405, "method not allowed: GET and HEAD only\n").with_header("Allow", "GET, HEAD".into()),
    };
    let status = reply.status;
    let sent = Arc::new(AtomicU64::new(0));
    let result = request.respond(reply.into_response(Arc::clone(&sent)));
    log(format_args!("{} {target} {status} {}", method.as_str(), sent.load(Ordering::Relaxed)));
    if let Err(e) = result {
        log(format_args!("susurrus: {} {target}: {e}", method.as_str()));
    }
}

/// The file a GET or HEAD of `target` names, or the reply that refuses it: 400 for a path that
/// is not plain, 403 for a link out of its folder, 404 for nothing there, 301 to add the `/`
/// a folder's URL needs (so the links in its index.html resolve inside it). With a VAD file,
/// `/vad/` holds that one file and nothing else.
fn locate(mounts: &Mounts, target: &str) -> Result<PathBuf, Reply> {
    let path = target.split_once('?').map_or(target, |(path, _query)| path);
    let (segments, folder_url) =
        segments(path).ok_or_else(|| Reply::text(400, "bad request: not a plain path below /\n"))?;
    let (base, rest) = match (segments.first().map(String::as_str), &mounts.model, &mounts.vad) {
        (Some("vad"), _, Some(vad)) => {
            let exact = !folder_url && format!("/{}", segments.join("/")) == VAD_PATH;
            return if exact { Ok(vad.clone()) } else { Err(Reply::not_found()) };
        }
        (Some("model"), Some(model), _) => (model, &segments[1..]),
        _ => (&mounts.root, &segments[..]),
    };
    let found = inside(base, &rest.iter().fold(base.clone(), |dir, name| dir.join(name)))?;
    if !found.is_dir() {
        return Ok(found);
    }
    if !folder_url {
        let location = utf8_percent_encode(path, CONTROLS).to_string() + "/";
        return Err(Reply::text(301, "moved: a folder's URL ends with /\n").with_header("Location", location));
    }
    inside(base, &found.join("index.html"))
}

/// `path` canonical, when it exists and stays inside `base` after following links.
fn inside(base: &Path, path: &Path) -> Result<PathBuf, Reply> {
    let found = path.canonicalize().map_err(|_| Reply::not_found())?;
    if found.starts_with(base) {
        Ok(found)
    } else {
        Err(Reply::text(403, "forbidden: a link out of the served folder\n"))
    }
}

/// The percent-decoded names in a request path and whether it ends with `/`; `None` for a path
/// that does not start with `/`, is not UTF-8, or holds a name that is not one plain file name:
/// `..`, `.`, empty (`//`), with a backslash or NUL, or a Windows drive.
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

/// A response before it is sent: status, body (a file is streamed, never read whole) and
/// headers beyond Content-Type, Content-Length and Cache-Control.
struct Reply {
    status: u16,
    content_type: &'static str,
    body: Box<dyn Read + Send>,
    len: usize,
    headers: Vec<(&'static str, String)>,
}

impl Reply {
    fn text(status: u16, text: &'static str) -> Self {
        let body = Box::new(text.as_bytes());
        Reply { status, content_type: "text/plain; charset=utf-8", body, len: text.len(), headers: Vec::new() }
    }

    fn not_found() -> Self {
        Reply::text(404, "not found\n")
    }

    /// A 200 with the file at `path` (canonical), or the error reply for it.
    fn file(path: &Path) -> Self {
        // Checked before opening: opening a FIFO would block until something writes to it.
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => {}
            _ => return Reply::not_found(),
        }
        let opened = File::open(path).and_then(|file| Ok((file.metadata()?.len(), file)));
        match opened {
            Ok((len, file)) => match usize::try_from(len) {
                Ok(len) => Reply {
                    status: 200,
                    content_type: content_type(path),
                    body: Box::new(file),
                    len,
                    headers: Vec::new(),
                },
                Err(_) => Reply::text(500, "file too large for this platform\n"),
            },
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Reply::text(403, "forbidden: not readable\n"),
            Err(_) => Reply::not_found(),
        }
    }

    fn with_header(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The tiny_http response, its body counted into `sent`. Always Content-Length (never
    /// chunked): the page's download progress needs the total.
    fn into_response(self, sent: Arc<AtomicU64>) -> Response<Counted> {
        let fixed = [("Content-Type", self.content_type.to_owned()), ("Cache-Control", "no-cache".to_owned())];
        // Every value here is ASCII (the Location is percent-encoded), which is all from_bytes checks.
        let headers =
            fixed.into_iter().chain(self.headers).filter_map(|(n, v)| Header::from_bytes(n, v).ok()).collect();
        // `take`: a file that grew since its length was read must not overrun Content-Length.
        let body = Counted { body: self.body.take(self.len as u64), sent };
        Response::new(self.status.into(), headers, body, Some(self.len), None).with_chunked_threshold(usize::MAX)
    }
}

/// A response body that counts the bytes the connection reads from it, for the request log.
struct Counted {
    body: io::Take<Box<dyn Read + Send>>,
    sent: Arc<AtomicU64>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.body.read(buf)?;
        self.sent.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_split_into_plain_names() {
        let names = |path| segments(path).map(|(names, folder)| (names.join("|"), folder));
        assert_eq!(names("/"), Some((String::new(), true)));
        assert_eq!(names("/a/b.js"), Some(("a|b.js".into(), false)));
        assert_eq!(names("/a/"), Some(("a".into(), true)));
        assert_eq!(names("/my%20file.txt"), Some(("my file.txt".into(), false)));
        for bad in
            ["", "a", "/..", "/a/../b", "/%2e%2e/x", "/a/..%2f..%2fx", "/.", "//etc", "/a//b", "/a\\b", "/%5c", "/%00"]
        {
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
}
