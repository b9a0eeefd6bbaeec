//! The wgpu executor beyond single ops: runs allocate nothing, runtime scalars change without
//! recompiling, persistent buffers survive runs and read back, the arena splits into several
//! buffers, bad arguments are errors, and a lost device is reported and survived; and single
//! ops at the edges of their value ranges.
//! Runs on whatever adapter wgpu finds (Mesa lavapipe on the CI machine).

use std::collections::HashMap;

use pollster::block_on;
use susurrus_core::exec::cpu::CpuBackend;
use susurrus_core::exec::{Backend, Chain, Profile};
use susurrus_core::ops::CmpKind;
use susurrus_core::plan::plan;
use susurrus_core::{DType, Error, Graph, Tensor, TensorType};
use susurrus_testkit::{random_inputs, random_weights};
use susurrus_wgpu::{WgpuBackend, WgpuOptions};

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
    // A state's staging buffer is made when it is first read, not at compile time; later
    // reads reuse it.
    let after_first_read = resources(&gpu);
    assert_eq!(after_first_read[0], before[0] + 1, "the first read made one staging buffer");
    assert_eq!(after_first_read[1..4], before[1..4]);
    assert_eq!(block_on(exe.read_state("cache")).unwrap().to_f32(), cache);
    assert_eq!(resources(&gpu), after_first_read, "reading state again created GPU resources");
}

/// A profiling backend (timestamp queries, a pass per dispatch) computes what an unprofiled
/// one does and adds one entry per dispatch and run, labelled with the op and its type.
#[test]
fn a_profile_times_every_dispatch_of_every_run() {
    let profile = Profile::default();
    let gpu = backend(WgpuOptions { profile: Some(profile.clone()), ..WgpuOptions::default() });
    let p = plan(cache_graph()).unwrap();
    let mut timed = block_on(gpu.compile(&p, &weights())).unwrap();
    let mut plain = block_on(backend(WgpuOptions::default()).compile(&p, &weights())).unwrap();
    for (pos, x) in [(0, [0.5, 1.0, -2.0, 0.25]), (3, [1.5, -0.5, 0.0, 1.0])] {
        let got = block_on(timed.run(&row(x), &at(pos), &["sums", "y"])).unwrap();
        let want = block_on(plain.run(&row(x), &at(pos), &["sums", "y"])).unwrap();
        assert_eq!(got, want);
    }
    block_on(timed.run_repeatedly(&row([1.0; 4]), &at(1), 3)).unwrap();
    let rows = profile.rows();
    let labels: Vec<&str> = rows.iter().map(|(label, ..)| label.as_str()).collect();
    // The plan's four ops (unoptimised: no fusion), five runs each.
    for label in ["mul f32[1,4]", "tanh f32[1,4]", "kv_write f32[8,4]", "reduce_sum f32[4]"] {
        let row = rows.iter().find(|(l, ..)| l == label).unwrap_or_else(|| panic!("no {label} in {labels:?}"));
        assert_eq!(row.1, 5, "{label}");
    }
    assert_eq!(rows.len(), 4, "{labels:?}");
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

// Single ops at the edges the harness's value ranges never reach, against the reference
// interpreter.

/// Every dtype a tensor may have.
const DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::I32, DType::U32];

/// Runs `g` on the wgpu backend with `shader-f16` and subgroups, on the f32 path without
/// subgroups, and with the GPU kernels forced (on a CPU adapter: the GPU kernels with their
/// lane folds on subgroups; elsewhere the first run again). For each backend: one map of every
/// graph output per entry of `runs` (the runtime scalars of that run), all runs on one
/// executable so persistent buffers carry over.
fn on_wgpu(
    g: &Graph,
    weights: &HashMap<String, Tensor>,
    inputs: &HashMap<String, Tensor>,
    runs: &[&[(&str, u32)]],
) -> Vec<Vec<HashMap<String, Tensor>>> {
    let plan = plan(g.clone()).unwrap();
    let names: Vec<&str> = g.outputs().iter().map(|(n, _)| n.as_str()).collect();
    let f32_path = WgpuOptions { allow_f16: false, allow_subgroups: false, ..WgpuOptions::default() };
    [WgpuOptions::default(), f32_path, WgpuOptions { force_gpu_kernels: true, ..WgpuOptions::default() }]
        .into_iter()
        .map(|options| {
            block_on(async {
                let backend = WgpuBackend::with_options(&options).await.unwrap();
                let mut exe = backend.compile(&plan, weights).await.unwrap();
                let mut results = Vec::new();
                for run in runs {
                    let scalars = run.iter().map(|&(k, v)| (k.to_string(), v)).collect();
                    results.push(exe.run(inputs, &scalars, &names).await.unwrap());
                }
                results
            })
        })
        .collect()
}

