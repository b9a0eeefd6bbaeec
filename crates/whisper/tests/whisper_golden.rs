//! Token-exact transcription: the golden clips, transcribed with the reference's options,
//! give the reference's segments — the same token ids, the same text, start and end within
//! 0.02 s — on the CPU reference executor (every clip) and on wgpu (the short clips: on
//! lavapipe, a software GPU, the 133 s clip alone took most of the suite). The fixtures (audio
//! made with espeak-ng, transcripts from faster-whisper 1.2.1 / CTranslate2 4.8.5 greedy) come
//! from tests/golden/make_golden.sh; the checks are in the test kit's `golden` module (the
//! native crate runs them on its fast CPU backend and on CUDA too).

use susurrus_testkit::golden;

use golden::transcripts_match_reference;

#[test]
fn cpu_transcripts_match_reference() {
    transcripts_match_reference(Box::new(golden::cpu()), &golden::CLIPS);
}

#[test]
fn wgpu_transcripts_match_reference() {
    transcripts_match_reference(Box::new(golden::wgpu()), &golden::SHORT_CLIPS);
}
