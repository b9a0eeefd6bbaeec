//! The larger Whisper sizes, which exist nowhere here as files, at their real widths (small
//! 768 wide with 12 heads, large-v3 1280 with 20 heads, 128 mels and 51866 tokens;
//! large-v3-turbo has large-v3's widths) with random weights and one layer each side: on wgpu
//! (lavapipe here) the encoder output and the decoder's choices equal the CPU reference
//! executor's (`susurrus_testkit::shapes`). Medium (1024 wide, 16 heads) runs on the fast CPU
//! backend (`crates/testkit/tests/conformance/golden.rs`) and on CUDA: on lavapipe, a software GPU, the
//! two widths here cover both vocabularies and mel counts.

use susurrus_testkit::shapes::real_width_model_matches_reference;
use susurrus_testkit::whisper::Architecture;

#[test]
fn small_width_on_wgpu() {
    real_width_model_matches_reference(susurrus_testkit::backends::wgpu().as_ref(), Architecture::Small, 1);
}

#[test]
fn large_v3_width_on_wgpu() {
    real_width_model_matches_reference(susurrus_testkit::backends::wgpu().as_ref(), Architecture::LargeV3, 1);
}
