//! Harness cases of the elementwise family: unary, binary, compare, where, fused elementwise programs, casts, runtime scalar reads.

use rand::Rng;
use susurrus_core::error::Result;
use susurrus_core::ir::{DType, Graph};
use susurrus_core::ops::*;
use susurrus_core::tensor::Tensor;

use super::*;
use crate::compare::Tolerance;
use crate::random::Dist;

/// Harness cases: every kind in f32 and f16 on shapes of rank 1 to 3; log, sqrt and rsqrt get
/// positive inputs.
pub(crate) fn unary(cases: &mut CaseGen) -> Result<()> {
    for kind in UnaryKind::ALL {
        for dtype in [DType::F32, DType::F16] {
            let rank = cases.rng.random_range(1..=3);
            let dims = cases.shape(rank, BUDGET);
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
            cases.push(kind.name(), &format!("{} {dtype}", kind.name()), g, tol, dists)?;
        }
    }
    Ok(())
}

/// Harness cases: every kind in f32 against a weight, in f16 broadcast both ways against a
/// constant, and exactly in i32 and u32.
pub(crate) fn binary(cases: &mut CaseGen) -> Result<()> {
    for kind in BinaryKind::ALL {
        let name = kind.name();
        // Divisors stay away from zero so quotients stay moderate.
        let divisor = |float: bool| match (kind, float) {
            (BinaryKind::Div, true) => vec![("b", Dist::Uniform { lo: 0.25, hi: 2.0 })],
            (BinaryKind::Div, false) => vec![("b", Dist::Ints { lo: 1, hi: 9 })],
            _ => vec![],
        };

        // f32, same shapes, the right operand a weight.
        let rank = cases.rng.random_range(1..=3);
        let dims = cases.shape(rank, BUDGET);
        let mut g = Graph::new(name);
        let a = g.input("a", ty(DType::F32, &dims))?;
        let b = g.param("b", ty(DType::F32, &dims))?;
        let y = g.binary(kind, a, b)?;
        g.output("y", y)?;
        cases.push(name, &format!("{name} f32"), g, ARITH, &divisor(true))?;

        // f16, both operands broadcast ([r,1,c] with [m,c]), the right one a constant.
        let (r, m, c) = (cases.pick(&ODD[..4]), cases.pick(&SIZES[..10]), cases.pick(&ODD));
        let mut g = Graph::new(name);
        let a = g.input("a", ty(DType::F16, &[r, 1, c]))?;
        let b_dist =
            if kind == BinaryKind::Div { Dist::Uniform { lo: 0.25, hi: 2.0 } } else { Dist::default_for(DType::F16) };
        let b = cases.constant(&mut g, ty(DType::F16, &[m, c]), b_dist);
        let y = g.binary(kind, a, b)?;
        g.output("y", y)?;
        cases.push(name, &format!("{name} f16 broadcast"), g, ARITH, &[])?;

        // Integers, exact, a row broadcast against a matrix; i32 with negative values.
        for dtype in [DType::I32, DType::U32] {
            let (r, c) = (cases.pick(&SIZES), cases.pick(&ODD));
            let mut g = Graph::new(name);
            let a = g.input("a", ty(dtype, &[r, c]))?;
            let b = g.input("b", ty(dtype, &[c]))?;
            let y = g.binary(kind, a, b)?;
            g.output("y", y)?;
            let lo = if dtype == DType::I32 { -50 } else { 0 };
            let mut dists = vec![("a", Dist::Ints { lo, hi: 50 }), ("b", Dist::Ints { lo, hi: 50 })];
            // A later entry for the same name wins: the divisor's range replaces b's.
            dists.extend(divisor(false));
            cases.push(name, &format!("{name} {dtype}"), g, Tolerance::Exact, &dists)?;
        }
    }
    Ok(())
}

/// Harness cases: every kind on f32 and i32 with frequent ties and a broadcast operand, and on f16.
pub(crate) fn compare(cases: &mut CaseGen) -> Result<()> {
    for kind in CmpKind::ALL {
        let name = kind.name();
        // Whole numbers in a small range make equal operands common.
        let ties = Dist::Ints { lo: -3, hi: 3 };
        for dtype in [DType::F32, DType::I32] {
            let (r, c) = (cases.pick(&SIZES), cases.pick(&ODD));
            let mut g = Graph::new(name);
            let a = g.input("a", ty(dtype, &[r, c]))?;
            let b = g.input("b", ty(dtype, &[c]))?;
            let y = g.compare(kind, a, b)?;
            g.output("y", y)?;
            cases.push(name, &format!("{name} {dtype} broadcast"), g, Tolerance::Exact, &[("a", ties), ("b", ties)])?;
        }
        let dims = cases.shape(2, BUDGET);
        let mut g = Graph::new(name);
        let a = g.input("a", ty(DType::F16, &dims))?;
        let b = g.input("b", ty(DType::F16, &dims))?;
        let y = g.compare(kind, a, b)?;
        g.output("y", y)?;
        cases.push(name, &format!("{name} f16"), g, Tolerance::Exact, &[])?;
    }
    Ok(())
}

