//! A local stand-in for the Hugging Face hub: its listing API
//! (`/api/models/{repo}/revision/{rev}?blobs=true`), its file URLs
//! (`/{repo}/resolve/{rev}/{file}`, small files served there, LFS files redirected to a
//! storage host: `localhost` instead of `127.0.0.1`, so that the client sees another host), byte
//! ranges, gated repositories, and faults set by the test: a connection cut mid-file, damaged
//! bytes, error statuses. Every request is logged with its range and authorization.
//!
//! HTTP/1.1 by hand on `std::net`: a fault must cut the connection at an exact byte.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use sha2::Digest;

/// A file of a repository.
pub struct File {
    pub name: String,
    pub bytes: Arc<Vec<u8>>,
    /// Stored with LFS (the listing gives its SHA-256; its URL redirects to storage).
    pub lfs: bool,
    pub sha256: String,
    /// git's blob id, from `git hash-object`.
    pub blob_id: String,
}

/// A repository at one commit.
pub struct Repo {
    pub id: String,
    pub commit: String,
    pub files: Vec<File>,
    /// A gated repository: the token it wants.
    pub token: Option<String>,
}

impl Repo {
    /// The files of model folder `dir`, with a README.md and .gitattributes beside them (which a
    /// download must skip); files over 1 MB are LFS files, as the hub's repositories store them.
    pub fn from_dir(id: &str, commit: &str, dir: &Path) -> Repo {
        let mut files = Vec::new();
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        for name in names {
            files.push(File::new(&name, std::fs::read(dir.join(&name)).unwrap()));
        }
        files.push(File::new("README.md", b"# A Whisper model\n".to_vec()));
        files.push(File::new(".gitattributes", b"*.bin filter=lfs diff=lfs merge=lfs -text\n".to_vec()));
        Repo { id: id.to_string(), commit: commit.to_string(), files, token: None }
    }

    pub fn file(&self, name: &str) -> &File {
        self.files.iter().find(|f| f.name == name).unwrap()
    }
}

impl File {
    pub fn new(name: &str, bytes: Vec<u8>) -> File {
        let sha256 = hex(&sha2::Sha256::digest(&bytes));
        let blob_id = git_blob_id(&bytes);
        File { name: name.to_string(), lfs: bytes.len() > 1 << 20, bytes: Arc::new(bytes), sha256, blob_id }
    }
}

/// What a request for a file gets wrong, set by the test.
#[derive(Clone, Debug)]
pub enum Fault {
    /// The next response with `file`'s bytes stops after `after` bytes of its body and the
    /// connection closes (its Content-Length promised all of them).
    Cut { file: String, after: usize },
    /// Every response with `file`'s bytes has byte `at` of the file flipped.
    Corrupt { file: String, at: usize },
    /// Requests whose path contains `path` answer `status`.
    Status { path: String, status: u16 },
}

/// A request as the server saw it.
#[derive(Clone, Debug)]
pub struct Logged {
    pub host: String,
    pub path: String,
    pub range: Option<String>,
    pub authorization: Option<String>,
}

#[derive(Default)]
struct State {
    repos: Vec<Repo>,
    faults: Vec<Fault>,
    log: Vec<Logged>,
}

/// The running hub; it stops serving when dropped.
pub struct TestHub {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl TestHub {
    pub fn start(repos: Vec<Repo>) -> TestHub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State { repos, ..State::default() }));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if Arc::strong_count(&shared) == 1 {
                    return;
                }
                let state = shared.clone();
                std::thread::spawn(move || connection(stream, &state, port));
            }
        });
        TestHub { port, state }
    }

    /// The endpoint, as HF_ENDPOINT names it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn fault(&self, fault: Fault) {
        self.state.lock().unwrap().faults.push(fault);
    }

    pub fn clear_faults(&self) {
        self.state.lock().unwrap().faults.clear();
    }

    /// The requests so far, and forgets them.
    pub fn take_log(&self) -> Vec<Logged> {
        std::mem::take(&mut self.state.lock().unwrap().log)
    }
}

