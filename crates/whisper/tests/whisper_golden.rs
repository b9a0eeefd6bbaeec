//! Token-exact transcription: every golden clip, transcribed with the reference's options,
//! gives the reference's segments — the same token ids, the same text, start and end within
//! 0.02 s — on the CPU reference executor and on wgpu. The fixtures (audio made with
//! espeak-ng, transcripts from faster-whisper 1.2.1 / CTranslate2 4.8.5 greedy) come from
//! tests/golden/make_golden.sh; the checks are in golden/mod.rs (the native crate runs them
//! on its fast CPU backend too).

use susurrus_testkit::golden;

use golden::transcripts_match_reference;

#[test]
fn cpu_transcripts_match_reference() {
    transcripts_match_reference(Box::new(golden::cpu()));
}

#[test]
fn wgpu_transcripts_match_reference() {
    transcripts_match_reference(Box::new(golden::wgpu()));
}
