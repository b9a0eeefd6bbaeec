//! The CUDA C sources NVRTC compiles: each kernel file after a prelude of
//! `kernels/operands.h`, `common.cuh` and the parameter structs derived from Rust, one
//! module per file (the whole text, every file after one prelude, is what host-side checks read).

use super::lower::{SOURCES, all_params};

/// The operand structs and dtype codes (plain C).
pub const OPERANDS: &str = include_str!("../kernels/operands.h");
/// The helpers every kernel uses.
pub const COMMON: &str = include_str!("../kernels/common.cuh");

/// The C declarations of every parameter struct, in registry order.
pub fn declarations() -> String {
    all_params().iter().map(|p| (p.declaration)()).collect::<Vec<_>>().join("\n")
}

/// What every kernel file is compiled with: the operand structs, the helpers and the
/// parameter structs.
fn prelude() -> String {
    format!("{OPERANDS}\n{COMMON}\n{}", declarations())
}

/// The whole module's source (every kernel file after the prelude).
pub fn module_source() -> String {
    let mut s = prelude();
    for (name, text) in SOURCES {
        s.push_str(&format!("\n// ---- kernels/{name}\n"));
        s.push_str(text);
    }
    s
}

/// One module per kernel file, each with the prelude: compiled side by side, the slowest file
/// decides how long NVRTC takes.
pub fn file_sources() -> Vec<(&'static str, String)> {
    let prelude = prelude();
    SOURCES.iter().map(|(name, text)| (*name, format!("{prelude}\n// ---- kernels/{name}\n{text}"))).collect()
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

    /// Every kernel file compiles on its own with NVRTC for Hopper, into a CUBIN naming its
    /// kernels (`scripts/setup.sh` installs NVRTC under ~/.cache/susurrus, and
    /// `scripts/test.sh` puts it on the library path).
    #[test]
    fn every_kernel_file_compiles_with_nvrtc() {
        for (name, text) in file_sources() {
            let cubin = crate::nvrtc::compile(&text, "sm_90").unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&cubin[..4], b"\x7fELF", "{name}: not a CUBIN");
            let kernel = text.split("extern \"C\" __global__ void ").nth(1).and_then(|t| t.split('(').next());
            let kernel = kernel.unwrap_or_else(|| panic!("{name} has no kernel"));
            assert!(String::from_utf8_lossy(&cubin).contains(kernel), "{name}: the CUBIN lacks {kernel}");
        }
    }

    /// A compile error is an error carrying NVRTC's log with the line.
    #[test]
    fn compile_errors_carry_the_log() {
        let err = crate::nvrtc::compile("extern \"C\" __global__ void k() { undeclared = 1; }", "sm_90")
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
