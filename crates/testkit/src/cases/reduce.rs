//! Harness cases of the reduce family: reductions over an axis, argmax, top_k, softmax.

use rand::Rng;
use susurrus_core::error::Result;
use susurrus_core::ir::{DType, Graph};
use susurrus_core::ops::*;
use susurrus_core::tensor::Tensor;

use super::*;
use crate::compare::Tolerance;
use crate::random::Dist;

/// Harness cases: every kind in f32 and f16 along a random axis, with and without `keep_dim`.
pub(crate) fn reduce(cases: &mut CaseGen) -> Result<()> {
    for kind in ReduceKind::ALL {
        for dtype in [DType::F32, DType::F16] {
            let rank = cases.rng.random_range(1..=3);
            let dims = cases.shape(rank, BUDGET);
            let axis = cases.rng.random_range(0..rank);
            let keep_dim = cases.coin();
            let mut g = Graph::new(kind.name());
            let x = g.input("x", ty(dtype, &dims))?;
            let y = g.reduce(kind, x, axis, keep_dim)?;
            g.output("y", y)?;
            let tol = if kind == ReduceKind::Max { Tolerance::Exact } else { accumulate(dims[axis]) };
            let label = format!("{} {dtype} axis={axis} keep_dim={keep_dim}", kind.name());
            cases.push(kind.name(), &label, g, tol, &[])?;
        }
    }
    Ok(())
}

/// Harness cases: f32, f16, and f32 with many ties, along a random axis.
pub(crate) fn argmax(cases: &mut CaseGen) -> Result<()> {
    let ties = Dist::Ints { lo: 0, hi: 3 };
    for (dtype, dist) in [(DType::F32, None), (DType::F16, None), (DType::F32, Some(ties))] {
        let rank = cases.rng.random_range(1..=3);
        let dims = cases.shape(rank, BUDGET);
        let axis = cases.rng.random_range(0..rank);
        let mut g = Graph::new("argmax");
        let x = g.input("x", ty(dtype, &dims))?;
        let y = g.argmax(x, axis)?;
        g.output("y", y)?;
        let dists: Vec<_> = dist.map(|d| ("x", d)).into_iter().collect();
        let ties = if dist.is_some() { " ties" } else { "" };
        cases.push("argmax", &format!("argmax {dtype} axis={axis}{ties}"), g, Tolerance::Exact, &dists)?;
    }
    Ok(())
}

/// The largest k of the top_k cases: the GPU backends' lowerings take k up to 64.
const TOP_K_MOST: usize = 64;

/// Harness cases: top_k over random shapes (leading axes are rows) of every dtype, k from 1
/// to the row length, with and without ties; integers beyond what f32 tells apart; long rows,
/// which GPU backends select in splits and merge (a decoder step's scores, and a row whose
/// last split is shorter than k); NaN, infinities and signed zeros.
pub(crate) fn top_k(cases: &mut CaseGen) -> Result<()> {
    use DType::{F16, F32, I32, U32};
    let ties = Dist::Ints { lo: 0, hi: 3 };
    let signed = Dist::Ints { lo: i32::MIN as i64, hi: i32::MAX as i64 + 1 };
    // u32 values near 2^32: neighbours collide in f32.
    let high = Dist::Ints { lo: (1 << 32) - 64, hi: 1 << 32 };
    let draws =
        [(F32, None), (F16, None), (F32, Some(ties)), (F16, Some(ties)), (I32, Some(signed)), (U32, Some(high))];
    for (dtype, dist) in draws {
        let rank = cases.rng.random_range(1..=3);
        let mut dims = cases.shape(rank - 1, BUDGET / 128);
        let n = cases.pick(&SIZES);
        dims.push(n);
        let k = cases.pick(&[1, 2, 5, 10, n]).min(n).min(TOP_K_MOST);
        top_k_case(cases, &dims, dtype, k, dist)?;
    }
    let ints = Dist::Ints { lo: -3, hi: 3 };
    let long = [
        ([1, 51864], 10, F32, None),
        ([1, 51864], 32, F16, None),
        ([2, 4099], 10, F32, None),
        ([3, LONG_ROW], 10, F32, Some(ties)),
        ([2, LONG_ROW], TOP_K_MOST, I32, Some(ints)),
        ([1, 9000], 7, U32, Some(high)),
    ];
    for (dims, k, dtype, dist) in long {
        top_k_case(cases, &dims, dtype, k, dist)?;
    }
    // Half the values special, all of them in order; then one in 64 of long rows.
    top_k_specials(cases, &[3, 33], 33, Dist::Ints { lo: 0, hi: 2 })?;
    top_k_specials(cases, &[2, 5000], 20, Dist::Ints { lo: 0, hi: 64 })
}

