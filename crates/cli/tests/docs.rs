//! The documentation's examples are real: the README's Rust library example is
//! `examples/library.rs` word for word (and docs/library.md shows the same program), it
//! transcribes the bundled sample with the real tiny.en model to what was spoken, and every
//! `susurrus` command in the README's and docs' quick starts parses with the command's own
//! argument parser, and the README's command-line quick start runs as written, on files named
//! as it names them, with the default model.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::Parser;
use susurrus_cli::Cli;
use susurrus_testkit::golden::Set;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The code of the first fenced block in `language` that follows `marker` in `text`.
fn block_after<'a>(text: &'a str, marker: &str, language: &str) -> &'a str {
    let at = text.find(marker).unwrap_or_else(|| panic!("no {marker:?}"));
    let rest = &text[at + marker.len()..];
    let fence = format!("```{language}\n");
    let open = rest.find(&fence).unwrap_or_else(|| panic!("a {fence:?} block after {marker:?}")) + fence.len();
    let close = rest[open..].find("```\n").expect("the block's closing fence");
    &rest[open..open + close]
}

#[test]
fn the_readme_library_example_is_the_example_program() {
    let example = read("crates/cli/examples/library.rs");
    let readme = read("README.md");
    assert_eq!(block_after(&readme, "<!-- library-example -->\n", "rust"), example, "README.md's library example");
    assert!(read("docs/library.md").contains(&format!("```rust\n{example}```\n")), "docs/library.md's example");
}

/// The example program as `cargo test` built it (cargo builds a package's examples with its
/// tests: `cargo test -p susurrus-cli` or the workspace's).
fn example_program() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let program = exe.parent().and_then(Path::parent).unwrap().join("examples").join("library");
    assert!(program.is_file(), "{} is missing: cargo test builds it unless tests are named alone", program.display());
    program
}

#[test]
fn the_library_example_transcribes_the_bundled_sample() {
    // scripts/make_sample.sh's text, which espeak-ng spoke into samples/sample.wav.
    let spoken = "Speech becomes text on your own computer. Nothing you say leaves the machine, and the \
                  transcript arrives in a few seconds.";
    let out = Command::new(example_program())
        .arg(Set::TinyEn.model_dir())
        .arg(root().join("samples/sample.wav"))
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "exit {:?}:\n{stderr}", out.status);
    let mut texts = Vec::new();
    let mut last_end = 0.0;
    for line in stdout.lines() {
        let (times, text) = line.split_once("] ").unwrap_or_else(|| panic!("not a segment line: {line:?}"));
        let (start, end) = times.trim_start_matches('[').split_once(" -> ").unwrap();
        let (start, end): (f64, f64) = (start.parse().unwrap(), end.parse().unwrap());
        assert!(last_end <= start && start < end && end <= 9.0, "segment times out of order: {stdout}");
        last_end = end;
        texts.push(text.trim());
    }
    assert_eq!(texts.join(" "), spoken, "{stdout}");
    assert_eq!(stderr, "8.9 s of audio, language en\n");
}

#[test]
fn the_usage_is_an_error_not_a_panic() {
    let out = Command::new(example_program()).arg("only-one-argument").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "Error: \"usage: transcribe MODEL_DIR AUDIO_FILE\"\n");
}

/// Every `susurrus ...` command line in the shell blocks of the README and the docs pages,
/// with its words as the shell splits them (quotes removed; a pipe, `&&` or a comment ends it).
fn documented_commands() -> Vec<(String, Vec<String>)> {
    let mut found = Vec::new();
    for page in ["README.md", "docs/cli.md", "docs/server.md", "docs/web.md", "docs/library.md", "docs/testing.md"] {
        let text = read(page);
        let mut in_shell = false;
        for line in text.lines() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("```") {
                in_shell = !in_shell && matches!(trimmed, "```sh" | "```bash" | "```shell");
                continue;
            }
            if !in_shell {
                continue;
            }
            for part in line.split('|') {
                let part = part.split(" #").next().unwrap().split("&&").next().unwrap().trim();
                let mut words = shell_words(&without_process_substitution(part));
                // Redirections end the command's own words.
                if let Some(redirect) = words.iter().position(|w| w.starts_with(['<', '>']) || w.starts_with("2>")) {
                    words.truncate(redirect);
                }
                // The command, not an image or a package of that name (`docker build -t susurrus`).
                let Some(at) = words.iter().position(|w| w == "susurrus" || w.ends_with("/susurrus")) else { continue };
                if at > 0 && !["cargo", "run", "--", "exec", "time"].contains(&words[at - 1].as_str()) {
                    continue;
                }
                if at + 1 < words.len() {
                    found.push((format!("{page}: {part}"), words[at..].to_vec()));
                }
            }
        }
    }
    found
}

