//! Running one case on a backend and comparing it with the reference interpreter.
//!
//! The reference is [`ir::evaluate`] on the graph as built: it keeps every value, shares no
//! storage and uses only the ops' CPU references. The backend side goes the way a real
//! caller does: [`plan::plan`], [`Backend::compile`], [`Executable::run`] for every run of the
//! case, then [`Executable::read_state`] for every persistent buffer the graph writes. Any
//! error on the backend side (an op it does not support included) fails the case: nothing
//! is skipped.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use super::cases::OpCase;
use super::compare::{Diff, compare};
use susurrus_core::exec::{Backend, Executable};
use susurrus_core::ir;
use susurrus_core::plan;

/// The outcome of one case on one backend.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseReport {
    pub case: String,
    pub op: &'static str,
    pub backend: &'static str,
    /// The largest errors seen over every checked tensor (up to the first failure).
    pub diff: Diff,
    /// What went wrong, or `None` when every output and state was within tolerance.
    pub failure: Option<String>,
}

impl CaseReport {
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

impl fmt::Display for CaseReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.failure {
            None => write!(f, "[{}] {}: ok (max |diff| {:e})", self.backend, self.case, self.diff.max_abs),
            Some(msg) => write!(f, "[{}] {}: FAILED: {msg}", self.backend, self.case),
        }
    }
}

/// A table of reports by op: cases, failures, the largest absolute error and the largest error
/// relative to the tolerance (1 is at the limit), one line per op in name order. Every
/// backend's test prints it, so runs on different backends compare at a glance.
pub fn summary_table(reports: &[CaseReport]) -> String {
    let mut by_op: BTreeMap<&str, (usize, usize, f64, f64)> = BTreeMap::new();
    for r in reports {
        let row = by_op.entry(r.op).or_default();
        row.0 += 1;
        row.1 += usize::from(!r.passed());
        row.2 = row.2.max(r.diff.max_abs);
        row.3 = row.3.max(r.diff.worst_ratio);
    }
    let mut out = format!("{:<18} {:>5} {:>6} {:>12} {:>12}\n", "op", "cases", "failed", "max |diff|", "diff/allowed");
    for (op, (cases, failed, max_abs, ratio)) in by_op {
        out += &format!("{op:<18} {cases:>5} {failed:>6} {max_abs:>12.3e} {ratio:>12.3}\n");
    }
    out
}

/// Runs `case` on `backend` and compares every output of every run, and every persistent
/// buffer the graph writes after each run, with the reference. Async because browser
/// readback is; native callers use [`check_backend`].
pub async fn check_backend_async(backend: &dyn Backend, case: &OpCase) -> CaseReport {
    let mut diff = Diff::default();
    let failure = run_case(backend, case, &mut diff).await.err();
    CaseReport { case: case.name.clone(), op: case.op, backend: backend.name(), diff, failure }
}

/// [`check_backend_async`], blocking until it completes.
#[cfg(not(target_arch = "wasm32"))]
pub fn check_backend(backend: &dyn Backend, case: &OpCase) -> CaseReport {
    pollster::block_on(check_backend_async(backend, case))
}

async fn run_case(backend: &dyn Backend, case: &OpCase, diff: &mut Diff) -> Result<(), String> {
    let graph = &case.graph;
    let plan = plan::plan(graph.clone()).map_err(|e| format!("planning failed: {e}"))?;
    let mut exe: Box<dyn Executable> =
        backend.compile(&plan, &case.weights).await.map_err(|e| format!("compile failed: {e}"))?;
    let outputs: Vec<&str> = graph.outputs().iter().map(|(name, _)| name.as_str()).collect();
    let tolerance = match case.f16_products {
        Some(tol) if backend.f16_products() => tol,
        _ => case.tolerance,
    };
    let mut states = HashMap::new();
    for (r, run) in case.runs.iter().enumerate() {
        let want = ir::evaluate(graph, &run.inputs, &case.weights, &states, &run.scalars)
            .map_err(|e| format!("run {r}: the reference failed: {e}"))?;
        let got = exe.run(&run.inputs, &run.scalars, &outputs).await.map_err(|e| format!("run {r} failed: {e}"))?;
        for &name in &outputs {
            let t = got.get(name).ok_or_else(|| format!("run {r}: output '{name}' was not returned"))?;
            *diff = diff.max(compare(&format!("run {r} output '{name}'"), t, &want.outputs[name], tolerance)?);
        }
        let mut written: Vec<&String> = want.states.keys().collect();
        written.sort();
        for name in written {
            let t = exe.read_state(name).await.map_err(|e| format!("run {r}: reading state '{name}' failed: {e}"))?;
            *diff = diff.max(compare(&format!("run {r} state '{name}'"), &t, &want.states[name], tolerance)?);
        }
        states.extend(want.states);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(op: &'static str, max_abs: f64, worst_ratio: f64, failure: Option<&str>) -> CaseReport {
        CaseReport {
            case: format!("{op} case"),
            op,
            backend: "test",
            diff: Diff { max_abs, worst_ratio },
            failure: failure.map(String::from),
        }
    }

    #[test]
    fn summary_groups_by_op_and_keeps_the_maxima() {
        let reports = [
            report("matmul", 1e-5, 0.25, None),
            report("add", 0.0, 0.0, None),
            report("matmul", 2e-6, 0.5, Some("run 0 failed")),
        ];
        assert_eq!(
            summary_table(&reports),
            "op                 cases failed   max |diff| diff/allowed\n\
             add                    1      0      0.000e0        0.000\n\
             matmul                 2      1     1.000e-5        0.500\n"
        );
        assert_eq!(reports[2].to_string(), "[test] matmul case: FAILED: run 0 failed");
        assert_eq!(reports[1].to_string(), "[test] add case: ok (max |diff| 0e0)");
    }
}
