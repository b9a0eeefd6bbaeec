//! Runs `susurrus transcribe` as a user would: the golden clips give the reference's tokens
//! and text on cpu and wgpu, every output format has the content the references imply
//! (formatted here independently of the command's own code), and bad inputs and options give
//! named errors and the right exit status.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden(file: &str) -> PathBuf {
    root().join("tests/fixtures/golden").join(file)
}

fn audio_fixture(file: &str) -> PathBuf {
    root().join("tests/fixtures/audio").join(file)
}

/// The default model folder, fetched on first use by the script the command's errors name.
fn model_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new(root().join("scripts/models/fetch_model.sh")).output().expect("fetch_model.sh runs");
        assert!(out.status.success(), "fetch_model.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout).expect("the printed path is UTF-8");
        PathBuf::from(stdout.lines().last().expect("fetch_model.sh prints the folder").trim())
    })
}

/// Runs `susurrus transcribe ARGS` with `stdin` piped in (or none), with the default model
/// in place, and returns what it printed.
fn transcribe(args: &[&str], stdin: Option<Vec<u8>>, env: &[(&str, &Path)]) -> Output {
    model_dir();
    let mut command = Command::new(env!("CARGO_BIN_EXE_susurrus"));
    command.arg("transcribe").args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("the susurrus binary runs");
    // Written from a thread: the command prints earlier files' results before it reads `-`.
    let writer = stdin.map(|bytes| {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        std::thread::spawn(move || pipe.write_all(&bytes).expect("the command reads standard input"))
    });
    let out = child.wait_with_output().expect("the command finishes");
    if let Some(writer) = writer {
        writer.join().expect("the stdin writer finishes");
    }
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("output is UTF-8")
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// A fresh, empty folder for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("susurrus-transcribe-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the temp folder is writable");
    dir
}

/// The reference run `name` of golden clip `clip`.
fn reference(clip: &str, name: &str) -> Value {
    let path = golden(&format!("{clip}.json"));
    let record: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("JSON");
    let runs = record["runs"].as_array().expect("runs");
    runs.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("{clip} has no run {name}")).clone()
}

/// The reference's segments as (start, end, text).
fn reference_segments(clip: &str) -> Vec<(f64, f64, String)> {
    reference(clip, "beam_5")["segments"]
        .as_array()
        .expect("segments")
        .iter()
        .map(|s| (s["start"].as_f64().unwrap(), s["end"].as_f64().unwrap(), s["text"].as_str().unwrap().to_string()))
        .collect()
}

/// Differences between one JSON line of the command and the reference run.
fn compare(got: &Value, want: &Value, label: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if got["text"] != want["text"] {
        problems.push(format!("{label}: text {}\n  reference {}", got["text"], want["text"]));
    }
    let (got_segments, want_segments) = (got["segments"].as_array().unwrap(), want["segments"].as_array().unwrap());
    if got_segments.len() != want_segments.len() {
        problems.push(format!("{label}: {} segments, reference {}", got_segments.len(), want_segments.len()));
    }
    for (i, (g, w)) in got_segments.iter().zip(want_segments).enumerate() {
        for key in ["tokens", "text"] {
            if g[key] != w[key] {
                problems.push(format!("{label} segment {i}: {key} {}\n  reference {}", g[key], w[key]));
            }
        }
        for key in ["start", "end"] {
            let (g, w) = (g[key].as_f64().unwrap(), w[key].as_f64().unwrap());
            if (g - w).abs() > 1e-6 {
                problems.push(format!("{label} segment {i}: {key} {g}, reference {w}"));
            }
        }
        // Words only where the reference timed them, and then each one's text and times.
        match (g.get("words"), w["words"].as_array()) {
            (None, None) => {}
            (Some(Value::Array(got)), Some(want)) if got.len() == want.len() => {
                for (k, (gw, ww)) in got.iter().zip(want).enumerate() {
                    let times = |v: &Value| (v["start"].as_f64().unwrap(), v["end"].as_f64().unwrap());
                    let ((gs, ge), (ws, we)) = (times(gw), times(ww));
                    if gw["word"] != ww["word"] || (gs - ws).abs() > 0.02 + 1e-9 || (ge - we).abs() > 0.02 + 1e-9 {
                        problems.push(format!("{label} segment {i} word {k}: {gw}\n  reference {ww}"));
                    }
                }
            }
            (got, want) => problems.push(format!("{label} segment {i}: words {got:?}\n  reference {want:?}")),
        }
    }
    problems
}

/// Checks the JSON lines of a run that transcribed `clips` (`(name given, golden clip)`).
fn check_json_lines(out: &Output, clips: &[(&str, &str)], run: &str, backend: &str) {
    assert!(out.status.success(), "exit {:?}, stderr:\n{}", out.status, text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), clips.len(), "one JSON object per file:\n{stdout}");
    let mut problems = Vec::new();
    let mut load_ms = Vec::new();
    for (line, (file, clip)) in lines.iter().zip(clips) {
        let got: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(got["file"], *file, "{line}");
        assert_eq!(got["language"], "en", "{line}");
        assert_eq!(got["language_probability"], 1.0, "{line}");
        // The wgpu backend names its weight precision too (`wgpu-f16`).
        assert!(got["backend"].as_str().is_some_and(|b| b.split('-').next() == Some(backend)), "{line}");
        problems.extend(compare(&got, &reference(clip, run), &format!("{file} ({clip})")));

        let timings = &got["timings"];
        let mut keys: Vec<&str> = timings.as_object().expect("timings").keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["audio_duration_s", "audio_ms", "compile_ms", "load_ms", "model_ms", "open_ms", "rtf", "transcribe_ms"],
            "{line}"
        );
        // Opening and reading overlap; compiling follows both.
        let part = |k: &str| timings[k].as_f64().unwrap();
        assert!(part("compile_ms") > 0.0 && part("open_ms") > 0.0 && part("model_ms") > 0.0, "{line}");
        assert!(part("open_ms").max(part("model_ms")) + part("compile_ms") <= part("load_ms") + 1.0, "{line}");
        let duration = timings["audio_duration_s"].as_f64().unwrap();
        let samples = reference_audio(clip)["samples"].as_f64().unwrap();
        assert_eq!(duration, samples / 16000.0, "{line}");
        let transcribe_ms = timings["transcribe_ms"].as_f64().unwrap();
        assert!(transcribe_ms > 0.0 && timings["audio_ms"].as_f64().unwrap() > 0.0, "{line}");
        let rtf = timings["rtf"].as_f64().unwrap();
        assert!((rtf - transcribe_ms / 1e3 / duration).abs() < 1e-9, "{line}");
        load_ms.push(timings["load_ms"].as_f64().unwrap());
    }
    assert!(problems.is_empty(), "{} differences from the reference:\n{}", problems.len(), problems.join("\n"));
    assert!(load_ms.iter().all(|&ms| ms > 0.0 && ms == load_ms[0]), "the model loads once: {load_ms:?}");
}

