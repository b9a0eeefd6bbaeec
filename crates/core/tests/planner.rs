//! The memory planner and the CPU executor that runs plans on a real arena.
//!
//! Plans are checked two ways: against their own liveness intervals (buffers live at the same
//! time never share bytes) and by an independent simulation that tags every arena byte with
//! the value last written there and checks that each value is still intact whenever it is
//! read. The CPU executor is then compared bit for bit with the interpreter, which keeps
//! every value separately and so cannot suffer from planner mistakes.

use std::collections::HashMap;

use pollster::block_on;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use susurrus_core::exec::Backend;
use susurrus_core::exec::cpu::CpuBackend;
use susurrus_core::ir::evaluate;
use susurrus_core::ops::{BinaryKind, KvWrite, Memory, Op, Reduce, ReduceKind, Reshape, UnaryKind};
use susurrus_core::plan::{ARENA_ALIGN, Interval, Plan, Storage, plan};
use susurrus_core::{DType, Graph, NodeId, Shape, Tensor, TensorType, passes};
use susurrus_whisper::graphs::demo::{EncoderLayerShape, encoder_layer};

fn f32_ty(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims)
}

// ---------------------------------------------------------------------------------------
// Random graphs

/// One step of a random graph: which op, two operand picks, an op-specific flag and
/// whether the result becomes a graph output.
type Step = (u8, u16, u16, bool, bool);

#[derive(Clone, Debug)]
struct Spec {
    scale: usize,
    steps: Vec<Step>,
}

fn spec() -> impl Strategy<Value = Spec> {
    let step = (0u8..9, any::<u16>(), any::<u16>(), any::<bool>(), prop::bool::weighted(0.2));
    (1usize..=24, prop::collection::vec(step, 1..40)).prop_map(|(scale, steps)| Spec { scale, steps })
}

/// Shapes with the element count of `ty` that a reshape may produce.
fn reshape_targets(ty: &TensorType) -> Vec<Shape> {
    let n = ty.numel();
    let mut out = vec![Shape::from([n])];
    if n.is_multiple_of(2) {
        out.push(Shape::from([n / 2, 2]));
    }
    let mut reversed = ty.shape.dims().to_vec();
    reversed.reverse();
    out.push(Shape::from(reversed));
    out
}

/// Builds a random DAG of elementwise, reshape, matmul and reduce ops over two inputs, with
/// params and constants mixed in. An op whose shapes do not fit falls back to `neg`, so
/// every step adds a value. Many elementwise ops meet inputs that die at them: in-place
/// opportunities.
fn build(spec: &Spec) -> Graph {
    let mut g = Graph::new("random");
    let (r, c) = (2 * spec.scale, 8);
    let x0 = g.input("x0", f32_ty(&[r, c])).unwrap();
    let x1 = g.input("x1", f32_ty(&[c, r])).unwrap();
    let pos = g.scalar("pos");
    let mut values = vec![x0, x1];
    for (i, &(kind, pa, pb, flag, output)) in spec.steps.iter().enumerate() {
        let a = values[pa as usize % values.len()];
        let b = values[pb as usize % values.len()];
        let tried = match kind {
            0 => {
                let kinds = [UnaryKind::Neg, UnaryKind::Relu, UnaryKind::Tanh, UnaryKind::Sigmoid];
                g.unary(kinds[pb as usize % kinds.len()], a)
            }
            1 => {
                let kinds = [BinaryKind::Add, BinaryKind::Sub, BinaryKind::Mul, BinaryKind::Max];
                g.binary(kinds[(pa ^ pb) as usize % kinds.len()], a, b)
            }
            2 => {
                let targets = reshape_targets(g.ty(a));
                g.push(Reshape { shape: targets[pb as usize % targets.len()].clone() }, &[a])
            }
            3 if flag => g.matmul_t(a, b),
            3 => g.matmul(a, b),
            4 => {
                let rank = g.ty(a).shape.rank();
                g.push(Reduce { kind: ReduceKind::Sum, axis: rank.saturating_sub(1), keep_dim: flag }, &[a])
            }
            5 => {
                let w = g.param(&format!("w{i}"), g.ty(a).clone()).unwrap();
                values.push(w);
                g.mul(a, w)
            }
            6 => {
                let ty = g.ty(a).clone();
                let data = (0..ty.numel()).map(|k| (k % 7) as f32 * 0.25 - 0.5).collect();
                let k = g.constant(Tensor::from_f32(ty.dtype, ty.shape.clone(), data).unwrap());
                values.push(k);
                g.add(a, k)
            }
            7 => {
                // Rows of the first axis: whole 256-byte runs of an arena value when they
                // start at a multiple of 64 values (views), copies otherwise.
                let dims = g.ty(a).shape.dims().to_vec();
                match dims.split_first() {
                    Some((&rows, rest)) if rows > 0 => {
                        let inner: usize = rest.iter().product();
                        let step = if flag { 64usize.div_ceil(inner).max(1) } else { 1 };
                        let start = (pb as usize % rows) / step * step;
                        g.slice(a, 0, start, (start + 1 + pa as usize % rows).min(rows))
                    }
                    _ => g.neg(a),
                }
            }
            _ => {
                let s = g.read_scalar(pos).unwrap();
                if output {
                    g.output(&format!("o{i}"), s).unwrap();
                }
                continue;
            }
        };
        let id = tried.or_else(|_| g.neg(a)).unwrap();
        if output {
            g.output(&format!("o{i}"), id).unwrap();
        }
        values.push(id);
    }
    let last = *values.last().unwrap();
    g.output("out", last).unwrap();
    g
}

