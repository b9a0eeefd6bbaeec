//! `susurrus serve --api` with the real tiny.en on the CPU backend: OpenAI's Python client
//! library (`./scripts/setup.sh api` makes its venv) transcribes the golden clips with
//! faster-whisper's text, in every answer format, streamed, and gets each error as its own
//! exception; 64 concurrent clients each get their own clip's text; and over plain TCP: a full
//! queue answered 503 with Retry-After while uploads in progress hold no place, silent and
//! trickling connections that starve no real request, full upload places, an upload over the limit
//! 413, a request over its time 504, the key, `/health`, `/metrics`, a transcription in
//! flight finished on SIGTERM, the API alone (no demo page) from an empty folder, and a small
//! upload of hours of audio refused with the server's memory unmoved.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use susurrus_testkit::golden::Set;

const KEY: &str = "test-key-1234";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden(name: &str) -> Vec<u8> {
    std::fs::read(repo().join("tests/fixtures/golden").join(name)).unwrap()
}

/// faster-whisper's text of a golden clip with its default decoding (the `beam_5` run).
fn reference(clip: &str) -> String {
    let record: serde_json::Value = serde_json::from_slice(&golden(&format!("{clip}.json"))).unwrap();
    let runs = record["runs"].as_array().unwrap();
    let run = runs.iter().find(|r| r["name"] == "beam_5").unwrap();
    run["text"].as_str().unwrap().trim().to_owned()
}

struct Server {
    child: Child,
    addr: String,
    stderr: Arc<Mutex<String>>,
    /// The lines on stdout before the API's.
    banner: Vec<String>,
}

impl Server {
    /// `susurrus serve --api --backend cpu --port 0 --root www ARGS`, once its API line is out.
    fn start(args: &[&str]) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_susurrus"));
        command
            .args(["serve", "--api", "--backend", "cpu", "--port", "0", "--root"])
            .arg(repo().join("www"))
            .args(args);
        Server::spawn(command)
    }

    /// Runs `command` (a `susurrus serve --api`), once its API line is out.
    fn spawn(mut command: Command) -> Server {
        let mut child =
            command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the susurrus binary runs");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (mut pipe, sink) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let mut banner = Vec::new();
        while !line.starts_with("api ") {
            if !line.is_empty() {
                banner.push(std::mem::take(&mut line));
            }
            if stdout.read_line(&mut line).unwrap() == 0 {
                let _ = child.wait();
                std::thread::sleep(Duration::from_millis(200));
                panic!("no api line on stdout; stderr:\n{}", stderr.lock().unwrap());
            }
        }
        let url = line.split_whitespace().find(|w| w.starts_with("http://")).unwrap();
        let addr = url.trim_start_matches("http://").trim_end_matches("/v1/").to_owned();
        Server { child, addr, stderr, banner }
    }

    fn get(&self, target: &str, key: Option<&str>) -> Reply {
        let auth = key.map(|k| format!("Authorization: Bearer {k}\r\n")).unwrap_or_default();
        let mut stream = self.connect();
        write!(stream, "GET {target} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n").unwrap();
        read_reply(&mut stream)
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
        stream
    }

    /// Runs tests/api/openai_client.py against the server; its stdout.
    fn openai_client(&self, args: &[&str]) -> String {
        let python = dirs_home().join(".cache/susurrus/api-venv/bin/python");
        assert!(python.exists(), "{} is missing: run ./scripts/setup.sh api", python.display());
        let out = Command::new(python)
            .arg(repo().join("tests/api/openai_client.py"))
            .arg(format!("http://{}/v1", self.addr))
            .arg(KEY)
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        println!("{stdout}");
        assert!(
            out.status.success(),
            "openai_client.py {args:?}: {stdout}\n{}\nserver:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.stderr.lock().unwrap()
        );
        stdout
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn dirs_home() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
}

struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.head
            .split("\r\n")
            .filter_map(|l| l.split_once(": "))
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

fn read_reply(stream: &mut TcpStream) -> Reply {
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no header end in {text:?}"));
    let status = head[9..12].parse().unwrap();
    Reply { status, head: head.to_owned(), body: body.to_owned() }
}

