// Top k along the last axis, second pass (crates/wgpu/src/lower/reduce.rs, `top_k`;
// the selection is top_k_select.wgsl, appended): workgroup g merges row g's candidates, the
// `p.splits * p.k` pairs (key, index) top_k.wgsl wrote to the scratch (read as input
// $SCRATCH_INPUT), and writes the row's k indices (u32, row-major [rows, k]).

fn count(g: u32) -> u32 {
    return p.splits * p.k;
}

fn candidate(g: u32, c: u32) -> vec2<u32> {
    let w = 2u * (g * p.splits * p.k + c);
    return vec2<u32>(ldw$SCRATCH_INPUT(w), ldw$SCRATCH_INPUT(w + 1u));
}

fn emit(g: u32, r: u32, pair: vec2<u32>) {
    stu(g * p.k + r, pair.y);
}