// ---------------------------------------------------------------------------------------
// Plan checks

/// The value whose bytes node `id` shows: itself, or for a view the value it views.
fn root(plan: &Plan, id: NodeId) -> NodeId {
    let node = plan.graph.node(id);
    if node.op.memory() == Memory::Alias || plan.views[id.index()] { root(plan, node.inputs[0]) } else { id }
}

fn arena_range(plan: &Plan, id: NodeId) -> Option<std::ops::Range<usize>> {
    match plan.storage[id.index()] {
        Storage::Arena { offset, size } => Some(offset..offset + size),
        _ => None,
    }
}

/// Runs the plan symbolically: every arena byte remembers which value was written there
/// last; every read checks that the bytes still hold the value read.
fn simulate(plan: &Plan) -> Result<(), String> {
    const NOTHING: u32 = u32::MAX;
    let g = &plan.graph;
    let mut owner = vec![NOTHING; plan.report.arena_bytes];
    let write = |owner: &mut Vec<u32>, id: NodeId| {
        if let Some(range) = arena_range(plan, id) {
            owner[range].fill(id.0);
        }
    };
    let intact = |owner: &Vec<u32>, id: NodeId, when: &str| -> Result<(), String> {
        let Some(range) = arena_range(plan, id) else { return Ok(()) };
        let want = root(plan, id).0;
        match owner[range].iter().find(|&&o| o != want) {
            Some(&o) => Err(format!("%{} (value of %{want}) was overwritten by %{o} {when}", id.0)),
            None => Ok(()),
        }
    };
    for id in g.ids() {
        if matches!(g.node(id).op, Op::Input(_)) {
            write(&mut owner, id);
        }
    }
    for &id in &plan.schedule {
        let node = g.node(id);
        match &node.op {
            Op::Input(_) | Op::Param(_) | Op::Const(_) | Op::State(_) => continue,
            _ => {}
        }
        for &i in &node.inputs {
            intact(&owner, i, &format!("before %{} reads it", id.0))?;
        }
        if node.op.memory() == Memory::Alias {
            if plan.storage[id.index()] != plan.storage[node.inputs[0].index()] {
                return Err(format!("view %{} is not stored where %{} is", id.0, node.inputs[0].0));
            }
        } else if plan.views[id.index()] {
            // A slice view: its bytes inside its input's.
            let (Some(own), Some(of)) = (arena_range(plan, id), arena_range(plan, node.inputs[0])) else {
                return Err(format!("slice view %{} is not in the arena", id.0));
            };
            if own.start < of.start || own.end > of.end {
                return Err(format!("slice view %{} at {own:?} is outside %{} at {of:?}", id.0, node.inputs[0].0));
            }
        } else {
            write(&mut owner, id);
        }
    }
    for (name, id) in g.outputs() {
        intact(&owner, *id, &format!("before output '{name}' is read back"))?;
    }
    Ok(())
}