/// A multipart form of `fields` and the file `audio` named `name`: its content type and body.
fn form(fields: &[(&str, &str)], name: &str, audio: &[u8]) -> (String, Vec<u8>) {
    let boundary = "susurrus-test-boundary-7d9f";
    let mut body = Vec::new();
    for (field, value) in fields {
        write!(body, "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"\r\n\r\n{value}\r\n").unwrap();
    }
    write!(body, "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n").unwrap();
    write!(body, "Content-Type: application/octet-stream\r\n\r\n").unwrap();
    body.extend_from_slice(audio);
    write!(body, "\r\n--{boundary}--\r\n").unwrap();
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Sends the head of a POST of `body` to the transcription route, and the first `sent` bytes of
/// the body.
fn post_start(server: &Server, content_type: &str, body: &[u8], sent: usize) -> TcpStream {
    post_start_to(server, "transcriptions", content_type, body, sent)
}

/// [`post_start`] to `/v1/audio/ROUTE`.
fn post_start_to(server: &Server, route: &str, content_type: &str, body: &[u8], sent: usize) -> TcpStream {
    let mut stream = server.connect();
    write!(
        stream,
        "POST /v1/audio/{route} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: \
         {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(&body[..sent]).unwrap();
    stream
}

/// POSTs a form and reads the reply. The body is written from another thread: a server that
/// answers before reading it all (413, 503) closes the connection, and a writer blocked on a
/// full socket would never read the answer.
fn post(server: &Server, fields: &[(&str, &str)], name: &str, audio: &[u8]) -> Reply {
    post_to(server, "transcriptions", fields, name, audio)
}

/// [`post`] to `/v1/audio/ROUTE`.
fn post_to(server: &Server, route: &str, fields: &[(&str, &str)], name: &str, audio: &[u8]) -> Reply {
    let (content_type, body) = form(fields, name, audio);
    let mut stream = post_start_to(server, route, &content_type, &body, 0);
    let mut writer = stream.try_clone().unwrap();
    let writing = std::thread::spawn(move || {
        let _ = writer.write_all(&body);
    });
    let reply = read_reply(&mut stream);
    let _ = writing.join();
    reply
}

#[test]
fn openai_client_library_gets_faster_whispers_text_every_format_and_each_error() {
    let server = Server::start(&["--api-key", KEY]);
    let out = server.openai_client(&["check"]);
    assert!(out.contains("AuthenticationError (401)"), "{out}");
}

#[test]
fn sixty_four_concurrent_clients_each_get_their_own_transcript() {
    // Four groups: the windows of concurrent requests encoded and decoded together, each client still
    // getting faster-whisper's text of its own clip.
    let server = Server::start(&["--api-key", KEY, "--batch", "4"]);
    server.openai_client(&["load", "64"]);
    let metrics = server.get("/metrics", None);
    assert_eq!(metrics.status, 200);
    for line in [
        "susurrus_requests_total{route=\"/v1/audio/transcriptions\",status=\"200\"} 64",
        "susurrus_queue_depth 0",
        "susurrus_request_duration_seconds_count 64",
    ] {
        assert!(metrics.body.lines().any(|l| l == line), "{line} missing from:\n{}", metrics.body);
    }
    // Decoder steps ran several requests' windows at once.
    let value = |name: &str| -> u64 {
        let line = metrics.body.lines().find(|l| l.starts_with(name)).unwrap_or_default();
        line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or_default()
    };
    let (alone, steps) = (value("susurrus_batch_windows_bucket{le=\"1\"}"), value("susurrus_batch_windows_count"));
    let most = value("susurrus_batch_windows_bucket{le=\"4\"}");
    assert!(steps > alone && most == steps, "{}", metrics.body);
    // The first jobs' windows, come while the first one decoded alone, joined together and
    // were encoded together.
    let encoded = value("susurrus_windows_encoded_together_total");
    assert!(encoded >= 2, "{}", metrics.body);
}

/// The device's queue holds only audio ready to transcribe: an upload in progress takes no
/// place in it (one that did let 64 silent connections make every request 503 for ten
/// minutes). Full, it is answered 503 with `Retry-After` from the jobs that hold it.
#[test]
fn a_full_queue_is_503_with_retry_after_and_an_upload_in_progress_holds_no_place() {
    let server = Server::start(&["--api-key", KEY, "--queue", "1"]);
    let audio = golden("short_2.wav");
    let (content_type, body) = form(&[], "short_2.wav", &audio);
    // Half an upload: it holds no place, and a whole request beside it is transcribed.
    let mut half = post_start(&server, &content_type, &body, body.len() / 2);
    let beside = post(&server, &[], "short_2.wav", &audio);
    assert_eq!(beside.status, 200, "{}", beside.body);
    assert!(server.get("/health", None).body.contains("\"queued\":0"));
    half.write_all(&body[body.len() / 2..]).unwrap();
    let done = read_reply(&mut half);
    assert_eq!(done.status, 200, "{}", done.body);
    let text: serde_json::Value = serde_json::from_str(&done.body).unwrap();
    assert_eq!(text["text"], reference("short_2"));
    // Long transcriptions fill the device (two in work on the CPU, a third taken from the
    // queue to wait for them) and its one place; the next request is refused. They are sent
    // one at a time until one waits in the queue: two that come together may race for the
    // place while the third is still in it.
    let long = golden("long.wav");
    let (long_type, long_body) = form(&[], "long.wav", &long);
    let mut holders = Vec::new();
    let waited = Instant::now();
    'filling: loop {
        assert!(holders.len() < 8, "the queue never filled");
        holders.push(post_start(&server, &long_type, &long_body, long_body.len()));
        let sent = Instant::now();
        while sent.elapsed() < Duration::from_secs(3) {
            // Twice, 200 ms apart: the third job sits in the queue a moment before the device
            // takes it; the fourth stays.
            let queued = || server.get("/health", None).body.contains("\"queued\":1");
            if queued() {
                std::thread::sleep(Duration::from_millis(200));
                if queued() {
                    break 'filling;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(waited.elapsed() < Duration::from_secs(120), "the queue never filled");
    }
    let busy = post(&server, &[], "short_2.wav", &audio);
    assert_eq!(busy.status, 503, "{}", busy.body);
    assert!(busy.body.contains("the server is busy: 1 of 1 places in its queue are taken"), "{}", busy.body);
    let retry: u64 = busy.header("Retry-After").expect("a Retry-After").parse().unwrap();
    assert!(retry >= 1);
    drop(holders);
}

/// Connections that send headers and nothing more, and bodies that trickle, hold no place a
/// real request needs: 200 of the first and as many of the second as there are upload places
/// less one, and a real request beside them is transcribed. The silent ones are answered 408
/// once nothing has come for 10 s.
#[test]
fn header_only_connections_and_slow_bodies_do_not_starve_real_requests() {
    let server = Server::start(&["--api-key", KEY, "--queue", "2", "--max-uploads", "4"]);
    let audio = golden("short_2.wav");
    let (content_type, body) = form(&[], "short_2.wav", &audio);
    let silent: Vec<TcpStream> = (0..200).map(|_| post_start(&server, &content_type, &body, 0)).collect();
    let trickling: Vec<_> = (0..3)
        .map(|_| {
            let mut stream = post_start(&server, &content_type, &body, 512);
            let rest = body[512..].to_vec();
            std::thread::spawn(move || {
                for byte in rest.iter().take(20) {
                    std::thread::sleep(Duration::from_secs(1));
                    if stream.write_all(std::slice::from_ref(byte)).is_err() {
                        break;
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let real = post(&server, &[], "short_2.wav", &audio);
    assert_eq!(real.status, 200, "{}", real.body);
    let text: serde_json::Value = serde_json::from_str(&real.body).unwrap();
    assert_eq!(text["text"], reference("short_2"));
    let mut first = silent.into_iter().next().unwrap();
    let stalled = read_reply(&mut first);
    assert_eq!(stalled.status, 408, "{}", stalled.body);
    assert!(stalled.body.contains("the upload stalled: nothing arrived for 10 s"), "{}", stalled.body);
    for thread in trickling {
        thread.join().unwrap();
    }
}

/// Every upload place taken (by a body that trickles): the next upload waits 10 s for one, then
/// is 503 with a `Retry-After`, its body read so the client gets the answer; a declared length over the limit is 413 before a byte of it is asked for
/// (`Expect: 100-continue` gets no `100 Continue`).
#[test]
fn full_upload_places_are_503_and_an_oversized_declared_length_is_413_before_100_continue() {
    let server = Server::start(&["--api-key", KEY, "--max-uploads", "1"]);
    let audio = golden("short_2.wav");
    let (content_type, body) = form(&[], "short_2.wav", &audio);
    // The holder sends a byte a second: never idle long enough to lose its place.
    let mut holder = post_start(&server, &content_type, &body, 512);
    let mut trickle = holder.try_clone().unwrap();
    let rest = body[512..].to_vec();
    let trickling = std::thread::spawn(move || {
        for byte in &rest[..14] {
            std::thread::sleep(Duration::from_secs(1));
            trickle.write_all(std::slice::from_ref(byte)).unwrap();
        }
        trickle.write_all(&rest[14..]).unwrap();
    });
    std::thread::sleep(Duration::from_millis(500));
    let busy = post(&server, &[], "short_2.wav", &audio);
    assert_eq!(busy.status, 503, "{}", busy.body);
    assert!(busy.body.contains("every upload place is taken (--max-uploads)"), "{}", busy.body);
    assert_eq!(busy.header("Retry-After"), Some("2"));
    trickling.join().unwrap();
    assert_eq!(read_reply(&mut holder).status, 200);
    let mut stream = server.connect();
    write!(
        stream,
        "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: \
         {content_type}\r\nContent-Length: 100000000000\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let reply = read_reply(&mut stream);
    assert_eq!(reply.status, 413, "{}\n{}", reply.head, reply.body);
    assert!(reply.body.contains("larger than the server's limit of 25 MB"), "{}", reply.body);
}

#[test]
fn limits_and_bad_requests_get_openai_shaped_errors() {
    let server = Server::start(&["--api-key", KEY, "--max-upload-mb", "5", "--request-timeout", "1"]);
    // Over the upload limit.
    let big = post(&server, &[], "big.wav", &vec![0u8; 6 << 20]);
    assert_eq!(big.status, 413, "{}", big.body);
    assert!(big.body.contains("larger than the server's limit of 5 MB"), "{}", big.body);
    // An upload slower than the request's time.
    let (content_type, body) = form(&[], "noisy.wav", &golden("noisy.wav"));
    let mut stalled = post_start(&server, &content_type, &body, body.len() / 2);
    let stalled = read_reply(&mut stalled);
    assert_eq!(stalled.status, 408, "{}", stalled.body);
    assert!(stalled.body.contains("the upload took too long"), "{}", stalled.body);
    // A transcription longer than the request's time (133 s of audio in a second), dropped at
    // the end of the window in work: no audio is counted as transcribed.
    let slow = post(&server, &[], "long.wav", &golden("long.wav"));
    assert_eq!(slow.status, 504, "{}", slow.body);
    assert!(slow.body.contains("longer than the server's --request-timeout"), "{}", slow.body);
    let waited = Instant::now();
    while !server.get("/health", None).body.contains("\"queued\":0,\"status\":\"ok\",\"working\":0") {
        assert!(waited.elapsed() < Duration::from_secs(120), "the timed-out job was never dropped");
        std::thread::sleep(Duration::from_millis(20));
    }
    let metrics = server.get("/metrics", None).body;
    assert!(metrics.lines().any(|l| l == "susurrus_audio_seconds_total 0"), "{metrics}");
    for (fields, says) in [
        (vec![("temperature", "2")], "temperature \\\"2\\\": a number from 0 to 1"),
        (vec![("stream", "yes")], "stream \\\"yes\\\": true or false"),
        (vec![("timestamp_granularities[]", "word")], "needs response_format verbose_json"),
        (vec![("language", "fr")], "language \\\"fr\\\" is not one whisper-tiny.en-ct2 knows (en)"),
        (vec![("response_format", "srt"), ("stream", "true")], "response_format json or text"),
        (vec![("model", "whisper-1"), ("model", "whisper-1")], "form field \\\"model\\\" is given twice: give it once"),
    ] {
        let reply = post(&server, &fields, "noisy.wav", &golden("noisy.wav"));
        assert_eq!(reply.status, 400, "{fields:?}: {}", reply.body);
        assert!(reply.body.contains(says), "{fields:?}: {}", reply.body);
        assert!(reply.body.contains("\"type\":\"invalid_request_error\""), "{}", reply.body);
    }
    let empty = post(&server, &[], "empty.wav", b"");
    assert_eq!(empty.status, 400, "{}", empty.body);
    assert!(empty.body.contains("empty.wav: empty file"), "{}", empty.body);
    // The key: none, wrong; /health and /metrics stay open to probes and scrapers.
    let none = server.get("/v1/models", None);
    assert_eq!((none.status, none.header("WWW-Authenticate")), (401, Some("Bearer")));
    assert!(none.body.contains("an API key is needed"), "{}", none.body);
    assert_eq!(server.get("/v1/models", Some("wrong")).status, 401);
    let models = server.get("/v1/models", Some(KEY));
    assert!(models.body.contains("\"id\":\"whisper-tiny.en-ct2\""), "{}", models.body);
    let health = server.get("/health", None);
    assert_eq!(health.status, 200);
    assert!(health.body.contains("\"status\":\"ok\""), "{}", health.body);
    // The demo's files are still served beside the API.
    assert_eq!(server.get("/index.html", None).status, 200);
}

/// The process's peak resident memory (`VmHWM`), in kB.
fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("a VmHWM line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The decompression bomb: ten hours of digital silence in 106 KB of FLAC, far under the upload
/// limit, used to be decoded whole into memory (2.3 GB of samples). It is answered 413 once its
/// decoding passes `--max-audio-minutes`, the server's peak memory stays where it was, and the
/// next request is transcribed.
#[cfg(target_os = "linux")]
#[test]
fn a_small_upload_of_hours_of_audio_is_413_and_memory_stays_bounded() {
    let server = Server::start(&["--api-key", KEY, "--max-audio-minutes", "2"]);
    let pid = server.child.id();
    let before = peak_rss_kb(pid);
    let bomb = susurrus_testkit::signal::silent_flac(16_000, 10 * 3600 * 16_000);
    assert!(bomb.len() < 128 << 10, "{} bytes", bomb.len());
    let reply = post(&server, &[], "silence.flac", &bomb);
    assert_eq!(reply.status, 413, "{}", reply.body);
    let says = "the audio is longer than the server's limit of 2 minutes (--max-audio-minutes)";
    assert!(reply.body.contains(says), "{}", reply.body);
    // Two minutes of samples are 7.7 MB; the upload 0.1 MB.
    let after = peak_rss_kb(pid);
    assert!(after < before + (64 << 10), "peak resident memory {before} kB before, {after} kB after");
    let clip = post(&server, &[], "noisy.wav", &golden("noisy.wav"));
    assert_eq!(clip.status, 200, "{}", clip.body);
    let text: serde_json::Value = serde_json::from_str(&clip.body).unwrap();
    assert_eq!(text["text"].as_str().unwrap().trim(), reference("noisy"));
}

#[test]
fn a_multilingual_model_transcribes_in_a_given_or_detected_language_and_translates() {
    let base = Set::Base.model_dir();
    let server = Server::start(&["--model", base.to_str().unwrap()]);
    let fixture = Set::Base.fixture("de");
    let runs = fixture["runs"].as_array().unwrap();
    let german = runs.iter().find(|r| r["name"] == "beam_5").unwrap()["text"].as_str().unwrap().trim();
    let wav = std::fs::read(Set::Base.dir().join("de.wav")).unwrap();
    let json = |reply: Reply| -> serde_json::Value {
        assert_eq!(reply.status, 200, "{}", reply.body);
        serde_json::from_str(&reply.body).unwrap()
    };
    let given = json(post(&server, &[("language", "de")], "de.wav", &wav));
    assert_eq!(given["text"], german);
    let detected = json(post(&server, &[("response_format", "verbose_json")], "de.wav", &wav));
    assert_eq!((detected["language"].as_str(), detected["task"].as_str()), (Some("german"), Some("transcribe")));
    assert_eq!(detected["text"], german);
    let translated = json(post_to(&server, "translations", &[("response_format", "verbose_json")], "de.wav", &wav));
    assert_eq!((translated["language"].as_str(), translated["task"].as_str()), (Some("german"), Some("translate")));
    let english = translated["text"].as_str().unwrap();
    assert!(english.is_ascii() && english != german && english.contains("cake"), "{english}");
    let unknown = post(&server, &[("language", "xx")], "de.wav", &wav);
    assert_eq!(unknown.status, 400, "{}", unknown.body);
    assert!(
        unknown.body.contains("language \\\"xx\\\" is not one whisper-base-ct2 knows (en, zh, de,"),
        "{}",
        unknown.body
    );
}

/// The long clip posted with `stream`, read until its first segment is out (more windows are
/// then left to decode): the connection and what it sent so far.
fn long_clip_streaming(server: &Server) -> (TcpStream, Vec<u8>) {
    let (content_type, body) = form(&[("stream", "true")], "long.wav", &golden("long.wav"));
    let mut request = post_start(server, &content_type, &body, body.len());
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("transcript.text.delta") {
        let mut buf = [0; 1024];
        let n = request.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended before its first segment: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    (request, seen)
}

#[cfg(unix)]
#[test]
fn sigterm_lets_the_transcription_in_flight_finish() {
    let mut server = Server::start(&["--api-key", KEY]);
    let (mut request, mut seen) = long_clip_streaming(&server);
    let status = Command::new("kill").arg("-TERM").arg(server.child.id().to_string()).status().unwrap();
    assert!(status.success());
    request.read_to_end(&mut seen).unwrap();
    let text = String::from_utf8_lossy(&seen);
    let done = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|e| serde_json::from_str::<serde_json::Value>(e).unwrap())
        .find(|e| e["type"] == "transcript.text.done")
        .unwrap_or_else(|| panic!("no done event in {text}"));
    assert_eq!(done["text"], reference("long"));
    let waited = Instant::now();
    let code = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status.code();
        }
        assert!(waited.elapsed() < Duration::from_secs(30), "still running:\n{}", server.stderr.lock().unwrap());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0), "{}", server.stderr.lock().unwrap());
}

/// A second SIGTERM stops the server at once, the transcription in work abandoned (it used to
/// wait for it: 35 s with a 3-minute clip), with a line that says so and exit status 1.
#[cfg(unix)]
#[test]
fn a_second_sigterm_exits_at_once() {
    let mut server = Server::start(&["--api-key", KEY]);
    let (mut request, mut seen) = long_clip_streaming(&server);
    for _ in 0..2 {
        let status = Command::new("kill").arg("-TERM").arg(server.child.id().to_string()).status().unwrap();
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(100));
    }
    let waited = Instant::now();
    let code = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status.code();
        }
        // The clip's 133 s take far longer than this to transcribe on the CPU.
        assert!(waited.elapsed() < Duration::from_secs(5), "still running:\n{}", server.stderr.lock().unwrap());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(1));
    let _ = request.read_to_end(&mut seen);
    assert!(!String::from_utf8_lossy(&seen).contains("transcript.text.done"));
    std::thread::sleep(Duration::from_millis(200));
    let stderr = server.stderr.lock().unwrap().clone();
    assert!(
        stderr.contains("susurrus: stopped at a second signal, abandoning the transcriptions in work: 1\n"),
        "{stderr}"
    );
}

/// `GET /v1/models` with `authorization` as the header's whole value; the status.
fn models_status(server: &Server, authorization: &str) -> u16 {
    let mut stream = server.connect();
    write!(stream, "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: {authorization}\r\nConnection: close\r\n\r\n")
        .unwrap();
    read_reply(&mut stream).status
}

/// The key from SUSURRUS_API_KEY (not only the command line, where every local user sees it in
/// the process list) or from a file (a mounted secret); the scheme of `Authorization` is
/// case-insensitive (RFC 9110), so `bearer KEY` is accepted as `Bearer KEY` is.
#[test]
fn the_key_comes_from_the_environment_or_a_file_and_the_scheme_is_case_insensitive() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_susurrus"));
    command.args(["serve", "--api", "--backend", "cpu", "--port", "0"]).env("SUSURRUS_API_KEY", KEY);
    let server = Server::spawn(command);
    for (authorization, status) in [
        (format!("Bearer {KEY}"), 200),
        (format!("bearer {KEY}"), 200),
        (format!("BEARER   {KEY}"), 200),
        ("Bearer wrong".to_string(), 401),
        (format!("Basic {KEY}"), 401),
    ] {
        assert_eq!(models_status(&server, &authorization), status, "{authorization}");
    }
    drop(server);
    let file = std::env::temp_dir().join(format!("susurrus-key-{}", std::process::id()));
    std::fs::write(&file, format!("{KEY}\n")).unwrap();
    let server = Server::start(&["--api-key-file", file.to_str().unwrap()]);
    assert_eq!(models_status(&server, &format!("Bearer {KEY}")), 200);
    assert_eq!(models_status(&server, "Bearer wrong"), 401);
    drop(server);
    // An empty key would refuse every request: refused at start, before the model loads.
    std::fs::write(&file, "\n").unwrap();
    for (args, from) in [
        (vec!["--api-key", ""], "--api-key".to_string()),
        (vec!["--api-key-file", file.to_str().unwrap()], format!("--api-key-file {}", file.display())),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_susurrus"))
            .args(["serve", "--api", "--backend", "cpu", "--port", "0"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("susurrus: error: the API key from {from} is empty: every request would be refused\n")
        );
    }
    std::fs::remove_file(&file).unwrap();
}

/// A client that hangs up mid-upload is counted as a client error (400), not the server's
/// (500); the device's busy time is the model thread's, so two jobs in work at once count the
/// device's seconds once (it used to add up each job's time from start to end).
#[test]
fn metrics_count_a_hung_up_upload_as_a_client_error_and_the_devices_own_time() {
    let server = Server::start(&["--api-key", KEY]);
    let audio = golden("short_2.wav");
    let (content_type, body) = form(&[], "short_2.wav", &audio);
    drop(post_start(&server, &content_type, &body, body.len() / 2));
    let value = |metrics: &str, name: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap_or_default();
        line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or_default()
    };
    let waited = Instant::now();
    let client_error = "susurrus_requests_total{route=\"/v1/audio/transcriptions\",status=\"400\"}";
    loop {
        let metrics = server.get("/metrics", None).body;
        if value(&metrics, client_error) == 1.0 {
            assert!(!metrics.contains("status=\"500\""), "{metrics}");
            break;
        }
        assert!(waited.elapsed() < Duration::from_secs(30), "the hung-up upload was never counted: {metrics}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    std::thread::scope(|scope| {
        let clients: Vec<_> = (0..2).map(|_| scope.spawn(|| post(&server, &[], "short_2.wav", &audio))).collect();
        for client in clients {
            let reply = client.join().unwrap();
            assert_eq!(reply.status, 200, "{}", reply.body);
        }
    });
    let wall = started.elapsed().as_secs_f64();
    let busy = value(&server.get("/metrics", None).body, "susurrus_device_busy_seconds_total");
    assert!(busy > 0.0 && busy <= wall, "device busy {busy} s within {wall} s of wall time");
}

#[test]
fn a_missing_model_folder_is_an_error_before_listening() {
    let out = Command::new(env!("CARGO_BIN_EXE_susurrus"))
        .args(["serve", "--api", "--port", "0", "--model", "/nonexistent/model-folder", "--root"])
        .arg(repo().join("www"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/model-folder"), "{stderr}");
}

#[test]
fn the_api_runs_from_an_empty_folder_without_the_demo_page() {
    // No --root and no www/ where it runs: the API alone, with the given model.
    let empty = tempfile::tempdir().unwrap();
    let model = susurrus_testkit::golden::model_dir();
    let mut command = Command::new(env!("CARGO_BIN_EXE_susurrus"));
    command
        .current_dir(empty.path())
        .args(["serve", "--api", "--backend", "cpu", "--port", "0", "--model"])
        .arg(&model);
    let server = Server::spawn(command);
    assert!(!server.banner.iter().any(|l| l.starts_with("serving ")), "a demo page was served: {:?}", server.banner);
    let note = "susurrus: serving the API without the demo page: no www/ folder here (run from the repository root \
                or pass --root DIR to serve it)";
    let waited = Instant::now();
    while !server.stderr.lock().unwrap().lines().any(|l| l == note) {
        assert!(waited.elapsed() < Duration::from_secs(10), "no note on stderr:\n{}", server.stderr.lock().unwrap());
        std::thread::sleep(Duration::from_millis(20));
    }
    let reply = post(&server, &[], "short_1.wav", &golden("short_1.wav"));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let text: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(text["text"], reference("short_1"));
    // No demo page: `/` and its files are 404; the API's other routes answer.
    for target in ["/", "/index.html"] {
        let reply = server.get(target, None);
        assert_eq!(reply.status, 404, "{target}: {}", reply.body);
    }
    assert_eq!(server.get("/health", None).status, 200);
}
