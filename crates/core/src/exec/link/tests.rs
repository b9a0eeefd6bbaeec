use super::*;
use crate::ops::Op;
use crate::plan::{plan, plan_with};

fn f32t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims)
}

/// The options every plan of these tests is made with unless a test says otherwise.
fn needs(plan: PlanOptions) -> Needs {
    Needs { backend: "test", plan, wide_f16_leaves: false }
}

fn weights(pairs: &[(&str, Tensor)]) -> Weights {
    pairs.iter().map(|(n, t)| (n.to_string(), t.clone())).collect()
}

/// `y = x * w (+ c)`, with the state `kv` of type `kv` when given.
fn graph(name: &str, with_const: bool, kv: Option<TensorType>) -> Graph {
    let mut g = Graph::new(name);
    let x = g.input("x", f32t(&[4])).unwrap();
    let w = g.param("w", f32t(&[4])).unwrap();
    let mut y = g.mul(x, w).unwrap();
    if with_const {
        let c = g.constant(Tensor::f32([4], vec![1.0; 4]).unwrap());
        y = g.add(y, c).unwrap();
    }
    if let Some(ty) = kv {
        let s = g.state("kv", ty).unwrap();
        g.output("kv", s).unwrap();
    }
    g.output("y", y).unwrap();
    g
}

fn leaf_place(leaf: usize, bytes: usize, dtype: DType, f16_words: bool) -> Place {
    Place { block: Block::Leaf(leaf), offset: 0, bytes, dtype, f16_words }
}

#[test]
fn a_weight_two_plans_declare_is_one_leaf_and_each_constant_is_its_own() {
    let (a, b) = (plan(graph("a", true, None)).unwrap(), plan(graph("b", true, None)).unwrap());
    let w = weights(&[("w", Tensor::f32([4], vec![1.0, 2.0, 3.0, 4.0]).unwrap())]);
    let link = Link::new(&[&a, &b], &w, &needs(PlanOptions::default())).unwrap();
    // Node 1 is `w` and node 3 the constant in both graphs: w, a's constant, b's constant.
    assert_eq!(link.leaves.iter().map(Leaf::label).collect::<Vec<_>>(), ["w", "const", "const"]);
    assert!(std::ptr::eq(link.leaves[0].tensor(), &w["w"]), "the weight is borrowed, not copied");
    for (p, constant) in [(0, 1), (1, 2)] {
        assert_eq!(link.plans[p].place(NodeId(1)), leaf_place(0, 16, DType::F32, false));
        assert_eq!(link.plans[p].place(NodeId(3)), leaf_place(constant, 16, DType::F32, false));
    }
    // The input lives in the arena, at the plan's offset.
    assert_eq!(
        link.plans[0].place(NodeId(0)),
        Place { block: Block::Arena(0), offset: 0, bytes: 16, dtype: DType::F32, f16_words: false }
    );
    assert!(matches!(link.plans[0].plan, Cow::Borrowed(_)), "a plan made with the needed options is used as is");
}

#[test]
fn weights_are_checked_in_every_plan_that_declares_them() {
    let (a, b) = (plan(graph("a", false, None)).unwrap(), plan(graph("b", false, None)).unwrap());
    let err = |w: &Weights| Link::new(&[&a, &b], w, &needs(PlanOptions::default())).unwrap_err().to_string();
    assert_eq!(err(&Weights::new()), "bad run argument: weight 'w' was not supplied");
    let wrong = weights(&[("w", Tensor::f32([3], vec![0.0; 3]).unwrap())]);
    assert_eq!(err(&wrong), "bad run argument: weight 'w': expected f32[4], got f32[3]");
}

