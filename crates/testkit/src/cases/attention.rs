//! Harness cases of the attention family: fused attention.

use rand::Rng;
use susurrus_core::error::Result;
use susurrus_core::ir::{DType, Graph};
use susurrus_core::ops::*;
use susurrus_core::tensor::Tensor;

use super::*;
use crate::compare::Tolerance;

/// Harness cases: every mask kind in f32, causal and additive in f16, and one Whisper-sized head.
pub(crate) fn attention(cases: &mut CaseGen) -> Result<()> {
    // (mask, dtype, large): every mask kind in f32, then f16, then one Whisper-sized head.
    let settings = [
        (MaskKind::None, DType::F32, false),
        (MaskKind::Additive, DType::F32, false),
        (MaskKind::Causal, DType::F32, false),
        (MaskKind::Causal, DType::F16, false),
        (MaskKind::Additive, DType::F16, false),
        (MaskKind::None, DType::F32, true),
    ];
    for (mask, dtype, large) in settings {
        attention_case(cases, mask, dtype, large)?;
    }
    // Decoder steps: one query over a cache (the one-query kernel), with Whisper's cache and
    // audio lengths.
    // (mask, dtype, heads, sk, a mask per head: a group step's rows of several sequences).
    let decode = [
        (MaskKind::Additive, DType::F32, 2, 448, false),
        (MaskKind::Additive, DType::F32, 3, 448, true),
        (MaskKind::None, DType::F16, 1, 1500, false),
        (MaskKind::Causal, DType::F32, 6, 65, false),
    ];
    for (mask, dtype, heads, sk, per_head) in decode {
        decode_case(cases, mask, dtype, heads, sk, per_head)?;
    }
    Ok(())
}

/// One query per head over `sk` keys, heads of 64 (within the harness's tensor budget); an
/// additive mask `[1, sk]` for every head, or `[heads, 1, sk]` with `per_head`.
fn decode_case(
    cases: &mut CaseGen,
    mask: MaskKind,
    dtype: DType,
    heads: usize,
    sk: usize,
    per_head: bool,
) -> Result<()> {
    let mut g = Graph::new("attention");
    let q = g.input("q", ty(dtype, &[heads, 1, 64]))?;
    let k = g.input("k", ty(dtype, &[heads, sk, 64]))?;
    let v = g.input("v", ty(dtype, &[heads, sk, 64]))?;
    let mut inputs = vec![q, k, v];
    let mask_dims: &[usize] = if per_head { &[heads, 1, sk] } else { &[1, sk] };
    if mask == MaskKind::Additive {
        inputs.push(g.input("mask", ty(dtype, mask_dims))?);
    }
    let y = g.push(Attention { scale: 0.125, mask }, &inputs)?;
    g.output("y", y)?;
    let (mut run, weights) = cases.run(&g, &[], &[])?;
    if mask == MaskKind::Additive {
        let rows = if per_head { heads } else { 1 };
        let values = random_mask(cases, dtype, rows, sk)?.to_f32();
        run.inputs.insert("mask".into(), Tensor::from_f32(dtype, mask_dims, values)?);
    }
    let tol = Tolerance::Close { abs: 1e-6 * (64 + sk) as f32 + 1e-5, rel: 1e-4 };
    let per = if per_head { " per head" } else { "" };
    cases.push_runs(
        "attention",
        &format!("attention {dtype} decode sk={sk} mask={mask:?}{per}"),
        g,
        tol,
        weights,
        vec![run],
    );
    Ok(())
}

/// One case of the general kernel's shapes.
fn attention_case(cases: &mut CaseGen, mask: MaskKind, dtype: DType, large: bool) -> Result<()> {
    {
        let lead = if large {
            vec![4]
        } else if cases.coin() {
            vec![cases.pick(&[1, 2]), cases.pick(&[1, 3])]
        } else {
            vec![cases.pick(&[1, 2, 6])]
        };
        let (d, dv) = if large { (64, 64) } else { (cases.pick(&[1, 8, 17, 33, 64]), cases.pick(&[1, 7, 33, 64])) };
        let sk = if large { 127 } else { cases.pick(&ODD[..6]) };
        // Causal attention runs both as a decode step (few queries behind a cache) and
        // as a full square.
        let sq = match mask {
            MaskKind::Causal if cases.coin() => sk,
            MaskKind::Causal => cases.rng.random_range(1..=sk.min(7)),
            _ if large => sk,
            _ => cases.pick(&ODD[..6]),
        };
        let dims = |s: usize, last: usize| {
            let mut v = lead.clone();
            v.extend([s, last]);
            v
        };
        let mut g = Graph::new("attention");
        let q = g.input("q", ty(dtype, &dims(sq, d)))?;
        let k = g.input("k", ty(dtype, &dims(sk, d)))?;
        let v = g.input("v", ty(dtype, &dims(sk, dv)))?;
        let mut inputs = vec![q, k, v];
        // The additive mask is [Sq, Sk], broadcast over the leading dims.
        if mask == MaskKind::Additive {
            inputs.push(g.input("mask", ty(dtype, &[sq, sk]))?);
        }
        let y = g.push(Attention { scale: 1.0 / (d as f32).sqrt(), mask }, &inputs)?;
        g.output("y", y)?;
        let (mut run, weights) = cases.run(&g, &[], &[])?;
        if mask == MaskKind::Additive {
            run.inputs.insert("mask".into(), random_mask(cases, dtype, sq, sk)?);
        }
        // Scores sum D products, the output sums Sk weighted values.
        let tol = Tolerance::Close { abs: 1e-6 * (d + sk) as f32 + 1e-5, rel: 1e-4 };
        let mask_name = match mask {
            MaskKind::None => "none",
            MaskKind::Additive => "additive",
            MaskKind::Causal => "causal",
        };
        let label = format!("attention {dtype} mask={mask_name}{}", if large { " large" } else { "" });
        cases.push_runs("attention", &label, g, tol, weights, vec![run]);
        cases.f16_products(f16_products(d, 1.0 / (d as f32).sqrt()));
    }
    Ok(())
}

/// The tolerance on a backend whose products round their inputs to f16: scores (sums of `d`
/// products) off by up to [`accumulate_f16`] times the scale, which moves the weights by about
/// that fraction; the output, a weighted mean of values up to 4, by 4 times that plus the
/// values' and weights' own f16 rounding.
fn f16_products(d: usize, scale: f32) -> Tolerance {
    let score = match accumulate_f16(d) {
        Tolerance::Close { abs, .. } => abs * scale,
        Tolerance::Exact => 0.0,
    };
    Tolerance::Close { abs: 4.0 * (score + 2e-3) + 1e-3, rel: 2e-3 }
}

/// An additive mask `[Sq, Sk]` as decoders use it: finite values with about a quarter of
/// the keys at -inf, never key 0, so every row keeps a key to attend to.
fn random_mask(cases: &mut CaseGen, dtype: DType, sq: usize, sk: usize) -> Result<Tensor> {
    let values = (0..sq * sk)
        .map(|i| {
            if i % sk != 0 && cases.rng.random_bool(0.25) {
                f32::NEG_INFINITY
            } else {
                cases.rng.random_range(-2.0..2.0)
            }
        })
        .collect();
    Tensor::from_f32(dtype, [sq, sk], values)
}
