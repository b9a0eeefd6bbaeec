//! Susurrus in the browser: the wasm-bindgen API of the npm package "susurrus".
//!
//! Every exported function is a thin wrapper over a plain Rust function, so the logic is
//! tested natively and the wrapper only turns errors into JS `Error`s with the same message.

use susurrus_core::demo::{EncoderLayerShape, encoder_layer};
use susurrus_core::{passes, plan};
use wasm_bindgen::prelude::*;

/// The package version, as built.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// The optimised IR and memory report of a Whisper-tiny-shaped encoder layer, as text.
#[wasm_bindgen(js_name = demoPlan)]
pub fn demo_plan() -> Result<String, JsError> {
    Ok(demo_plan_text()?)
}

/// What [`demo_plan`] returns: build the layer, run the default passes, plan it, render both.
pub fn demo_plan_text() -> susurrus_core::Result<String> {
    let mut graph = encoder_layer(&EncoderLayerShape::WHISPER_TINY)?;
    passes::optimize(&mut graph)?;
    let ir = graph.to_string();
    let plan = plan::plan(graph)?;
    Ok(format!("{ir}\n\n{}\n", plan.report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_plan_is_the_fused_layer_and_its_arena() {
        let text = demo_plan_text().unwrap();
        let (ir, report) = text.split_once("\n\n").unwrap();
        assert!(ir.starts_with("graph encoder_layer {\n  %0 = input \"x\" : f32[1500,384]\n"), "{ir}");
        assert!(ir.contains(" = attention(") && ir.contains(" = matmul_bias("), "{ir}");
        assert!(!ir.contains("softmax("), "attention fusion left a softmax:\n{ir}");
        // The MLP's hidden [1500,1536] f32 with the residual and the fc2 output, two
        // [1500,384] f32, live at once: 13 824 000 B = 13.2 MiB, which the arena reaches.
        assert!(report.starts_with("arena 13.2 MiB (peak live 13.2 MiB, 1.00x;"), "{report}");
        assert_eq!(report.lines().count(), 1, "{report}");
    }

    #[test]
    fn version_is_three_numbers() {
        let version = version();
        let parts: Vec<&str> = version.split('.').collect();
        assert_eq!(parts.len(), 3, "{parts:?}");
        assert!(parts.iter().all(|p| p.parse::<u32>().is_ok()), "{parts:?}");
    }
}
