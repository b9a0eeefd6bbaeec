//! Element-by-element comparison of a backend's tensor with the reference, under a tolerance.
//!
//! The comparison reports the worst element (largest error relative to what the tolerance
//! allows there), so a failure message points at one index with both values, and the
//! largest absolute error, so summaries show how much headroom a backend has.

use std::fmt;

use susurrus_core::ir::{DType, Shape};
use susurrus_core::tensor::Tensor;

/// How close a backend's value must be to the reference value `want`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// Equal values: data movement, integer arithmetic, comparisons, argmax, max. NaN equals
    /// NaN, and `-0.0` equals `0.0`.
    Exact,
    /// `|got - want| <= abs + rel * |want|`; an infinity must be matched exactly.
    Close { abs: f32, rel: f32 },
}

/// Relative slack for an f16 output: one f16 ulp is at most 2^-10 of the value, and a backend
/// whose f32 result differs from the reference's in the last bits may round to the
/// neighbouring f16. Two ulps leave room for the op's own f32 error on top.
const F16_REL: f32 = 2.0 / 1024.0;

impl Tolerance {
    /// This tolerance for an output stored as `dtype`: f16 outputs get f16 rounding slack on
    /// top of the op's own error; exact stays exact (data movement does not round).
    pub fn for_output(self, dtype: DType) -> Tolerance {
        match (self, dtype) {
            (Tolerance::Close { abs, rel }, DType::F16) => Tolerance::Close { abs: abs + 1e-4, rel: rel + F16_REL },
            (t, _) => t,
        }
    }

    /// The largest error allowed where the reference value is `want`.
    pub fn allowed(self, want: f64) -> f64 {
        match self {
            Tolerance::Exact => 0.0,
            Tolerance::Close { abs, rel } => abs as f64 + rel as f64 * want.abs(),
        }
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tolerance::Exact => f.write_str("exact"),
            Tolerance::Close { abs, rel } => write!(f, "abs {abs:e} + rel {rel:e}"),
        }
    }
}

/// How far a tensor was from the reference.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Diff {
    /// The largest `|got - want|` over all elements (0 for equal tensors; infinite when an
    /// element is NaN or infinite on one side only).
    pub max_abs: f64,
    /// The largest error divided by what the tolerance allows there: at most 1 passes. For an
    /// exact tolerance it is 0 or infinite.
    pub worst_ratio: f64,
}

impl Diff {
    /// The larger of two diffs, element by element.
    pub fn max(self, other: Diff) -> Diff {
        Diff { max_abs: self.max_abs.max(other.max_abs), worst_ratio: self.worst_ratio.max(other.worst_ratio) }
    }
}

/// Compares `got` with `want` under `tol` (adjusted for the output dtype with
/// [`Tolerance::for_output`]). `what` names the tensor in the failure message, which gives the
/// worst element's flat and multi-dimensional index, both values, the error and the allowance.
pub fn compare(what: &str, got: &Tensor, want: &Tensor, tol: Tolerance) -> Result<Diff, String> {
    if got.ty() != want.ty() {
        return Err(format!("{what}: got a {} tensor, want {}", got.ty(), want.ty()));
    }
    let tol = tol.for_output(want.dtype());
    let (g, w) = values(got, want);
    let mut diff = Diff::default();
    let mut worst: Option<(usize, f64)> = None;
    let mut bad = 0usize;
    for (i, (&gv, &wv)) in g.iter().zip(&w).enumerate() {
        let (err, ratio) = element_error(gv, wv, tol);
        diff.max_abs = diff.max_abs.max(err);
        if ratio > 1.0 {
            bad += 1;
        }
        if worst.is_none_or(|(_, r)| ratio > r) {
            worst = Some((i, ratio));
        }
    }
    let Some((i, ratio)) = worst else { return Ok(diff) };
    diff.worst_ratio = ratio;
    if ratio <= 1.0 {
        return Ok(diff);
    }
    let show = |v: f64| if want.dtype().is_float() { format!("{}", v as f32) } else { format!("{v}") };
    Err(format!(
        "{what}: {bad} of {} elements out of tolerance ({tol}); worst is element {i} at {:?}: got {}, want {}, \
         |diff| {} > allowed {}",
        g.len(),
        unflatten(i, want.shape()),
        show(g[i]),
        show(w[i]),
        show((g[i] - w[i]).abs()),
        show(tol.allowed(w[i])),
    ))
}

