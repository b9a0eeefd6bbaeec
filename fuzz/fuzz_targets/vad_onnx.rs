//! The Silero VAD network's ONNX file (protocol buffers, the graph checked node by node, the
//! weights' shapes and values).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| susurrus_fuzz::vad_onnx(data));
