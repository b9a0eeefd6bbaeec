//! The op cases, by op family, and the toolkit they are written with.
//!
//! Every op has a function in its family's file (`elementwise.rs`, `layout.rs`, `reduce.rs`,
//! `norm.rs`, `conv.rs`, `matmul.rs`, `attention.rs`) that adds small graphs for it with
//! random shapes and data and the tolerance the op is held to. [`op_cases`] calls them in
//! registry order through one exhaustive `match` over [`OpTag`], so an op registered without
//! cases does not compile. [`CaseGen`] draws from one seeded generator, so the registry order
//! fixes what each op draws for a seed.
//!
//! Shapes mix sizes that kernels like (4, 16, 64) with odd ones (1, 3, 7, 17, 33, 65, 127) so
//! tails, bounds checks and workgroup remainders are exercised. Cases stay small (mostly
//! under 100k elements) because the same list runs on software GPUs; a few larger matmul and
//! attention cases check tiling.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use susurrus_core::error::{Error, Result};
use susurrus_core::exec::Weights;
use susurrus_core::ir::{DType, Graph, NodeId, TensorType};
use susurrus_core::ops::{Op, OpTag};
use susurrus_core::tensor::Tensor;

use crate::compare::Tolerance;
use crate::random::{Dist, random_inputs, random_tensor_with, random_weights};

mod attention;
mod conv;
mod elementwise;
mod layout;
mod matmul;
mod norm;
mod reduce;

/// The inputs and runtime scalars of one run of a case.
#[derive(Clone, Debug)]
pub struct CaseRun {
    pub inputs: HashMap<String, Tensor>,
    pub scalars: HashMap<String, u32>,
}

/// One op under test: a graph, its weights, one or more runs (persistent state carries from
/// one run to the next) and the tolerance every output and written state is held to.
#[derive(Clone, Debug)]
pub struct OpCase {
    /// Op, variant, dtypes and shapes of every leaf, and the seed: enough to read a failure
    /// and to rebuild the case.
    pub name: String,
    /// The printed name of the op under test (`matmul`, `gelu`, ...), for grouping results.
    pub op: &'static str,
    pub graph: Graph,
    pub weights: HashMap<String, Tensor>,
    pub runs: Vec<CaseRun>,
    pub tolerance: Tolerance,
    /// The tolerance on a backend whose products round their inputs to f16
    /// (`Backend::f16_products`), for the cases of product ops; `None` elsewhere.
    pub f16_products: Option<Tolerance>,
}

/// Every dtype, for data-movement ops and casts.
pub(crate) const DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::I32, DType::U32];

/// Sizes for random shapes: powers of two kernels are tuned for and odd sizes around them.
pub(crate) const SIZES: [usize; 15] = [1, 2, 3, 4, 5, 7, 8, 16, 17, 32, 33, 64, 65, 127, 128];

/// Odd sizes, for the axis an op works along.
pub(crate) const ODD: [usize; 7] = [1, 3, 7, 17, 33, 65, 127];

/// Normalised axis sizes. Not 2 or 3: a row of so few uniform values is now and then almost
/// constant, where a one-pass variance (E[x^2] - E[x]^2) legitimately loses most digits.
pub(crate) const NORM_SIZES: [usize; 7] = [1, 7, 17, 64, 65, 127, 384];

/// Elements of a typical case's largest tensor.
pub(crate) const BUDGET: usize = 20_000;

/// Values of a long row (the decoder's 51864 logits are one). Odd, so rows after the first do
/// not start 16-byte aligned.
pub(crate) const LONG_ROW: usize = 20_001;

/// Simple float arithmetic (neg, relu, add, ..., div): at most a few ulps apart.
pub(crate) const ARITH: Tolerance = Tolerance::Close { abs: 1e-6, rel: 1e-6 };
/// exp, log, tanh, erf, ...: GPU built-ins and polynomial approximations are a few ulps off.
pub(crate) const TRANSCENDENTAL: Tolerance = Tolerance::Close { abs: 1e-5, rel: 1e-5 };
/// Normalisations (layer norm): mean and variance accumulate, and the result is divided by a
/// standard deviation that may be small.
pub(crate) const NORM: Tolerance = Tolerance::Close { abs: 1e-4, rel: 1e-4 };
/// Softmax: probabilities in (0, 1], each through exp and one division by a row sum.
pub(crate) const SOFTMAX: Tolerance = Tolerance::Close { abs: 1e-6, rel: 1e-4 };
/// Chains of several transcendental steps (fused programs).
pub(crate) const CHAIN: Tolerance = Tolerance::Close { abs: 1e-4, rel: 1e-4 };