/// The reference interpreter's outputs of `g` with no persistent state or runtime scalars.
fn reference(
    g: &Graph,
    inputs: &HashMap<String, Tensor>,
    weights: &HashMap<String, Tensor>,
) -> HashMap<String, Tensor> {
    susurrus_core::ir::evaluate(g, inputs, weights, &HashMap::new(), &HashMap::new()).unwrap().outputs
}

#[test]
fn cast_matches_the_reference_at_the_edges() {
    // What the harness's value ranges never reach: saturation, NaN, infinities, f16
    // overflow (65520 is the first value that rounds to infinity), f16 subnormals and
    // integers beyond 2^24. Each input is cast to every other dtype; f16 also comes from
    // a weight (packed or native f16 storage).
    let floats = vec![
        2.9,
        -2.9,
        3e9,
        -3e9,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.5,
        2_147_483_520.0,
        65519.0,
        65520.0,
        -1e6,
        0.1,
        1e-6,
    ];
    let halves = vec![65504.0, -7.75, 0.5, -0.0, f32::INFINITY];
    let ints = vec![-1, i32::MIN, i32::MAX, 16_777_217, 2049, 0, 65519, 65520];
    let uints = vec![u32::MAX, 1 << 31, 16_777_217, 2049, 0, 65519, 65520, 7];
    let sources = [
        ("f32", Tensor::f32([floats.len()], floats).unwrap()),
        ("f16", Tensor::from_f32(DType::F16, [halves.len()], halves).unwrap()),
        ("i32", Tensor::i32([ints.len()], ints).unwrap()),
        ("u32", Tensor::u32([uints.len()], uints).unwrap()),
    ];
    let mut g = Graph::new("casts");
    let mut inputs = HashMap::new();
    let mut weights = HashMap::new();
    for (name, t) in &sources {
        let x = if *name == "f16" {
            weights.insert(name.to_string(), t.clone());
            g.param(name, t.ty()).unwrap()
        } else {
            inputs.insert(name.to_string(), t.clone());
            g.input(name, t.ty()).unwrap()
        };
        for to in DTYPES.into_iter().filter(|&to| to != t.dtype()) {
            let y = g.cast(x, to).unwrap();
            g.output(&format!("{name} to {to}"), y).unwrap();
        }
    }
    let want = reference(&g, &inputs, &weights);
    for (backend, runs) in on_wgpu(&g, &weights, &inputs, &[&[]]).iter().enumerate() {
        for (out, expected) in &want {
            // Bytes, so NaNs compare equal to NaNs.
            let got = &runs[0][out];
            assert_eq!(got.to_bytes(), expected.to_bytes(), "backend {backend}, {out}: {got:?} != {expected:?}");
        }
    }
}

#[test]
fn compare_treats_nan_and_large_integers_like_the_reference() {
    use susurrus_core::ops::CmpKind;

    // NaN against numbers and itself (only `ne` holds), and u32/i32 values 2^24 apart by
    // one, which f32 could not tell apart.
    let f = Tensor::f32([4], vec![f32::NAN, 1.0, f32::NAN, 2.0]).unwrap();
    let g_ = Tensor::f32([4], vec![f32::NAN, f32::NAN, 1.0, 2.0]).unwrap();
    let u = Tensor::u32([3], vec![(1 << 24) + 1, u32::MAX, 1 << 24]).unwrap();
    let v = Tensor::u32([3], vec![1 << 24, u32::MAX - 1, 1 << 24]).unwrap();
    let i = Tensor::i32([3], vec![-(1 << 24) - 1, i32::MIN, i32::MAX]).unwrap();
    let j = Tensor::i32([3], vec![-(1 << 24), i32::MAX, i32::MAX - 1]).unwrap();
    let pairs = [("f", &f, &g_), ("u", &u, &v), ("i", &i, &j)];
    let mut g = Graph::new("compares");
    let mut inputs = HashMap::new();
    for (name, a, b) in pairs {
        let x = g.input(&format!("{name}a"), a.ty()).unwrap();
        let y = g.input(&format!("{name}b"), b.ty()).unwrap();
        inputs.insert(format!("{name}a"), a.clone());
        inputs.insert(format!("{name}b"), b.clone());
        for kind in CmpKind::ALL {
            let c = g.compare(kind, x, y).unwrap();
            g.output(&format!("{name} {}", kind.name()), c).unwrap();
        }
    }
    let want: HashMap<String, Vec<u32>> = reference(&g, &inputs, &HashMap::new())
        .into_iter()
        .map(|(out, t)| (out, t.as_u32().unwrap().to_vec()))
        .collect();
    assert_eq!(want["f ne"], [1, 1, 1, 0]);
    assert_eq!(want["u gt"], [1, 1, 0]);
    for runs in on_wgpu(&g, &HashMap::new(), &inputs, &[&[]]) {
        for (out, expected) in &want {
            assert_eq!(runs[0][out].as_u32(), Some(&expected[..]), "{out}");
        }
    }
}