/// Harness cases: integer conditions of both dtypes over float and integer values, and a condition
/// broadcast along the rows.
pub(crate) fn select(cases: &mut CaseGen) -> Result<()> {
    // (condition dtype, value dtype): u32 0/1 masks and i32 masks where -1 also picks `a`.
    for (cond_dtype, dtype) in [(DType::U32, DType::F32), (DType::I32, DType::F16), (DType::U32, DType::I32)] {
        let (r, c) = (cases.pick(&SIZES), cases.pick(&ODD));
        let mut g = Graph::new("where");
        let cond = g.input("cond", ty(cond_dtype, &[r, c]))?;
        let a = g.input("a", ty(dtype, &[r, c]))?;
        let b = g.input("b", ty(dtype, &[c]))?;
        let y = g.select(cond, a, b)?;
        g.output("y", y)?;
        let lo = if cond_dtype == DType::I32 { -1 } else { 0 };
        let label = format!("where {dtype} cond {cond_dtype}");
        cases.push("where", &label, g, Tolerance::Exact, &[("cond", Dist::Ints { lo, hi: 2 })])?;
    }
    // The condition broadcast along the rows.
    let (r, c) = (cases.pick(&ODD), cases.pick(&ODD));
    let mut g = Graph::new("where");
    let cond = g.input("cond", ty(DType::U32, &[r, 1]))?;
    let a = g.input("a", ty(DType::F32, &[r, c]))?;
    let b = g.input("b", ty(DType::F32, &[r, c]))?;
    let y = g.select(cond, a, b)?;
    g.output("y", y)?;
    cases.push("where", "where f32 row cond", g, Tolerance::Exact, &[("cond", Dist::Ints { lo: 0, hi: 2 })])
}

/// Harness cases: a program over broadcast inputs of several dtypes and a constant, and one that
/// uses every unary and binary kind.
pub(crate) fn fused_elementwise(cases: &mut CaseGen) -> Result<()> {
    use Instr::{Binary as B, Input as In, Select as Sel, Unary as U};
    // Broadcast inputs of several dtypes and a constant: x [R,C] f32, y [C] f16, z [R,1]
    // f32, cond [R,C] u32, k [] constant. tanh(x*y + z) where cond, else x; then gelu, * k.
    let (r, c) = (cases.pick(&SIZES), cases.pick(&ODD));
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
        let k = cases.constant(&mut g, ty(DType::F32, &[]), Dist::default_for(DType::F32));
        let out = g.push(FusedElementwise { program: program.clone(), dtype }, &[x, y, z, cond, k])?;
        g.output("out", out)?;
        let label = format!("fused_elementwise {dtype} {} instrs", program.len());
        cases.push("fused_elementwise", &label, g, CHAIN, &[("cond", Dist::Ints { lo: 0, hi: 2 })])?;
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
    let dims = cases.shape(2, BUDGET);
    let row = [dims[1]];
    let dtype = if cases.coin() { DType::F32 } else { DType::F16 };
    let mut g = Graph::new("fused_elementwise");
    let x = g.input("x", ty(DType::F32, &dims))?;
    let y = g.input("y", ty(DType::F32, &row))?;
    let out = g.push(FusedElementwise { program: program.clone(), dtype }, &[x, y])?;
    g.output("out", out)?;
    let label = format!("fused_elementwise {dtype} every kind {} instrs", program.len());
    cases.push("fused_elementwise", &label, g, CHAIN, &[])?;

    // Every comparison kind as a bit of a code, acc = 2 acc + (x <kind> y), on small integers
    // (so ties occur) of x [R,C] and y [C], 2 a constant of the program; then the code picks
    // x or y.
    let mut program = vec![In(0), In(1), Instr::Const(2.0), Instr::Compare(CmpKind::ALL[0], 0, 1)];
    let mut acc = 3;
    for kind in &CmpKind::ALL[1..] {
        program.push(B(BinaryKind::Mul, acc, 2));
        program.push(Instr::Compare(*kind, 0, 1));
        program.push(B(BinaryKind::Add, program.len() as u32 - 2, program.len() as u32 - 1));
        acc = program.len() as u32 - 1;
    }
    program.push(Instr::Compare(CmpKind::Gt, acc, 2));
    program.push(Sel(program.len() as u32 - 1, 0, 1));
    program.push(B(BinaryKind::Add, program.len() as u32 - 1, acc));
    let dims = cases.shape(2, BUDGET);
    let mut g = Graph::new("fused_elementwise");
    let x = g.input("x", ty(DType::F32, &dims))?;
    let y = g.input("y", ty(DType::F32, &[dims[1]]))?;
    let out = g.push(FusedElementwise { program: program.clone(), dtype: DType::F32 }, &[x, y])?;
    g.output("out", out)?;
    let label = format!("fused_elementwise every comparison {} instrs", program.len());
    let ints = Dist::Ints { lo: -2, hi: 3 };
    cases.push("fused_elementwise", &label, g, Tolerance::Exact, &[("x", ints), ("y", ints)])
}

