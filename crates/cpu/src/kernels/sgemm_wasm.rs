//! `c = a x b` in WebAssembly SIMD128: the products of the browser's CPU path (the encoder's
//! linear layers, its convolutions as products, attention's score and value products).
//!
//! Why not `matrixmultiply`'s SIMD128 kernel: its 8 x 8 tile keeps 16 accumulators and four
//! operand vectors live, more than the 16 vector registers engines have on x86-64 (V8 spills),
//! and it broadcasts with shuffles. This kernel's 4 x 8 tile keeps 8 accumulators, two rows of
//! `b` and one broadcast value (11 registers), and broadcasts with `v128.load32_splat`, a load.
//! WebAssembly has no fused multiply-add (relaxed SIMD's is fused on some machines and not on
//! others, so results would depend on the machine): each step is a multiply and an add.
//!
//! Blocking as in BLIS: `b` is packed `KC` rows by `NC` columns at a time into panels of 8
//! columns (`[k][8]`, zero-padded); a panel (8 KB) stays in L1 while `MC` rows of `a` (64 KB
//! of them) stream from L2. Rows of `a` whose elements are adjacent (every `a` Whisper has)
//! are read where they are, four at a time; others are first packed into strips of 4 rows
//! (`[k][4]`). Each element of `c` is a sum over `k` in order, `KC` terms at a time added to
//! what the earlier blocks left in `c`.

use core::arch::wasm32::*;
use std::cell::RefCell;

use super::product::View;

const MR: usize = 4;
const NR: usize = 8;
/// Rows of `b` (and columns of `a`) per packed block.
const KC: usize = 256;
/// Columns of `b` per packed block (256 KB packed: L2).
const NC: usize = 256;
/// Rows of `a` per block (64 KB of them).
const MC: usize = 64;

