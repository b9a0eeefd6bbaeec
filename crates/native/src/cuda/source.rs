//! The CUDA C module every backend compiles once with NVRTC: `kernels/cuda/operands.h`,
//! `common.cuh`, the parameter structs derived from Rust, then every kernel file.

use super::lower::{SOURCES, all_params};

/// The operand structs and dtype codes (plain C).
pub const OPERANDS: &str = include_str!("../../../../kernels/cuda/operands.h");
/// The helpers every kernel uses.
pub const COMMON: &str = include_str!("../../../../kernels/cuda/common.cuh");

/// The C declarations of every parameter struct, in registry order.
pub fn declarations() -> String {
    all_params().iter().map(|p| (p.declaration)()).collect::<Vec<_>>().join("\n")
}

/// The whole module's source.
pub fn module_source() -> String {
    let mut s = String::new();
    s.push_str(OPERANDS);
    s.push('\n');
    s.push_str(COMMON);
    s.push('\n');
    s.push_str(&declarations());
    for (name, text) in SOURCES {
        s.push_str(&format!("\n// ---- kernels/cuda/{name}\n"));
        s.push_str(text);
    }
    s
}

/// The parameter struct kernel `name` takes (`extern "C" __global__ void name(const P p)`),
/// or `None` when the module has no such kernel.
pub fn kernel_params_type(source: &str, name: &str) -> Option<String> {
    let head = format!("extern \"C\" __global__ void {name}(");
    let start = source.find(&head).map(|i| i + head.len())?;
    let rest = &source[start..];
    let args = &rest[..rest.find(')')?];
    let ty = args.trim().strip_prefix("const ")?.split_whitespace().next()?;
    Some(ty.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole module compiles with NVRTC for Hopper (`scripts/setup.sh` installs NVRTC
    /// under ~/.cache/susurrus, and `scripts/test.sh` puts it on the library path).
    #[test]
    fn module_compiles_with_nvrtc() {
        let ptx = crate::cuda::nvrtc::compile(&module_source(), "sm_90").unwrap_or_else(|e| panic!("{e}"));
        assert!(ptx.to_src().contains(".entry"), "the PTX has no kernels");
    }

    /// A compile error is an error carrying NVRTC's log with the line.
    #[test]
    fn compile_errors_carry_the_log() {
        let err = crate::cuda::nvrtc::compile("extern \"C\" __global__ void k() { undeclared = 1; }", "sm_90")
            .expect_err("the source is wrong");
        let text = err.to_string();
        assert!(text.starts_with("backend error: cuda: NVRTC could not compile the kernels:"), "{text}");
        assert!(text.contains("identifier \"undeclared\" is undefined"), "{text}");
    }

    #[test]
    fn finds_a_kernels_parameter_type() {
        let src = "extern \"C\" __global__ void unary(const UnaryParams p) {}";
        assert_eq!(kernel_params_type(src, "unary").as_deref(), Some("UnaryParams"));
        assert_eq!(kernel_params_type(src, "binary"), None);
    }
}
