//! The wgpu executor beyond single ops: runs allocate nothing, runtime scalars change without
//! recompiling, persistent buffers survive runs and read back, the arena splits into several
//! buffers, bad arguments are errors, and a lost device is reported and survived.
//! Runs on whatever adapter wgpu finds (Mesa lavapipe on the CI machine).

use std::collections::HashMap;

use pollster::block_on;
use susurrus_core::exec::Backend;
use susurrus_core::exec::cpu::CpuBackend;
use susurrus_core::exec::wgpu::{WgpuBackend, WgpuOptions};
use susurrus_core::plan::plan;
use susurrus_core::{DType, Error, Graph, Tensor, TensorType};
use susurrus_testkit::{random_inputs, random_weights};

fn backend(options: WgpuOptions) -> WgpuBackend {
    block_on(WgpuBackend::with_options(&options)).unwrap_or_else(|e| panic!("wgpu: {e}"))
}

fn f32t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims)
}

/// A decode-step-like graph: `y = tanh(x * w)` written into row `pos` of an 8-row cache, and
/// the column sums of the cache as output.
fn cache_graph() -> Graph {
    let mut g = Graph::new("cache");
    let pos = g.scalar("pos");
    let cache = g.state("cache", f32t(&[8, 4])).unwrap();
    let x = g.input("x", f32t(&[1, 4])).unwrap();
    let w = g.param("w", f32t(&[4])).unwrap();
    let xw = g.mul(x, w).unwrap();
    let y = g.tanh(xw).unwrap();
    let written = g.kv_write(cache, y, 0, pos).unwrap();
    let sums = g.reduce_sum(written, 0, false).unwrap();
    g.output("sums", sums).unwrap();
    g.output("y", y).unwrap();
    g
}

fn row(values: [f32; 4]) -> HashMap<String, Tensor> {
    HashMap::from([("x".to_string(), Tensor::f32([1, 4], values.to_vec()).unwrap())])
}

fn at(pos: u32) -> HashMap<String, u32> {
    HashMap::from([("pos".to_string(), pos)])
}

fn weights() -> HashMap<String, Tensor> {
    HashMap::from([("w".to_string(), Tensor::f32([4], vec![1.0, -1.0, 0.5, 2.0]).unwrap())])
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-5 * y.abs().max(1.0))
}

/// Resource counts that a run must not change.
fn resources(b: &WgpuBackend) -> [isize; 5] {
    let c = b.device().get_internal_counters().hal;
    [
        c.buffers.read(),
        c.bind_groups.read(),
        c.compute_pipelines.read(),
        c.shader_modules.read(),
        c.buffer_memory.read(),
    ]
}

#[test]
fn runs_allocate_nothing_and_scalars_need_no_recompile() {
    let gpu = backend(WgpuOptions::default());
    let p = plan(cache_graph()).unwrap();
    let mut exe = block_on(gpu.compile(&p, &weights())).unwrap();
    let mut cpu = block_on(CpuBackend::new().compile(&p, &weights())).unwrap();
    // The baseline is taken after the first run: by then wgpu has released the staging memory
    // it used to upload weights at compile time.
    let mut before = None;
    for (pos, x) in [(0, [0.5, 1.0, -2.0, 0.25]), (3, [1.5, -0.5, 0.0, 1.0]), (7, [-1.0, 2.0, 3.0, -0.75])] {
        let got = block_on(exe.run(&row(x), &at(pos), &["sums", "y"])).unwrap();
        let before = *before.get_or_insert_with(|| resources(&gpu));
        assert!(before[0] > 0 && before[2] > 0, "the counters are not counting: {before:?}");
        assert_eq!(resources(&gpu), before, "a run created GPU resources");
        let want = block_on(cpu.run(&row(x), &at(pos), &["sums", "y"])).unwrap();
        for name in ["sums", "y"] {
            assert!(
                close(&got[name].to_f32(), &want[name].to_f32()),
                "{name} at pos {pos}: {:?} vs {:?}",
                got[name],
                want[name]
            );
        }
    }
    let before = before.unwrap();
    block_on(exe.run_repeatedly(&row([1.0; 4]), &at(1), 5)).unwrap();
    assert_eq!(resources(&gpu), before, "repeated runs created GPU resources");

    // Rows 0, 3, 7 were written by the checked runs, row 1 by the repeated ones.
    let cache = block_on(exe.read_state("cache")).unwrap();
    let want = block_on(cpu.read_state("cache")).unwrap();
    let cache = cache.to_f32();
    let mut want = want.to_f32();
    let row1: Vec<f32> = [1.0f32, -1.0, 0.5, 2.0].iter().map(|w| w.tanh()).collect();
    want[4..8].copy_from_slice(&row1);
    assert!(close(&cache, &want), "{cache:?} vs {want:?}");
    assert_eq!(resources(&gpu), before, "reading state created GPU resources");
}