#[test]
fn fused_elementwise_matches_the_reference_at_high_rank_and_seven_inputs() {
    // Rank 5 that no axes merge away (the dimensions spill into `dims1`), and seven inputs
    // of seven shapes broadcast to [2,3,4]. Only additions, negation, max and where: exact
    // in f32 whatever order or fused instructions a GPU compiler picks.
    use Instr::{Binary as B, Input as In, Select as Sel, Unary as U};
    use susurrus_core::ops::{BinaryKind, FusedElementwise, Instr, UnaryKind};
    let values = |dims: &[usize], seed: usize| {
        let n = dims.iter().product::<usize>();
        Tensor::f32(dims, (0..n).map(|i| ((i * 7 + seed * 3) % 11) as f32 - 5.0).collect()).unwrap()
    };
    let cases: [(Vec<Vec<usize>>, Vec<Instr>); 2] = [
        (
            vec![vec![2, 1, 2, 1, 2], vec![3, 1, 3, 1]],
            vec![In(0), In(1), B(BinaryKind::Add, 0, 1), U(UnaryKind::Neg, 2), B(BinaryKind::Max, 3, 1)],
        ),
        (
            vec![vec![2, 3, 4], vec![3, 4], vec![4], vec![2, 1, 4], vec![2, 3, 1], vec![], vec![3, 1]],
            vec![
                In(0),
                In(1),
                In(2),
                In(3),
                In(4),
                In(5),
                In(6),
                B(BinaryKind::Add, 0, 1),
                B(BinaryKind::Add, 7, 2),
                B(BinaryKind::Add, 8, 3),
                B(BinaryKind::Add, 9, 4),
                B(BinaryKind::Max, 10, 5),
                U(UnaryKind::Neg, 11),
                Sel(6, 11, 12),
            ],
        ),
    ];
    for (shapes, program) in cases {
        let tensors: Vec<Tensor> = shapes.iter().enumerate().map(|(k, d)| values(d, k)).collect();
        let mut g = Graph::new("fused");
        let mut inputs = HashMap::new();
        let mut ids = Vec::new();
        for (k, t) in tensors.iter().enumerate() {
            ids.push(g.input(&format!("in{k}"), t.ty()).unwrap());
            inputs.insert(format!("in{k}"), t.clone());
        }
        let y = g.push(FusedElementwise { program, dtype: DType::F32 }, &ids).unwrap();
        g.output("y", y).unwrap();
        let want = reference(&g, &inputs, &HashMap::new()).remove("y").unwrap();
        for runs in on_wgpu(&g, &HashMap::new(), &inputs, &[&[]]) {
            assert_eq!(runs[0]["y"], want, "{shapes:?}");
        }
    }
}

/// Runs `table[ids]` on the wgpu f32 path (the adapter the op harness uses).
fn gather_on_wgpu(ids: Tensor) -> Vec<f32> {
    let mut g = Graph::new("gather");
    let table = g.param("table", TensorType::new(DType::F32, [3, 2])).unwrap();
    let id = g.input("ids", ids.ty()).unwrap();
    let y = g.gather(table, id).unwrap();
    g.output("y", y).unwrap();
    let weights =
        HashMap::from([("table".to_string(), Tensor::f32([3, 2], vec![0.0, 1.0, 10.0, 11.0, 20.0, 21.0]).unwrap())]);
    let gpu = backend(WgpuOptions { allow_f16: false, ..WgpuOptions::default() });
    let plan = plan(g).unwrap();
    let mut exe = block_on(gpu.compile(&plan, &weights)).unwrap();
    let inputs = HashMap::from([("ids".to_string(), ids)]);
    block_on(exe.run(&inputs, &HashMap::new(), &["y"])).unwrap()["y"].to_f32()
}

