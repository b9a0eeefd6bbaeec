//! The documentation's examples are real: the README's Rust library example is
//! `examples/library.rs` word for word (and docs/library.md shows the same program), it
//! transcribes the bundled sample with the real tiny.en model to what was spoken, and every
//! `susurrus` command in the README's and docs' quick starts parses with the command's own
//! argument parser.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use susurrus_cli::Cli;
use susurrus_testkit::golden::Set;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The code of the fenced block that follows `marker` in `text`.
fn block_after<'a>(text: &'a str, marker: &str) -> &'a str {
    let at = text.find(marker).unwrap_or_else(|| panic!("no {marker:?}"));
    let rest = &text[at + marker.len()..];
    let open = rest.find("```rust\n").expect("a ```rust block after the marker") + "```rust\n".len();
    let close = rest[open..].find("```\n").expect("the block's closing fence");
    &rest[open..open + close]
}

#[test]
fn the_readme_library_example_is_the_example_program() {
    let example = read("crates/cli/examples/library.rs");
    let readme = read("README.md");
    assert_eq!(block_after(&readme, "<!-- library-example -->\n"), example, "README.md's library example");
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
