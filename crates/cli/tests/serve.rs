//! Runs `susurrus serve` on a free port over folders made here and talks HTTP/1.1 to it over
//! plain TCP: types, lengths and bytes, folders, the VAD network's one URL, errors, methods, the
//! request log, clients that hang up, oversized headers, model folders of links (Hugging Face's
//! cache), that no URL reaches a file outside the served folders, the warning for addresses
//! other machines reach, a clean stop on Ctrl-C or SIGTERM, and that without `--api` the demo
//! page's folder is required. The time limits on slow clients
//! are tested in the module's own tests, with short limits.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Never served: it lies beside the served folders, where `..` would lead.
const SECRET: &[u8] = b"[package]\nname = \"the-secret-outside-the-root\"\n";
const INDEX: &[u8] = b"<!doctype html><title>top</title>\n";
const SUB_INDEX: &[u8] = b"<!doctype html><title>sub</title>\n";
const BIG_LEN: usize = 3 << 20;
/// Stands in for silero_vad_v6.onnx; its name on disk differs from the URL's on purpose.
const VAD: &[u8] = b"\x08\x09onnx-bytes";

/// Deterministic bytes that are not all alike, so a shifted or truncated body cannot pass.
fn pattern(len: usize) -> Vec<u8> {
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A temporary folder, removed on drop: `root/` (served at `/`), `model/` (at `/model/`),
/// `vad/net.onnx` (at `/vad/silero_vad_v6.onnx`) and the secret `Cargo.toml` beside them.
struct Site {
    dir: PathBuf,
}

impl Site {
    fn new(name: &str) -> Site {
        let dir = std::env::temp_dir().join(format!("susurrus-serve-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let files: [(&str, &[u8]); 14] = [
            ("Cargo.toml", SECRET),
            ("root/index.html", INDEX),
            ("root/app.js", b"export const answer = 42;\n"),
            ("root/worker.mjs", b"self.onmessage = () => {};\n"),
            ("root/pkg/susurrus_bg.wasm", b"\0asm\x01\0\0\0"),
            ("root/data.json", b"{\"ok\":true}"),
            ("root/clip.wav", b"RIFF\x04\0\0\0WAVE"),
            ("root/notes.txt", b"plain text\n"),
            ("root/blob.zzq", b"\x01\x02\x03"),
            ("root/sub/index.html", SUB_INDEX),
            ("model/model.bin", b"weights"),
            ("model/config.json", b"{\"d_model\":4}"),
            ("vad/net.onnx", VAD),
            ("vad/other.onnx", b"not served"),
        ];
        for (path, bytes) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        std::fs::write(dir.join("root/big.bin"), pattern(BIG_LEN)).unwrap();
        Site { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    fn file(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).unwrap()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running `susurrus serve`, killed on drop. Its stderr is collected as it comes.
struct Server {
    child: Child,
    stdout: BufReader<ChildStdout>,
    first_line: String,
    addr: String,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    /// Serves `site`'s root, model folder and VAD file on a free port.
    fn start(site: &Site) -> Server {
        let (root, model, vad) = (site.path("root"), site.path("model"), site.path("vad/net.onnx"));
        Server::start_with(
            &["--root", path_str(&root), "--model", path_str(&model), "--vad-model", path_str(&vad)],
            &[],
        )
    }

    fn start_with(args: &[&str], env: &[(&str, &Path)]) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_susurrus"));
        command.args(["serve", "--port", "0"]).args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("the susurrus binary runs");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first_line = String::new();
        stdout.read_line(&mut first_line).unwrap();
        let mut server = Server { child, stdout, first_line, addr: String::new(), stderr };
        let url = server.first_line.split_whitespace().find(|w| w.starts_with("http://")).map(str::to_owned);
        let Some(url) = url else {
            let _ = server.child.wait();
            std::thread::sleep(Duration::from_millis(200));
            panic!("no URL on stdout: {:?}; stderr:\n{}", server.first_line, server.stderr());
        };
        server.addr = url.trim_start_matches("http://").trim_end_matches('/').to_owned();
        server
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (up to 10 s) for `line` to appear as a whole line on stderr: the server logs a
    /// request after answering it, so the log may trail the reply.
    fn wait_for_log(&self, line: &str) {
        let start = Instant::now();
        while !self.stderr().lines().any(|l| l == line) {
            assert!(start.elapsed() < Duration::from_secs(10), "no line {line:?} on stderr:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn request(&self, method: &str, target: &str) -> Reply {
        request(&self.addr, method, target)
    }

    /// Kills the server and returns the rest of its stdout.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        rest
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn content_length(&self) -> usize {
        self.header("Content-Length").expect("a Content-Length").parse().unwrap()
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`), read to the end.
fn request(addr: &str, method: &str, target: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a header end");
    let head = std::str::from_utf8(&raw[..end]).unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    assert!(status_line.starts_with("HTTP/1.1 "), "{status_line}");
    let status = status_line[9..12].parse().unwrap();
    let headers = lines
        .map(|l| l.split_once(": ").unwrap_or_else(|| panic!("bad header line {l:?}")))
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    Reply { status, headers, body: raw[end + 4..].to_vec() }
}

/// Runs `susurrus serve ARGS` expecting it to exit by itself (within 10 s).
fn run_to_exit(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_susurrus"));
    command.arg("serve").args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("susurrus serve {args:?} kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn files_come_with_their_type_length_and_bytes() {
    let site = Site::new("types");
    let server = Server::start(&site);
    let root = site.path("root").canonicalize().unwrap();
    assert_eq!(server.first_line, format!("serving {} at http://{}/\n", root.display(), server.addr));
    assert!(server.addr.starts_with("127.0.0.1:"), "{}", server.addr);
    for (target, file, content_type) in [
        ("/index.html", "root/index.html", "text/html; charset=utf-8"),
        ("/app.js", "root/app.js", "text/javascript"),
        ("/worker.mjs", "root/worker.mjs", "text/javascript"),
        ("/pkg/susurrus_bg.wasm", "root/pkg/susurrus_bg.wasm", "application/wasm"),
        ("/data.json", "root/data.json", "application/json"),
        ("/clip.wav", "root/clip.wav", "audio/wav"),
        ("/notes.txt", "root/notes.txt", "text/plain; charset=utf-8"),
        ("/blob.zzq", "root/blob.zzq", "application/octet-stream"),
        ("/big.bin", "root/big.bin", "application/octet-stream"),
        ("/big.bin?v=2", "root/big.bin", "application/octet-stream"),
    ] {
        let reply = server.request("GET", target);
        assert_eq!(reply.status, 200, "{target}");
        assert_eq!(reply.header("Content-Type"), Some(content_type), "{target}");
        assert_eq!(reply.header("Cache-Control"), Some("no-cache"), "{target}");
        // Cross-origin isolated, so the package may run its threaded build.
        assert_eq!(reply.header("Cross-Origin-Opener-Policy"), Some("same-origin"), "{target}");
        assert_eq!(reply.header("Cross-Origin-Embedder-Policy"), Some("require-corp"), "{target}");
        assert_eq!(reply.header("Transfer-Encoding"), None, "{target}");
        let want = site.file(file);
        assert_eq!(reply.content_length(), want.len(), "{target}");
        assert!(reply.body == want, "{target}: {} bytes differ from the file's {}", reply.body.len(), want.len());
    }
}

#[test]
fn folders_give_their_index_html() {
    let site = Site::new("folders");
    let server = Server::start(&site);
    for (target, body) in [("/", INDEX), ("/sub/", SUB_INDEX), ("/sub/?x=1", SUB_INDEX)] {
        let reply = server.request("GET", target);
        assert_eq!(reply.status, 200, "{target}");
        assert_eq!(reply.header("Content-Type"), Some("text/html; charset=utf-8"), "{target}");
        assert_eq!(reply.body, body, "{target}");
    }
    // Without the slash, the page's relative links would resolve one folder up.
    let reply = server.request("GET", "/sub");
    assert_eq!((reply.status, reply.header("Location")), (301, Some("/sub/")));
    // A folder without an index.html is not listed.
    assert_eq!(server.request("GET", "/pkg/").status, 404);
}

#[test]
fn missing_files_are_404_with_a_short_text_body() {
    let site = Site::new("missing");
    let server = Server::start(&site);
    for target in ["/missing.js", "/sub/missing.html", "/model/missing.bin", "/app.js/x"] {
        let reply = server.request("GET", target);
        assert_eq!(reply.status, 404, "{target}");
        assert_eq!(reply.header("Content-Type"), Some("text/plain; charset=utf-8"), "{target}");
        assert_eq!(reply.body, b"not found\n", "{target}");
        assert_eq!(reply.content_length(), reply.body.len(), "{target}");
    }
}

/// A named pipe (or any other file that is not a regular one) under the root is 404 at once:
/// opening a FIFO to read it waits for a writer, which would hold the request, and a thread of
/// the server's, for as long as none comes (tower-http 0.6.11's `ServeDir` gives no answer in
/// 5 s there; see ARCHITECTURE.md). Files served after it still are.
#[cfg(unix)]
#[test]
fn a_named_pipe_under_the_root_is_404_at_once() {
    let site = Site::new("fifo");
    let fifo = site.path("root/live.wav");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let server = Server::start(&site);
    let reply = server.request("GET", "/live.wav");
    assert_eq!((reply.status, &reply.body[..]), (404, &b"not found\n"[..]));
    assert_eq!(server.request("GET", "/app.js").status, 200);
}

#[test]
fn only_get_and_head_are_allowed() {
    let site = Site::new("methods");
    let server = Server::start(&site);
    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let reply = server.request(method, "/index.html");
        assert_eq!(reply.status, 405, "{method}");
        assert_eq!(reply.header("Allow"), Some("GET, HEAD"), "{method}");
        assert_eq!(reply.body, b"method not allowed: GET and HEAD only\n", "{method}");
    }
}

#[test]
fn head_sends_the_headers_without_a_body() {
    let site = Site::new("head");
    let server = Server::start(&site);
    let reply = server.request("HEAD", "/big.bin");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("Content-Type"), Some("application/octet-stream"));
    assert_eq!(reply.content_length(), BIG_LEN);
    assert!(reply.body.is_empty(), "{} body bytes", reply.body.len());
    let reply = server.request("HEAD", "/missing");
    assert_eq!((reply.status, reply.content_length(), reply.body.len()), (404, 10, 0));
}

#[test]
fn no_url_names_a_file_outside_the_served_folders() {
    let site = Site::new("traversal");
    let outside = site.path("Cargo.toml");
    #[cfg(unix)]
    std::os::unix::fs::symlink(site.path("root/app.js"), site.path("root/alias.js")).unwrap();
    let server = Server::start(&site);
    let absolute = format!("/{}", path_str(&outside));
    let encoded = format!("/{}", path_str(&outside).replace('/', "%2f"));
    let targets = [
        "/../Cargo.toml",
        "/%2e%2e/Cargo.toml",
        "/%2E%2E/Cargo.toml",
        "/sub/..%2f..%2fCargo.toml",
        "/sub/%2e%2e/%2e%2e/Cargo.toml",
        "/..\\Cargo.toml",
        "/%5c..%5cCargo.toml",
        "/sub\\..\\..\\Cargo.toml",
        "/model/../Cargo.toml",
        "/model/%2e%2e/Cargo.toml",
        "/vad/../Cargo.toml",
        "/vad/%2e%2e/Cargo.toml",
        "/vad/silero_vad_v6.onnx/../../Cargo.toml",
        "/./../Cargo.toml",
        "/%00/../Cargo.toml",
        absolute.as_str(),
        encoded.as_str(),
    ];
    for target in targets {
        let reply = server.request("GET", target);
        assert!((400..500).contains(&reply.status), "{target}: {}", reply.status);
        let secret = String::from_utf8_lossy(SECRET);
        assert!(!String::from_utf8_lossy(&reply.body).contains(secret.trim()), "{target} leaked the file");
    }
    assert_eq!(server.request("GET", "/%2e%2e/Cargo.toml").status, 400);
    if cfg!(unix) {
        let reply = server.request("GET", "/alias.js");
        assert_eq!((reply.status, reply.body), (200, site.file("root/app.js")));
    }
}

#[test]
fn the_model_folder_is_served_under_model() {
    let site = Site::new("model");
    let mut server = Server::start(&site);
    let mut second = String::new();
    server.stdout.read_line(&mut second).unwrap();
    let model = site.path("model").canonicalize().unwrap();
    assert_eq!(second, format!("model {} at http://{}/model/\n", model.display(), server.addr));
    for (target, file, content_type) in [
        ("/model/model.bin", "model/model.bin", "application/octet-stream"),
        ("/model/config.json", "model/config.json", "application/json"),
    ] {
        let reply = server.request("GET", target);
        assert_eq!(reply.status, 200, "{target}");
        assert_eq!(reply.header("Content-Type"), Some(content_type), "{target}");
        assert_eq!(reply.body, site.file(file), "{target}");
    }
    assert_eq!(server.request("GET", "/model").header("Location"), Some("/model/"));
}

#[test]
fn the_vad_network_is_served_at_one_url_and_nothing_else_under_vad() {
    let site = Site::new("vad");
    let mut server = Server::start(&site);
    let (mut model, mut vad) = (String::new(), String::new());
    server.stdout.read_line(&mut model).unwrap();
    server.stdout.read_line(&mut vad).unwrap();
    assert!(model.starts_with("model "), "{model}");
    let file = site.path("vad/net.onnx").canonicalize().unwrap();
    assert_eq!(vad, format!("vad {} at http://{}/vad/silero_vad_v6.onnx\n", file.display(), server.addr));
    for target in ["/vad/silero_vad_v6.onnx", "/vad/silero_vad_v6.onnx?v=6"] {
        let reply = server.request("GET", target);
        assert_eq!(reply.status, 200, "{target}");
        assert_eq!(reply.header("Content-Type"), Some("application/octet-stream"), "{target}");
        assert_eq!((reply.content_length(), reply.body.as_slice()), (VAD.len(), VAD), "{target}");
    }
    let head = server.request("HEAD", "/vad/silero_vad_v6.onnx");
    assert_eq!((head.status, head.content_length(), head.body.len()), (200, VAD.len(), 0));
    // The folder beside the file is not served: only the one name is.
    for target in
        ["/vad/net.onnx", "/vad/other.onnx", "/vad/", "/vad", "/vad/silero_vad_v6.onnx/", "/vad/x/silero_vad_v6.onnx"]
    {
        assert_eq!(server.request("GET", target).status, 404, "{target}");
    }
    assert_eq!(server.request("POST", "/vad/silero_vad_v6.onnx").status, 405);
}

#[test]
fn every_request_is_logged_on_stderr() {
    let site = Site::new("log");
    let server = Server::start(&site);
    let index = server.request("GET", "/index.html");
    server.request("HEAD", "/app.js");
    let missing = server.request("GET", "/missing.txt");
    let post = server.request("POST", "/index.html");
    let bad = server.request("GET", "/%2e%2e/Cargo.toml");
    server.request("GET", "/model/model.bin?cache=1");
    server.request("HEAD", "/vad/silero_vad_v6.onnx");
    for line in [
        format!("GET /index.html 200 {}", index.body.len()),
        "HEAD /app.js 200 0".to_owned(),
        format!("GET /missing.txt 404 {}", missing.body.len()),
        format!("POST /index.html 405 {}", post.body.len()),
        format!("GET /%2e%2e/Cargo.toml 400 {}", bad.body.len()),
        "GET /model/model.bin?cache=1 200 7".to_owned(),
        "HEAD /vad/silero_vad_v6.onnx 200 0".to_owned(),
    ] {
        server.wait_for_log(&line);
    }
    assert_eq!(server.stderr().lines().count(), 7, "one line per request:\n{}", server.stderr());
}

#[test]
fn a_client_that_hangs_up_mid_download_stops_nothing() {
    let site = Site::new("hangup");
    let huge = pattern(32 << 20);
    std::fs::write(site.path("root/huge.bin"), &huge).unwrap();
    let server = Server::start(&site);
    let mut stalled = TcpStream::connect(&server.addr).unwrap();
    write!(stalled, "GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut start = [0; 4096];
    stalled.read_exact(&mut start).unwrap();
    assert!(start.starts_with(b"HTTP/1.1 200 "));
    // While that download waits on its reader, other requests are answered.
    let reply = server.request("GET", "/big.bin");
    assert_eq!(reply.body, site.file("root/big.bin"));
    drop(stalled);
    let reply = server.request("GET", "/index.html");
    assert_eq!((reply.status, reply.body), (200, INDEX.to_vec()));
    server.wait_for_log(&format!("GET /index.html 200 {}", INDEX.len()));
    let start = Instant::now();
    let cut = loop {
        let log = server.stderr();
        if let Some(line) = log.lines().find(|l| l.starts_with("GET /huge.bin 200 ")) {
            break line[18..].parse::<usize>().unwrap();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no log line for the cut download:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(cut < huge.len(), "the whole file was sent ({cut} bytes)");
}

#[test]
fn an_explicit_missing_model_is_an_error() {
    let site = Site::new("nomodel");
    let missing = site.path("no-such-model");
    let out = run_to_exit(&["--port", "0", "--root", path_str(&site.path("root")), "--model", path_str(&missing)], &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    let want =
        format!("susurrus: error: model folder {} not found: run ./scripts/models/fetch_model.sh", missing.display());
    assert!(err.starts_with(&want), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn an_explicit_missing_vad_network_is_an_error() {
    let site = Site::new("novad");
    let missing = site.path("no-such.onnx");
    let (root, model) = (site.path("root"), site.path("model"));
    let args =
        ["--port", "0", "--root", path_str(&root), "--model", path_str(&model), "--vad-model", path_str(&missing)];
    let out = run_to_exit(&args, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "susurrus: error: VAD network {} not found: run ./scripts/models/fetch_model.sh silero-vad to fetch it, or \
             pass --vad-model FILE\n",
            missing.display()
        )
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn without_the_default_model_it_serves_the_root_and_says_so() {
    let site = Site::new("nodefault");
    let home = site.path("home");
    std::fs::create_dir(&home).unwrap();
    let server = Server::start_with(&["--root", path_str(&site.path("root"))], &[("HOME", &home)]);
    let default = home.join(".cache/susurrus/models/whisper-tiny.en-ct2");
    let note = format!(
        "susurrus: serving without /model/: default model folder {} not found: run ./scripts/models/fetch_model.sh to \
         fetch whisper-tiny.en, or pass --model DIR with a CTranslate2 or Hugging Face Whisper folder, or a model's \
         name (tiny.en, tiny, base.en, base, small.en, small, medium.en, medium, large-v1, large-v2, large-v3, large, \
         distil-large-v2, distil-medium.en, distil-small.en, distil-large-v3, distil-large-v3.5, large-v3-turbo, turbo)",
        default.display()
    );
    server.wait_for_log(&note);
    let default_vad = home.join(".cache/susurrus/models/silero-vad-v6/silero_vad_v6.onnx");
    server.wait_for_log(&format!(
        "susurrus: serving without /vad/silero_vad_v6.onnx: default VAD network {} not found: run \
         ./scripts/models/fetch_model.sh silero-vad to fetch it, or pass --vad-model FILE",
        default_vad.display()
    ));
    assert_eq!(server.request("GET", "/app.js").status, 200);
    assert_eq!(server.request("GET", "/model/model.bin").status, 404);
    assert_eq!(server.request("GET", "/vad/silero_vad_v6.onnx").status, 404);
    assert_eq!(server.stop(), "", "no `model ... at` or `vad ... at` line");
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let site = Site::new("inuse");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (root, model, vad) = (site.path("root"), site.path("model"), site.path("vad/net.onnx"));
    let args = ["--port", &port, "--root", path_str(&root), "--model", path_str(&model), "--vad-model", path_str(&vad)];
    let out = run_to_exit(&args, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "susurrus: error: cannot listen on 127.0.0.1:{port}: address in use (pass another --port, or --port 0 \
             for a free one)\n"
        )
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_missing_root_is_an_error() {
    let site = Site::new("noroot");
    let missing = site.path("no-www");
    let out =
        run_to_exit(&["--port", "0", "--root", path_str(&missing), "--model", path_str(&site.path("model"))], &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with(&format!("susurrus: error: root folder {} not found", missing.display())), "{err}");
}

#[test]
fn without_api_and_without_www_it_is_an_error_naming_www() {
    let site = Site::new("nowww");
    let empty = site.path("empty");
    std::fs::create_dir(&empty).unwrap();
    let model = site.path("model");
    let out = Command::new(env!("CARGO_BIN_EXE_susurrus"))
        .current_dir(&empty)
        .args(["serve", "--port", "0", "--model", path_str(&model)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "susurrus: error: no www/ folder here: the demo page needs it; run from the repository root (www/ holds the \
         demo page), pass --root DIR, or pass --api to serve only the transcription API\n"
    );
    assert!(out.stdout.is_empty());
    // With --api, a --root given must still exist: it is checked before the model loads.
    let missing = site.path("no-www");
    let out = Command::new(env!("CARGO_BIN_EXE_susurrus"))
        .current_dir(&empty)
        .args(["serve", "--api", "--port", "0", "--root", path_str(&missing), "--model", path_str(&model)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with(&format!("susurrus: error: root folder {} not found", missing.display())), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn an_oversized_header_is_refused_and_others_are_still_answered() {
    let site = Site::new("bighead");
    let server = Server::start(&site);
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let client = stream.local_addr().unwrap();
    stream.write_all(b"GET /index.html HTTP/1.1\r\nHost: x\r\nX-Padding: ").unwrap();
    // The server must hang up long before a header this size is all sent: it reads a bounded
    // amount, then closes, and a write fails once the socket buffers between are full.
    let chunk = vec![b'a'; 64 << 10];
    let mut sent = 0;
    let refused = loop {
        match stream.write_all(&chunk) {
            Ok(()) => sent += chunk.len(),
            Err(e) => break e,
        }
        assert!(sent < 256 << 20, "the server took a {sent}-byte header");
    };
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    assert!(matches!(refused.kind(), BrokenPipe | ConnectionReset | ConnectionAborted), "{refused}");
    // The 431 may be lost to the reset the unread header causes; when it arrives, it is a 431.
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    assert!(reply.is_empty() || reply.starts_with(b"HTTP/1.1 431 "), "{}", String::from_utf8_lossy(&reply));
    server.wait_for_log(&format!("susurrus: refused a request from {client}: message head is too large"));
    let reply = server.request("GET", "/index.html");
    assert_eq!((reply.status, reply.body), (200, INDEX.to_vec()));
    // The bound lies between these two (hyper's own would take either).
    let header = |len| {
        format!("GET /index.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Padding: {}\r\n\r\n", "a".repeat(len))
    };
    let answer = |header: String| {
        let mut stream = TcpStream::connect(&server.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = stream.write_all(header.as_bytes());
        let mut reply = Vec::new();
        let _ = stream.read_to_end(&mut reply);
        reply
    };
    assert!(answer(header(32 << 10)).starts_with(b"HTTP/1.1 200 OK\r\n"));
    let reply = answer(header(80 << 10));
    assert!(reply.is_empty() || reply.starts_with(b"HTTP/1.1 431 "), "{}", String::from_utf8_lossy(&reply));
}

/// A Hugging Face cache below `site`: `hub/blobs/` holds the files under their hashes (and one
/// that no snapshot names), `hub/snapshots/rev/` links to them as `../../blobs/HASH`, and
/// `hub/Cargo.toml` is the secret beside them. Returns the snapshot folder and the model's bytes.
#[cfg(unix)]
fn hugging_face_cache(site: &Site) -> (PathBuf, Vec<u8>) {
    let weights = pattern((1 << 20) + 3);
    let blobs = site.path("hub/blobs");
    let snapshot = site.path("hub/snapshots/rev");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(&snapshot).unwrap();
    for (hash, bytes, name) in [
        ("5e1f", &weights[..], Some("model.safetensors")),
        ("c0f1", &b"{\"d_model\":4}"[..], Some("config.json")),
        ("0bad", SECRET, None),
    ] {
        std::fs::write(blobs.join(hash), bytes).unwrap();
        if let Some(name) = name {
            std::os::unix::fs::symlink(format!("../../blobs/{hash}"), snapshot.join(name)).unwrap();
        }
    }
    std::fs::write(site.path("hub/Cargo.toml"), SECRET).unwrap();
    (snapshot, weights)
}

#[cfg(unix)]
#[test]
fn a_model_folder_of_links_into_blobs_is_served_byte_exact() {
    let site = Site::new("hfcache");
    let (snapshot, weights) = hugging_face_cache(&site);
    // The root may link out too: a package built elsewhere.
    std::fs::create_dir_all(site.path("build/pkg")).unwrap();
    std::fs::write(site.path("build/pkg/susurrus.js"), b"export default 1;\n").unwrap();
    std::os::unix::fs::symlink(site.path("build/pkg"), site.path("root/pkg-link")).unwrap();
    let root = site.path("root");
    let server = Server::start_with(&["--root", path_str(&root), "--model", path_str(&snapshot)], &[]);
    let reply = server.request("GET", "/model/model.safetensors");
    assert_eq!((reply.status, reply.content_length()), (200, weights.len()));
    assert!(reply.body == weights, "{} bytes differ from the blob's {}", reply.body.len(), weights.len());
    let reply = server.request("GET", "/model/config.json");
    assert_eq!((reply.status, reply.header("Content-Type")), (200, Some("application/json")));
    assert_eq!(reply.body, b"{\"d_model\":4}");
    let head = server.request("HEAD", "/model/model.safetensors");
    assert_eq!((head.status, head.content_length(), head.body.len()), (200, weights.len(), 0));
    let reply = server.request("GET", "/pkg-link/susurrus.js");
    assert_eq!((reply.status, reply.header("Content-Type")), (200, Some("text/javascript")));
    assert_eq!(reply.body, b"export default 1;\n");
}

#[cfg(unix)]
#[test]
fn links_out_of_a_folder_cannot_be_climbed_out_of() {
    let site = Site::new("climb");
    let (snapshot, _) = hugging_face_cache(&site);
    std::os::unix::fs::symlink(site.path("hub/blobs"), site.path("root/ext")).unwrap();
    let root = site.path("root");
    let server = Server::start_with(&["--root", path_str(&root), "--model", path_str(&snapshot)], &[]);
    for target in [
        "/model/../../blobs/0bad",
        "/model/%2e%2e/%2e%2e/blobs/0bad",
        "/model/%2E%2E%2F%2E%2E%2Fblobs%2F0bad",
        "/model/model.safetensors/../0bad",
        "/model/model.safetensors/..%2f0bad",
        "/model/model.safetensors%2f..%2f0bad",
        "/model/config.json/%2e%2e/%2e%2e/Cargo.toml",
        "/model/..%5c..%5cblobs%5c0bad",
        "/ext/../../hub/Cargo.toml",
        "/ext/%2e%2e/Cargo.toml",
        "/ext%2f..%2fCargo.toml",
        "/ext/.%2e/Cargo.toml",
        "/ext/..\\Cargo.toml",
    ] {
        let reply = server.request("GET", target);
        assert!((400..500).contains(&reply.status), "{target}: {}", reply.status);
        let secret = String::from_utf8_lossy(SECRET);
        assert!(!String::from_utf8_lossy(&reply.body).contains(secret.trim()), "{target} leaked the file");
    }
    // What the links name is served: the folder a link leads to, below the link's URL.
    assert_eq!(server.request("GET", "/model/model.safetensors").status, 200);
    assert_eq!(server.request("GET", "/ext/5e1f").status, 200);
}

#[test]
fn listening_on_every_interface_warns() {
    let site = Site::new("everywhere");
    let (root, model) = (site.path("root"), site.path("model"));
    let server =
        Server::start_with(&["--host", "0.0.0.0", "--root", path_str(&root), "--model", path_str(&model)], &[]);
    assert!(server.addr.starts_with("0.0.0.0:"), "{}", server.addr);
    server.wait_for_log(
        "susurrus: warning: listening on 0.0.0.0 (every interface): the demo page and the model are reachable from \
         other machines, and browsers treat origins other than localhost and 127.0.0.1 as insecure (no WebGPU, no \
         Cache API)",
    );
    let port = server.addr.rsplit(':').next().unwrap();
    let reply = request(&format!("127.0.0.1:{port}"), "GET", "/index.html");
    assert_eq!((reply.status, reply.body), (200, INDEX.to_vec()));
}

/// Sends `signal` (`TERM`, `INT`) to the server's process.
#[cfg(unix)]
fn send_signal(server: &Server, signal: &str) {
    let status = Command::new("kill").arg(format!("-{signal}")).arg(server.child.id().to_string()).status().unwrap();
    assert!(status.success(), "kill -{signal} failed");
}

/// Waits (up to 10 s) for the server's process to exit by itself; its exit code.
#[cfg(unix)]
fn wait_for_exit(server: &mut Server) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status.code();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the server kept running:\n{}", server.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(unix)]
#[test]
fn sigterm_stops_it_after_the_download_in_flight() {
    let site = Site::new("sigterm");
    let huge = pattern(48 << 20);
    std::fs::write(site.path("root/huge.bin"), &huge).unwrap();
    let mut server = Server::start(&site);
    let mut download = TcpStream::connect(&server.addr).unwrap();
    download.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(download, "GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut start = [0; 4096];
    download.read_exact(&mut start).unwrap();
    send_signal(&server, "TERM");
    // Once connections are refused the server has seen the signal; the download, larger than
    // the sockets' buffers, is still in flight.
    let begun = Instant::now();
    while TcpStream::connect(&server.addr).is_ok() {
        assert!(begun.elapsed() < Duration::from_secs(10), "still accepting after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut got = start.to_vec();
    download.read_to_end(&mut got).unwrap();
    let end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    assert!(got[end + 4..] == huge, "{} of {} bytes came", got.len() - end - 4, huge.len());
    assert_eq!(wait_for_exit(&mut server), Some(0));
    server.wait_for_log(&format!("GET /huge.bin 200 {}", huge.len()));
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_an_idle_server_at_once() {
    let site = Site::new("ctrlc");
    let mut server = Server::start(&site);
    assert_eq!(server.request("GET", "/index.html").status, 200);
    // A kept-alive connection with nothing in flight does not hold the stop up.
    let mut idle = TcpStream::connect(&server.addr).unwrap();
    write!(idle, "GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut head = [0; 12];
    idle.read_exact(&mut head).unwrap();
    send_signal(&server, "INT");
    assert_eq!(wait_for_exit(&mut server), Some(0));
    let stderr = server.stderr();
    assert_eq!(stderr.lines().filter(|l| !l.starts_with("GET ")).count(), 0, "{stderr}");
}
