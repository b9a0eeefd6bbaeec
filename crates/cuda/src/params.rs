//! Kernel parameters: every CUDA kernel takes one struct by value, declared once in Rust with
//! [`cuda_params!`](crate::cuda_params). The macro derives the C declaration that the kernel
//! source is compiled with and the bytes a launch passes, so the two layouts cannot drift
//! (`tests` compiles the declarations with the host C compiler and compares every offset).
//!
//! Operands are [`In`] (a device address and how its elements are stored) and [`Out`] (an
//! address and the value's dtype); kernels read them with `ld(in, i)` / `ldi` / `ldu` and write
//! with `st(out, i, v)` / `sti` / `stu` (kernels/common.cuh).

use susurrus_core::DType;

/// How an input's elements are stored on the device.
pub mod kind {
    /// 32-bit float words (f32 values, and f16 values of the arena kept widened to f32).
    pub const F32: u32 = 0;
    /// Native 16-bit halves (f16 weights and constants).
    pub const F16: u32 = 1;
    pub const I32: u32 = 2;
    pub const U32: u32 = 3;
    /// A q8 weight (int8 values, then one f32 scale per row). Kernels never read one: the
    /// lowering dequantizes it into scratch first (`dequantize_q8`).
    pub const Q8: u32 = 4;
}

/// The dtype codes of [`Out::dtype`]: every output element is a 32-bit word; f16 values are
/// rounded to f16 precision and kept widened to f32 (like the arena of the wgpu executor).
pub fn dtype_code(dtype: DType) -> u32 {
    match dtype {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::I32 => 2,
        DType::U32 => 3,
        DType::Q8 => unreachable!("no op computes a q8 value (the graph refuses it)"),
    }
}

/// An input operand: `ptr` is a device address, `kind` one of [`kind`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct In {
    pub ptr: u64,
    pub kind: u32,
    pub pad: u32,
}

/// An output operand: `ptr` is a device address of 32-bit words, `dtype` a [`dtype_code`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Out {
    pub ptr: u64,
    pub dtype: u32,
    pub pad: u32,
}

/// A field type of a parameter struct: its C declaration and its little-endian bytes.
pub trait CField {
    /// `<type> <name>` (arrays: `<type> <name>[N]`).
    fn decl(name: &str) -> String;
    /// Writes the value's bytes at the start of `out`.
    fn write(&self, out: &mut [u8]);
}