/// One top_k case of an input `x` of `dims` and `dtype` (values from `dist`, or the dtype's
/// default).
fn top_k_case(cases: &mut CaseGen, dims: &[usize], dtype: DType, k: usize, dist: Option<Dist>) -> Result<()> {
    let mut g = Graph::new("top_k");
    let x = g.input("x", ty(dtype, dims))?;
    let y = g.top_k(x, k)?;
    g.output("y", y)?;
    let dists: Vec<_> = dist.map(|d| ("x", d)).into_iter().collect();
    let values = match dist {
        Some(Dist::Ints { lo, hi }) => format!(" ints {lo}..{hi}"),
        _ => String::new(),
    };
    cases.push("top_k", &format!("top_k {dtype} k={k}{values}"), g, Tolerance::Exact, &dists)
}

/// A top_k case over rows of small whole numbers and, where a mask drawn from `mask` is 0,
/// specials: NaN (5% of them), +inf (10%), -inf, +0 and -0, from a weight (copied exactly: no
/// arithmetic touches them; a weight rather than a constant, so the graph holds no NaN and
/// equals itself). Zeros of both signs tie; NaN is rare enough for infinities and numbers to
/// be picked too.
fn top_k_specials(cases: &mut CaseGen, dims: &[usize], k: usize, mask: Dist) -> Result<()> {
    let n = dims[dims.len() - 1];
    let specials: Vec<f32> = (0..n)
        .map(|_| match cases.rng.random_range(0..100) {
            0..5 => f32::NAN,
            5..15 => f32::INFINITY,
            15..50 => f32::NEG_INFINITY,
            50..75 => 0.0,
            _ => -0.0,
        })
        .collect();
    let mut g = Graph::new("top_k");
    let keep = g.input("mask", ty(DType::U32, dims))?;
    let x = g.input("x", ty(DType::F32, dims))?;
    let special = g.param("specials", ty(DType::F32, &[n]))?;
    let picked = g.select(keep, x, special)?;
    let y = g.top_k(picked, k)?;
    g.output("y", y)?;
    let (run, mut weights) = cases.run(&g, &[("mask", mask), ("x", Dist::Ints { lo: -2, hi: 3 })], &[])?;
    weights.insert("specials".into(), Tensor::f32([n], specials)?);
    let label = format!("top_k f32 k={k} nan inf zeros");
    cases.push_runs("top_k", &label, g, Tolerance::Exact, weights, vec![run]);
    Ok(())
}

/// Harness cases: f32, f16, and f32 over a range that overflows `exp` unless the row maximum is
/// subtracted.
pub(crate) fn softmax(cases: &mut CaseGen) -> Result<()> {
    // The wide range overflows exp unless the row maximum is subtracted first.
    let wide = Dist::Uniform { lo: -100.0, hi: 100.0 };
    for (dtype, dist) in [(DType::F32, None), (DType::F16, None), (DType::F32, Some(wide))] {
        let rank = cases.rng.random_range(1..=3);
        let mut dims = cases.shape(rank - 1, BUDGET / 128);
        dims.push(cases.pick(&ODD));
        let mut g = Graph::new("softmax");
        let x = g.input("x", ty(dtype, &dims))?;
        let y = g.softmax(x)?;
        g.output("y", y)?;
        let dists: Vec<_> = dist.map(|d| ("x", d)).into_iter().collect();
        let label = if dist.is_some() { format!("softmax {dtype} wide") } else { format!("softmax {dtype}") };
        cases.push("softmax", &label, g, SOFTMAX, &dists)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_cases_cover_every_kind() {
        let mut cases = CaseGen::new(0);
        reduce(&mut cases).unwrap();
        let cases = cases.into_cases();
        for kind in ReduceKind::ALL {
            assert_eq!(cases.iter().filter(|c| c.op == kind.name()).count(), 2, "{}", kind.name());
        }
    }
}