/// Storage classes, sizes, alignment, interval disjointness and the report's bounds.
fn check_plan(plan: &Plan) -> Result<(), String> {
    let g = &plan.graph;
    let r = &plan.report;
    for id in g.ids() {
        let node = g.node(id);
        let storage = &plan.storage[id.index()];
        let expected = match &node.op {
            Op::Param(p) => Some(Storage::Param(p.name.clone())),
            Op::Const(_) => Some(Storage::Const(id)),
            Op::State(s) => Some(Storage::State(s.name.clone())),
            _ => None,
        };
        match (expected, storage) {
            (Some(want), got) if &want != got => return Err(format!("%{} is stored in {got:?}", id.0)),
            (None, Storage::Arena { offset, size })
                if *size != node.ty.byte_size() || offset % ARENA_ALIGN != 0 || offset + size > r.arena_bytes =>
            {
                return Err(format!("%{} has a bad arena slot {offset}+{size}", id.0));
            }
            (None, other @ (Storage::Param(_) | Storage::Const(_) | Storage::State(_)))
                if node.op.memory() != Memory::Alias =>
            {
                return Err(format!("%{} is stored in {other:?}", id.0));
            }
            _ => {}
        }
    }
    for (k, a) in plan.buffers.iter().enumerate() {
        if a.offset % ARENA_ALIGN != 0 || a.bytes % ARENA_ALIGN != 0 || a.offset + a.bytes > r.arena_bytes {
            return Err(format!("buffer {k} at {}+{} is unaligned or outside the arena", a.offset, a.bytes));
        }
        for (l, b) in plan.buffers.iter().enumerate().skip(k + 1) {
            let disjoint = a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset;
            if a.live.overlaps(&b.live) && !disjoint {
                return Err(format!("buffers {k} and {l} are live together and share bytes: {a:?} {b:?}"));
            }
        }
    }
    if r.arena_bytes < r.peak_live_bytes || r.peak_live_bytes > r.total_bytes {
        return Err(format!("report out of order: {r:?}"));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_plans_never_overlap_live_values(spec in spec()) {
        let plan = plan(build(&spec)).unwrap();
        if let Err(e) = check_plan(&plan) {
            return Err(TestCaseError::fail(format!("{e}\n{}\n{}", plan.graph, plan.placement_table())));
        }
        if let Err(e) = simulate(&plan) {
            return Err(TestCaseError::fail(format!("{e}\n{}\n{}", plan.graph, plan.placement_table())));
        }
    }
}

// ---------------------------------------------------------------------------------------
// A hand-checked plan

#[test]
fn chain_plan_is_hand_checked() {
    let mut g = Graph::new("chain");
    let x = g.input("x", f32_ty(&[4, 64])).unwrap(); // 1024 bytes
    let a = g.exp(x).unwrap();
    let b = g.neg(a).unwrap();
    let s = g.push(Reduce { kind: ReduceKind::Sum, axis: 1, keep_dim: true }, &[b]).unwrap(); // f32[4,1]
    let y = g.add(x, s).unwrap();
    let z = g.mul(y, s).unwrap();
    let r = g.push(Reshape { shape: [256].into() }, &[z]).unwrap();
    g.output("out", r).unwrap();
    let p = plan(g).unwrap();
    // Buffers and intervals (steps = node ids):
    //   X = {x}        1024 B, 0..=4 (an input: never overwritten in place)
    //   A = {a, b}     1024 B, 1..=3 (b = neg(a) takes a's buffer: a dies at b)
    //   S = {s}         256 B, 3..=5
    //   Y = {y, z, r}  1024 B, 4..=6 (z = y*s takes y's buffer; r is a view of z)
    // Largest first: X at 0; A overlaps X -> 1024; Y overlaps X but not A -> 1024;
    // S overlaps all three -> 2048.
    let arena = |offset, size| Storage::Arena { offset, size };
    assert_eq!(
        p.storage,
        vec![
            arena(0, 1024),
            arena(1024, 1024),
            arena(1024, 1024),
            arena(2048, 16),
            arena(1024, 1024),
            arena(1024, 1024),
            arena(1024, 1024)
        ]
    );
    let lives: Vec<Interval> = p.buffers.iter().map(|b| b.live).collect();
    let iv = |start, end| Interval { start, end };
    assert_eq!(lives, vec![iv(0, 4), iv(1, 3), iv(3, 5), iv(4, 6)]);
    assert_eq!(p.buffers[3].values, vec![y, z, r]);
    assert_eq!(p.report.arena_bytes, 2304);
    assert_eq!(p.report.peak_live_bytes, 2304);
    assert_eq!(p.report.total_bytes, 5 * 1024 + 256);
    assert_eq!((p.report.arena_values, p.report.in_place), (6, 2));
    assert_eq!(
        p.report.to_string(),
        "arena 2.2 KiB (peak live 2.2 KiB, 1.00x; all values 5.2 KiB; 6 values, 2 in place)"
    );
    let table = p.placement_table();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 8, "{table}");
    assert!(lines[3].contains("in place of %1") && lines[3].contains("arena @1024"), "{table}");
    assert!(lines[7].contains("view of %5") && lines[7].contains("4..=6"), "{table}");
}

