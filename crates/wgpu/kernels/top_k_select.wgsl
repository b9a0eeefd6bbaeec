// The selection both top_k passes share (appended to top_k.wgsl and top_k_combine.wgsl,
// which say what the candidates are): workgroup g of a pass has `count(g)` candidates,
// `candidate(g, c)` a pair (key, index), and hands the first `p.k` of them in the order of
// `before` to `emit(g, r, pair)`, r = 0, 1, ... A key is a u32 whose order is the values'
// (key_f32, key_i32 of common.wgsl), so the order is the reference's: larger values first,
// equal values (every NaN, -0 and +0) by lower index.
//
// Thread t of the 256 holds candidates c = t, t + 256, ... and keeps the first of them not yet
// picked. Round r picks the first of the threads' pairs with two lane folds (the largest key,
// then the lowest index holding it); only the thread that held the pick moves on, to the
// first of its candidates after the pick. Every other thread's pair still comes after the
// pick, so no candidate is ever changed or marked: ties and repeated values need no care. A
// thread with nothing left holds NONE, after every genuine candidate (an index is below
// 2^32 - 1); since k <= n, NONE is only picked by a workgroup that has fewer than k
// candidates (the last split of a row), and then only after all of them.

const LANES: u32 = 256u;
const LANE_STRIDE: u32 = 1u;
const NONE: vec2<u32> = vec2<u32>(0u, 0xffffffffu);

// Whether pair a comes before pair b: a larger key, or the same key at a lower index.
fn before(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.x > b.x || (a.x == b.x && a.y < b.y);
}

// The first of thread t's candidates of workgroup g that come after `after` (any of them
// when `all`), or NONE.
fn first_after(g: u32, t: u32, after: vec2<u32>, all: bool) -> vec2<u32> {
    var best = NONE;
    let n = count(g);
    for (var c = t; c < n; c += LANES) {
        let x = candidate(g, c);
        if ((all || before(after, x)) && before(x, best)) {
            best = x;
        }
    }
    return best;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, th: Thread) {
    let t = thread_index(th);
    let g = wid.x + wid.y * nwg.x;
    // Whole workgroups past the last (the grid is rounded up) leave together: the folds'
    // barriers stay uniform.
    if (g >= p.groups) {
        return;
    }
    var mine = first_after(g, t, NONE, true);
    for (var r = 0u; r < p.k; r++) {
        let key = lanes(t, t, mine.x, FOLD_UMAX);
        let index = lanes(t, t, select(0xffffffffu, mine.y, mine.x == key), FOLD_UMIN);
        if (t == 0u) {
            emit(g, r, vec2<u32>(key, index));
        }
        if (mine.x == key && mine.y == index) {
            mine = first_after(g, t, mine, false);
        }
    }
}