fn reference_audio(clip: &str) -> Value {
    let path = golden(&format!("{clip}.json"));
    let record: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("JSON");
    record["audio"].clone()
}

/// `HH:MM:SS<sep>mmm`, or `MM:SS.mmm` below an hour when `short`.
fn stamp(seconds: f64, separator: char, short: bool) -> String {
    let total = (seconds * 1000.0).round() as u64;
    let (hours, rest) = (total / 3_600_000, total % 3_600_000);
    let (minutes, rest) = (rest / 60_000, rest % 60_000);
    let (secs, millis) = (rest / 1000, rest % 1000);
    if short && hours == 0 {
        format!("{minutes:02}:{secs:02}.{millis:03}")
    } else {
        format!("{hours:02}:{minutes:02}:{secs:02}{separator}{millis:03}")
    }
}

fn expected_txt(clip: &str) -> String {
    let mut out = String::new();
    for (start, end, text) in reference_segments(clip) {
        out += &format!("[{} --> {}] {}\n", stamp(start, '.', true), stamp(end, '.', true), text.trim());
    }
    out
}

#[test]
fn cpu_json_of_every_golden_clip_and_of_stdin_matches_the_reference() {
    let clips = ["short_1", "short_2", "short_3", "noisy", "silence", "long"];
    let wavs: Vec<PathBuf> = clips.iter().map(|c| golden(&format!("{c}.wav"))).collect();
    let mut args = vec!["--backend", "cpu", "--format", "json"];
    args.extend(wavs.iter().map(|p| path_str(p)));
    args.insert(5, "-");
    let stdin = std::fs::read(golden("short_3.wav")).unwrap();
    let out = transcribe(&args, Some(stdin), &[]);

    let mut named: Vec<(&str, &str)> = wavs.iter().map(|p| path_str(p)).zip(clips).collect();
    named.insert(1, ("-", "short_3"));
    check_json_lines(&out, &named, "beam_5", "cpu");
    assert_eq!(text(&out.stderr), "", "nothing on a non-terminal stderr when all goes well");
}

#[test]
fn wgpu_json_of_a_short_clip_matches_the_reference() {
    let wav = golden("short_2.wav");
    let out = transcribe(&["--backend", "wgpu", "--format", "json", path_str(&wav)], None, &[]);
    check_json_lines(&out, &[(path_str(&wav), "short_2")], "beam_5", "wgpu");
}

/// `--backend wgpu` on the software adapter (lavapipe, chosen by name) runs and says it is
/// slow; an adapter name that matches nothing is an error naming the adapters; and where
/// `XDG_RUNTIME_DIR` is unset (containers, cron), nothing about it is printed.
#[test]
fn wgpu_adapters_are_chosen_honestly_and_quietly() {
    model_dir();
    let wav = golden("short_2.wav");
    let run = |adapter: &str| {
        Command::new(env!("CARGO_BIN_EXE_susurrus"))
            .args(["transcribe", "--backend", "wgpu", path_str(&wav)])
            .env("WGPU_ADAPTER_NAME", adapter)
            .env_remove("XDG_RUNTIME_DIR")
            .output()
            .unwrap()
    };
    let out = run("LLVMPIPE");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), expected_txt("short_2"));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("susurrus: warning: the wgpu adapter llvmpipe (")
            && stderr.ends_with(
                " is software, on the CPU: it runs tens of times slower than --backend cpu (which --backend auto \
                 picks here)\n"
            )
            && stderr.lines().count() == 1,
        "{stderr}"
    );
    let out = run("no such adapter");
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(
            "susurrus: error: backend error: adapter name \"no such adapter\" (WGPU_ADAPTER_NAME) matches none of the \
             adapters here: llvmpipe ("
        ) && stderr.lines().count() == 1,
        "{stderr}"
    );
}

#[test]
fn no_timestamps_and_initial_prompt_reach_the_decoder() {
    let wav = golden("short_1.wav");
    let args = ["--backend", "cpu", "-f", "json", "--beam-size", "1", "--no-timestamps", path_str(&wav)];
    let out = transcribe(&args, None, &[]);
    check_json_lines(&out, &[(path_str(&wav), "short_1")], "without_timestamps", "cpu");

    let wav = golden("short_2.wav");
    let prompt = reference("short_2", "initial_prompt")["options"]["initial_prompt"].as_str().unwrap().to_string();
    let args = ["--backend", "cpu", "-f", "json", "--beam-size", "1", "--initial-prompt", &prompt, path_str(&wav)];
    let out = transcribe(&args, None, &[]);
    check_json_lines(&out, &[(path_str(&wav), "short_2")], "initial_prompt", "cpu");
}

#[test]
fn word_timestamps_reach_the_json_segments() {
    let wav = golden("short_3.wav");
    let args = ["--backend", "cpu", "-f", "json", "--beam-size", "1", "--word-timestamps", path_str(&wav)];
    let out = transcribe(&args, None, &[]);
    check_json_lines(&out, &[(path_str(&wav), "short_3")], "word_timestamps", "cpu");
}

