//! `susurrus stream` run as a user would: a file, headerless PCM on standard input, JSON lines,
//! pacing at speech speed, and its error messages.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use susurrus_testkit::golden::{self, Set};

/// `susurrus stream` on the CPU with tiny.en and the VAD, its output piped.
fn stream_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_susurrus"));
    command.arg("stream").args(["--backend", "cpu", "--model"]).arg(Set::TinyEn.model_dir());
    command.arg("--vad-model").arg(golden::vad_model()).args(args);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// Runs `susurrus stream`, feeding `stdin` when given.
fn stream(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut command = stream_command(args);
    command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = command.spawn().expect("the susurrus binary runs");
    if let Some(bytes) = stdin {
        child.stdin.take().unwrap().write_all(bytes).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

fn clip(name: &str) -> String {
    Set::TinyEn.dir().join(format!("{name}.wav")).display().to_string()
}

fn reference(name: &str) -> String {
    Set::TinyEn.fixture(name)["runs"][0]["text"].as_str().unwrap().trim().to_string()
}

/// The text of the text format's lines, without their times.
fn text_of_lines(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(|l| l.split_once("] ").map_or(l, |(_, t)| t)).collect();
    lines.join(" ")
}

#[test]
fn a_file_prints_its_committed_text_as_timed_lines() {
    let out = stream(&[&clip("short_2")], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // Broken after 60 characters, as no sentence ended before.
    assert!(text.starts_with("[00:00.000 --> 00:03.720] Please close the garden gate before"), "{text}");
    assert!(text.contains("\n[00:03.720 --> 00:04.600] an open field.\n"), "{text}");
    assert_eq!(text_of_lines(&text), reference("short_2"));
}

#[test]
fn raw_pcm_on_standard_input_is_transcribed_as_it_comes() {
    let wav = std::fs::read(clip("noisy")).unwrap();
    let out = stream(&["--raw", "s16le", "-"], Some(&wav[44..]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(text_of_lines(&stdout(&out)), reference("noisy"));
    // The same audio as 32 kHz f32 in two channels (each sample held twice in time, in both
    // channels), downmixed and resampled on the way.
    let samples: Vec<f32> =
        wav[44..].chunks_exact(2).map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0).collect();
    let stereo: Vec<u8> = samples.iter().flat_map(|s| [s.to_le_bytes(); 4].concat()).collect();
    let out = stream(&["--raw", "f32le", "--rate", "32000", "--channels", "2", "-"], Some(&stereo));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(golden::word_error_rate(&reference("noisy"), &text_of_lines(&stdout(&out))) <= 0.1, "{}", stdout(&out));
    // A byte that is not a whole frame is dropped with a warning.
    let out = stream(&["--raw", "s16le", "-"], Some(&wav[43..]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: -: the last 1 bytes are not a whole frame of 1 channels"),
        "{}",
        stderr(&out)
    );
}

/// The events of `--format json` lines, each checked to be a partial or a committed event with
/// its start no later than its end: the committed text, and how many partial events had text.
fn read_events<'a>(lines: impl IntoIterator<Item = &'a str>) -> (String, usize) {
    let mut committed = String::new();
    let mut partials = 0;
    for line in lines {
        let event: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let (start, end) = (event["start"].as_f64().unwrap(), event["end"].as_f64().unwrap());
        assert!(start <= end, "{line}");
        let text = event["text"].as_str().unwrap();
        match event["type"].as_str() {
            Some("committed") => committed.push_str(text),
            Some("partial") => partials += usize::from(!text.is_empty()),
            other => panic!("type {other:?} in {line}"),
        }
    }
    (committed, partials)
}

#[test]
fn json_lines_hold_every_event_and_the_committed_text_is_the_transcript() {
    let out = stream(&["--format", "json", "--realtime", &clip("short_1")], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let (committed, partials) = read_events(stdout(&out).lines());
    assert!(partials > 0, "no partial text while a 7 s clip was spoken");
    assert_eq!(committed.trim(), reference("short_1"));
}

/// Runs `susurrus stream` like [`stream`] and reads its standard output as it comes: each line
/// with the seconds since the command started when it arrived.
fn stream_as_it_comes(args: &[&str]) -> (Vec<(f64, String)>, Output) {
    let started = Instant::now();
    let mut child = stream_command(args).stdin(Stdio::null()).spawn().expect("the susurrus binary runs");
    let lines = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|line| (started.elapsed().as_secs_f64(), line.unwrap()))
        .collect();
    (lines, child.wait_with_output().unwrap())
}

#[test]
fn realtime_reads_a_file_no_faster_than_it_plays() {
    // With a hop longer than the clip the stream looks once as the speech starts and once at
    // its end, and that last look alone commits: the text is the same however busy the machine
    // is. (At the default hop, what two looks agree on depends on where the machine's speed put
    // them: on a loaded machine two looks of this clip agreed on "The cold wind", which the
    // last look alone hears as "A cold wind".)
    let (lines, out) = stream_as_it_comes(&["--realtime", "--hop", "10", "--format", "json", &clip("noisy")]);
    assert!(out.status.success(), "{}", stderr(&out));
    for (arrived, line) in &lines {
        // Nothing is told of audio before it has played (the stream's clock starts after the
        // model loaded, later than this one).
        let end = serde_json::from_str::<serde_json::Value>(line).unwrap()["end"].as_f64().unwrap();
        assert!(end <= *arrived, "an event of audio up to {end} s printed {arrived:.2} s after the start: {line}");
    }
    // The clip is 4.67 s long: the last event comes once its last sample has played.
    let (last, _) = lines.last().expect("events");
    assert!(*last >= 4.6, "the last event came {last:.2} s after the start");
    let (committed, partials) = read_events(lines.iter().map(|(_, line)| line.as_str()));
    assert!(partials > 0, "no partial text from the look as the speech started");
    assert_eq!(committed.trim(), reference("noisy"));
}

#[test]
fn bad_input_and_options_are_errors_before_any_work() {
    let error = |out: &Output| {
        assert_eq!(out.status.code(), Some(1), "{}", stdout(out));
        stderr(out)
    };
    let out = stream(&["--hop", "20", &clip("noisy")], None);
    assert_eq!(error(&out), "susurrus: error: invalid option: hop must be between 0.1 and 10 seconds, not 20\n");
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such.wav");
    let out = stream(&[missing.to_str().unwrap()], None);
    assert!(error(&out).contains("no-such.wav"), "{}", stderr(&out));
    let out = stream(&["--raw", "s16le", "-"], Some(&[]));
    assert_eq!(error(&out), "susurrus: error: -: no audio: the input was empty\n");
    let out = stream(&["--rate", "8000", &clip("noisy")], None);
    assert_eq!(out.status.code(), Some(2), "--rate without --raw: {}", stderr(&out));
}

#[test]
fn bench_stream_streams_at_the_hop_asked_for_and_refuses_a_bad_one() {
    let bench = |args: &[&str]| {
        let model = Set::TinyEn.model_dir();
        let mut command = Command::new(env!("CARGO_BIN_EXE_susurrus"));
        command.args(["bench", "--backend", "cpu", "--json", "--model"]).arg(&model).args(args);
        command.output().expect("the susurrus binary runs")
    };
    let out = bench(&["--hop", "20", "--stream", &clip("noisy")]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(stderr(&out), "susurrus: error: invalid option: hop must be between 0.1 and 10 seconds, not 20\n");

    let out = bench(&["--hop", "2", "--stream", &clip("noisy")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["hop"], 2.0, "{report}");
    let row = &report["rows"][0];
    // Looks every 2 s still commit the clip's words, each with its latency.
    assert!(row["words"].as_u64().unwrap() > 0, "{report}");
    assert!(row["wer_vs_offline"].as_f64().unwrap() <= 0.15, "{report}");
    assert!(row["first_seen_median"].as_f64().unwrap() <= row["committed_median"].as_f64().unwrap(), "{report}");
}

/// The process's peak resident memory (`VmHWM`) in kB, while it runs.
#[cfg(target_os = "linux")]
fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// `seconds` of 16 kHz raw silence fed to `stream --raw s16le -` as fast as it is taken; the
/// stream's peak resident memory, last read before it ended, in kB.
#[cfg(target_os = "linux")]
fn peak_streaming_silence(seconds: usize) -> u64 {
    let mut child = stream_command(&["--raw", "s16le", "-"]).stdin(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeding = std::thread::spawn(move || {
        let second = vec![0u8; 32_000];
        for _ in 0..seconds {
            stdin.write_all(&second).unwrap();
        }
    });
    let pid = child.id();
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        peak = peak_rss_kb(pid).unwrap_or(peak).max(peak);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    feeding.join().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    peak
}

/// Input faster than the transcription (a pipe at disk speed) waits in its pipe, not in
/// memory: an hour of audio peaks where two minutes do. The reader used to send into an
/// unbounded channel, +80 MB/s from `/dev/zero`.
#[cfg(target_os = "linux")]
#[test]
fn an_hour_at_disk_speed_keeps_memory_flat() {
    let minutes = peak_streaming_silence(120);
    let hour = peak_streaming_silence(3600);
    // An hour of samples is 230 MB; the bound is a tenth of it.
    assert!(hour < minutes + (23 << 10), "peak resident memory: two minutes {minutes} kB, an hour {hour} kB");
}

/// Standard output closed (`>&-`): every caption would vanish, so the stream refuses before the
/// model loads, as `transcribe` does (it used to run to the end and exit 0).
#[cfg(unix)]
#[test]
fn a_closed_standard_output_is_refused_before_any_work() {
    let out = Command::new("sh")
        .args(["-c", "exec \"$0\" stream --model /nonexistent/model \"$1\" >&-", env!("CARGO_BIN_EXE_susurrus")])
        .arg(clip("short_2"))
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), stderr(&out)),
        (Some(1), "susurrus: error: standard output is closed: redirect it to a file (> captions.txt)\n".to_string())
    );
}

/// A reader that stops reading (`| head -1`) ends the stream quietly with the status of a
/// program ended by SIGPIPE, as `transcribe` does (it used to report "Broken pipe").
#[test]
fn a_reader_that_stops_reading_ends_the_stream_quietly_with_status_141() {
    let mut child = stream_command(&[&clip("long")]).stdin(Stdio::null()).spawn().unwrap();
    let mut first = String::new();
    {
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut first).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(first.starts_with("[00:00"), "{first}");
    assert_eq!((out.status.code(), stderr(&out)), (Some(141), String::new()));
}
