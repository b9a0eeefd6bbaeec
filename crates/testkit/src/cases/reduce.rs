//! Harness cases of the reduce family: reductions over an axis, argmax, softmax.

use rand::Rng;
use susurrus_core::error::Result;
use susurrus_core::ir::{DType, Graph};
use susurrus_core::ops::*;

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