/// `--vad` with the network where the fetch script puts it: the speech of the VAD clip
/// (three passages between long noisy pauses) is faster-whisper's `vad_filter=True` run,
/// token for token, at the file's times.
#[test]
fn vad_transcribes_the_speech_at_the_files_times() {
    let out = Command::new(root().join("scripts/models/fetch_model.sh")).arg("silero-vad").output().unwrap();
    assert!(out.status.success(), "fetch_model.sh silero-vad: {}", text(&out.stderr));
    let wav = golden("vad.wav");
    let args = ["--backend", "cpu", "-f", "json", "--beam-size", "1", "--vad", path_str(&wav)];
    let out = transcribe(&args, None, &[]);
    check_json_lines(&out, &[(path_str(&wav), "vad")], "vad", "cpu");
}

/// The guard flags reach the decoder: hotwords, and a repetition penalty with the model's
/// suppress list and two more ids, each token for token the reference's run.
#[test]
fn guard_flags_reach_the_decoder() {
    let wav = golden("short_3.wav");
    let args = ["--backend", "cpu", "-f", "json", "--beam-size", "1", "--hotwords", "lanterns harbour fishermen"];
    let out = transcribe(&[&args[..], &[path_str(&wav)]].concat(), None, &[]);
    check_json_lines(&out, &[(path_str(&wav), "short_3")], "hotwords", "cpu");
    let wav = golden("short_1.wav");
    let args = ["--backend", "cpu", "-f", "json", "--beam-size", "1", "--suppress-tokens", "-1,4512,3859"];
    let out = transcribe(&[&args[..], &[path_str(&wav)]].concat(), None, &[]);
    check_json_lines(&out, &[(path_str(&wav), "short_1")], "suppress_tokens", "cpu");

    let input = audio_fixture("no_such_file.wav");
    let out = transcribe(&["--hallucination-silence-threshold", "2", path_str(&input)], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "susurrus: error: invalid option: hallucination_silence_threshold needs word_timestamps (it judges words)\n"
    );
    let out = transcribe(&["--suppress-tokens", "-2", path_str(&input)], None, &[]);
    assert_eq!(out.status.code(), Some(2), "a command-line error");
    assert!(
        text(&out.stderr).starts_with("error: invalid value '-2' for '--suppress-tokens <IDS>'"),
        "{}",
        text(&out.stderr)
    );
}