/// A sum of `n` products of values of magnitude up to about 4, in any order: the error grows
/// with `n` (backends split sums differently from the sequential reference). Sampled sums of
/// 384 such products in f32 stray up to about 8e-5 from the exact value, whatever the order;
/// `1e-6 * n` leaves a margin of about five.
pub(crate) fn accumulate(n: usize) -> Tolerance {
    Tolerance::Close { abs: 1e-6 * n as f32 + 1e-6, rel: 1e-5 }
}

/// The same sum of `n` products when the products' inputs are rounded to f16 (matrix units):
/// each input then carries a relative error of up to 2^-11, so a product of two values of
/// magnitude up to 4 is off by up to 16 * 2^-10, with a standard deviation of about 2e-3 for
/// such random values. Those errors add up like a random walk, about 2e-3 * sqrt(n); eight
/// times that bounds them. A kernel that mixes up rows, columns or steps is off by the size
/// of the values themselves, about 5 * sqrt(n).
pub(crate) fn accumulate_f16(n: usize) -> Tolerance {
    Tolerance::Close { abs: 0.016 * (n as f32).sqrt() + 1e-3, rel: 1e-3 }
}

/// Every op case for `seed`: the cases of every op in the registry but the leaves the harness
/// feeds. The same seed gives the same cases on every machine. Fails only when an op rejects
/// a case's graph (an op whose shape rules changed), naming the case.
pub fn op_cases(seed: u64) -> Result<Vec<OpCase>> {
    let mut cases = CaseGen::new(seed);
    for &tag in OpTag::ALL {
        add_cases(tag, &mut cases)?;
    }
    long_row_cases(&mut cases)?;
    Ok(cases.into_cases())
}

/// Adds the cases of one registry entry. Leaves come from outside the computation: the
/// harness feeds them, so they have no cases of their own.
fn add_cases(tag: OpTag, cases: &mut CaseGen) -> Result<()> {
    match tag {
        OpTag::Input | OpTag::Param | OpTag::Const | OpTag::State => Ok(()),
        OpTag::Unary => elementwise::unary(cases),
        OpTag::Binary => elementwise::binary(cases),
        OpTag::Compare => elementwise::compare(cases),
        OpTag::Select => elementwise::select(cases),
        OpTag::Cast => elementwise::cast(cases),
        OpTag::ScalarRead => elementwise::scalar(cases),
        OpTag::FusedElementwise => elementwise::fused_elementwise(cases),
        OpTag::Reduce => reduce::reduce(cases),
        OpTag::Argmax => reduce::argmax(cases),
        OpTag::TopK => reduce::top_k(cases),
        OpTag::Softmax => reduce::softmax(cases),
        OpTag::LayerNorm => norm::layer_norm(cases),
        OpTag::AddLayerNorm => norm::add_layer_norm(cases),
        OpTag::MatMul => matmul::matmul(cases),
        OpTag::MatMulBias => matmul::matmul_bias(cases),
        OpTag::Conv1d => conv::conv1d(cases),
        OpTag::Reshape => layout::reshape(cases),
        OpTag::Permute => layout::permute(cases),
        OpTag::Slice => layout::slice(cases),
        OpTag::Concat => layout::concat(cases),
        OpTag::Gather => layout::gather(cases),
        OpTag::KvWrite => layout::kv_write(cases),
        OpTag::Attention => attention::attention(cases),
    }
}