impl Drop for TestHub {
    fn drop(&mut self) {
        // Wakes the accepting thread, which sees it is the last owner and ends.
        let state = std::mem::take(&mut self.state);
        drop(state);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// A response: status, headers, body, and where the body is cut (the connection closed).
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    cut: Option<usize>,
}

impl Response {
    fn new(status: u16, body: &[u8]) -> Response {
        Response { status, headers: Vec::new(), body: body.to_vec(), cut: None }
    }
}

fn connection(stream: TcpStream, state: &Mutex<State>, port: u16) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let mut headers = HashMap::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
        let response = {
            let mut state = state.lock().unwrap();
            state.log.push(Logged {
                host: headers.get("host").cloned().unwrap_or_default(),
                path: target.clone(),
                range: headers.get("range").cloned(),
                authorization: headers.get("authorization").cloned(),
            });
            answer(&mut state, &method, &target, &headers, port)
        };
        let reason = match response.status {
            200 => "OK",
            206 => "Partial Content",
            302 => "Found",
            401 => "Unauthorized",
            404 => "Not Found",
            _ => "Error",
        };
        let mut head = format!("HTTP/1.1 {} {reason}\r\nContent-Length: {}\r\n", response.status, response.body.len());
        for (name, value) in &response.headers {
            head += &format!("{name}: {value}\r\n");
        }
        head += "\r\n";
        let sent = response.cut.unwrap_or(response.body.len());
        if stream.write_all(head.as_bytes()).is_err() || stream.write_all(&response.body[..sent]).is_err() {
            return;
        }
        if response.cut.is_some() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

fn answer(state: &mut State, method: &str, target: &str, headers: &HashMap<String, String>, port: u16) -> Response {
    if let Some(status) = state.faults.iter().find_map(|f| match f {
        Fault::Status { path, status } if target.contains(path.as_str()) => Some(*status),
        _ => None,
    }) {
        return Response::new(status, b"{\"error\":\"fault\"}");
    }
    if method != "GET" {
        return Response::new(405, b"");
    }
    let authorized = |repo: &Repo| match &repo.token {
        None => true,
        Some(token) => headers.get("authorization") == Some(&format!("Bearer {token}")),
    };
    // The listing.
    if let Some(rest) = target.strip_prefix("/api/models/") {
        let (path, _query) = rest.split_once('?').unwrap_or((rest, ""));
        let Some((id, _rev)) = path.split_once("/revision/") else { return Response::new(404, b"") };
        let Some(repo) = state.repos.iter().find(|r| r.id == id) else {
            return Response::new(404, b"{\"error\":\"Repository not found\"}");
        };
        if !authorized(repo) {
            return Response::new(401, b"{\"error\":\"Access to this model is restricted\"}");
        }
        let siblings: Vec<serde_json::Value> = repo
            .files
            .iter()
            .map(|f| {
                let mut s = serde_json::json!({"rfilename": f.name, "size": f.bytes.len(), "blobId": f.blob_id});
                if f.lfs {
                    s["lfs"] = serde_json::json!({"sha256": f.sha256, "size": f.bytes.len(), "pointerSize": 134});
                }
                s
            })
            .collect();
        let body = serde_json::json!({"id": repo.id, "sha": repo.commit, "siblings": siblings});
        return Response::new(200, body.to_string().as_bytes());
    }
    // LFS storage: any file by its SHA-256.
    if let Some(sha) = target.strip_prefix("/lfs/") {
        let found = state.repos.iter().flat_map(|r| &r.files).find(|f| f.sha256 == sha);
        let Some(file) = found else { return Response::new(404, b"") };
        let (name, bytes) = (file.name.clone(), file.bytes.clone());
        return content(state, &name, &bytes, headers);
    }
    // A file: /{org}/{name}/resolve/{rev}/{file}.
    let Some((id, rest)) = target.trim_start_matches('/').split_once("/resolve/") else {
        return Response::new(404, b"");
    };
    let Some(repo) = state.repos.iter().find(|r| r.id == id) else { return Response::new(404, b"") };
    if !authorized(repo) {
        return Response::new(401, b"");
    }
    let Some((rev, name)) = rest.split_once('/') else { return Response::new(404, b"") };
    if rev != repo.commit && rev != "main" {
        return Response::new(404, b"");
    }
    let Some(file) = repo.files.iter().find(|f| f.name == name) else { return Response::new(404, b"") };
    if file.lfs {
        let mut response = Response::new(302, b"");
        response.headers.push(("Location".into(), format!("http://localhost:{port}/lfs/{}", file.sha256)));
        return response;
    }
    let (name, bytes) = (file.name.clone(), file.bytes.clone());
    content(state, &name, &bytes, headers)
}

/// `file`'s bytes, from the requested range on, with the faults set for it.
fn content(state: &mut State, name: &str, bytes: &[u8], headers: &HashMap<String, String>) -> Response {
    let mut bytes = bytes.to_vec();
    for fault in &state.faults {
        if let Fault::Corrupt { file, at } = fault
            && file == name
        {
            bytes[*at] ^= 0x10;
        }
    }
    let total = bytes.len();
    let start = headers
        .get("range")
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|r| r.parse::<usize>().ok());
    let mut response = match start {
        Some(start) if start < total => {
            let mut r = Response::new(206, &bytes[start..]);
            r.headers.push(("Content-Range".into(), format!("bytes {start}-{}/{total}", total - 1)));
            r
        }
        Some(_) => return Response::new(416, b""),
        None => Response::new(200, &bytes),
    };
    if let Some(i) = state.faults.iter().position(|f| matches!(f, Fault::Cut { file, .. } if file == name)) {
        let Fault::Cut { after, .. } = state.faults.remove(i) else { unreachable!() };
        response.cut = Some(after.min(response.body.len()));
    }
    response
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// git's id of a blob of `bytes`, from git itself.
fn git_blob_id(bytes: &[u8]) -> String {
    let mut child = Command::new("git")
        .args(["hash-object", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("git runs");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