#[test]
fn a_persistent_buffer_is_shared_by_name_and_must_have_one_type() {
    let w = weights(&[("w", Tensor::f32([4], vec![0.0; 4]).unwrap())]);
    let a = plan(graph("a", false, Some(f32t(&[4, 3])))).unwrap();
    let b = plan(graph("b", false, Some(f32t(&[4, 3])))).unwrap();
    let link = Link::new(&[&a, &b], &w, &needs(PlanOptions::default())).unwrap();
    assert_eq!(link.states, [StateBuffer { name: "kv".into(), ty: f32t(&[4, 3]), f16_words: false }]);
    let kv = Place { block: Block::State(0), offset: 0, bytes: 48, dtype: DType::F32, f16_words: false };
    // `kv` is node 3 of both graphs (after x, w and the product).
    assert_eq!((link.plans[0].place(NodeId(3)), link.plans[1].place(NodeId(3))), (kv, kv));
    assert_eq!((link.state_of(1, "kv"), link.state_of(1, "nope")), (Some(0), None));

    let other = plan(graph("b", false, Some(f32t(&[2, 3])))).unwrap();
    let err = Link::new(&[&a, &other], &w, &needs(PlanOptions::default())).unwrap_err().to_string();
    assert_eq!(err, "bad run argument: persistent buffer 'kv' is f32[4,3] in one graph and f32[2,3] in 'b'");
}

/// `y = -x` for 192 f32s: x (768 bytes, an input) is live where y is computed, so they cannot
/// share bytes.
fn neg_graph() -> Graph {
    let mut g = Graph::new("split");
    let x = g.input("x", f32t(&[192])).unwrap();
    let y = g.neg(x).unwrap();
    g.output("y", y).unwrap();
    g
}

#[test]
fn an_arena_above_the_limit_is_split_with_no_value_across_two_blocks() {
    let limited = PlanOptions { max_buffer_bytes: 1024, f16_bytes: 2 };
    let given = plan(neg_graph()).unwrap();
    let none = Weights::new();
    let link = Link::new(&[&given], &none, &needs(limited.clone())).unwrap();
    let linked = &link.plans[0];
    // Planned again: x at 0..768; y would take 768..1536 across the cut at 1024, so it starts
    // the second block: an arena of 1792 bytes in blocks of 1024 and 768.
    assert_eq!(linked.plan.options, limited);
    assert_eq!(linked.arena, [1024, 768]);
    let arena =
        |block, bytes| Place { block: Block::Arena(block), offset: 0, bytes, dtype: DType::F32, f16_words: false };
    assert_eq!(linked.places, [arena(0, 768), arena(1, 768)]);

    // The default plan puts y at 768; claiming the limit without planning for it is an error.
    let mut straddling = given.clone();
    straddling.options = limited.clone();
    let err = Link::new(&[&straddling], &none, &needs(limited)).unwrap_err().to_string();
    assert_eq!(err, "invalid graph: graph 'split': %1: bytes 768..1536 do not lie in one arena block of 1024 bytes");
}

#[test]
fn plans_share_one_arena_as_large_as_the_largest_block_of_each_index() {
    let limited = PlanOptions { max_buffer_bytes: 1024, f16_bytes: 2 };
    let big = plan_with(neg_graph(), &limited).unwrap();
    let mut g = Graph::new("small");
    let x = g.input("x", f32t(&[16])).unwrap();
    let y = g.neg(x).unwrap();
    g.output("y", y).unwrap();
    let small = plan_with(g, &limited).unwrap();
    let none = Weights::new();
    let link = Link::new(&[&small, &big], &none, &needs(limited)).unwrap();
    // x and y of 64 bytes each, one block; the big plan's two blocks as above.
    assert_eq!(link.plans[0].arena.len(), 1);
    assert!(link.plans[0].arena[0] >= 128 && link.plans[0].arena[0] < 1024);
    assert_eq!(link.plans[1].arena, [1024, 768]);
    assert_eq!(link.shared_arena(), [1024, 768]);
    let alone = Link::new(&[&small], &none, &needs(link.plans[0].plan.options.clone())).unwrap();
    assert_eq!(alone.shared_arena(), alone.plans[0].arena);
}

#[test]
fn an_empty_arena_is_one_empty_block_and_a_zero_limit_is_an_error() {
    let mut g = Graph::new("leaves");
    let w = g.param("w", f32t(&[2])).unwrap();
    g.output("w", w).unwrap();
    let p = plan(g).unwrap();
    let w = weights(&[("w", Tensor::f32([2], vec![1.0, 2.0]).unwrap())]);
    assert_eq!(Link::new(&[&p], &w, &needs(PlanOptions::default())).unwrap().plans[0].arena, [0]);
    let zero = needs(PlanOptions { max_buffer_bytes: 0, f16_bytes: 2 });
    assert_eq!(
        Link::new(&[&p], &w, &zero).unwrap_err().to_string(),
        "backend error: test: arena blocks cannot be empty"
    );
    let odd = needs(PlanOptions { max_buffer_bytes: 1024, f16_bytes: 3 });
    assert!(Link::new(&[&p], &w, &odd).unwrap_err().to_string().contains("cannot take 3 bytes"));
}