/// Reductions, argmax and softmax over a few long rows: GPU backends split such rows over
/// many blocks and combine the partial results, a path the short rows of the random shapes
/// never take. Argmax runs on many ties, so the first largest value must win across the
/// parts. Layer norms of the widths larger Whispers have (768 to 1280) and longer: GPU
/// backends spread such rows over more threads. Attention over as many keys as a 30 s
/// window has, and more: score rows GPU backends keep in registers or not. Drawn after every
/// op's cases, which stay as they were.
fn long_row_cases(cases: &mut CaseGen) -> Result<()> {
    for sk in [1500, 2052] {
        let mut g = Graph::new("attention");
        let q = g.input("q", ty(DType::F32, &[1, 12, 16]))?;
        let k = g.input("k", ty(DType::F32, &[1, sk, 16]))?;
        let v = g.input("v", ty(DType::F32, &[1, sk, 16]))?;
        let attention = susurrus_core::ops::Attention { scale: 0.25, mask: susurrus_core::ops::MaskKind::None };
        let y = g.push(attention, &[q, k, v])?;
        g.output("y", y)?;
        let tol = Tolerance::Close { abs: 1e-6 * (16 + sk) as f32 + 1e-5, rel: 1e-4 };
        cases.push("attention", &format!("attention long rows sk={sk}"), g, tol, &[])?;
    }
    for d in [1280, 5000] {
        let mut g = Graph::new("layer_norm");
        let x = g.input("x", ty(DType::F32, &[2, d]))?;
        let gamma = g.param("gamma", ty(DType::F16, &[d]))?;
        let beta = g.param("beta", ty(DType::F16, &[d]))?;
        let y = g.layer_norm(x, gamma, beta, 1e-5)?;
        g.output("y", y)?;
        cases.push("layer_norm", &format!("layer_norm long rows {d}"), g, NORM, &[])?;
        let mut g = Graph::new("add_layer_norm");
        let a = g.input("a", ty(DType::F32, &[2, d]))?;
        let b = g.input("b", ty(DType::F32, &[2, d]))?;
        let gamma = g.param("gamma", ty(DType::F32, &[d]))?;
        let beta = g.param("beta", ty(DType::F32, &[d]))?;
        let y = g.push(susurrus_core::ops::AddLayerNorm { eps: 1e-5 }, &[a, b, gamma, beta])?;
        g.output("y", y)?;
        cases.push("add_layer_norm", &format!("add_layer_norm long rows {d}"), g, NORM, &[])?;
    }
    use susurrus_core::ops::reduce::ReduceKind;
    let ty = ty(DType::F32, &[3, LONG_ROW]);
    for kind in ReduceKind::ALL {
        let mut g = Graph::new(kind.name());
        let x = g.input("x", ty.clone())?;
        let y = g.reduce(kind, x, 1, true)?;
        g.output("y", y)?;
        let tol = if kind == ReduceKind::Max { Tolerance::Exact } else { accumulate(LONG_ROW) };
        cases.push(kind.name(), &format!("{} long rows", kind.name()), g, tol, &[])?;
    }
    let mut g = Graph::new("argmax");
    let x = g.input("x", ty.clone())?;
    let y = g.argmax(x, 1)?;
    g.output("y", y)?;
    cases.push("argmax", "argmax long rows ties", g, Tolerance::Exact, &[("x", Dist::Ints { lo: 0, hi: 3 })])?;
    let mut g = Graph::new("softmax");
    let x = g.input("x", ty)?;
    let y = g.softmax(x)?;
    g.output("y", y)?;
    cases.push("softmax", "softmax long rows wide", g, SOFTMAX, &[("x", Dist::Uniform { lo: -100.0, hi: 100.0 })])
}

/// Draws shapes and data for the cases of one seed and collects the cases.
pub(crate) struct CaseGen {
    seed: u64,
    /// The one source of randomness: op files draw their own settings from it.
    pub(crate) rng: StdRng,
    cases: Vec<OpCase>,
}

/// A dtype-typed tensor type, briefly.
pub(crate) fn ty(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims)
}

/// `name:type` for every leaf and the first output's type: the shapes a reader needs.
fn describe(g: &Graph) -> String {
    let mut parts = Vec::new();
    for node in g.nodes() {
        match (&node.op, node.op.leaf_name()) {
            (_, Some(name)) => parts.push(format!("{name}:{}", node.ty)),
            (Op::Const(_), None) => parts.push(format!("const:{}", node.ty)),
            _ => {}
        }
    }
    if let Some((_, id)) = g.outputs().first() {
        parts.push(format!("-> {}", g.ty(*id)));
    }
    parts.join(" ")
}

impl CaseGen {
    pub(crate) fn new(seed: u64) -> CaseGen {
        CaseGen { seed, rng: StdRng::seed_from_u64(seed), cases: Vec::new() }
    }

    /// The cases added so far, in order.
    pub(crate) fn into_cases(self) -> Vec<OpCase> {
        self.cases
    }

