//! The op cases: for every op of the registry, small graphs with random shapes and data drawn
//! from a seed, each with the tolerance its op is held to.
//!
//! Shapes mix sizes that kernels like (4, 16, 64) with odd ones (1, 3, 7, 17, 33, 65, 127) so
//! tails, bounds checks and workgroup remainders are exercised. Cases stay small (mostly
//! under 100k elements) because the same list runs on software GPUs; a few larger matmul and
//! attention cases check tiling.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::compare::Tolerance;
use super::random::{Dist, random_inputs, random_tensor_with, random_weights};
use crate::error::{Error, Result};
use crate::exec::Weights;
use crate::ir::{DType, Graph, NodeId, TensorType};
use crate::ops::{
    AddLayerNorm, Attention, BinaryKind, CmpKind, FusedElementwise, Instr, MaskKind, MatMulBias, Op, ReduceKind,
    UnaryKind,
};
use crate::tensor::Tensor;

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
}

/// Every reduction kind (`ReduceKind` has no list of its own).
pub const REDUCE_KINDS: [ReduceKind; 3] = [ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max];

/// Every dtype, for data-movement ops and casts.
const DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::I32, DType::U32];

/// Sizes for random shapes: powers of two kernels are tuned for and odd sizes around them.
const SIZES: [usize; 15] = [1, 2, 3, 4, 5, 7, 8, 16, 17, 32, 33, 64, 65, 127, 128];

/// Odd sizes, for the axis an op works along.
const ODD: [usize; 7] = [1, 3, 7, 17, 33, 65, 127];

/// Normalised axis sizes. Not 2 or 3: a row of so few uniform values is now and then almost
/// constant, where a one-pass variance (E[x^2] - E[x]^2) legitimately loses most digits.
const NORM_SIZES: [usize; 7] = [1, 7, 17, 64, 65, 127, 384];

/// Elements of a typical case's largest tensor.
const BUDGET: usize = 20_000;

/// Simple float arithmetic (neg, relu, add, ..., div): at most a few ulps apart.
const ARITH: Tolerance = Tolerance::Close { abs: 1e-6, rel: 1e-6 };
/// exp, log, tanh, erf, ...: GPU built-ins and polynomial approximations are a few ulps off.
const TRANSCENDENTAL: Tolerance = Tolerance::Close { abs: 1e-5, rel: 1e-5 };
/// Normalisations (layer norm): mean and variance accumulate, and the result is divided by a
/// standard deviation that may be small.
const NORM: Tolerance = Tolerance::Close { abs: 1e-4, rel: 1e-4 };
/// Softmax: probabilities in (0, 1], each through exp and one division by a row sum.
const SOFTMAX: Tolerance = Tolerance::Close { abs: 1e-6, rel: 1e-4 };
/// Chains of several transcendental steps (fused programs).
const CHAIN: Tolerance = Tolerance::Close { abs: 1e-4, rel: 1e-4 };

/// A sum of `n` products of values of magnitude up to about 4, in any order: the error grows
/// with `n` (backends split sums differently from the sequential reference). Sampled sums of
/// 384 such products in f32 stray up to about 8e-5 from the exact value, whatever the order;
/// `1e-6 * n` leaves a margin of about five.
fn accumulate(n: usize) -> Tolerance {
    Tolerance::Close { abs: 1e-6 * n as f32 + 1e-6, rel: 1e-5 }
}

/// Every op case for `seed`. The same seed gives the same cases on every machine. Fails only
/// when an op rejects a case's graph (an op whose shape rules changed), naming the case.
pub fn op_cases(seed: u64) -> Result<Vec<OpCase>> {
    let mut cases = Gen { seed, rng: StdRng::seed_from_u64(seed), cases: Vec::new() };
    cases.unary()?;
    cases.binary()?;
    cases.compare()?;
    cases.select()?;
    cases.reduce()?;
    cases.softmax()?;
    cases.layer_norm()?;
    cases.matmul()?;
    cases.conv1d()?;
    cases.reshape()?;
    cases.permute()?;
    cases.slice()?;
    cases.concat()?;
    cases.gather()?;
    cases.cast()?;
    cases.argmax()?;
    cases.kv_write()?;
    cases.scalar()?;
    cases.fused_elementwise()?;
    cases.matmul_bias()?;
    cases.add_layer_norm()?;
    cases.attention()?;
    Ok(cases.cases)
}

/// Draws shapes and data for the cases of one seed.
struct Gen {
    seed: u64,
    rng: StdRng,
    cases: Vec<OpCase>,
}

