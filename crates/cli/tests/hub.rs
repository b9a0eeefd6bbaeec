//! Models by name downloaded from a hub: `--model tiny.en` and `--model base` against a local
//! stand-in for the Hugging Face hub (tests/hub/server.rs) holding the real models, never the
//! internet. A download lands in the hub's cache layout, once; a cut one resumes; damaged bytes,
//! missing repositories, gated ones, failing servers and offline mode each give an error naming
//! the model, the file and the cause, and leave nothing half-written in the cache.

#[path = "hub/server.rs"]
mod server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use server::{Fault, Repo, TestHub};

const TINY: &str = "Systran/faster-whisper-tiny.en";
const BASE: &str = "Systran/faster-whisper-base";
const COMMIT: &str = "d90ca5fe5a4d8f2f5c1f0f0e3a1b6f3c2e7d9a41";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A model folder `./scripts/models/fetch_model.sh NAME` fetches (once, into the project's cache).
fn fetched(name: &str) -> PathBuf {
    let out =
        Command::new(root().join("scripts/models/fetch_model.sh")).arg(name).output().expect("fetch_model.sh runs");
    assert!(out.status.success(), "fetch_model.sh {name}: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8(out.stdout).unwrap().lines().last().unwrap().trim())
}

fn tiny_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fetched("tiny.en"))
}

fn base_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fetched("base"))
}

fn speech() -> PathBuf {
    root().join("tests/fixtures/audio/speech_16k_s16.wav")
}

/// A fresh, empty folder for one test's cache.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("susurrus-hub-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `susurrus ARGS` with the hub at `endpoint` and the cache at `cache`, and none of the
/// developer's own hub settings (token, offline mode).
fn susurrus(args: &[&str], cache: &Path, endpoint: &str, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_susurrus"));
    command.args(args).env("HF_HUB_CACHE", cache).env("HF_ENDPOINT", endpoint);
    for key in ["HF_TOKEN", "HF_HUB_OFFLINE", "HF_HOME"] {
        command.env_remove(key);
    }
    command.env("HF_TOKEN_PATH", cache.join("no-token"));
    command.envs(env.iter().copied());
    command.stdin(Stdio::null()).output().expect("the susurrus binary runs")
}