#[test]
fn gather_clamps_out_of_range_ids_to_the_nearest_row() {
    // Rows: 0 -> [0, 1], 1 -> [10, 11], 2 -> [20, 21]. -5 reads row 0, 7 and 3 read row 2.
    let got = gather_on_wgpu(Tensor::i32([4], vec![-5, 1, 7, 3]).unwrap());
    assert_eq!(got, vec![0.0, 1.0, 10.0, 11.0, 20.0, 21.0, 20.0, 21.0]);
    let got = gather_on_wgpu(Tensor::u32([3], vec![u32::MAX, 0, 2]).unwrap());
    assert_eq!(got, vec![20.0, 21.0, 0.0, 1.0, 20.0, 21.0]);
}

#[test]
fn kv_write_writes_at_the_offset_and_nothing_past_the_end() {
    // A [2,4,3] cache written along axis 1 with a [2,2,3] value: at offset 1, then at
    // offset 3, where 3 + 2 exceeds the capacity 4. The CPU reference fails that run; the
    // kernel cannot fail, so it writes nothing and the cache keeps the first write.
    let mut g = Graph::new("step");
    let cache = g.state("cache", TensorType::new(DType::I32, [2, 4, 3])).unwrap();
    let x = g.input("x", TensorType::new(DType::I32, [2, 2, 3])).unwrap();
    let pos = g.scalar("pos");
    let w = g.kv_write(cache, x, 1, pos).unwrap();
    g.output("cache", w).unwrap();
    let value = Tensor::i32([2, 2, 3], (1..=12).collect()).unwrap();
    let inputs = HashMap::from([("x".to_string(), value.clone())]);
    // The reference starts from a zeroed cache, as the executor does.
    let write = |states: &HashMap<String, Tensor>, offset: u32| {
        susurrus_core::ir::evaluate(&g, &inputs, &HashMap::new(), states, &at(offset))
    };
    let want = write(&HashMap::new(), 1).unwrap().outputs.remove("cache").unwrap();
    // Rows 1..3 of each head hold the value's rows.
    assert_eq!(want.as_i32().unwrap(), [0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0, 0]);
    assert!(write(&HashMap::from([("cache".to_string(), want.clone())]), 3).is_err());
    for runs in on_wgpu(&g, &HashMap::new(), &inputs, &[&[("pos", 1)], &[("pos", 3)]]) {
        assert_eq!(runs[0]["cache"], want);
        assert_eq!(runs[1]["cache"], want);
    }
}

/// A beam's cache reordered in place: rows gathered from the buffer by `rows` and written
/// back over it, then the step's row written at `pos`. The gather reads the buffer before the
/// write replaces it, on every backend, run after run (each run starting from the last).
#[test]
fn a_buffer_reordered_by_a_gather_of_itself_keeps_the_old_rows_it_reads() {
    let mut g = Graph::new("reorder");
    let cache = g.state("cache", TensorType::new(DType::I32, [4, 3])).unwrap();
    let rows = g.input("rows", TensorType::new(DType::U32, [4])).unwrap();
    let x = g.input("x", TensorType::new(DType::I32, [1, 3])).unwrap();
    let pos = g.scalar("pos");
    let reordered = g.gather(cache, rows).unwrap();
    let full = g.write_state(cache, reordered).unwrap();
    let w = g.kv_write(full, x, 0, pos).unwrap();
    g.output("cache", w).unwrap();
    let plan = plan(g).unwrap();
    let runs: [([u32; 4], [i32; 3], u32); 4] = [
        ([0, 1, 2, 3], [1, 2, 3], 0),
        ([0, 0, 1, 1], [4, 5, 6], 2),
        ([3, 2, 1, 0], [7, 8, 9], 1),
        ([2, 2, 0, 3], [0, 1, 0], 3),
    ];
    // The host's reordering, run by run.
    let mut want = vec![[0i32; 3]; 4];
    let mut wants = Vec::new();
    for (rows, x, pos) in runs {
        want = rows.iter().map(|&r| want[r as usize]).collect();
        want[pos as usize] = x;
        wants.push(want.concat());
    }
    let f32_path = WgpuOptions { allow_f16: false, allow_subgroups: false, ..WgpuOptions::default() };
    let wgpu = [WgpuOptions::default(), f32_path].map(backend);
    let backends: [&dyn Backend; 3] = [&CpuBackend::new(), &wgpu[0], &wgpu[1]];
    for b in backends {
        let mut exe = block_on(b.compile(&plan, &HashMap::new())).unwrap();
        for ((rows, x, pos), want) in runs.iter().zip(&wants) {
            let inputs = HashMap::from([
                ("rows".to_string(), Tensor::u32([4], rows.to_vec()).unwrap()),
                ("x".to_string(), Tensor::i32([1, 3], x.to_vec()).unwrap()),
            ]);
            let out = block_on(exe.run(&inputs, &at(*pos), &["cache"])).unwrap();
            assert_eq!(out["cache"].as_i32().unwrap(), &want[..], "{} at pos {pos}", b.name());
        }
    }
}

