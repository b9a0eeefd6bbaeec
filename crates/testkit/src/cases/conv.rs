//! Harness cases of the conv family: conv1d.

use rand::Rng;
use susurrus_core::error::Result;
use susurrus_core::ir::{DType, Graph};

use super::*;

/// Harness cases: Whisper's two stem convolutions, then random stride, padding, dilation and kernel
/// size.
pub(crate) fn conv1d(cases: &mut CaseGen) -> Result<()> {
    // (batched, stride, padding, dilation, kernel, bias): Whisper's two stem convolutions,
    // then random settings.
    let mut settings = vec![(false, 1, 1, 1, 3, true), (true, 2, 1, 1, 3, true), (false, 2, 1, 1, 3, true)];
    for _ in 0..2 {
        let (batched, bias) = (cases.coin(), cases.coin());
        let (stride, padding) = (cases.rng.random_range(1..=3), cases.rng.random_range(0..=3));
        let (dilation, k) = (cases.rng.random_range(1..=3), cases.rng.random_range(1..=5));
        settings.push((batched, stride, padding, dilation, k, bias));
    }
    for (i, (batched, stride, padding, dilation, k, bias)) in settings.into_iter().enumerate() {
        // The third case has q8 weights (an int8 model's stem), the fourth f16 weights with
        // f32 activations, the fifth f16 throughout.
        let (x_dtype, w_dtype) = match i {
            2 => (DType::F32, DType::Q8),
            3 => (DType::F32, DType::F16),
            4 => (DType::F16, DType::F16),
            _ => (DType::F32, DType::F32),
        };
        let (c_in, c_out) = (cases.pick(&[1, 3, 7, 17, 33, 80]), cases.pick(&[1, 3, 7, 17, 33, 64]));
        let span: usize = dilation * (k - 1) + 1;
        let len = cases.pick(&ODD).max(span.saturating_sub(2 * padding));
        let mut x_dims = if batched { vec![cases.pick(&[1, 2, 3])] } else { vec![] };
        x_dims.extend([c_in, len]);
        let mut g = Graph::new("conv1d");
        let x = g.input("x", ty(x_dtype, &x_dims))?;
        let w = g.param("w", ty(w_dtype, &[c_out, c_in, k]))?;
        let bias_dtype = if w_dtype == DType::Q8 { DType::F32 } else { w_dtype };
        let b = if bias { Some(g.param("bias", ty(bias_dtype, &[c_out]))?) } else { None };
        let y = g.conv1d(x, w, b, stride, padding, dilation)?;
        g.output("y", y)?;
        let label = format!("conv1d {x_dtype} w {w_dtype} stride={stride} padding={padding} dilation={dilation}");
        cases.push("conv1d", &label, g, accumulate(c_in * k), &[])?;
        cases.f16_products(accumulate_f16(c_in * k));
    }
    Ok(())
}