/// `part` with each process substitution `<(...)` replaced by the path the shell passes for it.
fn without_process_substitution(part: &str) -> String {
    let mut out = String::new();
    let mut rest = part;
    while let Some(at) = rest.find("<(") {
        out.push_str(&rest[..at]);
        let close = rest[at..].find(')').map_or(rest.len(), |c| at + c + 1);
        out.push_str("/dev/fd/63");
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// Words as a POSIX shell splits a simple command (single and double quotes, no expansions).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quote, mut any) = (None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

#[test]
fn every_documented_command_line_parses() {
    let commands = documented_commands();
    assert!(commands.len() >= 10, "found only {} commands: {commands:?}", commands.len());
    let mut failures = Vec::new();
    for (at, words) in &commands {
        // Placeholders in capitals (`DIR`, `FILE`) stand for paths: any word parses there.
        if let Err(e) = Cli::try_parse_from(words) {
            failures.push(format!("{at}\n{e}"));
        }
    }
    assert!(failures.is_empty(), "{} documented command(s) do not parse:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_shell_splitter_splits_as_a_shell_does() {
    assert_eq!(
        shell_words(r#"susurrus transcribe --initial-prompt "a b" 'c d' e"#),
        ["susurrus", "transcribe", "--initial-prompt", "a b", "c d", "e"]
    );
    assert_eq!(shell_words("a '' b"), ["a", "", "b"]);
    assert_eq!(without_process_substitution("x <(ffmpeg -i a.m4a -f wav -) y"), "x /dev/fd/63 y");
}

/// The folder `./scripts/models/fetch_model.sh NAME` fetches (once, into the project's cache).
fn fetched_model(name: &str) -> PathBuf {
    let out = Command::new(root().join("scripts/models/fetch_model.sh")).arg(name).output().unwrap();
    assert!(out.status.success(), "fetch_model.sh {name}: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8(out.stdout).unwrap().lines().last().unwrap().trim())
}

/// The espeak-ng sentence of tests/audio/make_audio.py's speech fixtures.
const FIXTURE_SPEECH: &str = "Please read this short sentence aloud.";

/// The `susurrus` command lines of the README's command-line quick start (the shell block
/// after "**Command line**"), each with whether it reads audio from a pipe.
fn readme_quick_start() -> Vec<(String, Vec<String>, bool)> {
    let readme = read("README.md");
    let block = block_after(&readme, "**Command line**", "sh");
    let mut found = Vec::new();
    for line in block.lines() {
        let piped = line.contains('|');
        let part = line.rsplit('|').next().unwrap().split(" #").next().unwrap().trim();
        let words = shell_words(part);
        if words.first().map(String::as_str) == Some("susurrus") {
            found.push((line.to_string(), words, piped));
        }
    }
    found
}

/// Runs the README's command-line quick start in an empty folder holding the files it names
/// (the speech fixtures, the bundled sample), with the default model and VAD network that
/// scripts/models/fetch_model.sh fetched; the microphone of its last line is the speech
/// fixture's 16 kHz samples, raw, on standard input. Every command succeeds and writes what the
/// quick start says it does, with the words that were spoken.
#[test]
fn the_readme_command_line_quick_start_runs_as_written() {
    let commands = readme_quick_start();
    assert_eq!(commands.len(), 6, "{commands:?}");
    let dir = tempfile::tempdir().unwrap();
    // `--model base`: the multilingual base model in a Hugging Face cache as faster-whisper
    // leaves it (links into blobs/), offline: the quick start never reaches the hub here.
    let hub = dir.path().join("hub");
    let repo = hub.join("models--Systran--faster-whisper-base");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("snapshots").join(commit)).unwrap();
    std::fs::write(repo.join("refs/main"), commit).unwrap();
    for (i, file) in ["config.json", "model.bin", "tokenizer.json", "vocabulary.txt"].iter().enumerate() {
        let blob = format!("{i:064x}");
        std::os::unix::fs::symlink(fetched_model("base").join(file), repo.join("blobs").join(&blob)).unwrap();
        std::os::unix::fs::symlink(format!("../../blobs/{blob}"), repo.join("snapshots").join(commit).join(file))
            .unwrap();
    }
    let fixture = |name: &str| root().join("tests/fixtures/audio").join(name);
    for (name, from) in [
        ("talk.mp3", fixture("speech_44k1_stereo.mp3")),
        ("memo.m4a", fixture("speech_44k1_stereo.m4a")),
        ("screen.mp4", fixture("video_two_audio_tracks.mp4")),
        ("recording.webm", fixture("speech_opus.webm")),
        ("meeting.mp3", fixture("speech_22k05.mp3")),
        ("a.wav", root().join("samples/sample.wav")),
        ("b.flac", fixture("speech_16k.flac")),
    ] {
        std::fs::copy(from, dir.path().join(name)).unwrap();
    }
    let wav = std::fs::read(fixture("speech_16k_s16.wav")).unwrap();
    let data = wav.windows(4).position(|w| w == b"data").expect("a data chunk") + 8;
    let microphone = wav[data..].to_vec();
    let sample_words = "Speech becomes text on your own computer.";
    let mut outputs = Vec::new();
    for (line, words, piped) in &commands {
        let mut child = Command::new(env!("CARGO_BIN_EXE_susurrus"))
            .args(&words[1..])
            .current_dir(dir.path())
            .env("HF_HUB_CACHE", &hub)
            .env("HF_HUB_OFFLINE", "1")
            .stdin(if *piped { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if *piped {
            child.stdin.take().unwrap().write_all(&microphone).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{line}: exit {:?}\n{stderr}", out.status);
        outputs.push(String::from_utf8(out.stdout).unwrap());
    }
    // `susurrus transcribe talk.mp3`: segment lines with what was said.
    assert!(outputs[0].contains(FIXTURE_SPEECH), "talk.mp3: {}", outputs[0]);
    // `memo.m4a screen.mp4 recording.webm`: each file's text under its name.
    for name in ["memo.m4a", "screen.mp4", "recording.webm"] {
        let section = outputs[1].split(&format!("==> {name} <==\n")).nth(1).unwrap_or_default();
        assert!(section.lines().next().unwrap_or_default().contains(FIXTURE_SPEECH), "{name}: {}", outputs[1]);
    }
    // `--format srt --output-dir subs/ a.wav b.flac`: one subtitle file per input.
    let srt = |name: &str| std::fs::read_to_string(dir.path().join("subs").join(name)).unwrap();
    let (a, b) = (srt("a.srt"), srt("b.srt"));
    assert!(a.starts_with("1\n00:00:00,") && a.contains(sample_words), "a.srt:\n{a}");
    assert!(b.starts_with("1\n00:00:00,") && b.contains(FIXTURE_SPEECH), "b.srt:\n{b}");
    // `--word-timestamps --vad --format json meeting.mp3`: JSON whose words are timed.
    let json: serde_json::Value = serde_json::from_str(&outputs[3]).unwrap_or_else(|e| panic!("{e}: {}", outputs[3]));
    let text = json["text"].as_str().unwrap_or_default();
    assert_eq!(text.trim(), FIXTURE_SPEECH, "{json}");
    let words: Vec<&serde_json::Value> =
        json["segments"].as_array().unwrap().iter().flat_map(|s| s["words"].as_array().unwrap()).collect();
    let spoken: String = words.iter().map(|w| w["word"].as_str().unwrap()).collect();
    assert_eq!(spoken.trim(), FIXTURE_SPEECH);
    assert!(words.iter().all(|w| w["start"].as_f64().unwrap() <= w["end"].as_f64().unwrap()), "{json}");
    // `--model base talk.mp3`: the same words from the multilingual model.
    assert!(outputs[4].contains(FIXTURE_SPEECH), "--model base: {}", outputs[4]);
    // `stream --raw s16le -` from the microphone: the live captions.
    assert!(outputs[5].contains("read this short sentence aloud"), "stream: {}", outputs[5]);
}