/// Argmax over rows as long as the vocabulary (each lane keeps two candidates): the first of
/// tied maxima wins wherever they fall, and the first NaN beats every number, as in the
/// reference.
#[test]
fn argmax_over_long_rows_picks_the_first_best_like_the_reference() {
    let n = 51864;
    let mut rows = vec![0.0f32; 4 * n];
    for (i, v) in rows[..n].iter_mut().enumerate() {
        *v = (i * 7 % 3) as f32;
    }
    // Row 1: the maximum at 300 (a lane's second candidate) and again at 44 (its first).
    rows[n + 300] = 5.0;
    rows[n + 44] = 5.0;
    // Row 2: the maximum only at 812, then a smaller one everywhere else.
    rows[2 * n..3 * n].fill(-1.0);
    rows[2 * n + 812] = 3.0;
    // Row 3: NaN at 51000 and 700.
    rows[3 * n + 51000] = f32::NAN;
    rows[3 * n + 700] = f32::NAN;
    let x = Tensor::f32([4, n], rows).unwrap();
    let mut g = Graph::new("argmax");
    let input = g.input("x", x.ty()).unwrap();
    let y = g.argmax(input, 1).unwrap();
    g.output("y", y).unwrap();
    let inputs = HashMap::from([("x".to_string(), x)]);
    let want = reference(&g, &inputs, &HashMap::new());
    assert_eq!(want["y"].as_u32().unwrap(), [2, 44, 812, 700]);
    for runs in on_wgpu(&g, &HashMap::new(), &inputs, &[&[]]) {
        assert_eq!(runs[0]["y"].as_u32(), want["y"].as_u32());
    }
}

/// A run's dispatches are counted: one per op, two for the ops that run in two passes
/// through the scratch (a long row's maximum: its splits, then their merge); and the result
/// is the reference's.
#[test]
fn launches_count_the_dispatches_of_a_run() {
    let mut g = Graph::new("launches");
    let x = g.input("x", f32t(&[1, 20_000])).unwrap();
    let y = g.tanh(x).unwrap();
    let top = g.reduce_max(y, 1, true).unwrap();
    g.output("top", top).unwrap();
    let p = plan(g.clone()).unwrap();
    let backend = backend(WgpuOptions::default());
    let mut exe = block_on(backend.compile(&p, &HashMap::new())).unwrap();
    assert_eq!(exe.launches(), Some(3));
    let inputs = random_inputs(&g, 7);
    let got = block_on(exe.run(&inputs, &HashMap::new(), &["top"])).unwrap();
    let mut cpu = block_on(CpuBackend::new().compile(&p, &HashMap::new())).unwrap();
    let want = block_on(cpu.run(&inputs, &HashMap::new(), &["top"])).unwrap();
    assert_eq!(got["top"].to_f32(), want["top"].to_f32());
    assert_eq!(cpu.launches(), None);
}

