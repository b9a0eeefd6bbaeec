//! Harness cases of the layout family: reshape, permute, slice, concat, gather, KV writes.

use rand::Rng;
use susurrus_core::error::Result;
use susurrus_core::ir::{DType, Graph};

use super::*;
use crate::compare::Tolerance;
use crate::random::Dist;

/// Harness cases: every dtype, regrouping an input or, for every other case, a computed value.
pub(crate) fn reshape(cases: &mut CaseGen) -> Result<()> {
    for (i, dtype) in DTYPES.into_iter().enumerate() {
        let dims = cases.shape(3, BUDGET);
        // The same elements regrouped: a shuffle of the dims with two of them merged.
        let mut to = dims.clone();
        to.shuffle(&mut cases.rng);
        let merged = to.remove(0) * to[0];
        to[0] = merged;
        let mut g = Graph::new("reshape");
        let x = g.input("x", ty(dtype, &dims))?;
        // Every other case reshapes a computed (arena) value instead of an input.
        let src = if i % 2 == 1 && dtype.is_float() { g.neg(x)? } else { x };
        let y = g.reshape(src, to.clone())?;
        g.output("y", y)?;
        let label = if src == x { format!("reshape {dtype}") } else { format!("reshape {dtype} of neg") };
        cases.push("reshape", &label, g, Tolerance::Exact, &[])?;
    }
    Ok(())
}

/// Harness cases: every dtype, with a random permutation other than the identity.
pub(crate) fn permute(cases: &mut CaseGen) -> Result<()> {
    for dtype in DTYPES {
        let rank = cases.rng.random_range(2..=4);
        let dims = cases.shape(rank, BUDGET);
        let mut perm: Vec<usize> = (0..rank).collect();
        while perm.iter().enumerate().all(|(i, &p)| i == p) {
            perm.shuffle(&mut cases.rng);
        }
        let mut g = Graph::new("permute");
        let x = g.input("x", ty(dtype, &dims))?;
        let y = g.permute(x, &perm)?;
        g.output("y", y)?;
        cases.push("permute", &format!("permute {dtype} perm={perm:?}"), g, Tolerance::Exact, &[])?;
    }
    Ok(())
}

/// Harness cases: every dtype, a random non-empty range along a random axis.
pub(crate) fn slice(cases: &mut CaseGen) -> Result<()> {
    for dtype in DTYPES {
        let rank = cases.rng.random_range(1..=3);
        let mut dims = cases.shape(rank, BUDGET);
        let axis = cases.rng.random_range(0..rank);
        dims[axis] = dims[axis].max(2);
        let start = cases.rng.random_range(0..dims[axis]);
        let end = cases.rng.random_range(start + 1..=dims[axis]);
        let mut g = Graph::new("slice");
        let x = g.input("x", ty(dtype, &dims))?;
        let y = g.slice(x, axis, start, end)?;
        g.output("y", y)?;
        cases.push("slice", &format!("slice {dtype} axis={axis} {start}..{end}"), g, Tolerance::Exact, &[])?;
    }
    Ok(())
}