#[test]
fn outputs_are_read_back_only_when_asked_and_bad_arguments_are_errors() {
    let gpu = backend(WgpuOptions::default());
    let p = plan(cache_graph()).unwrap();
    let mut exe = block_on(gpu.compile(&p, &weights())).unwrap();
    let only_y = block_on(exe.run(&row([1.0; 4]), &at(0), &["y"])).unwrap();
    assert_eq!(only_y.keys().collect::<Vec<_>>(), ["y"]);

    let err = |r: Result<HashMap<String, Tensor>, Error>| r.unwrap_err().to_string();
    assert_eq!(err(block_on(exe.run(&HashMap::new(), &at(0), &["y"]))), "bad run argument: input 'x' was not supplied");
    let wrong = HashMap::from([("x".to_string(), Tensor::f32([4], vec![0.0; 4]).unwrap())]);
    assert_eq!(
        err(block_on(exe.run(&wrong, &at(0), &["y"]))),
        "bad run argument: input 'x': expected f32[1,4], got f32[4]"
    );
    assert_eq!(
        err(block_on(exe.run(&row([0.0; 4]), &HashMap::new(), &["y"]))),
        "bad run argument: runtime scalar 'pos' was not supplied"
    );
    assert_eq!(
        err(block_on(exe.run(&row([0.0; 4]), &at(0), &["z"]))),
        "bad run argument: graph 'cache' has no output 'z'"
    );
    let state = block_on(exe.read_state("nope")).unwrap_err().to_string();
    assert_eq!(state, "bad run argument: graph 'cache' has no persistent buffer 'nope'");
    let missing = block_on(gpu.compile(&p, &HashMap::new())).err().unwrap().to_string();
    assert_eq!(missing, "bad run argument: weight 'w' was not supplied");
}

/// A chain of values larger than the 4 KiB buffers the arena is split into: the arena spans
/// several buffers and no value straddles two.
#[test]
fn a_split_arena_gives_the_same_numbers() {
    let mut g = Graph::new("split");
    let x = g.input("x", f32t(&[24, 33])).unwrap();
    let mut v = x;
    for _ in 0..4 {
        let e = g.exp(v).unwrap();
        let n = g.neg(v).unwrap();
        v = g.add(e, n).unwrap();
        v = g.tanh(v).unwrap();
    }
    g.output("y", v).unwrap();
    let p = plan(g.clone()).unwrap();
    let gpu = backend(WgpuOptions { max_buffer_bytes: Some(4096), ..WgpuOptions::default() });
    // At least three 4 KiB buffers.
    assert!(p.report.arena_bytes > 2 * 4096, "{}", p.report);
    let inputs = random_inputs(&g, 3);
    let mut exe = block_on(gpu.compile(&p, &random_weights(&g, 3))).unwrap();
    let got = block_on(exe.run(&inputs, &HashMap::new(), &["y"])).unwrap();
    let mut cpu = block_on(CpuBackend::new().compile(&p, &HashMap::new())).unwrap();
    let want = block_on(cpu.run(&inputs, &HashMap::new(), &["y"])).unwrap();
    assert!(close(&got["y"].to_f32(), &want["y"].to_f32()));
}

#[test]
fn a_lost_device_is_an_error_and_a_new_device_works() {
    let gpu = backend(WgpuOptions::default());
    let p = plan(cache_graph()).unwrap();
    let mut exe = block_on(gpu.compile(&p, &weights())).unwrap();
    block_on(exe.run(&row([1.0; 4]), &at(0), &["y"])).unwrap();
    gpu.device().destroy();
    let err = block_on(exe.run(&row([1.0; 4]), &at(0), &["y"])).unwrap_err();
    assert!(matches!(err, Error::DeviceLost(_)), "{err}");
    assert!(matches!(block_on(gpu.compile(&p, &weights())).err().unwrap(), Error::DeviceLost(_)));

    let fresh = backend(WgpuOptions::default());
    let mut exe = block_on(fresh.compile(&p, &weights())).unwrap();
    let y = block_on(exe.run(&row([1.0; 4]), &at(0), &["y"])).unwrap();
    assert!(close(&y["y"].to_f32(), &[1.0f32.tanh(), (-1.0f32).tanh(), 0.5f32.tanh(), 2.0f32.tanh()]));
}
