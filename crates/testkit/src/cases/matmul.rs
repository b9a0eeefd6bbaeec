//! Harness cases of the matmul family: matmul, matmul + bias (+ GELU).

use susurrus_core::error::Result;
use susurrus_core::ir::{DType, Graph};
use susurrus_core::ops::*;

use super::*;

/// Harness cases: plain and `transpose_b`, inputs and weights, broadcast batches, f16 weights and
/// data, and one product larger than a workgroup tile in every direction.
pub(crate) fn matmul(cases: &mut CaseGen) -> Result<()> {
    let ms = [1, 3, 7, 16, 17, 33, 64];
    let ks = [1, 3, 16, 17, 33, 64, 65, 127];
    let ns = [1, 3, 7, 17, 33, 64, 65];
    let (m, k, n) = (cases.pick(&ms), cases.pick(&ks), cases.pick(&ns));
    case(cases, "f32", &[m, k], &[k, n], DType::F32, DType::F32, false, false)?;
    let (m, k, n) = (cases.pick(&ms), cases.pick(&ks), cases.pick(&ns));
    case(cases, "f32 weight", &[m, k], &[n, k], DType::F32, DType::F32, true, true)?;
    // Batch dimensions broadcast both ways: [B1,1,M,K] x [B2,K,N] -> [B1,B2,M,N].
    let (b1, b2) = (cases.pick(&[1, 2, 3]), cases.pick(&[2, 3]));
    let (m, k, n) = (cases.pick(&ms), cases.pick(&ks), cases.pick(&ns));
    case(cases, "f32 broadcast batch", &[b1, 1, m, k], &[b2, k, n], DType::F32, DType::F32, false, false)?;
    // A 2-D weight serving every batch, stored f16 like the model's linear layers.
    let (b, m, k, n) = (cases.pick(&[2, 3, 5]), cases.pick(&ms), cases.pick(&ks), cases.pick(&ns));
    case(cases, "f16 weight", &[b, m, k], &[n, k], DType::F32, DType::F16, true, true)?;
    let (b, m, k, n) = (cases.pick(&[1, 3]), cases.pick(&ms), cases.pick(&ks), cases.pick(&ns));
    case(cases, "f16", &[b, m, k], &[b, k, n], DType::F16, DType::F16, false, false)?;
    // int8 weights (q8: one scale per output row), as a linear layer of an int8 model: a few
    // rows (a decoder step) and many.
    let (m, k, n) = (cases.pick(&[1, 2, 5, 8]), cases.pick(&[8, 16, 17, 64, 65]), cases.pick(&ns));
    case(cases, "q8 weight, few rows", &[m, k], &[n, k], DType::F32, DType::Q8, true, true)?;
    let (b, m, k, n) = (cases.pick(&[1, 3]), cases.pick(&ms), cases.pick(&ks), cases.pick(&ns));
    case(cases, "q8 weight", &[b, m, k], &[n, k], DType::F32, DType::Q8, true, true)?;
    // A beam search's step: 2 to 8 rows over a K long enough (at least 256) that GPUs give them
    // the matrix-vector kernel, each weight read serving every row; K not always a multiple of
    // the four consecutive k a lane reads.
    let beam = |cases: &mut CaseGen| (cases.pick(&[2, 5, 8]), cases.pick(&[256, 259, 385]), cases.pick(&[7, 33, 65]));
    let (m, k, n) = beam(cases);
    case(cases, "f16 weight, beam rows", &[m, k], &[n, k], DType::F32, DType::F16, true, true)?;
    let (m, k, n) = beam(cases);
    case(cases, "q8 weight, beam rows", &[m, k], &[n, k], DType::F32, DType::Q8, true, true)?;
    let (m, k, n) = beam(cases);
    case(cases, "f32, beam rows", &[m, k], &[k, n], DType::F32, DType::F32, false, false)?;
    // One larger product, to exercise tiling past one workgroup in every direction.
    let (m, k, n) = (cases.pick(&[64, 127]), cases.pick(&[256, 384]), cases.pick(&[129, 255]));
    case(cases, "f32 large", &[m, k], &[n, k], DType::F32, DType::F32, true, true)
}

