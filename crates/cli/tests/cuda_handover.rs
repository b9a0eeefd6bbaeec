//! The command on CUDA when the GPU is lost (needs an NVIDIA GPU, so marked ignored:
//! `scripts/gpu/test_cuda.sh` builds it with the CUDA backend's GPU suite and runs both on a
//! machine with one).

/// The `susurrus` program built with this suite: beside the test binary where
/// `scripts/gpu/test_cuda.sh build` put both, else where cargo built it.
fn susurrus_program() -> std::path::PathBuf {
    let beside = std::env::current_exe().unwrap().with_file_name("susurrus");
    if beside.is_file() { beside } else { env!("CARGO_BIN_EXE_susurrus").into() }
}

/// A CUDA context that met a sticky error is lost to its process: `--lose-gpu-after 1` traps a
/// kernel after the first of three windows of a batch's first file; the command says the
/// device was lost and that it goes on in a new process, which opens the GPU afresh and
/// resumes from the last window. Both files' transcripts are the undisturbed run's, and the
/// status is 0. (The small random model, text only, greedy with a sampled fallback.)
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/gpu/test_cuda.sh runs it"]
fn a_lost_device_hands_the_batch_to_a_new_process_with_the_same_transcripts() {
    use susurrus_testkit::whisper::{small_model_files, small_model_text_only, three_windows_of_tone, wav_file};
    let dir = std::env::temp_dir().join(format!("susurrus-cuda-handover-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let model = dir.join("model");
    std::fs::create_dir_all(&model).unwrap();
    for (name, bytes) in small_model_files(3).unwrap() {
        std::fs::write(model.join(name), bytes).unwrap();
    }
    let (first, second) = (dir.join("tone.wav"), dir.join("again.wav"));
    for wav in [&first, &second] {
        std::fs::write(wav, wav_file(&three_windows_of_tone())).unwrap();
    }
    let suppress: Vec<String> = small_model_text_only().iter().map(|id| id.to_string()).collect();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(susurrus_program())
            .args(["transcribe", "--backend", "cuda", "--format", "json", "--beam-size", "1", "--best-of", "2"])
            .args(["--temperature", "0,1", "--suppress-tokens", &suppress.join(",")])
            .arg("--model")
            .args([&model, &first, &second])
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(out.status.success(), "exit {:?}:\n{stderr}", out.status);
        let transcripts: Vec<(serde_json::Value, serde_json::Value)> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|line| {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                (v["segments"].clone(), v["text"].clone())
            })
            .collect();
        (transcripts, stderr)
    };
    let (want, _) = run(&[]);
    assert_eq!(want.len(), 2);
    assert!(want[0].0.as_array().is_some_and(|s| s.len() >= 2), "the model speaks in several windows: {want:?}");
    let (got, stderr) = run(&["--lose-gpu-after", "1"]);
    println!("{stderr}");
    assert_eq!(got, want);
    let name = first.display().to_string();
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("susurrus: warning:")).collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with(&format!("susurrus: warning: {name}: the GPU device was lost (cuda: "))
            && lines[0].contains("CUDA_ERROR_LAUNCH_FAILED")
            && lines[0].ends_with("); opening it again and resuming at 1.0 s"),
        "{stderr}"
    );
    assert_eq!(
        lines[1],
        format!(
            "susurrus: warning: {name}: a CUDA context that met a sticky error cannot be used again, nor \
             another opened, in the same process; going on in a new process"
        ),
        "{stderr}"
    );

    // Standard input first, as text printed while it is decoded: the new process prints the
    // rest of its lines (no second `==> - <==`), then the next file's.
    let text = |extra: &[&str]| {
        let out = std::process::Command::new(susurrus_program())
            .args(["transcribe", "--backend", "cuda", "--beam-size", "1", "--best-of", "2"])
            .args(["--temperature", "0,1", "--suppress-tokens", &suppress.join(",")])
            .arg("--model")
            .args([model.as_os_str(), "-".as_ref(), second.as_os_str()])
            .args(extra)
            .stdin(std::fs::File::open(&first).unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "exit {:?}:\n{}", out.status, String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let want = text(&[]);
    assert!(want.starts_with("==> - <==\n") && want.contains("\n\n==> "), "{want}");
    assert_eq!(text(&["--lose-gpu-after", "1"]), want);
    std::fs::remove_dir_all(&dir).unwrap();
}
