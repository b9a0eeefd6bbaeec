//! The Whisper encoder graph against CTranslate2's encoder output on a golden clip, on the CPU
//! reference executor and on wgpu: the same log-mel window in, `[1500, 384]` out.

use susurrus_testkit::golden;

use susurrus_core::exec::Backend;
use susurrus_core::tensor::Tensor;
use susurrus_whisper::audio::mel::LogMel;
use susurrus_whisper::graphs::layers::ModelWeights;
use susurrus_whisper::graphs::select::Selection;
use susurrus_whisper::load::load_dir;
use susurrus_whisper::program::{Program, ProgramSpec};

/// CTranslate2 runs the f16 weights widened to f32 in f32; so do we, with another summation
/// order and our own GELU and softmax, through 4 layers.
const TOLERANCE: f32 = 2e-3;

fn encoder_matches_reference(backend: &dyn Backend) {
    let record = golden::fixture("short_1");
    let mel = &record["mel"];
    let shape: Vec<usize> = mel["shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    let mel = Tensor::f32(shape, golden::read_f32(mel["file"].as_str().unwrap())).unwrap();
    let want = golden::read_f32(record["encoder_output"]["file"].as_str().unwrap());

    let model = ModelWeights::new(&load_dir(&golden::model_dir()).unwrap()).unwrap();
    let spec = ProgramSpec {
        selection: Selection {
            suppress: vec![],
            blank: vec![],
            timestamp_begin: 50363,
            end_of_text: 50256,
            no_timestamps: 50362,
            penalties: false,
        },
        no_speech: 50361,
        beams: 0,
        alignment: false,
        long_prompts: false,
        groups: 0,
    };
    let mut program = pollster::block_on(Program::compile(backend, &model, &spec)).unwrap();
    let got = pollster::block_on(program.encode(&mel, true)).unwrap().unwrap();
    assert_eq!(got.shape().dims(), [1500, 384]);
    let got = got.to_f32();
    let (diff, at) = golden::max_abs_diff(&got, &want);
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    println!("{}: encoder max abs diff {diff:.2e} at {at} (values up to {scale:.2})", backend.name());
    assert!(diff <= TOLERANCE, "{}: encoder output differs by {diff} at {at}", backend.name());
}

/// The first window's log-mel as faster-whisper's transcribe() computes it: the whole clip
/// plus 160 zero samples, `samples / 160` frames kept, zero-padded to 3000 frames.
#[test]
fn log_mel_window_matches_faster_whisper() {
    let record = golden::fixture("short_1");
    let pcm = golden::read_wav(record["audio"]["file"].as_str().unwrap());
    let want = golden::read_f32(record["mel"]["file"].as_str().unwrap());
    let content = record["mel"]["content_frames"].as_u64().unwrap() as usize;
    assert_eq!(content, pcm.len() / 160);
    let mut padded = pcm.clone();
    padded.extend([0.0; 160]);
    let mel = LogMel::new(80).unwrap().compute(&padded).unwrap();
    let frames = mel.shape().dims()[1];
    assert_eq!(frames, content + 1);
    let mel = mel.to_f32();
    let mut window = vec![0.0f32; 80 * 3000];
    for m in 0..80 {
        window[m * 3000..m * 3000 + content].copy_from_slice(&mel[m * frames..m * frames + content]);
    }
    let (diff, at) = golden::max_abs_diff(&window, &want);
    assert!(diff <= 1e-4, "log-mel differs by {diff} at mel {} frame {}", at / 3000, at % 3000);
}

#[test]
fn cpu_encoder_matches_ctranslate2() {
    encoder_matches_reference(susurrus_testkit::backends::reference().as_ref());
}

#[test]
fn wgpu_encoder_matches_ctranslate2() {
    encoder_matches_reference(susurrus_testkit::backends::wgpu().as_ref());
}