#[test]
fn in_place_never_takes_inputs_outputs_or_broadcast_operands() {
    let mut g = Graph::new("guards");
    let x = g.input("x", f32_ty(&[64])).unwrap();
    let e = g.exp(x).unwrap(); // x is an input: fresh buffer
    g.output("e", e).unwrap();
    let n = g.neg(e).unwrap(); // e is an output: fresh buffer
    let row = g.input("row", f32_ty(&[1, 64])).unwrap();
    let t = g.tanh(row).unwrap();
    let m = g.push(Reshape { shape: [1, 64].into() }, &[n]).unwrap();
    let wide = g.input("wide", f32_ty(&[4, 64])).unwrap();
    let sum = g.add(t, wide).unwrap(); // t [1,64] broadcasts to [4,64]: fresh buffer
    let out = g.add(sum, m).unwrap(); // sum dies here with the output's shape: in place
    g.output("out", out).unwrap();
    let p = plan(g).unwrap();
    assert_eq!(p.report.in_place, 1);
    let buffer = |id: NodeId| p.buffer_of[id.index()].unwrap();
    assert_ne!(buffer(e), buffer(x));
    assert_ne!(buffer(n), buffer(e));
    assert_ne!(buffer(sum), buffer(t));
    assert_eq!(buffer(out), buffer(sum));
    assert_eq!(buffer(m), buffer(n));
}

// ---------------------------------------------------------------------------------------
// The Whisper-tiny encoder layer

fn report_layer(label: &str, g: Graph) -> Plan {
    let p = plan(g).unwrap();
    let r = &p.report;
    println!("{label}: {r}");
    check_plan(&p).unwrap();
    simulate(&p).unwrap();
    assert!(
        r.arena_bytes as f64 <= 1.25 * r.peak_live_bytes as f64,
        "{label}: arena {} is more than 1.25x the peak {}",
        r.arena_bytes,
        r.peak_live_bytes
    );
    p
}

#[test]
fn whisper_tiny_encoder_layer_plan_is_tight() {
    let p = report_layer("whisper tiny encoder layer", encoder_layer(&EncoderLayerShape::WHISPER_TINY).unwrap());
    // The attention scores, [6,1500,1500] f32 (54 MB), and the probabilities are live together.
    let scores = 6 * 1500 * 1500 * 4;
    assert!(p.report.peak_live_bytes >= 2 * scores);
    assert!(p.report.in_place >= 1);
}

#[test]
fn optimised_whisper_tiny_encoder_layer_plan_is_tight() {
    let mut g = encoder_layer(&EncoderLayerShape::WHISPER_TINY).unwrap();
    let fired = passes::optimize(&mut g).unwrap();
    println!("passes that changed the layer: {fired:?}");
    report_layer("optimised whisper tiny encoder layer", g);
}

// ---------------------------------------------------------------------------------------
// The CPU executor

fn random_tensor(rng: &mut StdRng, ty: &TensorType) -> Tensor {
    let values = (0..ty.numel()).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    Tensor::from_f32(ty.dtype, ty.shape.clone(), values).unwrap()
}

/// Random inputs and weights for every input and param of `g`.
fn random_args(g: &Graph, seed: u64) -> (HashMap<String, Tensor>, HashMap<String, Tensor>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut inputs, mut weights) = (HashMap::new(), HashMap::new());
    for node in g.nodes() {
        match &node.op {
            Op::Input(i) => {
                inputs.insert(i.name.clone(), random_tensor(&mut rng, &i.ty));
            }
            Op::Param(p) => {
                weights.insert(p.name.clone(), random_tensor(&mut rng, &p.ty));
            }
            _ => {}
        }
    }
    (inputs, weights)
}

