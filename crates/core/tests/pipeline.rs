//! The default pass pipeline on a real layer: a Whisper encoder layer built with the builder
//! only comes out with attention and every linear layer fused, computes what it computed
//! before, and a second run of the pipeline finds nothing to do.

use std::collections::HashMap;

use susurrus_core::ir::evaluate;
use susurrus_core::passes::optimize;
use susurrus_testkit::{random_inputs, random_weights};
use susurrus_whisper::graphs::demo::{EncoderLayerShape, encoder_layer};

#[test]
fn the_pipeline_fuses_an_encoder_layer() {
    let shape = EncoderLayerShape { positions: 7, d_model: 12, heads: 3, ffn: 20 };
    let before = encoder_layer(&shape).unwrap();
    let mut after = before.clone();
    let fired = optimize(&mut after).unwrap();
    assert_eq!(fired, ["fuse_attention", "fuse_matmul_bias"]);
    for seed in 0..3 {
        let (inputs, weights) = (random_inputs(&before, seed), random_weights(&before, seed));
        let (states, scalars) = (HashMap::new(), HashMap::new());
        let want = evaluate(&before, &inputs, &weights, &states, &scalars).unwrap();
        let got = evaluate(&after, &inputs, &weights, &states, &scalars).unwrap();
        for (name, w) in &want.outputs {
            let g = &got.outputs[name];
            assert_eq!(g.ty(), w.ty(), "output {name}");
            for (i, (x, y)) in g.to_f32().iter().zip(w.to_f32()).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-4 * y.abs().max(1.0),
                    "output {name}[{i}]: {x} fused, {y} before (seed {seed})"
                );
            }
        }
    }
    println!("{after}");
    let text = after.to_string();
    let count = |needle: &str| text.matches(needle).count();
    assert_eq!(count("= attention("), 1, "{text}");
    assert_eq!(count("= matmul_bias("), 5, "{text}");
    assert_eq!(count(" gelu :"), 1, "{text}");
    assert_eq!(count("= softmax("), 0, "{text}");
    // Optimising again finds nothing to do.
    let again = after.clone();
    assert!(optimize(&mut after).unwrap().is_empty());
    assert_eq!(after, again);
}
