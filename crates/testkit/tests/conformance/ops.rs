//! The op harness on every backend of this build: every op case of several seeds must match
//! the reference interpreter. Also checks that the cases cover every registered op and that
//! the harness does fail a backend that computes something wrong.

use std::collections::{HashMap, HashSet};

use susurrus_core::exec::cpu::CpuBackend;
use susurrus_core::exec::{Backend, BlockingBackend, Executable, Weights, Wrap, Wrapped};
use susurrus_core::ops::{BinaryKind, CmpKind, Op, OpTag, ReduceKind, UnaryKind};
use susurrus_core::plan::Plan;
use susurrus_core::{DType, Error, Result, Tensor};
use susurrus_testkit::backends;
use susurrus_testkit::{CaseReport, OpCase, Tolerance, check_backend, op_cases, summary_table};
use susurrus_wgpu::WgpuOptions;

const SEEDS: [u64; 4] = [0, 1, 2, 3];

/// Every backend of this build that runs without a GPU of its kind (CUDA runs the same cases in
/// its GPU suite, `crates/cuda/tests/gpu.rs`); a new backend adds one line. wgpu runs twice:
/// with the adapter's `shader-f16` and subgroups (when it has them) and on the f32 path every
/// adapter has (no subgroups, as in a browser). On a CPU adapter (CI's lavapipe) those runs
/// use the CPU kernel variants, so two more runs force the GPU kernels (`force_gpu_kernels`)
/// to keep them tested there too, with the lane folds on subgroups and in workgroup memory.
/// On a GPU with matrix units (the GPU suite), the `shader-f16` run uses them and one more
/// run keeps the f16 kernels without them tested.
fn backends() -> Vec<Box<dyn Backend>> {
    let wgpu = |allow_f16, allow_matrix_units, allow_subgroups, force_gpu_kernels| {
        let options =
            WgpuOptions { allow_f16, allow_matrix_units, allow_subgroups, force_gpu_kernels, ..WgpuOptions::default() };
        backends::wgpu_with(&options)
    };
    let f32_path = wgpu(false, false, false, false);
    let cpu_adapter = f32_path.cpu_kernels();
    let f16_path = wgpu(true, true, true, false);
    let matrix_units = f16_path.has_matrix_units();
    let mut all: Vec<Box<dyn Backend>> =
        vec![backends::reference(), backends::fast_cpu(), Box::new(f16_path), Box::new(f32_path)];
    if cpu_adapter {
        let with_subgroups = wgpu(false, false, true, true);
        assert!(with_subgroups.subgroups().is_some(), "{} offers no subgroups", with_subgroups.adapter());
        all.push(Box::new(with_subgroups));
        all.push(Box::new(wgpu(false, false, false, true)));
    }
    if matrix_units {
        all.push(Box::new(wgpu(true, false, true, false)));
    }
    all
}

fn all_cases() -> Vec<OpCase> {
    SEEDS.iter().flat_map(|&seed| op_cases(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"))).collect()
}

#[test]
fn every_op_on_every_backend_matches_the_reference() {
    let cases = all_cases();
    let mut failures = Vec::new();
    for backend in backends() {
        let reports: Vec<CaseReport> = cases.iter().map(|case| check_backend(backend.as_ref(), case)).collect();
        println!("backend {}\n{}", backend.name(), summary_table(&reports));
        failures.extend(reports.iter().filter(|r| !r.passed()).map(|r| r.to_string()));
    }
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
}

/// Printed names of every kind of the parametrised ops: each needs a case of its own.
fn kind_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    names.extend(UnaryKind::ALL.map(UnaryKind::name));
    names.extend(BinaryKind::ALL.map(BinaryKind::name));
    names.extend(CmpKind::ALL.map(CmpKind::name));
    names.extend(ReduceKind::ALL.map(ReduceKind::name));
    names
}

/// Every registry entry but the leaves has a case named for one of its nodes, and every kind
/// of the parametrised ops has a case. Nothing here lists the ops: an op registered without
/// cases in the test kit does not compile, and one whose cases miss it fails here.
#[test]
fn cases_cover_every_registered_op() {
    let kinds = kind_names();
    for seed in SEEDS {
        let cases = op_cases(seed).unwrap();
        let mut tested = HashSet::new();
        for case in &cases {
            let named: Vec<&Op> = case.graph.nodes().iter().map(|n| &n.op).filter(|op| op.name() == case.op).collect();
            assert!(!named.is_empty(), "{} has no {} node", case.name, case.op);
            tested.extend(named.iter().map(|op| op.tag()));
        }
        let missing: Vec<OpTag> = OpTag::TESTED.iter().copied().filter(|v| !tested.contains(v)).collect();
        assert!(missing.is_empty(), "seed {seed}: no case is named for an op of {missing:?}");
        for kind in &kinds {
            assert!(cases.iter().any(|c| c.op == *kind), "seed {seed}: no case tests {kind}");
        }
    }
}

/// What the test backend corrupts.
#[derive(Clone, Copy, PartialEq)]
enum Corrupt {
    /// The middle element of the first requested output.
    Output,
    /// The middle element of every persistent buffer read back.
    State,
    /// Every float of every output and state, by the few ulps a correct backend may differ.
    Jitter,
}

/// A test-only backend: the CPU backend with its results changed as `what` says.
fn corrupting(what: Corrupt) -> Wrapped<Corrupt> {
    Wrapped::new(Box::new(CpuBackend::new()), what)
}

/// `t` with its middle element moved by more than any relative tolerance allows.
fn corrupt(t: &Tensor) -> Tensor {
    let i = t.numel() / 2;
    if t.dtype().is_float() {
        let mut v = t.to_f32();
        v[i] += 1.0 + v[i].abs();
        Tensor::from_f32(t.dtype(), t.shape().clone(), v).unwrap()
    } else {
        let mut v = t.to_i64();
        v[i] += 1;
        Tensor::from_i64(t.dtype(), t.shape().clone(), v).unwrap()
    }
}

/// `t` with every float moved by 2 to 4 f32 ulps, or up to one f16 ulp, alternately up and
/// down: rounding differences, not bugs. Integers are kept.
fn jitter(t: &Tensor) -> Tensor {
    if !t.dtype().is_float() {
        return t.clone();
    }
    let step = if t.dtype() == DType::F16 { 2f32.powi(-10) } else { 2f32.powi(-22) };
    let v = t.to_f32().iter().enumerate().map(|(i, &x)| x * if i % 2 == 0 { 1.0 + step } else { 1.0 - step }).collect();
    Tensor::from_f32(t.dtype(), t.shape().clone(), v).unwrap()
}

impl Wrap for Corrupt {
    fn name(&self, _inner: &dyn Backend) -> &'static str {
        "corrupting-cpu"
    }
    fn after_run(&self, outputs: &[&str], got: &mut HashMap<String, Tensor>) {
        match self {
            Corrupt::Output => {
                let bad = corrupt(&got[outputs[0]]);
                got.insert(outputs[0].to_string(), bad);
            }
            Corrupt::Jitter => got.values_mut().for_each(|t| *t = jitter(t)),
            Corrupt::State => {}
        }
    }
    fn after_read_state(&self, _name: &str, state: &mut Tensor) {
        match self {
            Corrupt::State => *state = corrupt(state),
            Corrupt::Jitter => *state = jitter(state),
            Corrupt::Output => {}
        }
    }
}

