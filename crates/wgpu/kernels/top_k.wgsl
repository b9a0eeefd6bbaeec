// Top k along the last axis, over values (crates/wgpu/src/lower/reduce.rs, `top_k`;
// the selection is top_k_select.wgsl, appended). x is `p.groups / p.splits` rows of `p.n`
// values, each cut into `p.splits` splits of `p.chunk` (the last one shorter); workgroup g
// takes split g % splits of row g / splits, its values read with `$LOAD` as `$T` and keyed
// with `$KEY`. With one split the k indices are the row's result (u32, row-major
// [rows, k]); with several, the split's k pairs (key, index) go to words 2 (g * k + r) and
// 2 (g * k + r) + 1 of the scratch, which top_k_combine.wgsl merges.

fn split_start(g: u32) -> u32 {
    return (g % p.splits) * p.chunk;
}

fn count(g: u32) -> u32 {
    return min(p.chunk, p.n - split_start(g));
}

fn candidate(g: u32, c: u32) -> vec2<u32> {
    let k = split_start(g) + c;
    let x: $T = $LOAD((g / p.splits) * p.n + k);
    return vec2<u32>($KEY(x), k);
}

fn emit(g: u32, r: u32, pair: vec2<u32>) {
    if (p.splits == 1u) {
        stu(g * p.k + r, pair.y);
    } else {
        stw(2u * (g * p.k + r), pair.x);
        stw(2u * (g * p.k + r) + 1u, pair.y);
    }
}