thread_local! {
    /// Each thread's packing buffers, kept between calls (attention makes hundreds of small
    /// products per window).
    static PACKED: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `c = a x b`, `a` `m x k`, `b` `k x n`, `c` row-major `m x n` with row stride `n`.
/// The caller checked that the views hold their matrices and `c` holds `m * n` values.
pub fn sgemm(m: usize, k: usize, n: usize, a: View, b: View, c: &mut [f32]) {
    if k == 0 {
        c[..m * n].fill(0.0);
        return;
    }
    PACKED.with_borrow_mut(|(pa, pb)| {
        pa.resize(MC.next_multiple_of(MR) * KC, 0.0);
        pb.resize(KC * NC.next_multiple_of(NR), 0.0);
        for jc in (0..n).step_by(NC) {
            let nc = NC.min(n - jc);
            for pc in (0..k).step_by(KC) {
                let kc = KC.min(k - pc);
                pack_b(b, pc, kc, jc, nc, pb);
                for ic in (0..m).step_by(MC) {
                    let mc = MC.min(m - ic);
                    if a.cs != 1 {
                        pack_a(a, ic, mc, pc, kc, pa);
                    }
                    for (p, panel) in pb.chunks_exact(kc * NR).take(nc.div_ceil(NR)).enumerate() {
                        let col = jc + p * NR;
                        let cols = NR.min(n - col);
                        for s in 0..mc.div_ceil(MR) {
                            let row = ic + s * MR;
                            let rows = MR.min(ic + mc - row);
                            let tile = if a.cs == 1 {
                                // A short strip reads its last row again in place of the rows
                                // it lacks (their sums are not stored).
                                let at = |i: usize| &a.data[(row + i.min(rows - 1)) * a.rs + pc..][..kc];
                                tile_rows(kc, std::array::from_fn(at), panel)
                            } else {
                                tile(kc, &pa[s * kc * MR..], panel)
                            };
                            store(tile, &mut c[row * n + col..], n, rows, cols, pc > 0);
                        }
                    }
                }
            }
        }
    });
}

/// Rows `pc..pc + kc` of columns `jc..jc + nc` of `b` as panels of 8 columns, `[k][8]` each,
/// the last one padded with zeros.
fn pack_b(b: View, pc: usize, kc: usize, jc: usize, nc: usize, out: &mut [f32]) {
    for (p, panel) in out.chunks_exact_mut(kc * NR).take(nc.div_ceil(NR)).enumerate() {
        let col = jc + p * NR;
        let cols = NR.min(jc + nc - col);
        if cols < NR {
            panel.fill(0.0);
        }
        if b.cs == 1 {
            // Row-major `b`: each k's 8 columns are adjacent.
            for (kk, dst) in panel.chunks_exact_mut(NR).enumerate() {
                let at = (pc + kk) * b.rs + col;
                dst[..cols].copy_from_slice(&b.data[at..at + cols]);
            }
        } else {
            // A transposed weight (`[n, k]` read as `[k, n]`): each column's k are adjacent.
            for j in 0..cols {
                let column = &b.data[(col + j) * b.cs + pc * b.rs..];
                for (kk, dst) in panel.chunks_exact_mut(NR).enumerate() {
                    dst[j] = column[kk * b.rs];
                }
            }
        }
    }
}

/// Rows `ic..ic + mc` of columns `pc..pc + kc` of `a` as strips of 4 rows, `[k][4]` each,
/// the last one padded with zeros.
fn pack_a(a: View, ic: usize, mc: usize, pc: usize, kc: usize, out: &mut [f32]) {
    for (s, strip) in out.chunks_exact_mut(kc * MR).take(mc.div_ceil(MR)).enumerate() {
        let row = ic + s * MR;
        let rows = MR.min(ic + mc - row);
        for i in 0..MR {
            let base = (row + i) * a.rs + pc * a.cs;
            for kk in 0..kc {
                strip[kk * MR + i] = if i < rows { a.data[base + kk * a.cs] } else { 0.0 };
            }
        }
    }
}

/// The 4 x 8 tile `strip x panel` over `kc` terms, as eight vectors (row `i`'s columns 0-3 in
/// `[2 * i]`, 4-7 in `[2 * i + 1]`).
#[inline(always)]
fn tile(kc: usize, strip: &[f32], panel: &[f32]) -> [v128; 2 * MR] {
    assert!(strip.len() >= kc * MR && panel.len() >= kc * NR);
    let mut acc = [f32x4_splat(0.0); 2 * MR];
    let (a, b) = (strip.as_ptr(), panel.as_ptr());
    for kk in 0..kc {
        // SAFETY: kk < kc, and the assert above showed that the strip holds kc * 4 values and
        // the panel kc * 8; v128 loads need no alignment.
        unsafe {
            let b0 = v128_load(b.add(kk * NR).cast());
            let b1 = v128_load(b.add(kk * NR + 4).cast());
            for i in 0..MR {
                let ai = v128_load32_splat(a.add(kk * MR + i).cast());
                acc[2 * i] = f32x4_add(acc[2 * i], f32x4_mul(ai, b0));
                acc[2 * i + 1] = f32x4_add(acc[2 * i + 1], f32x4_mul(ai, b1));
            }
        }
    }
    acc
}

/// [`tile`] with the 4 rows of `a` read in place (each `kc` adjacent values).
#[inline(always)]
fn tile_rows(kc: usize, rows: [&[f32]; MR], panel: &[f32]) -> [v128; 2 * MR] {
    assert!(rows.iter().all(|r| r.len() >= kc) && panel.len() >= kc * NR);
    let mut acc = [f32x4_splat(0.0); 2 * MR];
    let a = rows.map(<[f32]>::as_ptr);
    let b = panel.as_ptr();
    for kk in 0..kc {
        // SAFETY: kk < kc, and the assert above showed that every row holds kc values and the
        // panel kc * 8; v128 loads need no alignment.
        unsafe {
            let b0 = v128_load(b.add(kk * NR).cast());
            let b1 = v128_load(b.add(kk * NR + 4).cast());
            for i in 0..MR {
                let ai = v128_load32_splat(a[i].add(kk).cast());
                acc[2 * i] = f32x4_add(acc[2 * i], f32x4_mul(ai, b0));
                acc[2 * i + 1] = f32x4_add(acc[2 * i + 1], f32x4_mul(ai, b1));
            }
        }
    }
    acc
}

/// Writes (or adds, for the later blocks of `k`) the tile's first `rows x cols` values to `c`,
/// whose rows are `n` apart.
#[inline(always)]
fn store(tile: [v128; 2 * MR], c: &mut [f32], n: usize, rows: usize, cols: usize, add: bool) {
    for i in 0..rows {
        let row = &mut c[i * n..i * n + cols];
        if cols == NR {
            let out = row.as_mut_ptr();
            let mut v = [tile[2 * i], tile[2 * i + 1]];
            if add {
                // SAFETY: `row` holds `cols` = 8 floats; v128 loads need no alignment.
                let old = unsafe { [v128_load(out.cast()), v128_load(out.add(4).cast())] };
                v = [f32x4_add(old[0], v[0]), f32x4_add(old[1], v[1])];
            }
            // SAFETY: as above, for stores.
            unsafe {
                v128_store(out.cast(), v[0]);
                v128_store(out.add(4).cast(), v[1]);
            }
        } else {
            let mut lanes = [0.0f32; NR];
            // SAFETY: `lanes` holds 8 floats.
            unsafe {
                v128_store(lanes.as_mut_ptr().cast(), tile[2 * i]);
                v128_store(lanes.as_mut_ptr().add(4).cast(), tile[2 * i + 1]);
            }
            for (d, s) in row.iter_mut().zip(lanes) {
                *d = if add { *d + s } else { s };
            }
        }
    }
}