macro_rules! scalar_field {
    ($($t:ty => $c:literal),*) => {$(
        impl CField for $t {
            fn decl(name: &str) -> String {
                format!("{} {name}", $c)
            }
            fn write(&self, out: &mut [u8]) {
                out[..size_of::<$t>()].copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
scalar_field!(u32 => "unsigned", i32 => "int", f32 => "float", u64 => "unsigned long long");

impl CField for In {
    fn decl(name: &str) -> String {
        format!("In {name}")
    }
    fn write(&self, out: &mut [u8]) {
        self.ptr.write(out);
        self.kind.write(&mut out[8..]);
        self.pad.write(&mut out[12..]);
    }
}

impl CField for Out {
    fn decl(name: &str) -> String {
        format!("Out {name}")
    }
    fn write(&self, out: &mut [u8]) {
        self.ptr.write(out);
        self.dtype.write(&mut out[8..]);
        self.pad.write(&mut out[12..]);
    }
}

impl<T: CField, const N: usize> CField for [T; N] {
    fn decl(name: &str) -> String {
        format!("{}[{N}]", T::decl(name))
    }
    fn write(&self, out: &mut [u8]) {
        let each = size_of::<T>();
        for (i, v) in self.iter().enumerate() {
            v.write(&mut out[i * each..]);
        }
    }
}

/// Each field's name and byte offset, and the struct's size.
pub type StructLayout = (Vec<(&'static str, usize)>, usize);

/// What [`cuda_params!`](crate::cuda_params) derives for a parameter struct.
pub trait KernelParams {
    /// The struct's name in C.
    const NAME: &'static str;
    /// `struct Name { ... };` with the fields in order.
    fn c_declaration() -> String;
    /// The bytes a launch passes (padding zeroed).
    fn to_bytes(&self) -> Vec<u8>;
    /// Each field's name and byte offset, and the struct's size: what the layout test compares
    /// with the C compiler's.
    fn layout() -> StructLayout;
}

/// Declares a kernel parameter struct: `#[repr(C)]` in Rust, with its C twin derived.
///
/// ```ignore
/// cuda_params! {
///     /// One unary kernel.
///     pub struct UnaryParams { pub x: In, pub out: Out, pub n: u32, pub op: u32 }
/// }
/// ```
#[macro_export]
macro_rules! cuda_params {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $crate::params::KernelParams for $name {
            const NAME: &'static str = stringify!($name);
            fn c_declaration() -> String {
                let mut s = format!("struct {} {{\n", stringify!($name));
                $(
                    s.push_str("    ");
                    s.push_str(&<$ty as $crate::params::CField>::decl(stringify!($field)));
                    s.push_str(";\n");
                )*
                s.push_str("};\n");
                s
            }
            fn to_bytes(&self) -> Vec<u8> {
                let mut bytes = vec![0u8; ::core::mem::size_of::<Self>()];
                $(
                    let at = ::core::mem::offset_of!($name, $field);
                    $crate::params::CField::write(&self.$field, &mut bytes[at..]);
                )*
                bytes
            }
            fn layout() -> $crate::params::StructLayout {
                (vec![$((stringify!($field), ::core::mem::offset_of!($name, $field)),)*], ::core::mem::size_of::<Self>())
            }
        }
    };
}

/// A parameter struct's declaration and layout, type-erased for the list of all of them.
#[derive(Clone, Copy)]
pub struct ParamsInfo {
    pub name: &'static str,
    pub declaration: fn() -> String,
    pub layout: fn() -> StructLayout,
}

impl ParamsInfo {
    pub fn of<P: KernelParams>() -> Self {
        ParamsInfo { name: P::NAME, declaration: P::c_declaration, layout: P::layout }
    }
}

/// Up to 8 dimensions (or strides) packed for a kernel, unused ones 1 (or 0); the first
/// entry is the outermost.
pub fn dims8(values: &[usize], fill: u32) -> [u32; 8] {
    let mut out = [fill; 8];
    for (o, &v) in out.iter_mut().zip(values) {
        *o = v as u32;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::cuda_params! {
        /// A struct with every field type.
        pub struct Example { pub x: In, pub out: Out, pub n: u32, pub dims: [u32; 3], pub scale: f32, pub at: u64, pub s: i32 }
    }

    #[test]
    fn declaration_lists_fields_in_order() {
        assert_eq!(
            Example::c_declaration(),
            "struct Example {\n    In x;\n    Out out;\n    unsigned n;\n    unsigned dims[3];\n    float scale;\n    \
             unsigned long long at;\n    int s;\n};\n"
        );
    }

    #[test]
    fn bytes_sit_at_the_field_offsets() {
        let p = Example {
            x: In { ptr: 0x1122_3344_5566_7788, kind: kind::F16, pad: 0 },
            out: Out { ptr: 0x10, dtype: 2, pad: 0 },
            n: 7,
            dims: [1, 2, 3],
            scale: 0.5,
            at: 9,
            s: -1,
        };
        let b = p.to_bytes();
        assert_eq!(b.len(), size_of::<Example>());
        assert_eq!(&b[0..8], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&b[8..12], &1u32.to_le_bytes());
        assert_eq!(&b[16..24], &0x10u64.to_le_bytes());
        assert_eq!(&b[24..28], &2u32.to_le_bytes());
        assert_eq!(&b[32..36], &7u32.to_le_bytes());
        assert_eq!(&b[36..48], &[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(&b[48..52], &0.5f32.to_le_bytes());
        // `at` is 8-aligned: 4 bytes of zeroed padding after `scale`.
        assert_eq!(&b[52..56], &[0; 4]);
        assert_eq!(&b[56..64], &9u64.to_le_bytes());
        assert_eq!(&b[64..68], &(-1i32).to_le_bytes());
        let (fields, size) = Example::layout();
        assert_eq!(fields.iter().map(|f| f.1).collect::<Vec<_>>(), vec![0, 16, 32, 36, 48, 56, 64]);
        assert_eq!(size, 72);
    }

    #[test]
    fn dims_are_padded() {
        assert_eq!(dims8(&[3, 4], 1), [3, 4, 1, 1, 1, 1, 1, 1]);
    }
}