#[test]
fn views_share_their_input_and_f16_words_follow_the_needs() {
    let mut g = Graph::new("views");
    let pos = g.scalar("pos");
    let table = g.param("table", TensorType::new(DType::F16, [2, 3])).unwrap();
    let flat = g.reshape(table, [6]).unwrap();
    let kv = g.state("kv", TensorType::new(DType::F16, [4, 3])).unwrap();
    let x = g.input("x", TensorType::new(DType::F16, [1, 3])).unwrap();
    let written = g.kv_write(kv, x, 0, pos).unwrap();
    g.output("flat", flat).unwrap();
    g.output("written", written).unwrap();
    let p = plan(g).unwrap();
    let w = weights(&[("table", Tensor::from_f32(DType::F16, [2, 3], vec![0.5; 6]).unwrap())]);

    // As f16 (the CPU backends): every value in its own bytes.
    let link = Link::new(&[&p], &w, &needs(PlanOptions::default())).unwrap();
    let linked = &link.plans[0];
    assert_eq!(linked.place(flat), linked.place(table));
    assert_eq!(linked.place(table), leaf_place(0, 12, DType::F16, false));
    assert_eq!(linked.place(written), linked.place(kv));
    assert_eq!(linked.place(kv).bytes, 24);
    assert_eq!(linked.place(x).bytes, 6);

    // Arena and states as f32 words, leaves widened too (CUDA's f32 products).
    let wide = Needs {
        backend: "test",
        plan: PlanOptions { max_buffer_bytes: usize::MAX, f16_bytes: 4 },
        wide_f16_leaves: true,
    };
    let link = Link::new(&[&p], &w, &wide).unwrap();
    let linked = &link.plans[0];
    assert!(matches!(linked.plan, Cow::Owned(_)), "planned again for 4-byte f16 values");
    assert_eq!(linked.place(flat), leaf_place(0, 24, DType::F16, true));
    assert_eq!(
        linked.place(written),
        Place { block: Block::State(0), offset: 0, bytes: 48, dtype: DType::F16, f16_words: true }
    );
    assert_eq!((linked.place(x).bytes, linked.place(x).f16_words), (12, true));
    let words: Vec<f32> = bytemuck::pod_collect_to_vec(&link.leaves[0].stored());
    assert_eq!(words, [0.5; 6]);
}

#[test]
fn runtime_scalars_have_one_limit_and_fill_the_table_in_order() {
    let many = |n: usize| {
        let mut g = Graph::new("many");
        for i in 0..n {
            let s = g.scalar(&format!("s{i}"));
            let v = g.read_scalar(s).unwrap();
            g.output(&format!("v{i}"), v).unwrap();
        }
        plan(g).unwrap()
    };
    let fits = many(MAX_RUNTIME_SCALARS);
    assert!(Link::new(&[&fits], &Weights::new(), &needs(PlanOptions::default())).is_ok());
    let over = many(MAX_RUNTIME_SCALARS + 1);
    let err = Link::new(&[&fits, &over], &Weights::new(), &needs(PlanOptions::default())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "graph 'many' with 17 runtime scalars (at most 16) is not supported by the test backend"
    );

    let two = many(2);
    let given = HashMap::from([("s1".to_string(), 7), ("s0".to_string(), 5)]);
    let mut want = [0; MAX_RUNTIME_SCALARS];
    want[..2].copy_from_slice(&[5, 7]);
    assert_eq!(scalar_table(&two.graph, &given).unwrap(), want);
    assert_eq!(SCALAR_TABLE_BYTES, 64);
    let all: HashMap<String, u32> = (0..=MAX_RUNTIME_SCALARS).map(|i| (format!("s{i}"), 1)).collect();
    let err = scalar_table(&over.graph, &all).unwrap_err().to_string();
    assert_eq!(err, "invalid graph: graph 'many' has more than 16 runtime scalars");
}

