// The value of runtime scalar `p.index` as the one element of a u32 tensor.

@compute @workgroup_size(1)
fn main() {
    stu(0u, runtime_scalar(p.index));
}