/// Both tensors' values as f64: exact for every dtype (integers are at most 32 bits).
fn values(got: &Tensor, want: &Tensor) -> (Vec<f64>, Vec<f64>) {
    if want.dtype().is_float() {
        let widen = |t: &Tensor| t.to_f32().into_iter().map(f64::from).collect();
        (widen(got), widen(want))
    } else {
        let widen = |t: &Tensor| t.to_i64().into_iter().map(|v| v as f64).collect();
        (widen(got), widen(want))
    }
}

/// The absolute error of one element and its ratio to the allowance.
fn element_error(got: f64, want: f64, tol: Tolerance) -> (f64, f64) {
    if got == want || (got.is_nan() && want.is_nan()) {
        return (0.0, 0.0);
    }
    let err = (got - want).abs();
    if !err.is_finite() {
        return (f64::INFINITY, f64::INFINITY);
    }
    let allowed = tol.allowed(want);
    let ratio = if allowed > 0.0 { err / allowed } else { f64::INFINITY };
    (err, ratio)
}

/// The row-major multi-dimensional index of flat element `i`.
fn unflatten(i: usize, shape: &Shape) -> Vec<usize> {
    shape.strides().iter().zip(shape.dims()).map(|(&s, &d)| i / s % d).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::f32(shape, v.to_vec()).unwrap()
    }

    #[test]
    fn close_tolerance_boundary_and_worst_element() {
        let tol = Tolerance::Close { abs: 0.25, rel: 0.5 };
        let want = f32s(&[2, 2], &[1.0, -2.0, 0.0, 4.0]);
        // Allowed: 0.75, 1.25, 0.25, 2.25. Errors: 0.75 (ratio 1), 1.0 (0.8), 0, 0.
        let ok = f32s(&[2, 2], &[1.75, -1.0, 0.0, 4.0]);
        let d = compare("y", &ok, &want, tol).unwrap();
        assert_eq!(d, Diff { max_abs: 1.0, worst_ratio: 1.0 });
        // Element [1,0] errs by 0.5 against an allowance of 0.25: ratio 2, the worst.
        let bad = f32s(&[2, 2], &[1.75, -1.0, 0.5, 4.0]);
        assert_eq!(
            compare("y", &bad, &want, tol).unwrap_err(),
            "y: 1 of 4 elements out of tolerance (abs 2.5e-1 + rel 5e-1); worst is element 2 at [1, 0]: \
             got 0.5, want 0, |diff| 0.5 > allowed 0.25"
        );
    }

    #[test]
    fn exact_integers_nan_and_infinity() {
        let want = Tensor::u32([3], vec![1, 2, 3]).unwrap();
        assert_eq!(compare("m", &want, &want, Tolerance::Exact).unwrap(), Diff::default());
        let got = Tensor::u32([3], vec![1, 2, 4]).unwrap();
        assert_eq!(
            compare("m", &got, &want, Tolerance::Exact).unwrap_err(),
            "m: 1 of 3 elements out of tolerance (exact); worst is element 2 at [2]: got 4, want 3, |diff| 1 > \
             allowed 0"
        );
        let tol = Tolerance::Close { abs: 1.0, rel: 1.0 };
        let special = f32s(&[3], &[f32::NAN, f32::NEG_INFINITY, 1.0]);
        assert!(compare("s", &special, &special, tol).is_ok());
        let nan_for_one = f32s(&[3], &[f32::NAN, f32::NEG_INFINITY, f32::NAN]);
        assert!(compare("s", &nan_for_one, &special, tol).unwrap_err().contains("element 2 at [2]: got NaN, want 1"));
        let finite_for_inf = f32s(&[3], &[f32::NAN, -1e30, 1.0]);
        assert!(compare("s", &finite_for_inf, &special, tol).is_err());
    }

    #[test]
    fn type_mismatch_and_f16_slack() {
        let a = f32s(&[2], &[1.0, 2.0]);
        let b = f32s(&[1, 2], &[1.0, 2.0]);
        assert_eq!(compare("y", &a, &b, Tolerance::Exact).unwrap_err(), "y: got a f32[2] tensor, want f32[1,2]");
        // 1000 and its f16 neighbour 1000.5 differ by one ulp: too far for a tight f32
        // tolerance, within the f16 slack.
        let tight = Tolerance::Close { abs: 1e-6, rel: 1e-6 };
        let want = Tensor::from_f32(DType::F16, [1], vec![1000.0]).unwrap();
        let got = Tensor::from_f32(DType::F16, [1], vec![1000.5]).unwrap();
        assert!(compare("h", &got, &want, tight).is_ok());
        assert!(compare("y", &f32s(&[1], &[1000.5]), &f32s(&[1], &[1000.0]), tight).is_err());
        assert_eq!(Tolerance::Exact.for_output(DType::F16), Tolerance::Exact);
    }
}