#[test]
fn plans_made_otherwise_are_planned_again_and_leaves_can_be_shared() {
    let p = plan_with(neg_graph(), &PlanOptions { max_buffer_bytes: 1024, f16_bytes: 2 }).unwrap();
    let none = Weights::new();
    let link = Link::new(&[&p], &none, &needs(PlanOptions::default())).unwrap();
    assert_eq!(link.plans[0].arena, [1536]);
    assert_eq!(link.plans[0].place(NodeId(1)).offset, 768);

    let c = plan(graph("c", true, None)).unwrap();
    let w = weights(&[("w", Tensor::f32([4], vec![0.0; 4]).unwrap())]);
    let link = Link::new(&[&c], &w, &needs(PlanOptions::default())).unwrap();
    let Op::Const(constant) = &c.graph.node(NodeId(3)).op else { panic!("node 3 is the constant") };
    assert!(Arc::ptr_eq(&link.leaves[1].shared(), &constant.value), "constants are shared, not copied");
    assert_eq!(*link.leaves[0].shared(), w["w"]);
}

/// An embedding read by a gather and a linear layer, in two plans.
fn embedding_graph(name: &str) -> Graph {
    let mut g = Graph::new(name);
    let ids = g.input("ids", TensorType::new(DType::U32, [1])).unwrap();
    let table = g.param("table", TensorType::new(DType::F16, [48, 8])).unwrap();
    let rows = g.gather(table, ids).unwrap();
    let rows = g.cast(rows, DType::F32).unwrap();
    let logits = g.matmul_t(rows, table).unwrap();
    g.output("logits", logits).unwrap();
    g
}

#[test]
fn a_weight_above_the_limit_is_leaves_of_rows_that_every_plan_shares() {
    let (a, b) = (plan(embedding_graph("a")).unwrap(), plan(embedding_graph("b")).unwrap());
    let table = Tensor::from_f32(DType::F16, [48, 8], (0..384).map(|i| i as f32).collect()).unwrap();
    let w = weights(&[("table", table.clone())]);
    // 16 bytes a row as f16, 768 in all: three blocks of 16 rows within 256 bytes.
    let limited = PlanOptions { max_buffer_bytes: 256, f16_bytes: 4 };
    let link = Link::new(&[&a, &b], &w, &needs(limited.clone())).unwrap();
    let labels: Vec<&str> = link.leaves.iter().map(Leaf::label).collect();
    assert_eq!(labels[..3], ["table[0..16]", "table[16..32]", "table[32..48]"]);
    assert!(link.leaves.iter().all(|l| l.label() != "table" && l.bytes() <= 256), "{labels:?}");
    assert_eq!(link.leaves[1].tensor().to_f32(), table.to_f32()[128..256]);
    // Plan b reads the same three leaves.
    let leaves_of = |p: &LinkedPlan| {
        let mut l: Vec<usize> = p
            .places
            .iter()
            .filter_map(|pl| match pl.block {
                Block::Leaf(i) if link.leaves[i].label().starts_with("table") => Some(i),
                _ => None,
            })
            .collect();
        l.dedup();
        l
    };
    assert_eq!(leaves_of(&link.plans[0]), [0, 1, 2]);
    assert_eq!(leaves_of(&link.plans[1]), [0, 1, 2]);

    let wide = Needs { wide_f16_leaves: true, ..needs(limited) };
    let link = Link::new(&[&a], &w, &wide).unwrap();
    let blocks: Vec<&str> = link.leaves.iter().map(Leaf::label).filter(|l| l.starts_with("table")).collect();
    // As f32 words (CUDA's f32 products) a row takes 32 bytes: six blocks of 8 rows.
    assert_eq!(
        blocks,
        ["table[0..8]", "table[8..16]", "table[16..24]", "table[24..32]", "table[32..40]", "table[40..48]"]
    );
}

#[test]
fn a_persistent_buffer_above_the_limit_is_an_error_naming_it() {
    let p = plan(graph("big", false, Some(f32t(&[128])))).unwrap();
    let w = weights(&[("w", Tensor::f32([4], vec![1.0; 4]).unwrap())]);
    let limited = PlanOptions { max_buffer_bytes: 256, f16_bytes: 2 };
    let err = Link::new(&[&p], &w, &needs(limited)).unwrap_err().to_string();
    assert_eq!(err, "'kv' of 512 bytes, more than one buffer's 256, is not supported by the test backend");
}
