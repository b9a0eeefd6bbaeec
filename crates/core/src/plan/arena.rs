//! Arena offsets: best fit over liveness intervals.
//!
//! Buffers are placed largest first (large buffers are the hardest to fit later). Each one
//! goes into the smallest gap left between the already-placed buffers whose intervals
//! overlap its own, or after all of them when no gap fits. Buffers whose intervals are
//! disjoint never constrain each other, so they may share bytes.

use std::cmp::Reverse;

use super::ArenaBuffer;
use crate::error::{Error, Result};

/// Sets every buffer's offset and returns the arena size in bytes. No buffer crosses a
/// multiple of `max_buffer` bytes; a buffer larger than that is an error.
pub(super) fn assign_offsets(buffers: &mut [ArenaBuffer], max_buffer: usize) -> Result<usize> {
    if let Some(b) = buffers.iter().find(|b| b.bytes > max_buffer) {
        return Err(Error::Unsupported {
            op: format!("a value of {} bytes (%{})", b.bytes, b.values.first().map_or(0, |v| v.0)),
            backend: format!("plan with buffers of at most {max_buffer} bytes"),
        });
    }
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    order.sort_by_key(|&b| (Reverse(buffers[b].bytes), buffers[b].live.start, b));
    let mut placed: Vec<usize> = Vec::with_capacity(buffers.len());
    let mut taken: Vec<(usize, usize)> = Vec::new();
    let mut arena = 0;
    for b in order {
        let live = buffers[b].live;
        taken.clear();
        taken.extend(
            placed
                .iter()
                .filter(|&&p| buffers[p].live.overlaps(&live))
                .map(|&p| (buffers[p].offset, buffers[p].offset + buffers[p].bytes)),
        );
        taken.sort_unstable();
        let offset = best_fit(&taken, buffers[b].bytes, max_buffer);
        buffers[b].offset = offset;
        arena = arena.max(offset + buffers[b].bytes);
        placed.push(b);
    }
    Ok(arena)
}

/// The start of the smallest gap of at least `size` bytes between the `taken` byte ranges
/// (sorted by start), or the end of the last one when no gap fits. A placement never crosses
/// a multiple of `max_buffer` (`size <= max_buffer`): it moves to the next multiple instead.
fn best_fit(taken: &[(usize, usize)], size: usize, max_buffer: usize) -> usize {
    let within_chunk = |offset: usize| {
        let chunk_end = (offset / max_buffer).saturating_add(1).saturating_mul(max_buffer);
        if offset + size > chunk_end { chunk_end } else { offset }
    };
    let mut cursor = 0;
    let mut best: Option<(usize, usize)> = None;
    for &(start, end) in taken {
        let offset = within_chunk(cursor);
        if start > offset {
            let gap = start - offset;
            if gap >= size && best.is_none_or(|(smallest, _)| gap < smallest) {
                best = Some((gap, offset));
            }
        }
        cursor = cursor.max(end);
    }
    best.map_or(within_chunk(cursor), |(_, offset)| offset)
}

/// The largest sum of buffer sizes live at one of `steps` steps: no arena can be smaller.
pub(super) fn peak_live(buffers: &[ArenaBuffer], steps: usize) -> usize {
    let mut delta = vec![0i64; steps + 1];
    for b in buffers {
        delta[b.live.start] += b.bytes as i64;
        delta[b.live.end + 1] -= b.bytes as i64;
    }
    let mut live = 0i64;
    let mut peak = 0i64;
    for d in delta {
        live += d;
        peak = peak.max(live);
    }
    peak as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::NodeId;
    use crate::plan::Interval;

    #[test]
    fn best_fit_takes_the_smallest_gap_that_fits() {
        let taken = [(0, 256), (768, 1024), (1280, 2048)];
        // Gaps: 256..768 (512 bytes) and 1024..1280 (256 bytes).
        assert_eq!(best_fit(&taken, 256, usize::MAX), 1024);
        assert_eq!(best_fit(&taken, 512, usize::MAX), 256);
        assert_eq!(best_fit(&taken, 768, usize::MAX), 2048);
        assert_eq!(best_fit(&[], 512, usize::MAX), 0);
        // Overlapping ranges (buffers that share bytes with each other) leave no false gap.
        assert_eq!(best_fit(&[(0, 1024), (256, 512), (1536, 2048)], 512, usize::MAX), 1024);
    }

    #[test]
    fn placements_never_cross_a_buffer_boundary() {
        // Chunks of 1024 bytes: a 512-byte value that would start at 768 moves to 1024, and a
        // gap that only fits across a boundary is not used.
        assert_eq!(best_fit(&[(0, 768)], 512, 1024), 1024);
        assert_eq!(best_fit(&[(0, 768), (1280, 2048)], 512, 1024), 2048);
        assert_eq!(best_fit(&[(0, 768)], 256, 1024), 768);
        let mut b = vec![buffer(768, 0, 1), buffer(512, 0, 1)];
        assert_eq!(assign_offsets(&mut b, 1024).unwrap(), 1536);
        assert_eq!((b[0].offset, b[1].offset), (0, 1024));
        let err = assign_offsets(&mut [buffer(2048, 0, 0)], 1024).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a value of 2048 bytes (%0) is not supported by the plan with buffers of at most 1024 bytes backend"
        );
    }

    fn buffer(bytes: usize, start: usize, end: usize) -> ArenaBuffer {
        ArenaBuffer { offset: 0, bytes, live: Interval { start, end }, values: vec![NodeId(0)] }
    }

    #[test]
    fn offsets_are_hand_checked() {
        let mut b = vec![
            buffer(1024, 0, 3), // a
            buffer(512, 0, 1),  // b
            buffer(512, 2, 5),  // c
            buffer(256, 1, 2),  // d
            buffer(256, 4, 5),  // e
        ];
        let arena = assign_offsets(&mut b, usize::MAX).unwrap();
        // a at 0; b overlaps a -> 1024; c overlaps a but not b -> 1024 too; d overlaps a, b
        // and c -> 1536; e overlaps only c (1024..1536) -> the gap 0..1024.
        let offsets: Vec<usize> = b.iter().map(|b| b.offset).collect();
        assert_eq!(offsets, vec![0, 1024, 1024, 1536, 0]);
        assert_eq!(arena, 1792);
        // Steps 1 (a+b+d) and 2 (a+c+d) both hold 1792 bytes.
        assert_eq!(peak_live(&b, 6), 1792);
    }
}