/// `--threads` above the core count is lowered to it, with a warning (1000 threads on 2 cores
/// made a 2.3 s run take over 90 s); `--best-of` and `bench --threads` have ranges.
#[test]
fn thread_and_sample_counts_are_kept_in_range() {
    let wav = golden("short_2.wav");
    let out = transcribe(&["--backend", "cpu", "--threads", "1000", path_str(&wav)], None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let cores = std::thread::available_parallelism().unwrap().get();
    let warning =
        format!("susurrus: warning: --threads 1000 is more than this machine's {cores} cores; using {cores}\n");
    assert!(text(&out.stderr).contains(&warning), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), expected_txt("short_2"));

    let input = audio_fixture("no_such_file.wav");
    let out = transcribe(&["--best-of", "33", path_str(&input)], None, &[]);
    assert_eq!(out.status.code(), Some(2), "a command-line error");
    assert!(text(&out.stderr).starts_with("error: invalid value '33' for '--best-of <N>': 33 is not in 1..=32"));
    let out = Command::new(env!("CARGO_BIN_EXE_susurrus")).args(["bench", "--threads", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a command-line error");
    assert!(text(&out.stderr).starts_with("error: invalid value '0' for '--threads <N>': 0 is not in 1..=65535"));
}

#[test]
fn vad_settings_and_a_missing_network_fail_before_any_file_is_read() {
    let input = golden("short_1.wav");
    let fails = |args: &[&str], want: &str| {
        let out = transcribe(&[args, &[path_str(&input)]].concat(), None, &[]);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(text(&out.stderr), format!("susurrus: error: {want}\n"), "{args:?}");
    };
    fails(&["--vad-min-silence-ms", "500"], "--vad-model and the --vad-* settings are for --vad: add --vad");
    fails(
        &["--vad", "--vad-model", "/nonexistent/silero.onnx"],
        "VAD network /nonexistent/silero.onnx not found: run ./scripts/models/fetch_model.sh silero-vad to fetch it, or \
         pass --vad-model FILE",
    );
    fails(
        &["--vad", "--clip-timestamps", "1"],
        "invalid option: vad and clip_timestamps exclude each other: give one or the other",
    );
    let out = transcribe(&["--vad", "--vad-threshold", "2", path_str(&input)], None, &[]);
    assert_eq!(out.status.code(), Some(2), "a command-line error");
    assert!(
        text(&out.stderr)
            .starts_with("error: invalid value '2' for '--vad-threshold <P>': not a probability from 0 to 1"),
        "{}",
        text(&out.stderr)
    );
}

/// Word-level SubRip: cues of at most two lines of at most 24 characters (a longer word alone
/// on its line), cut from the reference's words: together they hold every word in order, each
/// cue from its first word's start to its last word's end.
#[test]
fn srt_cues_cut_from_words_keep_to_the_line_limits() {
    let wav = golden("short_3.wav");
    let args = ["--backend", "cpu", "-f", "srt", "--beam-size", "1", "--word-timestamps", "--max-line-width", "24"];
    let out = transcribe(&[&args[..], &["--max-line-count", "2", path_str(&wav)]].concat(), None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let words: Vec<Value> = reference("short_3", "word_timestamps")["segments"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["words"].as_array().unwrap().clone())
        .collect();
    let srt = text(&out.stdout);
    let cues: Vec<&str> = srt.trim_end().split("\n\n").collect();
    assert!(cues.len() > 2, "{srt}");
    let mut next = 0;
    for (i, cue) in cues.iter().enumerate() {
        let lines: Vec<&str> = cue.lines().collect();
        assert_eq!(lines[0], (i + 1).to_string(), "{cue}");
        let text_lines = &lines[2..];
        assert!((1..=2).contains(&text_lines.len()), "{cue}");
        let mut cue_words = Vec::new();
        for line in text_lines {
            let n = line.split(' ').count();
            assert!(line.chars().count() <= 24 || n == 1, "a line over 24 characters: {line:?}");
            cue_words.extend(line.split(' ').map(str::to_string));
        }
        let (first, last) = (&words[next], &words[next + cue_words.len() - 1]);
        let want: Vec<String> = words[next..next + cue_words.len()]
            .iter()
            .map(|w| w["word"].as_str().unwrap().trim().to_string())
            .collect();
        assert_eq!(cue_words, want, "{cue}");
        let time = |s: f64| format!("00:00:{:02},{:03}", s as u64, ((s * 1000.0).round() as u64) % 1000);
        assert_eq!(
            lines[1],
            format!("{} --> {}", time(first["start"].as_f64().unwrap()), time(last["end"].as_f64().unwrap()))
        );
        next += cue_words.len();
    }
    assert_eq!(next, words.len(), "every word in a cue");

    let out = transcribe(&["--backend", "cpu", "-f", "srt", "--max-line-width", "24", path_str(&wav)], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cut cues from words: add --word-timestamps"), "{}", text(&out.stderr));
}

#[test]
fn txt_srt_and_vtt_files_hold_the_reference_segments() {
    let dir = scratch("formats");
    let wav = golden("short_3.wav");
    let segments = reference_segments("short_3");
    assert_eq!(segments.len(), 2, "the clip has two cues to number");

    let mut srt = Vec::new();
    let mut vtt = String::from("WEBVTT\n");
    for (i, (start, end, text)) in segments.iter().enumerate() {
        srt.push(format!(
            "{}\n{} --> {}\n{}\n",
            i + 1,
            stamp(*start, ',', false),
            stamp(*end, ',', false),
            text.trim()
        ));
        vtt += &format!("\n{} --> {}\n{}\n", stamp(*start, '.', false), stamp(*end, '.', false), text.trim());
    }
    let expected = [("txt", expected_txt("short_3")), ("srt", srt.join("\n")), ("vtt", vtt)];
    for (format, want) in expected {
        let out = transcribe(&["--backend", "cpu", "-f", format, "-o", path_str(&dir), path_str(&wav)], None, &[]);
        assert!(out.status.success(), "{format}: exit {:?}, stderr:\n{}", out.status, text(&out.stderr));
        assert_eq!(text(&out.stdout), "", "{format}: with --output-dir nothing goes to stdout");
        let file = dir.join(format!("short_3.{format}"));
        let got = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(got, want, "{format}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_file_in_a_batch_is_reported_and_the_others_are_transcribed() {
    let (first, bad, last) = (golden("short_2.wav"), audio_fixture("garbage.wav"), golden("noisy.wav"));
    let out = transcribe(&["--backend", "cpu", path_str(&first), path_str(&bad), path_str(&last)], None, &[]);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{}", text(&out.stderr));
    // Each file's text under a `==> FILE <==` line, as `head` marks files.
    let want = format!(
        "==> {} <==\n{}\n==> {} <==\n{}",
        first.display(),
        expected_txt("short_2"),
        last.display(),
        expected_txt("noisy")
    );
    assert_eq!(text(&out.stdout), want);
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    let want = format!(
        "susurrus: error: {}: not a supported audio format (WAV, AIFF, FLAC, MP3, AAC, OGG, M4A/MP4/MOV, WebM/MKV, CAF)",
        bad.display()
    );
    assert_eq!(lines, [want.as_str(), "susurrus: error: 1 of 3 files failed"]);
}

#[test]
fn unreadable_inputs_fail_each_with_its_name_and_a_silent_one_gives_nothing() {
    let (empty, silent, nan) =
        (audio_fixture("empty.wav"), audio_fixture("zero_samples.wav"), audio_fixture("nan_f32.wav"));
    let out =
        transcribe(&["--backend", "cpu", "-f", "json", path_str(&empty), path_str(&silent), path_str(&nan)], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_str(&text(&out.stdout)).expect("one JSON line");
    assert_eq!(
        (&json["file"], &json["segments"]),
        (&Value::from(path_str(&silent)), &serde_json::json!([])),
        "a file without samples has an empty transcript"
    );
    let want = [
        format!("susurrus: error: {}: empty file", empty.display()),
        format!(
            "susurrus: error: {}: the audio contains NaN or infinite samples (the first at 0.312 s)",
            nan.display()
        ),
        "susurrus: error: 2 of 3 files failed".to_string(),
    ];
    assert_eq!(text(&out.stderr), want.join("\n") + "\n");
}

/// A missing input, an output folder that cannot be made, a transcript that exists or would
/// replace an input, a closed standard output: each stops the run before the model loads
/// (the model folder given does not exist, and its error never shows).
#[test]
fn inputs_and_outputs_are_checked_before_the_model_loads() {
    let dir = scratch("outputs");
    let no_model = dir.join("no-model");
    let (wav, missing) = (golden("short_1.wav"), audio_fixture("no_such_file.wav"));
    let fails = |args: &[&str], want: String| {
        let out = transcribe(&[&["--model", path_str(&no_model)], args].concat(), None, &[]);
        assert_eq!((out.status.code(), text(&out.stderr)), (Some(1), format!("susurrus: error: {want}\n")), "{args:?}");
        assert_eq!(text(&out.stdout), "");
    };
    fails(
        &[path_str(&wav), path_str(&missing)],
        format!("{}: No such file or directory (os error 2)", missing.display()),
    );
    let file = dir.join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("out");
    fails(
        &["-o", path_str(&under_file), path_str(&wav)],
        format!("{}: Not a directory (os error 20)", under_file.display()),
    );

    // An input named like a transcript, with the transcripts going beside it.
    let speech = dir.join("speech.txt");
    std::fs::copy(&wav, &speech).unwrap();
    fails(
        &["-o", path_str(&dir), "--overwrite", path_str(&speech)],
        format!(
            "{}: the transcript of {} would replace this input file ({}); choose another --output-dir",
            dir.join("speech.txt").display(),
            speech.display(),
            std::fs::canonicalize(&speech).unwrap().display()
        ),
    );
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(out_dir.join("short_1.txt"), "an earlier transcript").unwrap();
    fails(
        &["-o", path_str(&out_dir), path_str(&wav)],
        format!("{} exists: pass --overwrite to replace it", out_dir.join("short_1.txt").display()),
    );
    assert_eq!(std::fs::read_to_string(out_dir.join("short_1.txt")).unwrap(), "an earlier transcript");

    // With --overwrite it is replaced, whole, and no temporary file is left beside it.
    let out = transcribe(&["--backend", "cpu", "-o", path_str(&out_dir), "--overwrite", path_str(&wav)], None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(out_dir.join("short_1.txt")).unwrap(), expected_txt("short_1"));
    let names: Vec<_> = std::fs::read_dir(&out_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["short_1.txt"]);

    // Standard output closed (`>&-`): the transcript would vanish.
    let out = Command::new("sh")
        .args(["-c", "exec \"$0\" transcribe --model \"$1\" \"$2\" >&-", env!("CARGO_BIN_EXE_susurrus")])
        .args([path_str(&no_model), path_str(&wav)])
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), text(&out.stderr)),
        (
            Some(1),
            "susurrus: error: standard output is closed: redirect it to a file (> transcript.txt) or pass --output-dir\n"
                .to_string()
        )
    );
    // `> /dev/null` is a choice, not a closed output: the run goes on (to the missing model).
    let out = Command::new("sh")
        .args(["-c", "exec \"$0\" transcribe --model \"$1\" \"$2\" > /dev/null", env!("CARGO_BIN_EXE_susurrus")])
        .args([path_str(&no_model), path_str(&wav)])
        .output()
        .unwrap();
    assert!(text(&out.stderr).starts_with("susurrus: error: model folder "), "{}", text(&out.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A write error on standard output (here a full device) fails the run with its cause.
#[test]
fn a_failed_write_to_standard_output_is_an_error() {
    model_dir();
    let wav = golden("short_1.wav");
    let out = Command::new("sh")
        .args(["-c", "exec \"$0\" transcribe --backend cpu \"$1\" > /dev/full", env!("CARGO_BIN_EXE_susurrus")])
        .arg(path_str(&wav))
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), text(&out.stderr)),
        (Some(1), "susurrus: error: <stdout>: No space left on device (os error 28)\n".to_string())
    );
}

/// Process substitution (`<(…)`) and a named pipe whose writer comes late are read as
/// streams; the wait for the writer is reported.
#[test]
fn pipes_and_process_substitution_are_read_as_streams() {
    model_dir();
    let wav = golden("short_2.wav");
    let out = Command::new("bash")
        .args(["-c", "exec \"$0\" transcribe --backend cpu <(cat \"$1\")", env!("CARGO_BIN_EXE_susurrus")])
        .arg(path_str(&wav))
        .output()
        .unwrap();
    assert_eq!((out.status.code(), text(&out.stderr)), (Some(0), String::new()));
    assert_eq!(text(&out.stdout), expected_txt("short_2"));

    let dir = scratch("fifo");
    let fifo = dir.join("audio.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let child = Command::new(env!("CARGO_BIN_EXE_susurrus"))
        .args(["transcribe", "--backend", "cpu", path_str(&fifo)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The writer opens the pipe once the command has waited past its notice.
    std::thread::sleep(std::time::Duration::from_secs(3));
    std::fs::write(&fifo, std::fs::read(&wav).unwrap()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        (out.status.code(), text(&out.stderr)),
        (Some(0), format!("susurrus: {}: waiting for a program to write to this named pipe\n", fifo.display()))
    );
    assert_eq!(text(&out.stdout), expected_txt("short_2"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A truncated file is transcribed as far as it decodes, with a warning saying where.
#[test]
fn a_truncated_file_is_transcribed_with_a_warning() {
    let wav = golden("short_2.wav");
    let dir = scratch("truncated");
    let cut = dir.join("cut.wav");
    let bytes = std::fs::read(&wav).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() - 1001]).unwrap();
    let out = transcribe(&["--backend", "cpu", "-f", "json", path_str(&cut)], None, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let samples = (bytes.len() - 1001 - 44) / 2;
    let want = format!(
        "susurrus: warning: {}: the file ends inside a packet at byte {}, after {:.3} s of audio: it looks truncated; \
         the audio before the cut is transcribed\n",
        cut.display(),
        bytes.len() - 1001,
        samples as f64 / 16000.0
    );
    assert_eq!(text(&out.stderr), want);
    let json: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(json["timings"]["audio_duration_s"].as_f64().unwrap(), samples as f64 / 16000.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_model_names_the_fetch_script_before_any_file_is_read() {
    let home = scratch("home");
    let input = golden("short_1.wav");
    let hint = "run ./scripts/models/fetch_model.sh to fetch whisper-tiny.en, or pass --model DIR with a CTranslate2 or \
                Hugging Face Whisper folder";

    let out = transcribe(&[path_str(&input)], None, &[("HOME", &home)]);
    assert_eq!(out.status.code(), Some(1));
    let default = home.join(".cache/susurrus/models/whisper-tiny.en-ct2");
    let names = "tiny.en, tiny, base.en, base, small.en, small, medium.en, medium, large-v1, large-v2, large-v3, large, \
                 distil-large-v2, distil-medium.en, distil-small.en, distil-large-v3, distil-large-v3.5, \
                 large-v3-turbo, turbo";
    let want = format!(
        "susurrus: error: default model folder {} not found: {hint}, or a model's name ({names})\n",
        default.display()
    );
    assert_eq!(text(&out.stderr), want);

    let out = transcribe(&["--model", path_str(&home), path_str(&input)], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    let want =
        format!("susurrus: error: model folder {} has no model.bin or model.safetensors: {hint}\n", home.display());
    assert_eq!(text(&out.stderr), want);
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn options_the_model_cannot_honour_fail_before_any_file_is_read() {
    let input = golden("short_1.wav");
    let out = transcribe(&["--backend", "cpu", "--language", "de", path_str(&input)], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    let want = format!(
        "susurrus: error: --language de: the model in {} is English-only; leave --language out or pass a \
         multilingual model with --model\n",
        model_dir().display()
    );
    assert_eq!(text(&out.stderr), want);

    let out = transcribe(&["--backend", "cpu", "--task", "translate", path_str(&input)], None, &[]);
    assert_eq!(out.status.code(), Some(1));
    let want = format!(
        "susurrus: error: --task translate needs a multilingual model; the model in {} is English-only\n",
        model_dir().display()
    );
    assert_eq!(text(&out.stderr), want);

    let out = transcribe(&["--temperature", "-1", path_str(&input)], None, &[]);
    assert_eq!(out.status.code(), Some(2), "a command-line error");
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(
            "error: invalid value '-1' for '--temperature <T>': a temperature is 0 (greedy decoding) or a number from \
             0.001 to 100"
        ),
        "{stderr}"
    );

    let beam_errors = [
        (["--beam-size", "0"], "error: invalid value '0' for '--beam-size <N>': 0 is not in 1..=32"),
        (["--beam-size", "33"], "error: invalid value '33' for '--beam-size <N>': 33 is not in 1..=32"),
        (["--patience", "0"], "error: invalid value '0' for '--patience <P>': not a number > 0"),
        (["--length-penalty", "-1"], "error: invalid value '-1' for '--length-penalty <L>': not a number >= 0"),
    ];
    for (flags, want) in beam_errors {
        let out = transcribe(&[flags[0], flags[1], path_str(&input)], None, &[]);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: a command-line error");
        assert!(text(&out.stderr).starts_with(want), "{flags:?}: {}", text(&out.stderr));
    }
    // A length penalty whose scores overflow was taken, then reported as damaged weights
    // ("non-finite scores"); it is refused before the model loads.
    let out = transcribe(&["--length-penalty", "1000", path_str(&input)], None, &[]);
    assert_eq!(
        (out.status.code(), text(&out.stderr)),
        (Some(1), "susurrus: error: invalid option: length_penalty: 1000 is not a value from 0 to 10\n".to_string())
    );

    let out = transcribe(&["--clip-timestamps", "1,x", path_str(&input)], None, &[]);
    assert_eq!(out.status.code(), Some(2), "a command-line error");
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("error: invalid value 'x' for '--clip-timestamps <T>': a time is a number of seconds >= 0"),
        "{stderr}"
    );
    // A clip starting after the audio ends leaves nothing to transcribe.
    let wav = golden("short_1.wav");
    let out =
        transcribe(&["--backend", "cpu", "--format", "json", "--clip-timestamps", "600", path_str(&wav)], None, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(json["segments"], serde_json::json!([]));
}

#[test]
fn a_reader_that_stops_reading_ends_the_batch_quietly_with_status_141() {
    model_dir();
    let wav = golden("noisy.wav");
    let mut child = Command::new(env!("CARGO_BIN_EXE_susurrus"))
        .args(["transcribe", "--backend", "cpu", path_str(&wav), path_str(&wav)])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the susurrus binary runs");
    let (mut header, mut first) = (String::new(), String::new());
    {
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout is piped"));
        std::io::BufRead::read_line(&mut stdout, &mut header).expect("the first file's header arrives");
        std::io::BufRead::read_line(&mut stdout, &mut first).expect("the first segment arrives");
    }
    // The pipe is closed now; the second file's output meets a broken pipe. The command stops
    // without a message, with the status of a program ended by SIGPIPE.
    let out = child.wait_with_output().expect("the command finishes");
    assert_eq!((header, first), (format!("==> {} <==\n", wav.display()), expected_txt("noisy")));
    assert_eq!((out.status.code(), text(&out.stderr)), (Some(141), String::new()));
}

/// The small random model (one-second windows) as a model folder.
fn small_model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("small-model");
        for (name, bytes) in susurrus_testkit::whisper::small_model_files(3).unwrap() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        dir
    })
}

/// The transcript of each JSON line of `out` (its segments' times, tokens and scores and the
/// text), without the timings.
fn json_transcripts(out: &Output) -> Vec<(Value, Value)> {
    assert!(out.status.success(), "exit {:?}, stderr:\n{}", out.status, text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|line| {
            let got: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            (got["segments"].clone(), got["text"].clone())
        })
        .collect()
}

/// The GPU lost after the first of three windows of a batch's first file (`--lose-gpu-after
/// 1`: the wgpu device destroyed, on lavapipe): the command says so once, with where it
/// resumed, and prints what an undisturbed run prints, for both files. The small random model
/// decodes text only (timestamps suppressed), greedy with a sampled fallback, on three
/// one-second windows.
#[test]
fn a_gpu_lost_mid_transcription_is_reported_and_the_transcripts_are_unchanged() {
    use susurrus_testkit::whisper::{small_model_text_only, three_windows_of_tone, wav_file};
    let dir = scratch("device-loss");
    let (first, second) = (dir.join("tone.wav"), dir.join("again.wav"));
    for wav in [&first, &second] {
        std::fs::write(wav, wav_file(&three_windows_of_tone())).unwrap();
    }
    let suppress: Vec<String> = small_model_text_only().iter().map(|id| id.to_string()).collect();
    let suppress = suppress.join(",");
    let mut args = vec!["--backend", "wgpu", "--model", path_str(small_model()), "--format", "json"];
    args.extend(["--beam-size", "1", "--best-of", "2", "--temperature", "0,1", "--suppress-tokens", &suppress]);
    args.extend([path_str(&first), path_str(&second)]);
    let undisturbed = transcribe(&args, None, &[]);
    let want = json_transcripts(&undisturbed);
    assert_eq!(want.len(), 2);
    assert!(want[0].0.as_array().is_some_and(|s| s.len() >= 2), "the model speaks in several windows: {want:?}");
    assert!(!text(&undisturbed.stderr).contains("device was lost"));

    args.extend(["--lose-gpu-after", "1"]);
    let lost = transcribe(&args, None, &[]);
    assert_eq!(json_transcripts(&lost), want);
    let stderr = text(&lost.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("device was lost")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    let name = path_str(&first);
    assert!(
        warnings[0].starts_with(&format!("susurrus: warning: {name}: the GPU device was lost ("))
            && warnings[0].ends_with("); opening it again and resuming at 1.0 s"),
        "{stderr}"
    );
}

/// A random model at the small test width with the real 30 s windows (one encoder layer of one
/// head keeps runs short), as a model folder.
fn long_window_model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        use susurrus_testkit::whisper::{model_files, small_config};
        let dir = scratch("long-window-model");
        let mut config = small_config();
        (config.n_audio_ctx, config.encoder_layers, config.encoder_heads) = (1500, 1, 1);
        let files = model_files(config, 11, susurrus_whisper::load::convert::WeightFormat::F16).unwrap();
        for (name, bytes) in &files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        dir
    })
}

/// Memory is flat in the recording's length: two hours on standard input take no more peak
/// memory than ten minutes, within 24 MB, where keeping the samples would take 422 MB more (the
/// log-mel as much again). The model is a random one at the small test width with the real
/// 30 s windows (a real model's run would take most of an hour here); the samples, spectrogram
/// windows and seek loop are the real ones. Peak RSS comes from the kernel (`wait4`'s
/// `ru_maxrss`), for the command alone.
#[cfg(target_os = "linux")]
#[test]
fn memory_is_flat_in_the_recordings_length() {
    let dir = long_window_model();
    let peak_mb = |minutes: u32| -> f64 {
        let samples = minutes as usize * 60 * 16_000;
        #[expect(clippy::zombie_processes, reason = "reaped by wait4, which gives its peak memory too")]
        let mut child = Command::new(env!("CARGO_BIN_EXE_susurrus"))
            .args(["transcribe", "--backend", "cpu", "--beam-size", "1", "--temperature", "0", "--model"])
            .args([path_str(dir), "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the susurrus binary runs");
        let mut stdin = child.stdin.take().unwrap();
        // A 16-bit WAV of a slow chirp written as the command reads it: nothing on disk.
        let writer = std::thread::spawn(move || {
            stdin.write_all(&susurrus_testkit::whisper::wav_header(samples))?;
            let mut block = Vec::with_capacity(2 * 16_000);
            for second in 0..samples / 16_000 {
                block.clear();
                for i in 0..16_000 {
                    let t = (second * 16_000 + i) as f64 / 16_000.0;
                    let value = 0.3 * (2.0 * std::f64::consts::PI * (200.0 + (t % 60.0) * 10.0) * t).sin();
                    block.extend_from_slice(&((value * 32767.0) as i16).to_le_bytes());
                }
                stdin.write_all(&block)?;
            }
            Ok::<_, std::io::Error>(())
        });
        let mut stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut stderr, &mut text).map(|_| text)
        });
        let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
        let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
        assert_eq!(pid, child.id() as libc::pid_t, "wait4: {}", std::io::Error::last_os_error());
        writer.join().unwrap().expect("the command reads all of its input");
        let stderr = reader.join().unwrap().unwrap();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{minutes} min: {status}: {stderr}");
        usage.ru_maxrss as f64 / 1024.0
    };
    let short = peak_mb(10);
    let long = peak_mb(120);
    println!("peak RSS: 10 min {short:.1} MB, 120 min {long:.1} MB");
    assert!(long < short + 24.0, "peak RSS grows with the recording: 10 min {short:.1} MB, 120 min {long:.1} MB");
}

/// `bench --memory` transcribes the clip repeated to each length in a child and prints a row
/// per length with the child's peak RSS, and the growth per minute: flat here.
#[cfg(target_os = "linux")]
#[test]
fn bench_memory_prints_peak_memory_against_length() {
    let dir = long_window_model();
    let out = Command::new(env!("CARGO_BIN_EXE_susurrus"))
        .args(["bench", "--memory", "0.5,2.5", "--backend", "cpu", "--temperature", "0", "--model", path_str(dir)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let rows: Vec<Vec<f64>> = table
        .lines()
        .filter_map(|line| line.split_whitespace().map(|v| v.parse::<f64>().ok()).collect::<Option<Vec<f64>>>())
        .filter(|row| row.len() == 4)
        .collect();
    assert_eq!(rows.iter().map(|r| r[0]).collect::<Vec<_>>(), [0.5, 2.5], "{table}");
    for row in &rows {
        // A process that loaded a model and transcribed; its RTF from its wall time.
        assert!(row[1] > 10.0 && row[1] < 1000.0, "{table}");
        // Wall time is printed to 0.1 s: the RTF agrees within that.
        assert!((row[3] - row[2] / (row[0] * 60.0)).abs() < 0.002, "{table}");
    }
    let growth = table.lines().find_map(|l| l.strip_prefix("growth: ")).expect("a growth line");
    let slope: f64 = growth.split_whitespace().next().unwrap().parse().unwrap();
    // Peaks are printed to 0.1 MiB: the slope agrees within that.
    assert!((slope - (rows[1][1] - rows[0][1]) / 2.0).abs() < 0.06, "{table}");
    assert!(slope.abs() < 2.0, "memory grows with the length: {table}");
}

#[test]
fn every_container_and_codec_gives_the_wavs_transcript() {
    // The same speech as 16-bit WAV and in each format tests/audio/make_audio.py writes, two
    // of them videos (the speech is their first audio track, behind the video).
    let names = [
        "speech_16k_s16.wav",
        "speech_44k1_stereo.m4a",
        "speech_moov_last.m4a",
        "speech_alac.m4a",
        "speech_alac.caf",
        "speech_16k.aiff",
        "speech_22k05.aac",
        "speech_opus.webm",
        "speech_opus.ogg",
        "speech_flac.mkv",
        "video_two_audio_tracks.mp4",
        "video_opus.webm",
    ];
    let paths: Vec<PathBuf> = names.iter().map(|name| audio_fixture(name)).collect();
    let mut args = vec!["--backend", "cpu"];
    args.extend(paths.iter().map(|path| path_str(path)));
    let out = transcribe(&args, None, &[]);
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // Each file's text under a `==> FILE <==` line.
    let texts: Vec<(String, String)> = stdout
        .split("==> ")
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (name, body) = part.split_once(" <==\n").expect("a file header");
            (name.to_string(), body.trim().to_string())
        })
        .collect();
    let want: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(texts.iter().map(|(name, _)| name.clone()).collect::<Vec<_>>(), want);
    let wav = &texts[0].1;
    assert!(wav.to_lowercase().contains("short sentence"), "the WAV's transcript: {wav}");
    for (name, body) in &texts[1..] {
        assert_eq!(body, wav, "{name}");
    }
}

/// A Hugging Face hub cache as huggingface_hub (faster-whisper's downloader) leaves it, in
/// `cache`: the repository's folder, `refs/main` naming a commit, the snapshot of that commit
/// holding links into `blobs/`. Here the blobs are links to the default model's files.
fn hub_cache_entry(cache: &Path, repo: &str, files: &[&str]) -> PathBuf {
    let folder = cache.join(format!("models--{}", repo.replace('/', "--")));
    let commit = "5d3a3ec2d8d9b2f0a6e1c4b7a9f8e7d6c5b4a392";
    let snapshot = folder.join("snapshots").join(commit);
    std::fs::create_dir_all(folder.join("blobs")).unwrap();
    std::fs::create_dir_all(folder.join("refs")).unwrap();
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::write(folder.join("refs/main"), commit).unwrap();
    for (i, file) in files.iter().enumerate() {
        let blob = format!("{i:064x}");
        std::os::unix::fs::symlink(model_dir().join(file), folder.join("blobs").join(&blob)).unwrap();
        std::os::unix::fs::symlink(format!("../../blobs/{blob}"), snapshot.join(file)).unwrap();
    }
    snapshot
}

#[test]
fn a_model_name_loads_from_the_hugging_face_cache_as_faster_whisper_leaves_it() {
    let input = audio_fixture("speech_16k_s16.wav");
    let cache = scratch("hub");
    let tiny = hub_cache_entry(
        &cache,
        "Systran/faster-whisper-tiny.en",
        &["config.json", "model.bin", "tokenizer.json", "vocabulary.txt"],
    );
    // A download cut before the weights: refs and snapshot, no model.bin.
    let base = hub_cache_entry(&cache, "Systran/faster-whisper-base", &["config.json", "tokenizer.json"]);
    let by_folder = transcribe(&["--backend", "cpu", path_str(&input)], None, &[]);
    assert!(by_folder.status.success(), "{}", text(&by_folder.stderr));

    // HF_HUB_CACHE, and HF_HOME (whose hub/ is the cache), as huggingface_hub reads them.
    let home = scratch("hf-home");
    std::os::unix::fs::symlink(&cache, home.join("hub")).unwrap();
    for env in [("HF_HUB_CACHE", cache.as_path()), ("HF_HOME", home.as_path())] {
        let out = transcribe(&["--backend", "cpu", "--model", "tiny.en", path_str(&input)], None, &[env]);
        assert!(out.status.success(), "{}: {}", env.0, text(&out.stderr));
        assert_eq!(text(&out.stdout), text(&by_folder.stdout), "{}", env.0);
    }

    // Offline (a download is tests/hub.rs's), what the cache lacks is named.
    let env = [("HF_HUB_CACHE", cache.as_path()), ("HF_HUB_OFFLINE", Path::new("1"))];
    let out = transcribe(&["--model", "base", path_str(&input)], None, &env);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "susurrus: error: model base (Systran/faster-whisper-base) in the Hugging Face cache cannot be loaded: {} \
             lacks model.bin (an interrupted download?); HF_HUB_OFFLINE forbids downloading it again\n",
            base.display()
        )
    );
    let out = transcribe(&["--model", "large-v3-turbo", "--offline", path_str(&input)], None, &env[..1]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "susurrus: error: model large-v3-turbo (mobiuslabsgmbh/faster-whisper-large-v3-turbo) is not in the Hugging \
             Face cache {} and --offline forbids downloading it: run once without --offline, or pass --model DIR\n",
            cache.display()
        )
    );

    // `susurrus models` lists every name, what it stands for and where the cache holds it.
    let out = Command::new(env!("CARGO_BIN_EXE_susurrus")).arg("models").env("HF_HUB_CACHE", &cache).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listing = text(&out.stdout);
    let line = |name: &str| {
        listing
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name}: {listing}"))
    };
    assert!(listing.contains(&format!("Hugging Face cache: {}\n", cache.display())), "{listing}");
    assert_eq!(
        line("tiny.en").split_whitespace().collect::<Vec<_>>(),
        ["tiny.en", "Systran/faster-whisper-tiny.en", path_str(&tiny)]
    );
    assert!(line("base").contains("incomplete: ") && line("base").contains("lacks model.bin"), "{listing}");
    assert_eq!(
        line("turbo").split_whitespace().collect::<Vec<_>>(),
        ["turbo", "mobiuslabsgmbh/faster-whisper-large-v3-turbo", "-"]
    );
    assert_eq!(listing.lines().count(), 2 + 1 + 19, "{listing}");
    std::fs::remove_dir_all(&cache).unwrap();
    std::fs::remove_dir_all(&home).unwrap();
}