    /// One of `from`, uniformly.
    pub(crate) fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.rng.random_range(0..from.len())]
    }

    /// A fair coin flip.
    pub(crate) fn coin(&mut self) -> bool {
        self.rng.random_bool(0.5)
    }

    /// A shape of `rank` with at most `budget` elements, from [`SIZES`] in random order.
    pub(crate) fn shape(&mut self, rank: usize, budget: usize) -> Vec<usize> {
        let mut left = budget.max(1);
        let mut dims = Vec::with_capacity(rank);
        for _ in 0..rank {
            let fits: Vec<usize> = SIZES.iter().copied().filter(|&d| d <= left).collect();
            let d = self.pick(&fits);
            left /= d;
            dims.push(d);
        }
        dims.shuffle(&mut self.rng);
        dims
    }

    /// A random constant of type `t`.
    pub(crate) fn constant(&mut self, g: &mut Graph, t: TensorType, dist: Dist) -> NodeId {
        let value = random_tensor_with(&t, dist, &mut self.rng);
        g.constant(value)
    }

    /// Random inputs and weights for `g` (with `dists` overriding the defaults of named
    /// leaves) and `scalars`, as one run.
    pub(crate) fn run(
        &mut self,
        g: &Graph,
        dists: &[(&str, Dist)],
        scalars: &[(&str, u32)],
    ) -> Result<(CaseRun, Weights)> {
        let data_seed = self.rng.random::<u64>();
        let mut inputs = random_inputs(g, data_seed);
        let mut weights = random_weights(g, data_seed);
        let mut rng = StdRng::seed_from_u64(data_seed ^ 1);
        for &(name, dist) in dists {
            let map = if inputs.contains_key(name) { &mut inputs } else { &mut weights };
            let t = map
                .get(name)
                .ok_or_else(|| Error::InvalidGraph(format!("harness case {}: no input or param '{name}'", g.name())))?;
            let redrawn = random_tensor_with(&t.ty(), dist, &mut rng);
            map.insert(name.to_string(), redrawn);
        }
        let scalars = scalars.iter().map(|&(n, v)| (n.to_string(), v)).collect();
        Ok((CaseRun { inputs, scalars }, weights))
    }

    /// Adds a one-run case for `g`, named `label` plus its leaves.
    pub(crate) fn push(
        &mut self,
        op: &'static str,
        label: &str,
        g: Graph,
        tol: Tolerance,
        dists: &[(&str, Dist)],
    ) -> Result<()> {
        let (run, weights) = self.run(&g, dists, &[])?;
        self.push_runs(op, label, g, tol, weights, vec![run]);
        Ok(())
    }

    /// Gives the case added last the tolerance `tol` on backends whose products round their
    /// inputs to f16 ([`OpCase::f16_products`]).
    pub(crate) fn f16_products(&mut self, tol: Tolerance) {
        if let Some(case) = self.cases.last_mut() {
            case.f16_products = Some(tol);
        }
    }

    /// Adds a case with several runs (each drawn with [`CaseGen::run`]), named `label` plus
    /// its leaves.
    pub(crate) fn push_runs(
        &mut self,
        op: &'static str,
        label: &str,
        graph: Graph,
        tolerance: Tolerance,
        weights: Weights,
        runs: Vec<CaseRun>,
    ) {
        let name = format!("{label} {} (seed {})", describe(&graph), self.seed);
        self.cases.push(OpCase { name, op, graph, weights, runs, tolerance, f16_products: None });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_deterministic_and_well_formed() {
        let a = op_cases(3).unwrap();
        let b = op_cases(3).unwrap();
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.name, y.name);
            assert_eq!(x.graph, y.graph);
            assert_eq!(x.runs[0].inputs, y.runs[0].inputs);
        }
        for case in &a {
            susurrus_core::ir::verify(&case.graph).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            assert!(!case.graph.outputs().is_empty(), "{} has no output", case.name);
            assert!(case.name.contains(case.op), "{} does not name its op {}", case.name, case.op);
            assert!(case.graph.nodes().iter().any(|n| n.op.name() == case.op), "{} lacks its op", case.name);
        }
        let names_differ = op_cases(4).unwrap().iter().zip(&a).any(|(x, y)| x.name != y.name);
        assert!(names_differ, "another seed draws other shapes");
    }

    #[test]
    fn shapes_stay_within_budget_and_include_odd_sizes() {
        let mut odd = false;
        for seed in 0..16 {
            for case in op_cases(seed).unwrap() {
                let elements: usize = case.graph.nodes().iter().map(|n| n.ty.numel()).max().unwrap_or(0);
                assert!(elements <= 100_000, "{} has a tensor of {elements} elements", case.name);
                odd |= case.graph.nodes().iter().any(|n| n.ty.shape.dims().iter().any(|&d| d > 4 && d % 2 == 1));
            }
        }
        assert!(odd);
    }
}
