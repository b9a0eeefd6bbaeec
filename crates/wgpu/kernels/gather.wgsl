// Gather rows: output element `i` is word `i % p.row_len` of the table row chosen by id
// `i / p.row_len`. `$ID` reads that id (i32 or u32) as a row index clamped into 0..p.rows: a
// shader cannot raise an error, so an out-of-range id reads the nearest valid row.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let k = i / p.row_len;
    let row = $ID;
    stw(i, ldw0(row * p.row_len + i % p.row_len));
}