/// A `scalar` read that only feeds kernels runs no kernel: they read the runtime scalar
/// table themselves (as f32, and as u32 in wrapping integer arithmetic), while one that is
/// also an output is still written out. Values as the reference's, over several runs of one
/// executable with different scalars.
#[test]
fn scalar_reads_feeding_kernels_run_no_kernel_of_their_own() {
    let mut g = Graph::new("scalars");
    let x = g.input("x", f32t(&[1, 6])).unwrap();
    let ids = g.constant(Tensor::u32([1, 6], vec![0, 1, 2, 3, 4, 5]).unwrap());
    let (lo, len, out) = (g.scalar("lo"), g.scalar("len"), g.scalar("out"));
    let (lo, len, out) = (g.read_scalar(lo).unwrap(), g.read_scalar(len).unwrap(), g.read_scalar(out).unwrap());
    // ids in [lo, lo + len): `id - lo` wraps past `len` below `lo`.
    let offset = g.sub(ids, lo).unwrap();
    let inside = g.compare(CmpKind::Lt, offset, len).unwrap();
    let factor = g.cast(lo, DType::F32).unwrap();
    let scaled = g.mul(x, factor).unwrap();
    let y = g.select(inside, scaled, x).unwrap();
    g.output("y", y).unwrap();
    g.output("out", out).unwrap();
    let p = plan(g.clone()).unwrap();
    let backend = backend(WgpuOptions::default());
    let mut exe = block_on(backend.compile(&p, &HashMap::new())).unwrap();
    // sub, lt, cast, mul, where and the output scalar's copy; no kernel for lo and len.
    assert_eq!(exe.launches(), Some(6));
    let mut cpu = block_on(CpuBackend::new().compile(&p, &HashMap::new())).unwrap();
    let inputs = random_inputs(&g, 11);
    for (lo, len, out) in [(2, 3, 7), (0, 1, 0), (5, 4, 1), (3, 0, 9)] {
        let scalars = HashMap::from([("lo".to_string(), lo), ("len".to_string(), len), ("out".to_string(), out)]);
        let got = block_on(exe.run(&inputs, &scalars, &["y", "out"])).unwrap();
        let want = block_on(cpu.run(&inputs, &scalars, &["y", "out"])).unwrap();
        assert_eq!(got["y"].to_f32(), want["y"].to_f32(), "lo {lo} len {len}");
        assert_eq!(got["out"].as_u32(), Some(&[out][..]));
    }
    // Read through a view (a row index for a gather), and read back through one: the first
    // is read in place, the second written out.
    let mut viewed = Graph::new("scalar_views");
    let table = viewed.input("table", f32t(&[5, 3])).unwrap();
    let (row, back) = (viewed.scalar("row"), viewed.scalar("back"));
    let (row, back) = (viewed.read_scalar(row).unwrap(), viewed.read_scalar(back).unwrap());
    let row = viewed.reshape(row, [1]).unwrap();
    let picked = viewed.gather(table, row).unwrap();
    let back = viewed.reshape(back, [1]).unwrap();
    viewed.output("picked", picked).unwrap();
    viewed.output("back", back).unwrap();
    let p = plan(viewed.clone()).unwrap();
    let mut exe = block_on(backend.compile(&p, &HashMap::new())).unwrap();
    assert_eq!(exe.launches(), Some(2), "the gather and the read-back scalar's copy");
    let mut cpu = block_on(CpuBackend::new().compile(&p, &HashMap::new())).unwrap();
    let inputs = random_inputs(&viewed, 12);
    for (row, back) in [(0, 5), (3, 0), (4, 2)] {
        let scalars = HashMap::from([("row".to_string(), row), ("back".to_string(), back)]);
        let got = block_on(exe.run(&inputs, &scalars, &["picked", "back"])).unwrap();
        let want = block_on(cpu.run(&inputs, &scalars, &["picked", "back"])).unwrap();
        assert_eq!(got["picked"].to_f32(), want["picked"].to_f32(), "row {row}");
        assert_eq!(got["back"].as_u32(), Some(&[back][..]));
    }
}

/// A decoder step's fused projection: one product of [1, 1, 1152], sliced into q, k and v
/// that the planner keeps as views (bound at 1536-byte offsets of the product's bytes): q read
/// back as an output, k written into a cache, v read by a kernel. No kernel runs for the
/// slices, and the values are the reference's on every kernel family.
#[test]
fn slice_views_are_bound_at_their_offsets_and_run_no_kernel() {
    let mut g = Graph::new("qkv");
    let x = g.input("x", f32t(&[1, 1, 64])).unwrap();
    let w = g.param("w", f32t(&[1152, 64])).unwrap();
    let qkv = g.matmul_t(x, w).unwrap();
    let (q, k, v) =
        (g.slice(qkv, 2, 0, 384).unwrap(), g.slice(qkv, 2, 384, 768).unwrap(), g.slice(qkv, 2, 768, 1152).unwrap());
    let cache = g.state("cache", f32t(&[2, 384])).unwrap();
    let pos = g.scalar("pos");
    let k_row = g.reshape(k, [1, 384]).unwrap();
    let cache = g.kv_write(cache, k_row, 0, pos).unwrap();
    let v = g.tanh(v).unwrap();
    for (name, id) in [("q", q), ("cache", cache), ("v", v)] {
        g.output(name, id).unwrap();
    }
    let p = plan(g.clone()).unwrap();
    assert!([q, k].iter().all(|id| p.views[id.index()]));
    let weights = random_weights(&g, 3);
    let exe = block_on(backend(WgpuOptions::default()).compile(&p, &weights)).unwrap();
    // The product, the cache write, tanh.
    assert_eq!(exe.launches(), Some(3));
    let inputs = random_inputs(&g, 5);
    let want = susurrus_core::ir::evaluate(&g, &inputs, &weights, &HashMap::new(), &at(1)).unwrap().outputs;
    for runs in on_wgpu(&g, &weights, &inputs, &[&[("pos", 1)]]) {
        for name in ["q", "cache", "v"] {
            let (got, want) = (runs[0][name].to_f32(), want[name].to_f32());
            assert!(close(&got, &want), "{name}: {got:?} vs {want:?}");
        }
    }
}

