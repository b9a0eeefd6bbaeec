//! Fast loops shared by the CPU reference evaluations: matrix products and splitting work
//! across cores.
//!
//! The references stay plain in what they compute (f32 values, f32 accumulation) but not in
//! how: a triple loop runs Whisper's encoder at 0.5 GFLOP/s, too slow to run the model in
//! tests. Products go to `matrixmultiply` (packed, cache-blocked, SIMD picked at run time);
//! single-row products (decoder steps) to a dot or axpy loop that reads the weight once.
//! Natively, large jobs are split across threads by output rows; each output element is
//! still computed by one thread in one fixed order, so results do not depend on the split.

/// Multiply-adds (or comparable steps) below which a job runs on the calling thread: a
/// thread costs tens of microseconds to start, about what this much work takes.
const PARALLEL_WORK: usize = 1 << 19;

/// The number of threads jobs are split across: the machine's cores, or 1 on wasm32 (no
/// threads there).
pub(crate) fn threads() -> usize {
    #[cfg(target_arch = "wasm32")]
    {
        1
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// Runs `f(first, chunk)` over `out` cut into consecutive chunks of whole units of `unit`
/// elements, where `first` is the index of the chunk's first unit. Chunks run on separate
/// threads when `work` (the job's total cost) is worth it, else `f(0, out)` runs here.
pub(crate) fn par_chunks<T: Send>(out: &mut [T], unit: usize, work: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let units = out.len().checked_div(unit).unwrap_or(0);
    let parts = threads().min(units).min(work / PARALLEL_WORK);
    if parts <= 1 {
        f(0, out);
        return;
    }
    split(out, unit, units.div_ceil(parts), &f);
}

#[cfg(not(target_arch = "wasm32"))]
fn split<T: Send>(out: &mut [T], unit: usize, per: usize, f: &(impl Fn(usize, &mut [T]) + Sync)) {
    std::thread::scope(|s| {
        let mut chunks = out.chunks_mut(per * unit).enumerate();
        let first = chunks.next();
        for (i, chunk) in chunks {
            s.spawn(move || f(i * per, chunk));
        }
        if let Some((_, chunk)) = first {
            f(0, chunk);
        }
    });
}

#[cfg(target_arch = "wasm32")]
fn split<T: Send>(out: &mut [T], _unit: usize, _per: usize, f: &(impl Fn(usize, &mut [T]) + Sync)) {
    f(0, out);
}

/// A read-only `rows x cols` f32 matrix in a slice: element `(r, c)` is
/// `data[r * row_stride + c * col_stride]`. A transposed view just swaps the strides.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mat<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a> Mat<'a> {
    /// A row-major matrix at the start of `data`.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Mat { data, rows, cols, row_stride: cols, col_stride: 1 }
    }

    /// The transpose of the row-major `cols x rows` matrix at the start of `data`: the
    /// `[out, in]` weight of a linear layer seen as the `[in, out]` right operand.
    pub fn transposed(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Mat { data, rows, cols, row_stride: 1, col_stride: rows }
    }

    /// Rows `start..start + count`.
    fn row_range(self, start: usize, count: usize) -> Self {
        Mat { data: &self.data[(start * self.row_stride).min(self.data.len())..], rows: count, ..self }
    }

    /// Columns `start..start + count`.
    fn col_range(self, start: usize, count: usize) -> Self {
        Mat { data: &self.data[(start * self.col_stride).min(self.data.len())..], cols: count, ..self }
    }

    /// Whether every element lies inside `data` (what makes handing it to `sgemm` sound).
    fn in_bounds(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride < self.data.len()
    }

    /// Row `r` as a contiguous slice, when columns are contiguous.
    fn row(&self, r: usize) -> &'a [f32] {
        &self.data[r * self.row_stride..r * self.row_stride + self.cols]
    }
}

/// `c = a x b` on this thread, `c` row-major `a.rows x b.cols` (overwritten).
///
/// # Panics
/// When the shapes disagree or a view reaches past its data: callers derive both from
/// shapes that `infer` checked, so this is a bug, never user input.
pub(crate) fn gemm(a: Mat, b: Mat, c: &mut [f32]) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(
        b.rows == k && c.len() == m * n && a.in_bounds() && b.in_bounds(),
        "gemm of {m}x{k} by {}x{n} into {} values",
        b.rows,
        c.len()
    );
    if c.is_empty() {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        return;
    }
    if m == 1 && a.col_stride == 1 && (b.row_stride == 1 || b.col_stride == 1) {
        return gemv(a.row(0), b, c);
    }
    // SAFETY: `in_bounds` checked that every element of `a` and `b` read through these strides
    // lies inside their slices, and `c` holds exactly `m * n` elements written row-major with
    // row stride `n` (no two alias); with beta 0, `c` is only written.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.data.as_ptr(),
            a.row_stride as isize,
            a.col_stride as isize,
            b.data.as_ptr(),
            b.row_stride as isize,
            b.col_stride as isize,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// `c = a x b`, split across threads: by rows of `c`, or by columns when `a` is one row.
pub(crate) fn gemm_par(a: Mat, b: Mat, c: &mut [f32]) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let work = m * n * k;
    if m == 1 {
        par_chunks(c, 1, work, |j, chunk| gemm(a, b.col_range(j, chunk.len()), chunk));
    } else {
        par_chunks(c, n, work, |i, chunk| gemm(a.row_range(i, chunk.len() / n.max(1)), b, chunk));
    }
}