fn transcribe(model: &str, cache: &Path, endpoint: &str, env: &[(&str, &str)]) -> Output {
    susurrus(&["transcribe", "--backend", "cpu", "--model", model, speech().to_str().unwrap()], cache, endpoint, env)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The transcript of the speech fixture with the model in `dir`, loaded as a folder.
fn by_folder(dir: &Path) -> String {
    let out = transcribe(dir.to_str().unwrap(), &scratch("unused"), "http://127.0.0.1:9", &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

fn repo_folder(cache: &Path, repo: &str) -> PathBuf {
    cache.join(format!("models--{}", repo.replace('/', "--")))
}

/// The paths the hub was asked for.
fn paths(hub: &TestHub) -> Vec<String> {
    hub.take_log().into_iter().map(|l| l.path).collect()
}

#[test]
fn a_name_downloads_once_into_the_hub_cache_resumes_after_a_cut_and_then_needs_no_network() {
    let repo = Repo::from_dir(TINY, COMMIT, tiny_dir());
    let model_sha = repo.file("model.bin").sha256.clone();
    let model_len = repo.file("model.bin").bytes.len();
    let hub = TestHub::start(vec![repo]);
    let cache = scratch("resume");
    let folder = repo_folder(&cache, TINY);
    let cut = 30 << 20;
    hub.fault(Fault::Cut { file: "model.bin".into(), after: cut });

    let out = transcribe("tiny.en", &cache, &hub.url(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let heading = format!(
        "susurrus: downloading model tiny.en ({TINY}) from {}: 4 files, 78.1 MB into {}\n",
        hub.url(),
        folder.display()
    );
    let error = format!(
        "susurrus: error: model tiny.en ({TINY}): model.bin: the download broke off after {cut} of {model_len} bytes ("
    );
    assert!(stderr.starts_with(&format!("{heading}{error}")), "{stderr}");
    assert!(stderr.ends_with("): run the command again to resume it\n"), "{stderr}");
    assert!(out.stdout.is_empty());
    // The part kept for the next run; no `main` naming an incomplete snapshot.
    let part = folder.join("blobs").join(format!("{model_sha}.incomplete"));
    assert_eq!(std::fs::metadata(&part).unwrap().len(), cut as u64);
    assert!(!folder.join("refs/main").exists());
    let log = hub.take_log();
    assert!(log.iter().all(|l| !l.path.contains("README.md") && !l.path.contains(".gitattributes")), "{log:?}");

    // The next run asks for the rest only, and transcribes as the folder does.
    let out = transcribe("tiny.en", &cache, &hub.url(), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), by_folder(tiny_dir()));
    let snapshot = folder.join("snapshots").join(COMMIT);
    assert_eq!(
        text(&out.stderr),
        format!(
            "susurrus: downloading model tiny.en ({TINY}) from {}: 3 files, 78.1 MB into {}\nsusurrus: model tiny.en is \
             in {}\n",
            hub.url(),
            folder.display(),
            snapshot.display()
        )
    );
    let log = hub.take_log();
    // The range goes to the hub's URL and on to the storage it redirects to.
    let ranged: Vec<_> =
        log.iter().filter(|l| l.range.is_some()).map(|l| (l.path.as_str(), l.range.as_deref())).collect();
    let range = format!("bytes={cut}-");
    let storage = format!("/lfs/{model_sha}");
    let resolve = format!("/{TINY}/resolve/{COMMIT}/model.bin");
    assert_eq!(ranged, [(resolve.as_str(), Some(range.as_str())), (storage.as_str(), Some(range.as_str()))], "{log:?}");

    // The layout huggingface_hub makes: refs/main, snapshot links into blobs/ named by id.
    assert_eq!(std::fs::read_to_string(folder.join("refs/main")).unwrap(), COMMIT);
    assert_eq!(std::fs::read_link(snapshot.join("model.bin")).unwrap(), Path::new("../../blobs").join(&model_sha));
    let mut listed: Vec<String> =
        std::fs::read_dir(&snapshot).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    listed.sort();
    assert_eq!(listed, ["config.json", "model.bin", "tokenizer.json", "vocabulary.txt"]);
    for file in &listed {
        assert_eq!(
            std::fs::read(snapshot.join(file)).unwrap(),
            std::fs::read(tiny_dir().join(file)).unwrap(),
            "{file}"
        );
    }
    let blobs = std::fs::read_dir(folder.join("blobs")).unwrap().count();
    assert_eq!(blobs, 4, "no .incomplete left");

    // Cached: no request at all, offline or not, and the same text.
    let out = transcribe("tiny.en", &cache, &hub.url(), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    let out = transcribe("tiny.en", &cache, &hub.url(), &[("HF_HUB_OFFLINE", "1")]);
    assert_eq!(text(&out.stdout), by_folder(tiny_dir()));
    assert_eq!(paths(&hub), Vec::<String>::new());

    // `serve --api` serves it under its name, from the cache.
    let mut child = Command::new(env!("CARGO_BIN_EXE_susurrus"))
        .args(["serve", "--api", "--backend", "cpu", "--port", "0", "--model", "tiny.en", "--offline", "--root"])
        .arg(scratch("www"))
        .env("HF_HUB_CACHE", &cache)
        .env("HF_ENDPOINT", hub.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("api ") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "no api line");
    }
    assert!(line.starts_with("api tiny.en on cpu"), "{line}");
    let url = line.split_whitespace().find(|w| w.starts_with("http://")).unwrap();
    let addr = url.trim_start_matches("http://").trim_end_matches("/v1/");
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "GET /v1/models/tiny.en HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("\"id\":\"tiny.en\""), "{reply}");
    assert_eq!(paths(&hub), Vec::<String>::new());
    std::fs::remove_dir_all(&cache).unwrap();
}

#[test]
fn damaged_bytes_are_refused_and_removed_and_the_next_download_is_whole() {
    let repo = Repo::from_dir(BASE, COMMIT, base_dir());
    let (model_sha, config_id) = (repo.file("model.bin").sha256.clone(), repo.file("config.json").blob_id.clone());
    let mut damaged = repo.file("model.bin").bytes.to_vec();
    damaged[1000] ^= 0x10;
    let damaged_sha = server::hex(&<sha2::Sha256 as sha2::Digest>::digest(&damaged));
    let mut config = repo.file("config.json").bytes.to_vec();
    config[10] ^= 0x10;
    let hub = TestHub::start(vec![repo]);
    let cache = scratch("damaged");
    let folder = repo_folder(&cache, BASE);

    // A small file is checked against git's blob id.
    hub.fault(Fault::Corrupt { file: "config.json".into(), at: 10 });
    let out = transcribe("base", &cache, &hub.url(), &[]);
    let got = {
        let mut child = Command::new("git")
            .args(["hash-object", "--stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&config).unwrap();
        text(&child.wait_with_output().unwrap().stdout).trim().to_string()
    };
    assert!(
        text(&out.stderr).ends_with(&format!(
            "susurrus: error: model base ({BASE}): config.json: its git blob id is {got}, not {config_id} as the hub \
             lists it: the download is damaged and was removed; run the command again\n"
        )),
        "{}",
        text(&out.stderr)
    );

    hub.clear_faults();
    hub.fault(Fault::Corrupt { file: "model.bin".into(), at: 1000 });
    let out = transcribe("base", &cache, &hub.url(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.ends_with(&format!(
            "susurrus: error: model base ({BASE}): model.bin: its SHA-256 is {damaged_sha}, not {model_sha} as the hub \
             lists it: the download is damaged and was removed; run the command again\n"
        )),
        "{stderr}"
    );
    assert!(!folder.join("blobs").join(&model_sha).exists());
    assert!(!folder.join("blobs").join(format!("{model_sha}.incomplete")).exists());
    assert!(!folder.join("refs/main").exists());

    hub.clear_faults();
    let out = transcribe("base", &cache, &hub.url(), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), by_folder(base_dir()));
    std::fs::remove_dir_all(&cache).unwrap();
}

#[test]
fn every_failure_names_the_model_the_file_and_the_cause() {
    let mut gated = Repo::from_dir(BASE, COMMIT, base_dir());
    gated.token = Some("hf_secret".into());
    let hub = TestHub::start(vec![Repo::from_dir(TINY, COMMIT, tiny_dir()), gated]);
    let cache = scratch("errors");
    let url = hub.url();
    let error = |out: &Output| {
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        text(&out.stderr).lines().last().unwrap().to_string()
    };

    // Offline: never a request.
    let audio = speech();
    let audio = audio.to_str().unwrap();
    let runs = [
        ("--offline", vec!["transcribe", "--model", "tiny.en", "--offline", audio], vec![]),
        ("HF_HUB_OFFLINE", vec!["transcribe", "--model", "tiny.en", audio], vec![("HF_HUB_OFFLINE", "1")]),
    ];
    for (flag, args, env) in runs {
        let out = susurrus(&args, &cache, &url, &env);
        assert_eq!(
            error(&out),
            format!(
                "susurrus: error: model tiny.en ({TINY}) is not in the Hugging Face cache {} and {flag} forbids \
                 downloading it: run once without {flag}, or pass --model DIR",
                cache.display()
            )
        );
    }
    assert_eq!(paths(&hub), Vec::<String>::new());

    // A repository the hub does not have.
    let out = transcribe("small", &cache, &url, &[]);
    assert_eq!(
        error(&out),
        format!(
            "susurrus: error: model small (Systran/faster-whisper-small): the hub at {url} has no repository \
             Systran/faster-whisper-small ({url}/api/models/Systran/faster-whisper-small/revision/main?blobs=true \
             answered 404 Not Found)"
        )
    );

    // A gated one: refused without the token, fetched with it, which never goes to storage.
    let out = transcribe("base", &cache, &url, &[]);
    assert_eq!(
        error(&out),
        format!(
            "susurrus: error: model base ({BASE}): {url}/api/models/{BASE}/revision/main?blobs=true answered 401 \
             Unauthorized: {BASE} is gated or private; accept its terms on the hub and set HF_TOKEN to a token with \
             access"
        )
    );
    let out = transcribe("base", &cache, &url, &[("HF_TOKEN", "hf_wrong")]);
    assert!(error(&out).ends_with(
        "answered 401 Unauthorized: the token (HF_TOKEN or the saved token) has no access to \
                                   Systran/faster-whisper-base"
    ));
    hub.take_log();
    std::fs::write(cache.join("token"), "hf_secret\n").unwrap();
    let out = transcribe("base", &cache, &url, &[("HF_TOKEN_PATH", cache.join("token").to_str().unwrap())]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let log = hub.take_log();
    let (storage, hub_side): (Vec<_>, Vec<_>) = log.iter().partition(|l| l.path.starts_with("/lfs/"));
    assert_eq!(storage.len(), 2, "model.bin, tokenizer.json (LFS): {log:?}");
    assert!(storage.iter().all(|l| l.authorization.is_none() && l.host.starts_with("localhost:")), "{log:?}");
    assert!(hub_side.iter().all(|l| l.authorization.as_deref() == Some("Bearer hf_secret")), "{log:?}");

    // A failing server, for one file.
    hub.fault(Fault::Status { path: "/resolve/".to_string() + COMMIT + "/tokenizer.json", status: 500 });
    let out = transcribe("tiny.en", &cache, &url, &[]);
    assert_eq!(
        error(&out),
        format!(
            "susurrus: error: model tiny.en ({TINY}): tokenizer.json: {url}/{TINY}/resolve/{COMMIT}/tokenizer.json \
             answered 500 Internal Server Error: the hub failed; try again later"
        )
    );
    // No hub at all.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = format!("http://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let out = transcribe("tiny.en", &cache, &nowhere, &[]);
    let message = error(&out);
    assert!(
        message.starts_with(&format!(
            "susurrus: error: model tiny.en ({TINY}): cannot reach {nowhere}/api/models/{TINY}/revision/main?blobs=true ("
        )) && message.ends_with("): check the network connection, or HF_ENDPOINT, or pass --model DIR"),
        "{message}"
    );
    std::fs::remove_dir_all(&cache).unwrap();
}

/// Two commands at once downloading one model: each file is fetched once (the other command
/// waits for its lock, then finds it), and both transcribe.
#[test]
fn two_downloads_at_once_share_the_cache() {
    let repo = Repo::from_dir(TINY, COMMIT, tiny_dir());
    let model_sha = repo.file("model.bin").sha256.clone();
    let hub = TestHub::start(vec![repo]);
    let cache = scratch("together");
    let url = hub.url();
    let outs: Vec<Output> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..2).map(|_| scope.spawn(|| transcribe("tiny.en", &cache, &url, &[]))).collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for out in &outs {
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), by_folder(tiny_dir()));
    }
    let fetched = paths(&hub).iter().filter(|p| **p == format!("/lfs/{model_sha}")).count();
    assert_eq!(fetched, 1);
    let blobs = std::fs::read_dir(repo_folder(&cache, TINY).join("blobs")).unwrap().count();
    assert_eq!(blobs, 4);
    std::fs::remove_dir_all(&cache).unwrap();
}
