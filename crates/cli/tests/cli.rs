//! Runs the built `susurrus` binary as a user would and checks what it prints.

use std::process::{Command, Output};

fn susurrus(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_susurrus")).args(args).output().expect("the susurrus binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

/// The text between the header line starting with `header` and the next `== ` header.
fn section<'a>(text: &'a str, header: &str) -> &'a str {
    let start = text.find(header).unwrap_or_else(|| panic!("no section {header:?} in:\n{text}"));
    let body = &text[start..];
    let body = &body[body.find('\n').map_or(body.len(), |i| i + 1)..];
    body.find("\n== ").map_or(body, |end| &body[..end])
}

#[test]
fn demo_prints_the_graph_before_and_after_fusion_and_its_memory_plan() {
    let out = susurrus(&["demo"]);
    assert!(out.status.success(), "exit {:?}, stderr:\n{}", out.status, stderr(&out));
    let text = stdout(&out);

    let built = section(&text, "== encoder layer as built ==");
    assert!(built.starts_with("graph encoder_layer {\n  %0 = input \"x\" : f32[1500,384]\n"), "{built}");
    assert!(built.contains("softmax(") && !built.contains("attention(") && !built.contains("matmul_bias("), "{built}");

    assert!(text.contains("== optimised (passes that changed it: ") && text.contains("fuse_attention"), "{text}");
    let optimised = section(&text, "== optimised");
    assert!(optimised.contains(" = attention(") && optimised.contains(" = matmul_bias("), "{optimised}");
    assert!(!optimised.contains("softmax("), "attention fusion left a softmax:\n{optimised}");
    // Five linears with bias (q, v, out, fc1, fc2) fuse; the key projection has no bias.
    assert_eq!(optimised.matches(" = matmul_bias(").count(), 5, "{optimised}");
    let nodes = optimised.lines().filter(|l| l.starts_with("  %")).count();

    let plan = section(&text, "== memory plan ==");
    let mut lines = plan.lines();
    // Peak: the MLP's hidden [1500,1536] f32 (9 216 000 B) with the residual and the fc2
    // output, two [1500,384] f32 (2 x 2 304 000 B): 13 824 000 B = 13.2 MiB.
    let report = lines.next().unwrap_or_default();
    assert!(report.starts_with("arena 13.2 MiB (peak live 13.2 MiB, 1.00x;"), "{report}");
    assert_eq!(lines.next(), Some(""));
    let header: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["node", "op", "type", "storage", "shares", "live"]);
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), nodes, "one row per optimised node:\n{plan}");
    assert!(rows[0].starts_with("%0 ") && rows[0].contains("arena @0 "), "{}", rows[0]);
    assert!(rows.iter().any(|r| r.contains("param mlp.fc1.weight")), "{plan}");
}

#[test]
fn demo_positions_shrink_the_plan() {
    let out = susurrus(&["demo", "--positions", "64"]);
    assert!(out.status.success(), "exit {:?}, stderr:\n{}", out.status, stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("%0 = input \"x\" : f32[64,384]"), "{text}");
    // Peak as above with 64 positions: 64*1536*4 + 2*64*384*4 = 589 824 B = 576 KiB.
    assert!(text.contains("\narena 576.0 KiB (peak live 576.0 KiB, 1.00x;"), "{text}");
}

#[test]
fn demo_rejects_positions_out_of_range() {
    for (value, msg) in [("0", "0 is not in 1..=1500"), ("1501", "1501 is not in 1..=1500"), ("x", "invalid digit")] {
        let out = susurrus(&["demo", "--positions", value]);
        assert_eq!(out.status.code(), Some(2), "--positions {value}");
        let err = stderr(&out);
        assert!(err.starts_with(&format!("error: invalid value '{value}' for '--positions <N>'")), "{err}");
        assert!(err.contains(msg), "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let out = susurrus(&["transcribe-everything"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.starts_with("error: unrecognized subcommand 'transcribe-everything'"), "{err}");
    assert!(err.contains("Usage: susurrus <COMMAND>"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn help_lists_the_subcommands() {
    let out = susurrus(&["--help"]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.starts_with("Whisper speech recognition"), "{text}");
    for line in [
        "  transcribe  Transcribe audio files (WAV, FLAC, MP3, M4A, MP4, WebM, OGG ...; `-` reads standard input)",
        "  bench       Time the encoder, a decoder step and a whole transcription on a backend",
        "  convert     Convert a CTranslate2 model folder to a Hugging Face folder with f16 safetensors",
        "  info        List GPU adapters with their limits and features, and describe a model",
        "  demo        Build a Whisper-tiny-shaped encoder layer",
        "  bench-ops   Time the ops of a Whisper size",
    ] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }
}

#[test]
fn bench_ops_rejects_an_unknown_backend() {
    let out = susurrus(&["bench-ops", "--backend", "tpu"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid value 'tpu' for '--backend <BACKEND>'"), "{err}");
}

#[test]
fn bench_ops_names_the_sizes_and_refuses_auto() {
    let out = susurrus(&["bench-ops", "--size", "huge"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(
            "invalid value 'huge' for '--size <SIZE>': not a Whisper size: one of tiny, base, small, medium, large-v3, \
             large-v3-turbo"
        ),
        "{err}"
    );
    let out = susurrus(&["bench-ops", "--backend", "cpu,auto"]);
    assert_eq!(
        (out.status.code(), stderr(&out)),
        (Some(1), "susurrus: error: bench-ops measures named backends: --backend auto is not one of them\n".into())
    );
}

#[test]
fn bench_refuses_a_negative_temperature() {
    let out = susurrus(&["bench", "--temperature", "0,-1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(
            "invalid value '-1' for '--temperature <T>': a temperature is 0 (greedy decoding) or a number from 0.001 to \
             100"
        ),
        "{err}"
    );
}