/// Harness cases: every ordered pair of distinct dtypes.
pub(crate) fn cast(cases: &mut CaseGen) -> Result<()> {
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
            let rank = cases.rng.random_range(1..=2);
            let dims = cases.shape(rank, BUDGET);
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
            cases.push("cast", &format!("cast {from} to {to}"), g, tol, &[("x", dist)])?;
        }
    }
    Ok(())
}

/// Harness cases: the runtime scalar read on its own, and as an operand of a comparison (how a
/// decoder masks positions past the current one), each over two runs with different values.
pub(crate) fn scalar(cases: &mut CaseGen) -> Result<()> {
    let mut g = Graph::new("scalar");
    let pos = g.scalar("pos");
    let s = g.read_scalar(pos)?;
    g.output("pos", s)?;
    let values = [cases.rng.random_range(0..8), cases.rng.random_range(8..100_000)];
    let runs = values.iter().map(|&v| cases.run(&g, &[], &[("pos", v)])).collect::<Result<Vec<_>>>()?;
    let runs = runs.into_iter().map(|(r, _)| r).collect();
    cases.push_runs("scalar", "scalar", g, Tolerance::Exact, Weights::new(), runs);

    let n = cases.pick(&ODD);
    let mut g = Graph::new("scalar");
    let pos = g.scalar("pos");
    let s = g.read_scalar(pos)?;
    let iota = g.constant(Tensor::u32([n], (0..n as u32).collect())?);
    let mask = g.compare(CmpKind::Lt, iota, s)?;
    g.output("mask", mask)?;
    let values = [cases.rng.random_range(0..=n as u32), cases.rng.random_range(0..=n as u32)];
    let runs = values.iter().map(|&v| cases.run(&g, &[], &[("pos", v)])).collect::<Result<Vec<_>>>()?;
    let runs = runs.into_iter().map(|(r, _)| r).collect();
    cases.push_runs("scalar", "scalar in lt", g, Tolerance::Exact, Weights::new(), runs);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unary_cases_cover_every_kind_with_positive_inputs_where_needed() {
        for seed in 0..4 {
            let mut cases = CaseGen::new(seed);
            unary(&mut cases).unwrap();
            let cases = cases.into_cases();
            for kind in UnaryKind::ALL {
                assert_eq!(cases.iter().filter(|c| c.op == kind.name()).count(), 2, "{}", kind.name());
            }
            for case in cases.iter().filter(|c| ["log", "sqrt", "rsqrt"].contains(&c.op)) {
                assert!(case.runs[0].inputs["x"].to_f32().iter().all(|&x| x > 0.0), "{}", case.name);
            }
        }
    }

    #[test]
    fn binary_cases_cover_every_kind() {
        let mut cases = CaseGen::new(0);
        binary(&mut cases).unwrap();
        let cases = cases.into_cases();
        for kind in BinaryKind::ALL {
            assert_eq!(cases.iter().filter(|c| c.op == kind.name()).count(), 4, "{}", kind.name());
        }
    }

    #[test]
    fn compare_cases_cover_every_kind() {
        let mut cases = CaseGen::new(0);
        compare(&mut cases).unwrap();
        let cases = cases.into_cases();
        for kind in CmpKind::ALL {
            assert_eq!(cases.iter().filter(|c| c.op == kind.name()).count(), 3, "{}", kind.name());
        }
    }
}