/// A step-like graph for chains: `next = tanh(w * (x - max(x + s)))` written into row `pos`
/// of a cache, whose column sums are an output too. `x` is fed by `next`; `s` is not fed and
/// is dead after its first use, so the arena reuses its bytes within a run.
fn chain_graph() -> Graph {
    let mut g = Graph::new("chain");
    let pos = g.scalar("pos");
    let cache = g.state("cache", f32t(&[8, 4])).unwrap();
    let x = g.input("x", f32t(&[1, 4])).unwrap();
    let s = g.input("s", f32t(&[1, 4])).unwrap();
    let w = g.param("w", f32t(&[4])).unwrap();
    let a = g.add(x, s).unwrap();
    let m = g.reduce_max(a, 1, true).unwrap();
    let centred = g.sub(x, m).unwrap();
    let scaled = g.mul(centred, w).unwrap();
    let next = g.tanh(scaled).unwrap();
    let written = g.kv_write(cache, next, 0, pos).unwrap();
    let sums = g.reduce_sum(written, 0, false).unwrap();
    g.output("next", next).unwrap();
    g.output("sums", sums).unwrap();
    g
}

#[test]
fn a_chain_of_runs_fed_on_the_device_equals_runs_fed_by_the_host() {
    let plan = plan(chain_graph()).unwrap();
    let inputs = HashMap::from([
        ("x".to_string(), Tensor::f32([1, 4], vec![0.5, -1.0, 2.0, 0.25]).unwrap()),
        ("s".to_string(), Tensor::f32([1, 4], vec![3.0, 0.0, -2.0, 1.0]).unwrap()),
    ]);
    let scalars: Vec<_> = (0..5).map(at).collect();
    let feeds = [("next", "x")];
    let outputs = ["next", "sums"];
    let wgpu = backend(WgpuOptions::default());

    // Fed by the host, one submission per run.
    let mut exe = block_on(wgpu.compile(&plan, &weights())).unwrap();
    let mut fed = inputs.clone();
    let mut want = Vec::new();
    for s in &scalars {
        let out = block_on(exe.run(&fed, s, &outputs)).unwrap();
        fed.insert("x".into(), out["next"].clone());
        want.push(out);
    }
    assert_ne!(want[0]["next"], want[1]["next"], "the runs differ");

    let mut exe = block_on(wgpu.compile(&plan, &weights())).unwrap();
    assert!(exe.feeds_on_device());
    let chain = Chain { inputs: &inputs, scalars: &scalars, feeds: &feeds, outputs: &outputs };
    let got = block_on(exe.run_chain(chain)).unwrap();
    assert_eq!(got, want);
    // The cache holds every run's row, as the runs wrote them.
    let cache = block_on(exe.read_state("cache")).unwrap().to_f32();
    for (k, out) in want.iter().enumerate() {
        assert_eq!(cache[k * 4..k * 4 + 4], out["next"].to_f32()[..]);
    }
    // Another chain rewrites the same rows alike (the cache full from the start, so only the
    // rows match) and leaves nothing more behind than the first.
    let before = resources(&wgpu);
    let again = block_on(exe.run_chain(chain)).unwrap();
    assert_eq!(
        again.iter().map(|r| &r["next"]).collect::<Vec<_>>(),
        want.iter().map(|r| &r["next"]).collect::<Vec<_>>()
    );
    assert_eq!(resources(&wgpu), before, "buffers, bind groups, pipelines, modules, memory");

    // The reference executor's chain (fed through the host) agrees.
    let mut cpu = block_on(CpuBackend::new().compile(&plan, &weights())).unwrap();
    assert!(!cpu.feeds_on_device());
    let reference = block_on(cpu.run_chain(chain)).unwrap();
    for (r, w) in reference.iter().zip(&want) {
        assert!(close(&w["sums"].to_f32(), &r["sums"].to_f32()), "{w:?} vs {r:?}");
    }
}