/// `c = x b` for one row `x`: dot products with the contiguous columns of a transposed `b`,
/// or a sum of `x[p]` times the contiguous rows of `b`. Either way `b` is read once, in order.
fn gemv(x: &[f32], b: Mat, c: &mut [f32]) {
    if b.row_stride == 1 {
        for (j, out) in c.iter_mut().enumerate() {
            let col = &b.data[j * b.col_stride..j * b.col_stride + b.rows];
            *out = dot(x, col);
        }
    } else {
        c.fill(0.0);
        for (p, &xp) in x.iter().enumerate() {
            for (out, &bv) in c.iter_mut().zip(b.row(p)) {
                *out += xp * bv;
            }
        }
    }
}

/// Lanes of [`dot`]: independent sums the compiler keeps in vector registers.
const LANES: usize = 16;

/// The dot product of two equally long slices, summed in [`LANES`] interleaved partial sums.
pub(crate) fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (xs, ys) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    let tail: f32 = xs.remainder().iter().zip(ys.remainder()).map(|(a, b)| a * b).sum();
    for (xc, yc) in xs.zip(ys) {
        for l in 0..LANES {
            acc[l] += xc[l] * yc[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1] that differ from element to element.
    fn wave(n: usize, seed: f32) -> Vec<f32> {
        (0..n).map(|i| (i as f32 * 0.37 + seed).sin()).collect()
    }

    /// The triple loop, in f64 so its own rounding does not count.
    fn reference(a: Mat, b: Mat) -> Vec<f32> {
        let mut c = Vec::new();
        for i in 0..a.rows {
            for j in 0..b.cols {
                let mut acc = 0.0f64;
                for p in 0..a.cols {
                    acc += f64::from(a.data[i * a.row_stride + p * a.col_stride])
                        * f64::from(b.data[p * b.row_stride + j * b.col_stride]);
                }
                c.push(acc as f32);
            }
        }
        c
    }

    fn assert_close(got: &[f32], want: &[f32], k: usize) {
        assert_eq!(got.len(), want.len());
        // Values are at most 1 in magnitude, so an f32 sum of k products is off by at most
        // about k ulps of 1.
        let tol = 1e-6 * (k as f32 + 1.0);
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() <= tol, "element {i}: {g} vs {w}");
        }
    }

    #[test]
    fn products_match_the_triple_loop() {
        // Sizes below, at and past the kernels' register blocks and cache blocks, odd ones,
        // single rows (the GEMV path) and single columns.
        for (m, k, n) in [(1, 1, 1), (1, 17, 33), (1, 300, 129), (2, 3, 5), (7, 65, 1), (9, 257, 70), (130, 19, 33)] {
            let (av, bv) = (wave(m * k, 0.3), wave(k * n, 1.1));
            let a = Mat::row_major(&av, m, k);
            for b in [Mat::row_major(&bv, k, n), Mat::transposed(&bv, k, n)] {
                let want = reference(a, b);
                let mut got = vec![f32::NAN; m * n];
                gemm(a, b, &mut got);
                assert_close(&got, &want, k);
                let mut got = vec![f32::NAN; m * n];
                gemm_par(a, b, &mut got);
                assert_close(&got, &want, k);
            }
        }
    }

    #[test]
    fn large_products_split_across_threads_give_the_same_values() {
        // Big enough to be split (when the machine has several cores): the split changes
        // which thread computes a row, never the order of a row's sums.
        let (m, k, n) = (203, 131, 97);
        let (av, bv) = (wave(m * k, 0.7), wave(k * n, 2.0));
        let (a, b) = (Mat::row_major(&av, m, k), Mat::transposed(&bv, k, n));
        let mut one = vec![0.0; m * n];
        gemm(a, b, &mut one);
        let mut split = vec![0.0; m * n];
        gemm_par(a, b, &mut split);
        assert_eq!(one, split);
        assert_close(&one, &reference(a, b), k);
        // One row against many columns: the columns are split instead.
        let (xv, wv) = (wave(k, 0.1), wave(k * 5001, 0.9));
        let (x, w) = (Mat::row_major(&xv, 1, k), Mat::transposed(&wv, k, 5001));
        let mut got = vec![0.0; 5001];
        gemm_par(x, w, &mut got);
        assert_close(&got, &reference(x, w), k);
    }

    #[test]
    fn empty_inner_dimension_gives_zeros_and_empty_outputs_nothing() {
        let mut c = vec![f32::NAN; 6];
        gemm(Mat::row_major(&[], 2, 0), Mat::row_major(&[], 0, 3), &mut c);
        assert_eq!(c, [0.0; 6]);
        let mut c: Vec<f32> = Vec::new();
        gemm_par(Mat::row_major(&[], 0, 4), Mat::row_major(&[1.0; 8], 4, 2), &mut c);
        assert!(c.is_empty());
    }

    #[test]
    #[should_panic(expected = "gemm of 2x3 by 3x2 into 4 values")]
    fn views_past_their_data_are_refused() {
        let mut c = vec![0.0; 4];
        gemm(Mat::row_major(&[1.0; 5], 2, 3), Mat::row_major(&[1.0; 6], 3, 2), &mut c);
    }

    #[test]
    fn chunks_cover_the_output_once_in_whole_units() {
        let mut out = vec![0usize; 3 * 1001];
        par_chunks(&mut out, 3, usize::MAX, |first, chunk| {
            assert_eq!(chunk.len() % 3, 0);
            for (u, unit) in chunk.chunks_mut(3).enumerate() {
                unit.fill(first + u + 1);
            }
        });
        let want: Vec<usize> = (0..3 * 1001).map(|i| i / 3 + 1).collect();
        assert_eq!(out, want);
    }

    #[test]
    fn dot_sums_every_element() {
        for n in [0, 1, 15, 16, 17, 100] {
            let (x, y) = (wave(n, 0.2), wave(n, 0.5));
            let want: f64 = x.iter().zip(&y).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
            assert!((f64::from(dot(&x, &y)) - want).abs() < 1e-5, "n = {n}");
        }
    }
}
