// Operands of every kernel parameter struct (crates/cuda/src/params.rs declares the
// Rust side). Plain C: the layout test compiles this file and the generated parameter structs
// with the host C compiler.

// An input: a device address and how its elements are stored (KIND_*).
typedef struct In {
    const void* ptr;
    unsigned kind;
    unsigned pad;
} In;

// An output of 32-bit words; `dtype` is a DTYPE_* code (f16 values are kept widened to f32).
typedef struct Out {
    void* ptr;
    unsigned dtype;
    unsigned pad;
} Out;

#define KIND_F32 0u
#define KIND_F16 1u
#define KIND_I32 2u
#define KIND_U32 3u
// A q8 weight: int8 values, then one f32 scale per row. Only the kernels that take one read it
// (matmul_gemv, gather_rows, dequantize_q8); the lowering dequantizes it for the others.
#define KIND_Q8 4u

#define DTYPE_F32 0u
#define DTYPE_F16 1u
#define DTYPE_I32 2u
#define DTYPE_U32 3u