/// A dtype-typed tensor type, briefly.
fn ty(dtype: DType, dims: &[usize]) -> TensorType {
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

impl Gen {
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.rng.random_range(0..from.len())]
    }

    fn coin(&mut self) -> bool {
        self.rng.random_bool(0.5)
    }

    /// A shape of `rank` with at most `budget` elements, from [`SIZES`] in random order.
    fn shape(&mut self, rank: usize, budget: usize) -> Vec<usize> {
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
    fn constant(&mut self, g: &mut Graph, t: TensorType, dist: Dist) -> NodeId {
        let value = random_tensor_with(&t, dist, &mut self.rng);
        g.constant(value)
    }

    /// Random inputs and weights for `g` (with `dists` overriding the defaults of named
    /// leaves) and `scalars`, as one run.
    fn run(&mut self, g: &Graph, dists: &[(&str, Dist)], scalars: &[(&str, u32)]) -> Result<(CaseRun, Weights)> {
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
    fn push(&mut self, op: &'static str, label: &str, g: Graph, tol: Tolerance, dists: &[(&str, Dist)]) -> Result<()> {
        let (run, weights) = self.run(&g, dists, &[])?;
        self.push_runs(op, label, g, tol, weights, vec![run]);
        Ok(())
    }

    fn push_runs(
        &mut self,
        op: &'static str,
        label: &str,
        graph: Graph,
        tolerance: Tolerance,
        weights: Weights,
        runs: Vec<CaseRun>,
    ) {
        let name = format!("{label} {} (seed {})", describe(&graph), self.seed);
        self.cases.push(OpCase { name, op, graph, weights, runs, tolerance });
    }

    fn unary(&mut self) -> Result<()> {
        for kind in UnaryKind::ALL {
            for dtype in [DType::F32, DType::F16] {
                let rank = self.rng.random_range(1..=3);
                let dims = self.shape(rank, BUDGET);
                let mut g = Graph::new(kind.name());
                let x = g.input("x", ty(dtype, &dims))?;
                let y = g.unary(kind, x)?;
                g.output("y", y)?;
                let tol = match kind {
                    UnaryKind::Neg | UnaryKind::Relu => ARITH,
                    _ => TRANSCENDENTAL,
                };
                let positive = matches!(kind, UnaryKind::Log | UnaryKind::Sqrt | UnaryKind::Rsqrt);
                let dists: &[(&str, Dist)] = if positive { &[("x", Dist::Uniform { lo: 0.1, hi: 2.1 })] } else { &[] };
                self.push(kind.name(), &format!("{} {dtype}", kind.name()), g, tol, dists)?;
            }
        }
        Ok(())
    }

    fn binary(&mut self) -> Result<()> {
        for kind in BinaryKind::ALL {
            let name = kind.name();
            // Divisors stay away from zero so quotients stay moderate.
            let divisor = |float: bool| match (kind, float) {
                (BinaryKind::Div, true) => vec![("b", Dist::Uniform { lo: 0.25, hi: 2.0 })],
                (BinaryKind::Div, false) => vec![("b", Dist::Ints { lo: 1, hi: 9 })],
                _ => vec![],
            };

            // f32, same shapes, the right operand a weight.
            let rank = self.rng.random_range(1..=3);
            let dims = self.shape(rank, BUDGET);
            let mut g = Graph::new(name);
            let a = g.input("a", ty(DType::F32, &dims))?;
            let b = g.param("b", ty(DType::F32, &dims))?;
            let y = g.binary(kind, a, b)?;
            g.output("y", y)?;
            self.push(name, &format!("{name} f32"), g, ARITH, &divisor(true))?;

            // f16, both operands broadcast ([r,1,c] with [m,c]), the right one a constant.
            let (r, m, c) = (self.pick(&ODD[..4]), self.pick(&SIZES[..10]), self.pick(&ODD));
            let mut g = Graph::new(name);
            let a = g.input("a", ty(DType::F16, &[r, 1, c]))?;
            let b_dist = if kind == BinaryKind::Div {
                Dist::Uniform { lo: 0.25, hi: 2.0 }
            } else {
                Dist::default_for(DType::F16)
            };
            let b = self.constant(&mut g, ty(DType::F16, &[m, c]), b_dist);
            let y = g.binary(kind, a, b)?;
            g.output("y", y)?;
            self.push(name, &format!("{name} f16 broadcast"), g, ARITH, &[])?;

            // Integers, exact, a row broadcast against a matrix; i32 with negative values.
            for dtype in [DType::I32, DType::U32] {
                let (r, c) = (self.pick(&SIZES), self.pick(&ODD));
                let mut g = Graph::new(name);
                let a = g.input("a", ty(dtype, &[r, c]))?;
                let b = g.input("b", ty(dtype, &[c]))?;
                let y = g.binary(kind, a, b)?;
                g.output("y", y)?;
                let lo = if dtype == DType::I32 { -50 } else { 0 };
                let mut dists = vec![("a", Dist::Ints { lo, hi: 50 }), ("b", Dist::Ints { lo, hi: 50 })];
                // A later entry for the same name wins: the divisor's range replaces b's.
                dists.extend(divisor(false));
                self.push(name, &format!("{name} {dtype}"), g, Tolerance::Exact, &dists)?;
            }
        }
        Ok(())
    }

    fn compare(&mut self) -> Result<()> {
        for kind in CmpKind::ALL {
            let name = kind.name();
            // Whole numbers in a small range make equal operands common.
            let ties = Dist::Ints { lo: -3, hi: 3 };
            for dtype in [DType::F32, DType::I32] {
                let (r, c) = (self.pick(&SIZES), self.pick(&ODD));
                let mut g = Graph::new(name);
                let a = g.input("a", ty(dtype, &[r, c]))?;
                let b = g.input("b", ty(dtype, &[c]))?;
                let y = g.compare(kind, a, b)?;
                g.output("y", y)?;
                self.push(
                    name,
                    &format!("{name} {dtype} broadcast"),
                    g,
                    Tolerance::Exact,
                    &[("a", ties), ("b", ties)],
                )?;
            }
            let dims = self.shape(2, BUDGET);
            let mut g = Graph::new(name);
            let a = g.input("a", ty(DType::F16, &dims))?;
            let b = g.input("b", ty(DType::F16, &dims))?;
            let y = g.compare(kind, a, b)?;
            g.output("y", y)?;
            self.push(name, &format!("{name} f16"), g, Tolerance::Exact, &[])?;
        }
        Ok(())
    }

    fn select(&mut self) -> Result<()> {
        // (condition dtype, value dtype): u32 0/1 masks and i32 masks where -1 also picks `a`.
        for (cond_dtype, dtype) in [(DType::U32, DType::F32), (DType::I32, DType::F16), (DType::U32, DType::I32)] {
            let (r, c) = (self.pick(&SIZES), self.pick(&ODD));
            let mut g = Graph::new("where");
            let cond = g.input("cond", ty(cond_dtype, &[r, c]))?;
            let a = g.input("a", ty(dtype, &[r, c]))?;
            let b = g.input("b", ty(dtype, &[c]))?;
            let y = g.select(cond, a, b)?;
            g.output("y", y)?;
            let lo = if cond_dtype == DType::I32 { -1 } else { 0 };
            let label = format!("where {dtype} cond {cond_dtype}");
            self.push("where", &label, g, Tolerance::Exact, &[("cond", Dist::Ints { lo, hi: 2 })])?;
        }
        // The condition broadcast along the rows.
        let (r, c) = (self.pick(&ODD), self.pick(&ODD));
        let mut g = Graph::new("where");
        let cond = g.input("cond", ty(DType::U32, &[r, 1]))?;
        let a = g.input("a", ty(DType::F32, &[r, c]))?;
        let b = g.input("b", ty(DType::F32, &[r, c]))?;
        let y = g.select(cond, a, b)?;
        g.output("y", y)?;
        self.push("where", "where f32 row cond", g, Tolerance::Exact, &[("cond", Dist::Ints { lo: 0, hi: 2 })])
    }

    fn reduce(&mut self) -> Result<()> {
        for kind in REDUCE_KINDS {
            for dtype in [DType::F32, DType::F16] {
                let rank = self.rng.random_range(1..=3);
                let dims = self.shape(rank, BUDGET);
                let axis = self.rng.random_range(0..rank);
                let keep_dim = self.coin();
                let mut g = Graph::new(kind.name());
                let x = g.input("x", ty(dtype, &dims))?;
                let y = g.reduce(kind, x, axis, keep_dim)?;
                g.output("y", y)?;
                let tol = if kind == ReduceKind::Max { Tolerance::Exact } else { accumulate(dims[axis]) };
                let label = format!("{} {dtype} axis={axis} keep_dim={keep_dim}", kind.name());
                self.push(kind.name(), &label, g, tol, &[])?;
            }
        }
        Ok(())
    }

    fn softmax(&mut self) -> Result<()> {
        // The wide range overflows exp unless the row maximum is subtracted first.
        let wide = Dist::Uniform { lo: -100.0, hi: 100.0 };
        for (dtype, dist) in [(DType::F32, None), (DType::F16, None), (DType::F32, Some(wide))] {
            let rank = self.rng.random_range(1..=3);
            let mut dims = self.shape(rank - 1, BUDGET / 128);
            dims.push(self.pick(&ODD));
            let mut g = Graph::new("softmax");
            let x = g.input("x", ty(dtype, &dims))?;
            let y = g.softmax(x)?;
            g.output("y", y)?;
            let dists: Vec<_> = dist.map(|d| ("x", d)).into_iter().collect();
            let label = if dist.is_some() { format!("softmax {dtype} wide") } else { format!("softmax {dtype}") };
            self.push("softmax", &label, g, SOFTMAX, &dists)?;
        }
        Ok(())
    }

    fn layer_norm(&mut self) -> Result<()> {
        for (dtype, param_dtype) in [(DType::F32, DType::F32), (DType::F16, DType::F16), (DType::F32, DType::F16)] {
            let d = self.pick(&NORM_SIZES);
            let rank = self.rng.random_range(0..=2);
            let mut dims = self.shape(rank, BUDGET / d);
            dims.push(d);
            let mut g = Graph::new("layer_norm");
            let x = g.input("x", ty(dtype, &dims))?;
            let gamma = g.param("gamma", ty(param_dtype, &[d]))?;
            let beta = g.param("beta", ty(param_dtype, &[d]))?;
            let y = g.layer_norm(x, gamma, beta, 1e-5)?;
            g.output("y", y)?;
            self.push("layer_norm", &format!("layer_norm {dtype}"), g, NORM, &[])?;
        }
        Ok(())
    }

    /// One matmul case: `a [a_batch.., M, K]` input, `b` an input or a weight.
    #[allow(clippy::too_many_arguments)]
    fn matmul_case(
        &mut self,
        label: &str,
        a_dims: &[usize],
        b_dims: &[usize],
        a_dtype: DType,
        b_dtype: DType,
        b_is_weight: bool,
        transpose_b: bool,
    ) -> Result<()> {
        let k = a_dims[a_dims.len() - 1];
        let mut g = Graph::new("matmul");
        let a = g.input("a", ty(a_dtype, a_dims))?;
        let b = if b_is_weight { g.param("b", ty(b_dtype, b_dims))? } else { g.input("b", ty(b_dtype, b_dims))? };
        let y = if transpose_b { g.matmul_t(a, b)? } else { g.matmul(a, b)? };
        g.output("y", y)?;
        let label = if transpose_b { format!("matmul {label} transpose_b") } else { format!("matmul {label}") };
        self.push("matmul", &label, g, accumulate(k), &[])
    }

    fn matmul(&mut self) -> Result<()> {
        let ms = [1, 3, 7, 16, 17, 33, 64];
        let ks = [1, 3, 16, 17, 33, 64, 65, 127];
        let ns = [1, 3, 7, 17, 33, 64, 65];
        let (m, k, n) = (self.pick(&ms), self.pick(&ks), self.pick(&ns));
        self.matmul_case("f32", &[m, k], &[k, n], DType::F32, DType::F32, false, false)?;
        let (m, k, n) = (self.pick(&ms), self.pick(&ks), self.pick(&ns));
        self.matmul_case("f32 weight", &[m, k], &[n, k], DType::F32, DType::F32, true, true)?;
        // Batch dimensions broadcast both ways: [B1,1,M,K] x [B2,K,N] -> [B1,B2,M,N].
        let (b1, b2) = (self.pick(&[1, 2, 3]), self.pick(&[2, 3]));
        let (m, k, n) = (self.pick(&ms), self.pick(&ks), self.pick(&ns));
        self.matmul_case("f32 broadcast batch", &[b1, 1, m, k], &[b2, k, n], DType::F32, DType::F32, false, false)?;
        // A 2-D weight serving every batch, stored f16 like the model's linear layers.
        let (b, m, k, n) = (self.pick(&[2, 3, 5]), self.pick(&ms), self.pick(&ks), self.pick(&ns));
        self.matmul_case("f16 weight", &[b, m, k], &[n, k], DType::F32, DType::F16, true, true)?;
        let (b, m, k, n) = (self.pick(&[1, 3]), self.pick(&ms), self.pick(&ks), self.pick(&ns));
        self.matmul_case("f16", &[b, m, k], &[b, k, n], DType::F16, DType::F16, false, false)?;
        // One larger product, to exercise tiling past one workgroup in every direction.
        let (m, k, n) = (self.pick(&[64, 127]), self.pick(&[256, 384]), self.pick(&[129, 255]));
        self.matmul_case("f32 large", &[m, k], &[n, k], DType::F32, DType::F32, true, true)
    }

    fn conv1d(&mut self) -> Result<()> {
        // (batched, stride, padding, dilation, kernel, bias): Whisper's two stem convolutions,
        // then random settings.
        let mut settings = vec![(false, 1, 1, 1, 3, true), (true, 2, 1, 1, 3, true)];
        for _ in 0..2 {
            let (batched, bias) = (self.coin(), self.coin());
            let (stride, padding) = (self.rng.random_range(1..=3), self.rng.random_range(0..=3));
            let (dilation, k) = (self.rng.random_range(1..=3), self.rng.random_range(1..=5));
            settings.push((batched, stride, padding, dilation, k, bias));
        }
        for (i, (batched, stride, padding, dilation, k, bias)) in settings.into_iter().enumerate() {
            // The third case uses f16 weights with f32 activations, the fourth f16 throughout.
            let (x_dtype, w_dtype) = match i {
                2 => (DType::F32, DType::F16),
                3 => (DType::F16, DType::F16),
                _ => (DType::F32, DType::F32),
            };
            let (c_in, c_out) = (self.pick(&[1, 3, 7, 17, 33, 80]), self.pick(&[1, 3, 7, 17, 33, 64]));
            let span: usize = dilation * (k - 1) + 1;
            let len = self.pick(&ODD).max(span.saturating_sub(2 * padding));
            let mut x_dims = if batched { vec![self.pick(&[1, 2, 3])] } else { vec![] };
            x_dims.extend([c_in, len]);
            let mut g = Graph::new("conv1d");
            let x = g.input("x", ty(x_dtype, &x_dims))?;
            let w = g.param("w", ty(w_dtype, &[c_out, c_in, k]))?;
            let b = if bias { Some(g.param("bias", ty(w_dtype, &[c_out]))?) } else { None };
            let y = g.conv1d(x, w, b, stride, padding, dilation)?;
            g.output("y", y)?;
            let label = format!("conv1d {x_dtype} stride={stride} padding={padding} dilation={dilation}");
            self.push("conv1d", &label, g, accumulate(c_in * k), &[])?;
        }
        Ok(())
    }

    fn reshape(&mut self) -> Result<()> {
        for (i, dtype) in DTYPES.into_iter().enumerate() {
            let dims = self.shape(3, BUDGET);
            // The same elements regrouped: a shuffle of the dims with two of them merged.
            let mut to = dims.clone();
            to.shuffle(&mut self.rng);
            let merged = to.remove(0) * to[0];
            to[0] = merged;
            let mut g = Graph::new("reshape");
            let x = g.input("x", ty(dtype, &dims))?;
            // Every other case reshapes a computed (arena) value instead of an input.
            let src = if i % 2 == 1 && dtype.is_float() { g.neg(x)? } else { x };
            let y = g.reshape(src, to.clone())?;
            g.output("y", y)?;
            let label = if src == x { format!("reshape {dtype}") } else { format!("reshape {dtype} of neg") };
            self.push("reshape", &label, g, Tolerance::Exact, &[])?;
        }
        Ok(())
    }

    fn permute(&mut self) -> Result<()> {
        for dtype in DTYPES {
            let rank = self.rng.random_range(2..=4);
            let dims = self.shape(rank, BUDGET);
            let mut perm: Vec<usize> = (0..rank).collect();
            while perm.iter().enumerate().all(|(i, &p)| i == p) {
                perm.shuffle(&mut self.rng);
            }
            let mut g = Graph::new("permute");
            let x = g.input("x", ty(dtype, &dims))?;
            let y = g.permute(x, &perm)?;
            g.output("y", y)?;
            self.push("permute", &format!("permute {dtype} perm={perm:?}"), g, Tolerance::Exact, &[])?;
        }
        Ok(())
    }

    fn slice(&mut self) -> Result<()> {
        for dtype in DTYPES {
            let rank = self.rng.random_range(1..=3);
            let mut dims = self.shape(rank, BUDGET);
            let axis = self.rng.random_range(0..rank);
            dims[axis] = dims[axis].max(2);
            let start = self.rng.random_range(0..dims[axis]);
            let end = self.rng.random_range(start + 1..=dims[axis]);
            let mut g = Graph::new("slice");
            let x = g.input("x", ty(dtype, &dims))?;
            let y = g.slice(x, axis, start, end)?;
            g.output("y", y)?;
            self.push("slice", &format!("slice {dtype} axis={axis} {start}..{end}"), g, Tolerance::Exact, &[])?;
        }
        Ok(())
    }

    fn concat(&mut self) -> Result<()> {
        for dtype in DTYPES {
            let rank = self.rng.random_range(1..=3);
            let parts = self.rng.random_range(2..=3);
            let dims = self.shape(rank, BUDGET / 4);
            let axis = self.rng.random_range(0..rank);
            let mut g = Graph::new("concat");
            let mut ids = Vec::new();
            for p in 0..parts {
                let mut d = dims.clone();
                d[axis] = self.pick(&ODD[..5]);
                // The last part is a weight, so inputs from different storages meet.
                let id = if p + 1 == parts {
                    g.param(&format!("p{p}"), ty(dtype, &d))?
                } else {
                    g.input(&format!("x{p}"), ty(dtype, &d))?
                };
                ids.push(id);
            }
            let y = g.concat(&ids, axis)?;
            g.output("y", y)?;
            self.push("concat", &format!("concat {dtype} axis={axis}"), g, Tolerance::Exact, &[])?;
        }
        Ok(())
    }

    fn gather(&mut self) -> Result<()> {
        for (table_dtype, ids_dtype) in [(DType::F32, DType::I32), (DType::F16, DType::U32), (DType::F32, DType::U32)] {
            let v = self.pick(&[1, 7, 33, 127, 200]);
            let mut table = vec![v, self.pick(&[1, 3, 17, 64, 65])];
            if ids_dtype == DType::U32 && table_dtype == DType::F32 {
                table.push(self.pick(&[2, 3]));
            }
            let n = self.pick(&[1, 3, 7, 17]);
            let ids_dims = if ids_dtype == DType::U32 { vec![self.pick(&[1, 2, 3]), n] } else { vec![n] };
            let mut g = Graph::new("gather");
            let t = g.param("table", ty(table_dtype, &table))?;
            let ids = g.input("ids", ty(ids_dtype, &ids_dims))?;
            let y = g.gather(t, ids)?;
            g.output("y", y)?;
            let dists = [("ids", Dist::Ints { lo: 0, hi: v as i64 })];
            self.push("gather", &format!("gather {table_dtype} ids {ids_dtype}"), g, Tolerance::Exact, &dists)?;
        }
        Ok(())
    }

    fn cast(&mut self) -> Result<()> {
        for from in DTYPES {
            for to in DTYPES.into_iter().filter(|&t| t != from) {
                // Values every pair converts without a matter of taste: floats truncate into
                // integers within range, integers fit f16 exactly, i32 -> u32 wraps.
                let dist = match (from.is_float(), to) {
                    (true, DType::I32) => Dist::Uniform { lo: -100.0, hi: 100.0 },
                    (true, DType::U32) => Dist::Uniform { lo: 0.0, hi: 100.0 },
                    (true, _) => Dist::default_for(from),
                    (false, _) if from == DType::I32 => Dist::Ints { lo: -1000, hi: 1000 },
                    (false, _) => Dist::Ints { lo: 0, hi: 2000 },
                };
                let rank = self.rng.random_range(1..=2);
                let dims = self.shape(rank, BUDGET);
                let mut g = Graph::new("cast");
                let x = g.input("x", ty(from, &dims))?;
                let y = g.cast(x, to)?;
                g.output("y", y)?;
                // Rounding into f16 may go either way at a tie on GPUs without f16 arithmetic;
                // `Close` with zero error becomes f16 rounding slack.
                let tol = if to == DType::F16 && from == DType::F32 {
                    Tolerance::Close { abs: 0.0, rel: 0.0 }
                } else {
                    Tolerance::Exact
                };
                self.push("cast", &format!("cast {from} to {to}"), g, tol, &[("x", dist)])?;
            }
        }
        Ok(())
    }

    fn argmax(&mut self) -> Result<()> {
        let ties = Dist::Ints { lo: 0, hi: 3 };
        for (dtype, dist) in [(DType::F32, None), (DType::F16, None), (DType::F32, Some(ties))] {
            let rank = self.rng.random_range(1..=3);
            let dims = self.shape(rank, BUDGET);
            let axis = self.rng.random_range(0..rank);
            let mut g = Graph::new("argmax");
            let x = g.input("x", ty(dtype, &dims))?;
            let y = g.argmax(x, axis)?;
            g.output("y", y)?;
            let dists: Vec<_> = dist.map(|d| ("x", d)).into_iter().collect();
            let ties = if dist.is_some() { " ties" } else { "" };
            self.push("argmax", &format!("argmax {dtype} axis={axis}{ties}"), g, Tolerance::Exact, &dists)?;
        }
        Ok(())
    }

    /// Two runs writing at different runtime offsets: the second run's state must hold both
    /// writes, so the case checks persistence as well as placement.
    fn kv_write(&mut self) -> Result<()> {
        for dtype in [DType::F32, DType::F16] {
            // A per-head cache [H, S, D] written along S, output directly; then a random
            // rank and axis, read back through a permute.
            for through_permute in [false, true] {
                let rank = if through_permute { self.rng.random_range(2..=3) } else { 3 };
                let cache = if through_permute {
                    self.shape(rank, BUDGET / 4)
                } else {
                    vec![self.pick(&[1, 2, 6]), self.pick(&[7, 17, 33, 65]), self.pick(&[1, 17, 64])]
                };
                let axis = if through_permute { self.rng.random_range(0..rank) } else { 1 };
                let rows = self.rng.random_range(1..=cache[axis].min(3));
                let mut value = cache.clone();
                value[axis] = rows;
                let mut g = Graph::new("kv_write");
                let buf = g.state("cache", ty(dtype, &cache))?;
                let v = g.input("value", ty(dtype, &value))?;
                let pos = g.scalar("pos");
                let w = g.kv_write(buf, v, axis, pos)?;
                let y = if through_permute {
                    let rev: Vec<usize> = (0..rank).rev().collect();
                    g.permute(w, &rev)?
                } else {
                    w
                };
                g.output("y", y)?;
                let mut runs = Vec::new();
                let mut weights = Weights::new();
                for _ in 0..2 {
                    let offset = self.rng.random_range(0..=cache[axis] - rows) as u32;
                    let (run, w) = self.run(&g, &[], &[("pos", offset)])?;
                    runs.push(run);
                    weights = w;
                }
                let label =
                    format!("kv_write {dtype} axis={axis}{}", if through_permute { " then permute" } else { "" });
                self.push_runs("kv_write", &label, g, Tolerance::Exact, weights, runs);
            }
        }
        Ok(())
    }

    /// The runtime scalar read on its own, and as an operand of a comparison (how a decoder
    /// masks positions past the current one), each over two runs with different values.
    fn scalar(&mut self) -> Result<()> {
        let mut g = Graph::new("scalar");
        let pos = g.scalar("pos");
        let s = g.read_scalar(pos)?;
        g.output("pos", s)?;
        let values = [self.rng.random_range(0..8), self.rng.random_range(8..100_000)];
        let runs = values.iter().map(|&v| self.run(&g, &[], &[("pos", v)])).collect::<Result<Vec<_>>>()?;
        let runs = runs.into_iter().map(|(r, _)| r).collect();
        self.push_runs("scalar", "scalar", g, Tolerance::Exact, Weights::new(), runs);

        let n = self.pick(&ODD);
        let mut g = Graph::new("scalar");
        let pos = g.scalar("pos");
        let s = g.read_scalar(pos)?;
        let iota = g.constant(Tensor::u32([n], (0..n as u32).collect())?);
        let mask = g.compare(CmpKind::Lt, iota, s)?;
        g.output("mask", mask)?;
        let values = [self.rng.random_range(0..=n as u32), self.rng.random_range(0..=n as u32)];
        let runs = values.iter().map(|&v| self.run(&g, &[], &[("pos", v)])).collect::<Result<Vec<_>>>()?;
        let runs = runs.into_iter().map(|(r, _)| r).collect();
        self.push_runs("scalar", "scalar in lt", g, Tolerance::Exact, Weights::new(), runs);
        Ok(())
    }

    fn fused_elementwise(&mut self) -> Result<()> {
        use Instr::{Binary as B, Input as In, Select as Sel, Unary as U};
        // Broadcast inputs of several dtypes and a constant: x [R,C] f32, y [C] f16, z [R,1]
        // f32, cond [R,C] u32, k [] constant. tanh(x*y + z) where cond, else x; then gelu, * k.
        let (r, c) = (self.pick(&SIZES), self.pick(&ODD));
        let program = vec![
            In(0),
            In(1),
            In(2),
            In(3),
            In(4),
            B(BinaryKind::Mul, 0, 1),
            B(BinaryKind::Add, 5, 2),
            U(UnaryKind::Tanh, 6),
            Sel(3, 7, 0),
            U(UnaryKind::Gelu, 8),
            B(BinaryKind::Mul, 9, 4),
        ];
        for dtype in [DType::F32, DType::F16] {
            let mut g = Graph::new("fused_elementwise");
            let x = g.input("x", ty(DType::F32, &[r, c]))?;
            let y = g.input("y", ty(DType::F16, &[c]))?;
            let z = g.input("z", ty(DType::F32, &[r, 1]))?;
            let cond = g.input("cond", ty(DType::U32, &[r, c]))?;
            let k = self.constant(&mut g, ty(DType::F32, &[]), Dist::default_for(DType::F32));
            let out = g.push(FusedElementwise { program: program.clone(), dtype }, &[x, y, z, cond, k])?;
            g.output("out", out)?;
            let label = format!("fused_elementwise {dtype} {} instrs", program.len());
            self.push("fused_elementwise", &label, g, CHAIN, &[("cond", Dist::Ints { lo: 0, hi: 2 })])?;
        }

        // Every unary and binary kind in one program over x [R,C] and y [C]; log, sqrt and
        // rsqrt read exp(x), which is positive, and div divides by it.
        let mut program = vec![In(0), In(1), U(UnaryKind::Exp, 0)];
        let positive_arg = |k: UnaryKind| matches!(k, UnaryKind::Log | UnaryKind::Sqrt | UnaryKind::Rsqrt);
        let mut results = Vec::new();
        for kind in UnaryKind::ALL.into_iter().filter(|&k| k != UnaryKind::Exp) {
            program.push(U(kind, if positive_arg(kind) { 2 } else { 1 }));
            results.push(program.len() as u32 - 1);
        }
        let mut acc = 2;
        for (i, kind) in BinaryKind::ALL.into_iter().enumerate() {
            let operand = if kind == BinaryKind::Div { 2 } else { results[i % results.len()] };
            program.push(B(kind, acc, operand));
            acc = program.len() as u32 - 1;
        }
        for &res in &results {
            program.push(B(BinaryKind::Add, acc, res));
            acc = program.len() as u32 - 1;
        }
        let dims = self.shape(2, BUDGET);
        let row = [dims[1]];
        let dtype = if self.coin() { DType::F32 } else { DType::F16 };
        let mut g = Graph::new("fused_elementwise");
        let x = g.input("x", ty(DType::F32, &dims))?;
        let y = g.input("y", ty(DType::F32, &row))?;
        let out = g.push(FusedElementwise { program: program.clone(), dtype }, &[x, y])?;
        g.output("out", out)?;
        let label = format!("fused_elementwise {dtype} every kind {} instrs", program.len());
        self.push("fused_elementwise", &label, g, CHAIN, &[])
    }

    fn matmul_bias(&mut self) -> Result<()> {
        for (i, (transpose_b, gelu)) in
            [(true, false), (true, true), (false, true), (false, false)].into_iter().enumerate()
        {
            let w_dtype = if i % 2 == 1 { DType::F16 } else { DType::F32 };
            let (m, k, n) =
                (self.pick(&[1, 3, 16, 17, 33]), self.pick(&[3, 17, 64, 65, 127]), self.pick(&[1, 7, 33, 64, 65]));
            let a_dims = if self.coin() { vec![self.pick(&[2, 3]), m, k] } else { vec![m, k] };
            let b_dims = if transpose_b { [n, k] } else { [k, n] };
            let mut g = Graph::new("matmul_bias");
            let a = g.input("a", ty(DType::F32, &a_dims))?;
            let b = g.param("w", ty(w_dtype, &b_dims))?;
            let bias = g.param("bias", ty(w_dtype, &[n]))?;
            let y = g.push(MatMulBias { transpose_b, gelu }, &[a, b, bias])?;
            g.output("y", y)?;
            let mut label = format!("matmul_bias w {w_dtype}");
            if transpose_b {
                label += " transpose_b";
            }
            if gelu {
                label += " gelu";
            }
            self.push("matmul_bias", &label, g, accumulate(k), &[])?;
        }
        Ok(())
    }

    fn add_layer_norm(&mut self) -> Result<()> {
        for dtype in [DType::F32, DType::F16] {
            let d = self.pick(&NORM_SIZES);
            let rank = self.rng.random_range(0..=2);
            let mut dims = self.shape(rank, BUDGET / d);
            dims.push(d);
            let mut g = Graph::new("add_layer_norm");
            let a = g.input("a", ty(dtype, &dims))?;
            let b = g.input("b", ty(dtype, &dims))?;
            let gamma = g.param("gamma", ty(DType::F32, &[d]))?;
            let beta = g.param("beta", ty(DType::F32, &[d]))?;
            let y = g.push(AddLayerNorm { eps: 1e-5 }, &[a, b, gamma, beta])?;
            g.output("y", y)?;
            self.push("add_layer_norm", &format!("add_layer_norm {dtype}"), g, NORM, &[])?;
        }
        Ok(())
    }

    fn attention(&mut self) -> Result<()> {
        // (mask, dtype, large): every mask kind in f32, then f16, then one Whisper-sized head.
        let settings = [
            (MaskKind::None, DType::F32, false),
            (MaskKind::Additive, DType::F32, false),
            (MaskKind::Causal, DType::F32, false),
            (MaskKind::Causal, DType::F16, false),
            (MaskKind::Additive, DType::F16, false),
            (MaskKind::None, DType::F32, true),
        ];
        for (mask, dtype, large) in settings {
            let lead = if large {
                vec![4]
            } else if self.coin() {
                vec![self.pick(&[1, 2]), self.pick(&[1, 3])]
            } else {
                vec![self.pick(&[1, 2, 6])]
            };
            let (d, dv) = if large { (64, 64) } else { (self.pick(&[1, 8, 17, 33, 64]), self.pick(&[1, 7, 33, 64])) };
            let sk = if large { 127 } else { self.pick(&ODD[..6]) };
            // Causal attention runs both as a decode step (few queries behind a cache) and
            // as a full square.
            let sq = match mask {
                MaskKind::Causal if self.coin() => sk,
                MaskKind::Causal => self.rng.random_range(1..=sk.min(7)),
                _ if large => sk,
                _ => self.pick(&ODD[..6]),
            };
            let dims = |s: usize, last: usize| {
                let mut v = lead.clone();
                v.extend([s, last]);
                v
            };
            let mut g = Graph::new("attention");
            let q = g.input("q", ty(dtype, &dims(sq, d)))?;
            let k = g.input("k", ty(dtype, &dims(sk, d)))?;
            let v = g.input("v", ty(dtype, &dims(sk, dv)))?;
            let mut inputs = vec![q, k, v];
            // The additive mask is [Sq, Sk], broadcast over the leading dims.
            if mask == MaskKind::Additive {
                inputs.push(g.input("mask", ty(dtype, &[sq, sk]))?);
            }
            let y = g.push(Attention { scale: 1.0 / (d as f32).sqrt(), mask }, &inputs)?;
            g.output("y", y)?;
            let (mut run, weights) = self.run(&g, &[], &[])?;
            if mask == MaskKind::Additive {
                run.inputs.insert("mask".into(), self.attention_mask(dtype, sq, sk)?);
            }
            // Scores sum D products, the output sums Sk weighted values.
            let tol = Tolerance::Close { abs: 1e-6 * (d + sk) as f32 + 1e-5, rel: 1e-4 };
            let mask_name = match mask {
                MaskKind::None => "none",
                MaskKind::Additive => "additive",
                MaskKind::Causal => "causal",
            };
            let label = format!("attention {dtype} mask={mask_name}{}", if large { " large" } else { "" });
            self.push_runs("attention", &label, g, tol, weights, vec![run]);
        }
        Ok(())
    }

    /// An additive mask `[Sq, Sk]` as decoders use it: finite values with about a quarter of
    /// the keys at -inf, never key 0, so every row keeps a key to attend to.
    fn attention_mask(&mut self, dtype: DType, sq: usize, sk: usize) -> Result<Tensor> {
        let values = (0..sq * sk)
            .map(|i| {
                if i % sk != 0 && self.rng.random_bool(0.25) {
                    f32::NEG_INFINITY
                } else {
                    self.rng.random_range(-2.0..2.0)
                }
            })
            .collect();
        Tensor::from_f32(dtype, [sq, sk], values)
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
            crate::ir::verify(&case.graph).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            assert!(!case.graph.outputs().is_empty(), "{} has no output", case.name);
            assert!(case.name.contains(case.op), "{} does not name its op {}", case.name, case.op);
            assert!(case.graph.nodes().iter().any(|n| n.op.name() == case.op), "{} lacks its op", case.name);
        }
        let names_differ = op_cases(4).unwrap().iter().zip(&a).any(|(x, y)| x.name != y.name);
        assert!(names_differ, "another seed draws other shapes");
    }

    #[test]
    fn gather_ids_are_in_range_and_log_inputs_positive() {
        for seed in 0..4 {
            for case in op_cases(seed).unwrap() {
                let run = &case.runs[0];
                if case.op == "gather" {
                    let v = case.weights["table"].shape().dims()[0] as i64;
                    assert!(run.inputs["ids"].to_i64().iter().all(|&i| (0..v).contains(&i)), "{}", case.name);
                }
                if ["log", "sqrt", "rsqrt"].contains(&case.op) {
                    assert!(run.inputs["x"].to_f32().iter().all(|&x| x > 0.0), "{}", case.name);
                }
            }
        }
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
