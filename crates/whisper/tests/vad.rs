//! The Silero VAD network file: faults in it are errors naming the fault, and a transcription
//! with `vad` on audio without speech, without the network or with clip times is what a user
//! expects. (Probabilities and transcripts against the reference: whisper_golden.rs.)

use std::ops::ControlFlow;

use prost::Message;
use susurrus_testkit::golden;
use susurrus_whisper::vad::onnx;
use susurrus_whisper::vad::{VadPlan, VadWeights};
use susurrus_whisper::{TranscribeOptions, Whisper};

fn file() -> Vec<u8> {
    std::fs::read(golden::vad_model()).unwrap()
}

fn load_error(bytes: &[u8]) -> String {
    VadWeights::from_onnx(bytes, "vad.onnx").unwrap_err().to_string()
}

/// The file decoded, changed by `edit`, and encoded again.
fn edited(edit: impl FnOnce(&mut onnx::Graph)) -> Vec<u8> {
    let mut model = onnx::Model::decode(file().as_slice()).unwrap();
    edit(model.graph.as_mut().unwrap());
    model.encode_to_vec()
}

#[test]
fn the_network_loads_and_plans() {
    VadPlan::new(VadWeights::from_onnx(&file(), "vad.onnx").unwrap()).unwrap();
    // What is kept of a decoded file is enough to load it again.
    VadWeights::from_onnx(&edited(|_| {}), "vad.onnx").unwrap();
}

#[test]
fn damaged_files_are_errors_naming_the_file() {
    let bytes = file();
    let err = load_error(&bytes[..bytes.len() / 2]);
    assert!(err.starts_with("vad.onnx: not an ONNX model ("), "{err}");
    let err = load_error(b"RIFF....WAVEfmt ");
    assert!(err.starts_with("vad.onnx: not an ONNX model ("), "{err}");
    let err = VadWeights::load(std::path::Path::new("/nonexistent/silero.onnx")).unwrap_err().to_string();
    assert!(err.starts_with("/nonexistent/silero.onnx: cannot read: "), "{err}");
}

#[test]
fn another_network_is_refused_at_its_first_difference() {
    let err = load_error(&edited(|g| g.node[10].op_type = "Tanh".into()));
    assert_eq!(err, "vad.onnx: not the Silero VAD v6 network: node 10 is Tanh, expected Relu (25 nodes, expected 25)");
    let err = load_error(&edited(|g| {
        g.node.pop();
    }));
    assert!(err.contains("node 24 is missing, expected Reshape (24 nodes, expected 25)"), "{err}");
    let err = load_error(&edited(|g| {
        let strides = g.node[11].attribute.iter_mut().find(|a| a.name == "strides").unwrap();
        strides.ints = vec![1];
    }));
    assert!(
        err.contains("a convolution has strides Some([1]) and pads Some([1, 1]), expected [2] and [1, 1]"),
        "{err}"
    );
}

#[test]
fn weights_must_be_whole_and_finite() {
    let err = load_error(&edited(|g| {
        let bias = g.initializer.iter_mut().find(|t| t.name == "encoder.conv_layers.2.bias").unwrap();
        bias.raw_data[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
    }));
    assert_eq!(err, "vad.onnx: encoder.conv_layers.2.bias holds a non-finite value (NaN) at element 2");
    let err = load_error(&edited(|g| {
        let basis =
            g.initializer.iter_mut().find(|t| t.name == "encoder.feature_extractor.forward_basis_buffer").unwrap();
        basis.raw_data.truncate(1000);
    }));
    assert_eq!(
        err,
        "vad.onnx: encoder.feature_extractor.forward_basis_buffer has 250 values for its dims [258, 1, 256] (66048)"
    );
    let err = load_error(&edited(|g| {
        g.initializer.retain(|t| t.name != "decoder.conv1d.weight");
    }));
    assert_eq!(err, "vad.onnx: no initializer decoder.conv1d.weight");
}

fn whisper() -> Whisper {
    pollster::block_on(Whisper::load_dir(susurrus_testkit::backends::reference(), &golden::model_dir())).unwrap()
}

#[test]
fn vad_needs_the_network_and_no_clip_times() {
    let mut whisper = whisper();
    let options = TranscribeOptions { vad: true, beam_size: 1, ..TranscribeOptions::default() };
    let run = |w: &mut Whisper, o: &TranscribeOptions| {
        pollster::block_on(w.transcribe(&[0.0; 16000], o, &mut |_| ControlFlow::Continue(())))
    };
    let err = run(&mut whisper, &options).unwrap_err().to_string();
    assert!(err.contains("vad: the Silero VAD network is not loaded"), "{err}");
    let clipped = TranscribeOptions { clip_timestamps: vec![1.0], ..options.clone() };
    let err = run(&mut whisper, &clipped).unwrap_err().to_string();
    assert!(err.contains("vad and clip_timestamps exclude each other"), "{err}");
}

/// 20 s of the `silence` clip's digital silence and quiet noise: no speech, so nothing is
/// transcribed (the reference transcribes the empty audio that is left), and the duration
/// stays the recording's.
#[test]
fn audio_without_speech_gives_an_empty_transcript() {
    let mut whisper = whisper();
    pollster::block_on(whisper.load_vad(&golden::vad_plan())).unwrap();
    let mut pcm = golden::read_wav("silence.wav");
    pcm.extend((0..12 * 16000).map(|i| 1e-3 * ((i * 7919 % 2000) as f32 / 1000.0 - 1.0)));
    let options = TranscribeOptions { vad: true, beam_size: 1, ..TranscribeOptions::default() };
    let mut segments = 0;
    let transcript = pollster::block_on(whisper.transcribe(&pcm, &options, &mut |e| {
        if let susurrus_whisper::Event::Segment(_) = e {
            segments += 1;
        }
        ControlFlow::Continue(())
    }))
    .unwrap();
    assert_eq!((transcript.segments.len(), transcript.text.as_str(), segments), (0, "", 0));
    assert_eq!(transcript.duration, pcm.len() as f64 / 16000.0);
}
