//! Matrix products: `matrixmultiply`'s packed, cache-blocked SIMD kernel (chosen at run
//! time) on each thread, rows of the result split across the pool. Measured here on Whisper's
//! fc1 shape (1500 x 384 x 1536, 2 cores): 71 GFLOP/s on one thread, about twice that on two.
//! In WebAssembly each thread runs our own SIMD128 kernel instead ([`super::sgemm_wasm`]).

use rayon::prelude::*;

/// A read-only matrix view: element `(r, c)` at `data[r * rs + c * cs]`.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    pub data: &'a [f32],
    pub rs: usize,
    pub cs: usize,
}

impl<'a> View<'a> {
    /// Row-major with `cols` columns.
    pub fn rows(data: &'a [f32], cols: usize) -> Self {
        View { data, rs: cols, cs: 1 }
    }

    /// The transpose of a row-major matrix with `cols` columns (a `[N, K]` weight read as
    /// `[K, N]`).
    pub fn transposed(data: &'a [f32], cols: usize) -> Self {
        View { data, rs: 1, cs: cols }
    }

    /// Whether a `rows x cols` matrix lies inside `data`.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        rows == 0 || cols == 0 || (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// Multiply-adds below which a product stays on one thread.
const PARALLEL_WORK: usize = 1 << 20;

/// `c = a x b` with `a` `m x k`, `b` `k x n`, `c` row-major `m x n` (overwritten). Rows of
/// `c` are split across up to `threads` threads of the current pool; each element is still
/// computed by one thread in one order, so the result does not depend on the split.
///
/// # Panics
/// When a view does not hold its matrix: shapes come from types `choose` checked, so this
/// is a bug, never user input.
pub fn matmul(m: usize, n: usize, k: usize, a: View, b: View, c: &mut [f32], threads: usize) {
    assert!(a.fits(m, k) && b.fits(k, n) && c.len() >= m * n, "product {m}x{k}x{n} outside its operands");
    if m == 0 || n == 0 {
        return;
    }
    let parts = if m * n * k < PARALLEL_WORK { 1 } else { threads.clamp(1, m) };
    let per = m.div_ceil(parts);
    c[..m * n].par_chunks_mut(per * n).enumerate().for_each(|(i, block)| {
        let first = i * per;
        let rows = block.len() / n;
        let a_block = &a.data[first * a.rs..];
        #[cfg(all(target_family = "wasm", target_feature = "simd128"))]
        super::sgemm_wasm::sgemm(rows, k, n, View { data: a_block, ..a }, b, block);
        // SAFETY: `fits` showed that rows first..first+rows of `a` and all of `b` lie in
        // their slices, and `block` holds rows x n values with row stride n.
        #[cfg(not(all(target_family = "wasm", target_feature = "simd128")))]
        unsafe {
            matrixmultiply::sgemm(
                rows,
                k,
                n,
                1.0,
                a_block.as_ptr(),
                a.rs as isize,
                a.cs as isize,
                b.data.as_ptr(),
                b.rs as isize,
                b.cs as isize,
                0.0,
                block.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    });
}