/// Harness cases: every dtype, two or three parts along a random axis, the last one a weight.
pub(crate) fn concat(cases: &mut CaseGen) -> Result<()> {
    for dtype in DTYPES {
        let rank = cases.rng.random_range(1..=3);
        let parts = cases.rng.random_range(2..=3);
        // The other dims times up to three parts of 33 along the axis stay within the budget
        // (BUDGET / 4 let a seed reach 114,427 elements).
        let dims = cases.shape(rank, BUDGET / 20);
        let axis = cases.rng.random_range(0..rank);
        let mut g = Graph::new("concat");
        let mut ids = Vec::new();
        for p in 0..parts {
            let mut d = dims.clone();
            d[axis] = cases.pick(&ODD[..5]);
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
        cases.push("concat", &format!("concat {dtype} axis={axis}"), g, Tolerance::Exact, &[])?;
    }
    Ok(())
}

/// Harness cases: f32, f16 and q8 tables (q8 rows come out f32) with i32 and u32 ids of rank
/// 1 and 2, every id in range.
pub(crate) fn gather(cases: &mut CaseGen) -> Result<()> {
    let pairs = [(DType::F32, DType::I32), (DType::F16, DType::U32), (DType::F32, DType::U32), (DType::Q8, DType::U32)];
    for (table_dtype, ids_dtype) in pairs {
        let v = cases.pick(&[1, 7, 33, 127, 200]);
        let mut table = vec![v, cases.pick(&[1, 3, 17, 64, 65])];
        if ids_dtype == DType::U32 && table_dtype == DType::F32 {
            table.push(cases.pick(&[2, 3]));
        }
        let n = cases.pick(&[1, 3, 7, 17]);
        let ids_dims = if ids_dtype == DType::U32 { vec![cases.pick(&[1, 2, 3]), n] } else { vec![n] };
        let mut g = Graph::new("gather");
        let t = g.param("table", ty(table_dtype, &table))?;
        let ids = g.input("ids", ty(ids_dtype, &ids_dims))?;
        let y = g.gather(t, ids)?;
        g.output("y", y)?;
        let dists = [("ids", Dist::Ints { lo: 0, hi: v as i64 })];
        cases.push("gather", &format!("gather {table_dtype} ids {ids_dtype}"), g, Tolerance::Exact, &dists)?;
    }
    Ok(())
}

/// Harness cases: two runs writing at different runtime offsets; the second run's state must hold
/// both writes, so the cases check persistence as well as placement.
pub(crate) fn kv_write(cases: &mut CaseGen) -> Result<()> {
    for dtype in [DType::F32, DType::F16] {
        // A per-head cache [H, S, D] written along S, output directly; then a random
        // rank and axis, read back through a permute.
        for through_permute in [false, true] {
            let rank = if through_permute { cases.rng.random_range(2..=3) } else { 3 };
            let cache = if through_permute {
                cases.shape(rank, BUDGET / 4)
            } else {
                vec![cases.pick(&[1, 2, 6]), cases.pick(&[7, 17, 33, 65]), cases.pick(&[1, 17, 64])]
            };
            let axis = if through_permute { cases.rng.random_range(0..rank) } else { 1 };
            let rows = cases.rng.random_range(1..=cache[axis].min(3));
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
                let offset = cases.rng.random_range(0..=cache[axis] - rows) as u32;
                let (run, w) = cases.run(&g, &[], &[("pos", offset)])?;
                runs.push(run);
                weights = w;
            }
            let label = format!("kv_write {dtype} axis={axis}{}", if through_permute { " then permute" } else { "" });
            cases.push_runs("kv_write", &label, g, Tolerance::Exact, weights, runs);
        }
        // A whole-buffer write without an offset scalar, read back through a cast.
        let dims = cases.shape(2, BUDGET / 4);
        let mut g = Graph::new("write_state");
        let buf = g.state("cache", ty(dtype, &dims))?;
        let v = g.input("value", ty(dtype, &dims))?;
        let w = g.write_state(buf, v)?;
        let y = g.cast(w, DType::F32)?;
        g.output("y", y)?;
        cases.push("kv_write", &format!("kv_write without an offset {dtype}"), g, Tolerance::Exact, &[])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_ids_are_in_range() {
        for seed in 0..4 {
            let mut cases = CaseGen::new(seed);
            gather(&mut cases).unwrap();
            let cases = cases.into_cases();
            assert_eq!(cases.len(), 4);
            for case in &cases {
                let v = case.weights["table"].shape().dims()[0] as i64;
                assert!(case.runs[0].inputs["ids"].to_i64().iter().all(|&i| (0..v).contains(&i)), "{}", case.name);
            }
        }
    }
}
