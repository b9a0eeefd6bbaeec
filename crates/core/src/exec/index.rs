//! Index math the backends' lowerings share: how the elements an op reads are laid out, with
//! as few axes as the layout allows. A kernel splits every element index into coordinates
//! (one division per axis), so the fewer axes, the less work per element; and limits on how
//! many axes a kernel's parameters hold apply after merging, so more shapes fit.
//!
//! The wgpu lowering (`susurrus_wgpu::lower`) and the CUDA lowering (`susurrus_cuda::lower`) both
//! take their index math from here. [`broadcast_offset`] lives with [`Shape`](crate::Shape)
//! because the CPU references use it too; it is re-exported here so lowerings have one place
//! to look.

pub use crate::ir::broadcast_offset;

/// The fewest axes that walk the same offsets as output axes of sizes `dims` reading the input
/// with `strides`: size-1 axes go, and neighbours that stay contiguous in the input merge
/// (`[A, B, C] -> [C, A, B]` is the transpose of an `[A*B, C]` matrix). Fewer axes mean fewer
/// divisions per element in the kernel, and ranks above 8 may still fit its 8 slots.
pub fn collapse(dims: &[usize], strides: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut out_dims: Vec<usize> = Vec::new();
    let mut out_strides: Vec<usize> = Vec::new();
    for (&d, &s) in dims.iter().zip(strides).filter(|(d, _)| **d != 1) {
        match (out_dims.last_mut(), out_strides.last_mut()) {
            (Some(last_d), Some(last_s)) if *last_s == s * d => {
                *last_d *= d;
                *last_s = s;
            }
            _ => {
                out_dims.push(d);
                out_strides.push(s);
            }
        }
    }
    (out_dims, out_strides)
}

/// The output dimensions and per-input strides with size-1 axes dropped and neighbouring axes
/// merged wherever every input walks them as one (outer stride = inner stride * inner size;
/// broadcast axes, stride 0, merge with broadcast axes). The offsets stay the same and each
/// thread splits its index into fewer coordinates: inputs of the output's own shape coalesce
/// to one axis of stride 1.
pub fn coalesce(dims: &[usize], strides: &[Vec<usize>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    // Each kept axis: its size and every input's stride along it.
    let mut axes: Vec<(usize, Vec<usize>)> = Vec::new();
    for (d, &size) in dims.iter().enumerate().filter(|&(_, &size)| size != 1) {
        let along: Vec<usize> = strides.iter().map(|s| s[d]).collect();
        match axes.last_mut() {
            Some((outer, outer_strides)) if outer_strides.iter().zip(&along).all(|(&o, &s)| o == s * size) => {
                *outer *= size;
                *outer_strides = along;
            }
            _ => axes.push((size, along)),
        }
    }
    let merged_dims = axes.iter().map(|(size, _)| *size).collect();
    let merged_strides = (0..strides.len()).map(|k| axes.iter().map(|(_, s)| s[k]).collect()).collect();
    (merged_dims, merged_strides)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapse_merges_contiguous_axes_and_drops_unit_axes() {
        // [2,3,4] -> perm [2,0,1]: output [4,2,3] walks input strides [1,12,4]; axes 1 and 2
        // are contiguous (12 = 4 * 3), giving a transpose of a [6, 4] matrix.
        assert_eq!(collapse(&[4, 2, 3], &[1, 12, 4]), (vec![4, 6], vec![1, 4]));
        // [B=2,S=3,H=4,D=5] -> [B,H,S,D]: strides [60,5,20,1]; no neighbours are contiguous.
        assert_eq!(collapse(&[2, 4, 3, 5], &[60, 5, 20, 1]), (vec![2, 4, 3, 5], vec![60, 5, 20, 1]));
        // A unit axis goes even between axes that then do not merge.
        assert_eq!(collapse(&[2, 1, 3], &[1, 6, 2]), (vec![2, 3], vec![1, 2]));
        // The identity collapses to one axis; all-unit shapes to none (a scalar copy).
        assert_eq!(collapse(&[2, 3, 4], &[12, 4, 1]), (vec![24], vec![1]));
        assert_eq!(collapse(&[1, 1], &[1, 1]), (vec![], vec![]));
    }

    #[test]
    fn coalescing_merges_axes_every_input_walks_as_one() {
        // Output [2,1,3,4]: x of the same shape, y [3,4] broadcast over the first axis, z
        // [2,1,1,1]. The size-1 axis goes; axis 2 does not merge into axis 0 (y: 0 != 4 * 3);
        // axis 3 merges into axis 2 (x and y: 4 = 1 * 4, z: 0 = 0 * 4).
        let (dims, strides) = coalesce(&[2, 1, 3, 4], &[vec![12, 12, 4, 1], vec![0, 0, 4, 1], vec![1, 0, 0, 0]]);
        assert_eq!(dims, [2, 12]);
        assert_eq!(strides, [vec![12, 1], vec![0, 1], vec![1, 0]]);
        // Inputs of the output's own shape: one axis. A scalar output: no axes.
        assert_eq!(coalesce(&[2, 3, 4], &[vec![12, 4, 1], vec![12, 4, 1]]), (vec![24], vec![vec![1], vec![1]]));
        assert_eq!(coalesce(&[1, 1], &[vec![0, 0]]), (vec![], vec![vec![]]));
    }
}