#[test]
fn bad_chains_are_errors_before_anything_runs() {
    let plan = plan(chain_graph()).unwrap();
    let wgpu = backend(WgpuOptions::default());
    let mut exe = block_on(wgpu.compile(&plan, &weights())).unwrap();
    let inputs = HashMap::from([
        ("x".to_string(), Tensor::f32([1, 4], vec![0.5, -1.0, 2.0, 0.25]).unwrap()),
        ("s".to_string(), Tensor::f32([1, 4], vec![3.0, 0.0, -2.0, 1.0]).unwrap()),
    ]);
    let scalars = [at(0), at(1)];
    let chain = |feeds: &'static [(&'static str, &'static str)], scalars| Chain {
        inputs: &inputs,
        scalars,
        feeds,
        outputs: &["next"],
    };
    let mut err = |c| match block_on(exe.run_chain(c)) {
        Err(Error::BadArgument(m)) => m,
        other => panic!("{other:?}"),
    };
    assert_eq!(err(chain(&[("sums", "x")], &scalars)), "output 'sums' (f32[4]) cannot feed input 'x' (f32[1,4])");
    assert_eq!(err(chain(&[("nope", "x")], &scalars)), "graph 'chain' has no output 'nope' to feed");
    assert_eq!(err(chain(&[("next", "nope")], &scalars)), "graph 'chain' has no input 'nope' to feed");
    assert_eq!(err(chain(&[("next", "x")], &[])), "a chain of runs of graph 'chain' needs at least one run");
    // Nothing ran: the cache is still zero.
    assert_eq!(block_on(exe.read_state("cache")).unwrap().to_f32(), vec![0.0; 32]);
}

/// A folder of its own under the system's temporary folder, emptied first.
fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("susurrus-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn compiled_pipelines_are_kept_in_the_pipeline_cache_folder() {
    let dir = scratch_dir("pipelines");
    let options = WgpuOptions { pipeline_cache: Some(dir.clone()), ..WgpuOptions::default() };
    let plan = plan(cache_graph()).unwrap();
    let first = backend(options.clone());
    assert!(first.device().features().contains(wgpu::Features::PIPELINE_CACHE), "the adapter has a pipeline cache");
    let mut exe = block_on(first.compile(&plan, &weights())).unwrap();
    let want = block_on(exe.run(&row([1.0, 2.0, 3.0, 4.0]), &at(2), &["sums"])).unwrap();
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "one file per adapter, no temporary left: {files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("wgpu_pipeline_cache_vulkan_"), "{name}");
    let stored = std::fs::read(&files[0]).unwrap();
    assert!(!stored.is_empty());

    // A second device starts from the file and computes the same; its pipelines all came
    // from the file, so the file is left as it was (not written again and renamed over).
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(&files[0]).unwrap().ino();
    let second = backend(options);
    let mut exe = block_on(second.compile(&plan, &weights())).unwrap();
    assert_eq!(block_on(exe.run(&row([1.0, 2.0, 3.0, 4.0]), &at(2), &["sums"])).unwrap(), want);
    assert_eq!(std::fs::metadata(&files[0]).unwrap().ino(), inode, "an unchanged cache was written again");
    assert_eq!(std::fs::read(&files[0]).unwrap(), stored);

    // Garbage in the file is ignored (the cache starts empty) and replaced.
    std::fs::write(&files[0], b"not a pipeline cache").unwrap();
    let third = backend(WgpuOptions { pipeline_cache: Some(dir.clone()), ..WgpuOptions::default() });
    let mut exe = block_on(third.compile(&plan, &weights())).unwrap();
    assert_eq!(block_on(exe.run(&row([1.0, 2.0, 3.0, 4.0]), &at(2), &["sums"])).unwrap(), want);
    assert_ne!(std::fs::read(&files[0]).unwrap(), b"not a pipeline cache");

    // A folder that cannot be made is an error naming it.
    let blocked = scratch_dir("pipelines-blocked");
    std::fs::write(&blocked, b"a file where the folder goes").unwrap();
    let fourth = backend(WgpuOptions { pipeline_cache: Some(blocked.join("inside")), ..WgpuOptions::default() });
    let err = block_on(fourth.compile(&plan, &weights())).err().unwrap().to_string();
    assert!(
        err.contains("cannot create the folder of the pipeline cache") && err.contains("pipelines-blocked"),
        "{err}"
    );
    std::fs::remove_file(&blocked).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