/// Runs `g` on the CPU executor and the interpreter and asserts bit-identical outputs.
fn cpu_matches_interpreter(g: Graph, seed: u64) -> Result<(), String> {
    let (inputs, weights) = random_args(&g, seed);
    let scalars: HashMap<String, u32> = g.scalars().iter().map(|s| (s.clone(), 3)).collect();
    let want = evaluate(&g, &inputs, &weights, &HashMap::new(), &scalars).map_err(|e| e.to_string())?;
    let names: Vec<String> = g.outputs().iter().map(|(n, _)| n.clone()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let p = plan(g).map_err(|e| e.to_string())?;
    let mut exe = block_on(CpuBackend::new().compile(&p, &weights)).map_err(|e| e.to_string())?;
    let got = block_on(exe.run(&inputs, &scalars, &names)).map_err(|e| e.to_string())?;
    for name in names {
        let (a, b) = (&got[name], &want.outputs[name]);
        if a.ty() != b.ty() {
            return Err(format!("output '{name}' is {} on the cpu, {} in the interpreter", a.ty(), b.ty()));
        }
        let (av, bv) = (a.to_f32(), b.to_f32());
        if let Some(i) = (0..av.len()).find(|&i| av[i].to_bits() != bv[i].to_bits()) {
            return Err(format!(
                "output '{name}' differs first at element {i}: cpu {}, interpreter {}\n{}",
                av[i],
                bv[i],
                p.placement_table()
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn cpu_executor_matches_interpreter_on_random_graphs(spec in spec(), seed in any::<u64>()) {
        cpu_matches_interpreter(build(&spec), seed).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn cpu_executor_matches_interpreter_on_an_encoder_layer() {
    let shape = EncoderLayerShape { positions: 24, d_model: 32, heads: 4, ffn: 64 };
    cpu_matches_interpreter(encoder_layer(&shape).unwrap(), 11).unwrap();
    let mut optimised = encoder_layer(&shape).unwrap();
    passes::optimize(&mut optimised).unwrap();
    cpu_matches_interpreter(optimised, 12).unwrap();
}

#[test]
fn a_plan_with_overlapping_live_values_gives_wrong_numbers() {
    // The executor really computes from the arena: move b onto a (still needed by c) and
    // the result changes.
    let mut g = Graph::new("overlap");
    let x = g.input("x", f32_ty(&[64])).unwrap();
    let a = g.exp(x).unwrap();
    let b = g.neg(x).unwrap();
    let c = g.add(a, b).unwrap();
    g.output("c", c).unwrap();
    let mut p = plan(g).unwrap();
    let inputs = HashMap::from([("x".to_string(), Tensor::f32([64], vec![0.5; 64]).unwrap())]);
    let run = |p: &Plan| {
        let mut exe = block_on(CpuBackend::new().compile(p, &HashMap::new())).unwrap();
        block_on(exe.run(&inputs, &HashMap::new(), &["c"])).unwrap().remove("c").unwrap().to_f32()
    };
    let good = run(&p);
    assert!(good.iter().all(|&v| v == 0.5f32.exp() - 0.5));
    p.storage[b.index()] = p.storage[a.index()].clone();
    let bad = run(&p);
    assert!(bad.iter().all(|&v| v == -1.0), "{bad:?}");
}

fn kv_graph() -> Graph {
    let mut g = Graph::new("kv");
    let cache = g.state("cache", f32_ty(&[4, 3])).unwrap();
    let x = g.input("x", f32_ty(&[1, 3])).unwrap();
    let pos = g.scalar("pos");
    let written = g.push(KvWrite { axis: 0, offset: Some(pos) }, &[cache, x]).unwrap();
    let sum = g.push(Reduce { kind: ReduceKind::Sum, axis: 0, keep_dim: false }, &[written]).unwrap();
    g.output("sum", sum).unwrap();
    g
}

#[test]
fn kv_cache_persists_across_runs() {
    let p = plan(kv_graph()).unwrap();
    let mut exe = block_on(CpuBackend::new().compile(&p, &HashMap::new())).unwrap();
    let zeros = block_on(exe.read_state("cache")).unwrap();
    assert_eq!(zeros.to_f32(), vec![0.0; 12]);
    let step = |exe: &mut Box<dyn susurrus_core::exec::Executable>, pos: u32, row: [f32; 3]| {
        let inputs = HashMap::from([("x".to_string(), Tensor::f32([1, 3], row.to_vec()).unwrap())]);
        let scalars = HashMap::from([("pos".to_string(), pos)]);
        block_on(exe.run(&inputs, &scalars, &["sum"])).unwrap().remove("sum").unwrap().to_f32()
    };
    assert_eq!(step(&mut exe, 0, [1.0, 2.0, 3.0]), vec![1.0, 2.0, 3.0]);
    assert_eq!(step(&mut exe, 2, [4.0, 5.0, 6.0]), vec![5.0, 7.0, 9.0]);
    let cache = block_on(exe.read_state("cache")).unwrap();
    assert_eq!(cache.ty(), f32_ty(&[4, 3]));
    assert_eq!(cache.to_f32(), vec![1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 4.0, 5.0, 6.0, 0.0, 0.0, 0.0]);
    let err = block_on(exe.read_state("nope")).unwrap_err();
    assert_eq!(err.to_string(), "bad run argument: graph 'kv' has no persistent buffer 'nope'");
}

#[test]
fn cpu_executor_rejects_bad_arguments() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32_ty(&[2, 3])).unwrap();
    let w = g.param("w", f32_ty(&[4, 3])).unwrap();
    let pos = g.scalar("pos");
    let y = g.matmul_t(x, w).unwrap();
    let p = g.read_scalar(pos).unwrap();
    g.output("y", y).unwrap();
    g.output("p", p).unwrap();
    let plan = plan(g).unwrap();
    let cpu = CpuBackend::new();
    let compile_err =
        |weights: HashMap<String, Tensor>| block_on(cpu.compile(&plan, &weights)).err().unwrap().to_string();
    assert_eq!(compile_err(HashMap::new()), "bad run argument: weight 'w' was not supplied");
    let f16_w = Tensor::from_f32(DType::F16, [4, 3], vec![0.0; 12]).unwrap();
    assert_eq!(
        compile_err(HashMap::from([("w".to_string(), f16_w)])),
        "bad run argument: weight 'w': expected f32[4,3], got f16[4,3]"
    );

    let weights = HashMap::from([("w".to_string(), Tensor::f32([4, 3], vec![1.0; 12]).unwrap())]);
    let mut exe = block_on(cpu.compile(&plan, &weights)).unwrap();
    let good_x = Tensor::f32([2, 3], vec![1.0; 6]).unwrap();
    let scalars = HashMap::from([("pos".to_string(), 9)]);
    let mut run = |inputs: Vec<(&str, Tensor)>, scalars: &HashMap<String, u32>, outputs: &[&str]| {
        let inputs: HashMap<String, Tensor> = inputs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        block_on(exe.run(&inputs, scalars, outputs)).map_err(|e| e.to_string())
    };
    assert_eq!(run(vec![], &scalars, &["y"]).unwrap_err(), "bad run argument: input 'x' was not supplied");
    let f16_x = Tensor::from_f32(DType::F16, [2, 3], vec![0.0; 6]).unwrap();
    assert_eq!(
        run(vec![("x", f16_x)], &scalars, &["y"]).unwrap_err(),
        "bad run argument: input 'x': expected f32[2,3], got f16[2,3]"
    );
    assert_eq!(
        run(vec![("x", good_x.clone()), ("z", good_x.clone())], &scalars, &["y"]).unwrap_err(),
        "bad run argument: input 'z' is not used by graph 't'"
    );
    assert_eq!(
        run(vec![("x", good_x.clone())], &scalars, &["y", "nope"]).unwrap_err(),
        "bad run argument: graph 't' has no output 'nope'"
    );
    assert_eq!(
        run(vec![("x", good_x.clone())], &HashMap::new(), &["y"]).unwrap_err(),
        "bad run argument: runtime scalar 'pos' was not supplied"
    );
    let out = run(vec![("x", good_x)], &scalars, &["p", "y"]).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out["p"].as_u32(), Some(&[9u32][..]));
    assert_eq!(out["y"].to_f32(), vec![3.0; 8]);
}