#[test]
fn a_wrong_output_fails_every_case_at_the_wrong_element() {
    for case in op_cases(0).unwrap() {
        let report = check_backend(&corrupting(Corrupt::Output), &case);
        let first = case.graph.outputs()[0].0.as_str();
        let n = case.graph.ty(case.graph.outputs()[0].1).numel();
        let msg = report.failure.unwrap_or_else(|| panic!("{}: a corrupted output passed", case.name));
        let want = format!("run 0 output '{first}': 1 of {n} elements out of tolerance");
        assert!(msg.starts_with(&want), "{}: {msg}", case.name);
        assert!(msg.contains(&format!("worst is element {}", n / 2)), "{}: {msg}", case.name);
    }
}

#[test]
fn a_wrong_state_fails_the_cases_that_write_state() {
    let mut writers = 0;
    for case in op_cases(1).unwrap() {
        let report = check_backend(&corrupting(Corrupt::State), &case);
        if case.op == "kv_write" {
            writers += 1;
            let msg = report.failure.unwrap_or_else(|| panic!("{}: a corrupted state passed", case.name));
            assert!(msg.starts_with("run 0 state 'cache': 1 of "), "{}: {msg}", case.name);
        } else {
            assert!(report.passed(), "{report}");
        }
    }
    assert_eq!(writers, 6);
}

#[test]
fn rounding_differences_pass_every_inexact_case() {
    let mut checked = 0;
    for case in all_cases().iter().filter(|c| c.tolerance != Tolerance::Exact) {
        let report = check_backend(&corrupting(Corrupt::Jitter), case);
        assert!(report.passed(), "{report}");
        checked += 1;
    }
    assert!(checked > 100, "only {checked} inexact cases");
}

/// A backend without matmul: it must fail the matmul cases, not skip them.
struct NoMatmul;

impl BlockingBackend for NoMatmul {
    fn name(&self) -> &'static str {
        "no-matmul"
    }
    fn compile_linked_now(&self, plans: &[&Plan], weights: &Weights) -> Result<Vec<Box<dyn Executable>>> {
        let matmul = plans.iter().flat_map(|p| p.graph.nodes()).find(|n| matches!(n.op, Op::MatMul(_)));
        if let Some(node) = matmul {
            let backend = BlockingBackend::name(self).to_string();
            return Err(Error::Unsupported { op: node.op.name().to_string(), backend });
        }
        CpuBackend::new().compile_linked_now(plans, weights)
    }
}

#[test]
fn an_unsupported_op_fails_the_case() {
    let cases = op_cases(2).unwrap();
    for case in &cases {
        let report = check_backend(&NoMatmul, case);
        if case.op == "matmul" {
            assert_eq!(
                report.failure.as_deref(),
                Some("compile failed: matmul is not supported by the no-matmul backend"),
                "{}",
                case.name
            );
        } else {
            assert!(report.passed(), "{report}");
        }
    }
}