/// Harness cases: every combination of `transpose_b` and GELU, with f32 and f16 weights.
pub(crate) fn matmul_bias(cases: &mut CaseGen) -> Result<()> {
    for (i, (transpose_b, gelu)) in [(true, false), (true, true), (false, true), (false, false)].into_iter().enumerate()
    {
        let w_dtype = if i % 2 == 1 { DType::F16 } else { DType::F32 };
        // A residual block's last layer: the residual stream added after the activation.
        let residual = i == 1 || i == 2;
        let (m, k, n) =
            (cases.pick(&[1, 3, 16, 17, 33]), cases.pick(&[3, 17, 64, 65, 127]), cases.pick(&[1, 7, 33, 64, 65]));
        let a_dims = if cases.coin() { vec![cases.pick(&[2, 3]), m, k] } else { vec![m, k] };
        let b_dims = if transpose_b { [n, k] } else { [k, n] };
        let mut g = Graph::new("matmul_bias");
        let a = g.input("a", ty(DType::F32, &a_dims))?;
        let b = g.param("w", ty(w_dtype, &b_dims))?;
        let bias = g.param("bias", ty(w_dtype, &[n]))?;
        let mut inputs = vec![a, b, bias];
        if residual {
            let mut r_dims = a_dims.clone();
            *r_dims.last_mut().expect("a has rank 2 or 3") = n;
            inputs.push(g.input("r", ty(DType::F32, &r_dims))?);
        }
        let y = g.push(MatMulBias { transpose_b, gelu, residual }, &inputs)?;
        g.output("y", y)?;
        let mut label = format!("matmul_bias w {w_dtype}");
        if transpose_b {
            label += " transpose_b";
        }
        if gelu {
            label += " gelu";
        }
        if residual {
            label += " residual";
        }
        cases.push("matmul_bias", &label, g, accumulate(k), &[])?;
        cases.f16_products(accumulate_f16(k));
    }
    // An int8 model's linear layer: q8 weight, f32 bias, GELU, few rows and many.
    // The second also with a residual.
    for (m, residual) in [(cases.pick(&[1, 3, 8]), false), (cases.pick(&[9, 17, 33]), true)] {
        let (k, n) = (cases.pick(&[8, 16, 17, 64, 65]), cases.pick(&[1, 7, 33, 64, 65]));
        let mut g = Graph::new("matmul_bias");
        let a = g.input("a", ty(DType::F32, &[m, k]))?;
        let b = g.param("w", ty(DType::Q8, &[n, k]))?;
        let bias = g.param("bias", ty(DType::F32, &[n]))?;
        let mut inputs = vec![a, b, bias];
        if residual {
            inputs.push(g.input("r", ty(DType::F32, &[m, n]))?);
        }
        let y = g.push(MatMulBias { transpose_b: true, gelu: true, residual }, &inputs)?;
        g.output("y", y)?;
        let label = format!("matmul_bias w q8 transpose_b gelu{}, {m} rows", if residual { " residual" } else { "" });
        cases.push("matmul_bias", &label, g, accumulate(k), &[])?;
        cases.f16_products(accumulate_f16(k));
    }
    Ok(())
}

/// One matmul case: `a [a_batch.., M, K]` input, `b` an input or a weight.
#[allow(clippy::too_many_arguments)]
fn case(
    cases: &mut CaseGen,
    label: &str,
    a_dims: &[usize],
    b_dims: &[usize],
    a_dtype: DType,
    b_dtype: DType,
    b_is_weight: bool,
    transpose_b: bool,
) -> Result<()> {
    let k = a_dims[a_dims.len() - 1];
    let mut g = Graph::new("matmul");
    let a = g.input("a", ty(a_dtype, a_dims))?;
    let b = if b_is_weight { g.param("b", ty(b_dtype, b_dims))? } else { g.input("b", ty(b_dtype, b_dims))? };
    let y = if transpose_b { g.matmul_t(a, b)? } else { g.matmul(a, b)? };
    g.output("y", y)?;
    let label = if transpose_b { format!("matmul {label} transpose_b") } else { format!("matmul {label}") };
    cases.push("matmul", &label, g, accumulate(k), &[])?;
    cases.f16_products(accumulate_f16(k));
    Ok(())
}
