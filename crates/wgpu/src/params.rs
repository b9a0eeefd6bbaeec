//! Kernel parameter structs, declared once in Rust; the WGSL struct text is generated from the
//! same declaration, so the two layouts cannot drift apart.
//!
//! Fields are `u32`, `i32`, `f32` or `vec4u` (four `u32`s, for shapes and strides). A `vec4u`
//! must sit at a multiple of 16 bytes (WGSL's uniform alignment): declare them first. The
//! macro checks this at compile time.

/// A parameter block the executor can upload into a dispatch's uniform slot.
pub trait KernelParams: bytemuck::Pod {
    /// The WGSL declaration `struct Params { ... }` matching `Self` field for field.
    const WGSL: &'static str;
}

/// Declares a kernel parameter struct; see the module docs.
#[macro_export]
#[doc(hidden)]
macro_rules! kernel_params {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $field:ident : $ty:ident),* $(,)? }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $name { $($(#[$fm])* pub $field: $crate::kernel_params!(@rust $ty)),* }

        impl $crate::KernelParams for $name {
            const WGSL: &'static str = concat!(
                "struct Params {\n",
                $("    ", stringify!($field), ": ", $crate::kernel_params!(@wgsl $ty), ",\n",)*
                "}\n"
            );
        }

        $($crate::kernel_params!(@check $name $field $ty);)*
    };
    (@rust u32) => { u32 };
    (@rust i32) => { i32 };
    (@rust f32) => { f32 };
    (@rust vec4u) => { [u32; 4] };
    (@wgsl u32) => { "u32" };
    (@wgsl i32) => { "i32" };
    (@wgsl f32) => { "f32" };
    (@wgsl vec4u) => { "vec4<u32>" };
    (@check $name:ident $field:ident vec4u) => {
        const _: () = assert!(core::mem::offset_of!($name, $field) % 16 == 0, "vec4u fields must come first");
    };
    (@check $name:ident $field:ident $ty:ident) => {};
}

/// Up to eight dimensions packed as two `vec4u` (WGSL reads `v[i / 4][i % 4]`).
pub fn pack_dims(dims: &[usize]) -> [[u32; 4]; 2] {
    let mut out = [[0u32; 4]; 2];
    for (i, &d) in dims.iter().enumerate().take(8) {
        out[i / 4][i % 4] = d as u32;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::kernel_params! {
        /// Example block.
        pub struct Example {
            pub dims: vec4u,
            pub n: u32,
            pub eps: f32,
            pub shift: i32,
        }
    }

    #[test]
    fn rust_and_wgsl_layouts_come_from_one_declaration() {
        assert_eq!(
            Example::WGSL,
            "struct Params {\n    dims: vec4<u32>,\n    n: u32,\n    eps: f32,\n    shift: i32,\n}\n"
        );
        let p = Example { dims: [1, 2, 3, 4], n: 5, eps: 0.5, shift: -1 };
        let words: &[u32] = bytemuck::cast_slice(bytemuck::bytes_of(&p));
        assert_eq!(words, &[1, 2, 3, 4, 5, 0.5f32.to_bits(), u32::MAX]);
        assert_eq!(pack_dims(&[7, 8, 9, 10, 11]), [[7, 8, 9, 10], [11, 0, 0, 0]]);
    }
}
