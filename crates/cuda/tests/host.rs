//! The CUDA backend's host side, which needs no GPU: every op case of the harness and every
//! plan of a (small, random-weight) Whisper lower to launches of kernels the module has,
//! with parameter bytes of the size the kernel's struct has and launch shapes the hardware
//! accepts; the kernel module compiles with NVRTC; the parameter structs have the same layout
//! in C as in Rust; without a driver the backend is an error that says so.
//! (`scripts/gpu/test_cuda.sh` runs the GPU suite, `tests/cuda.rs`, on a machine with one.)

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use susurrus_core::exec::link::Link;
use susurrus_core::exec::{BlockingBackend, Executable, Weights};
use susurrus_core::plan::{Plan, plan_with};
use susurrus_core::{Error, Result};
use susurrus_cuda::layout::{Bases, ProgramLayout};
use susurrus_cuda::lower::{KernelLaunch, Launch, all_params};
use susurrus_cuda::source::{OPERANDS, declarations, kernel_params_type, module_source};
use susurrus_cuda::{CudaBackend, CudaOptions, Precision, lower_program, needs, plan_options};
use susurrus_testkit::op_cases;

const PRECISIONS: [Precision; 2] = [Precision::F16, Precision::F32];

fn fake_bases(plans: usize) -> Bases {
    Bases {
        weights: 0x1_0000_0000,
        states: 0x2_0000_0000,
        arenas: (0..plans as u64).map(|i| 0x10_0000_0000 + i * 0x1_0000_0000).collect(),
    }
}

/// Lowers `plans` linked, as the backend would, and checks every launch; returns the launches.
fn lower_checked(plans: &[&Plan], weights: &Weights, precision: Precision, source: &str) -> Result<Vec<Launch>> {
    let link = Link::new(plans, weights, &needs(precision))?;
    let layout = ProgramLayout::new(&link);
    let (work, _) = lower_program(&link, &layout, &fake_bases(plans.len()), 0x3_0000_0000, precision)?;
    let sizes: HashMap<&str, usize> = all_params().iter().map(|p| (p.name, (p.layout)().1)).collect();
    let mut all = Vec::new();
    for (id, launches) in work.into_iter().flatten() {
        for launch in launches {
            if let Launch::Kernel(k) = &launch {
                check_kernel(k, source, &sizes).map_err(|e| Error::Backend(format!("%{}: {e}", id.0)))?;
            }
            all.push(launch);
        }
    }
    Ok(all)
}

fn check_kernel(k: &KernelLaunch, source: &str, sizes: &HashMap<&str, usize>) -> std::result::Result<(), String> {
    match kernel_params_type(source, k.name) {
        Some(ty) if ty == k.params_name => {}
        Some(ty) => return Err(format!("kernel {} takes {ty}, the launch passes {}", k.name, k.params_name)),
        None => return Err(format!("the module has no kernel {}", k.name)),
    }
    if sizes.get(k.params_name) != Some(&k.params.len()) {
        return Err(format!("{} bytes of {} for {}", k.params.len(), k.params_name, k.name));
    }
    let threads = k.block.iter().product::<u32>();
    if threads == 0 || threads > 1024 || k.block[2] > 64 {
        return Err(format!("{}: block {:?}", k.name, k.block));
    }
    if k.grid.contains(&0) || k.grid[1] > 65535 || k.grid[2] > 65535 || k.grid[0] > i32::MAX as u32 {
        return Err(format!("{}: grid {:?}", k.name, k.grid));
    }
    if k.shared_bytes > 48 * 1024 {
        return Err(format!("{}: {} bytes of shared memory", k.name, k.shared_bytes));
    }
    Ok(())
}

#[test]
fn every_op_case_lowers_to_kernels_of_the_module() {
    let source = module_source();
    let mut failures = Vec::new();
    let mut kernels = std::collections::BTreeSet::new();
    for seed in [0, 1, 2, 3] {
        for case in op_cases(seed).unwrap() {
            let plan = plan_with(case.graph.clone(), &plan_options()).unwrap();
            for precision in PRECISIONS {
                match lower_checked(&[&plan], &case.weights, precision, &source) {
                    Ok(launches) => kernels.extend(launches.iter().filter_map(|l| match l {
                        Launch::Kernel(k) => Some(k.name),
                        Launch::Gemm(_) => None,
                    })),
                    Err(e) => failures.push(format!("{} ({precision:?}): {e}", case.name)),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
    // Every kernel of the module is used by some case (but the trap the device-loss suite
    // loses the device with).
    let defined: Vec<&str> = source
        .split("extern \"C\" __global__ void ")
        .skip(1)
        .filter_map(|rest| rest.split('(').next())
        .filter(|name| !kernels.contains(name) && *name != "lose_device")
        .collect();
    assert!(defined.is_empty(), "kernels no op case launches: {defined:?}");
}

/// A backend that lowers what it is given and keeps the launches, then refuses to run.
struct Recorder {
    precision: Precision,
    launches: Rc<RefCell<Vec<Launch>>>,
}

impl BlockingBackend for Recorder {
    fn name(&self) -> &'static str {
        "cuda-lowering"
    }
    fn compile_linked_now(&self, plans: &[&Plan], weights: &Weights) -> Result<Vec<Box<dyn Executable>>> {
        let replanned: Vec<Plan> =
            plans.iter().map(|p| plan_with(p.graph.clone(), &plan_options())).collect::<Result<_>>()?;
        let refs: Vec<&Plan> = replanned.iter().collect();
        let launches = lower_checked(&refs, weights, self.precision, &module_source())?;
        self.launches.borrow_mut().extend(launches);
        Err(Error::Backend("recorded".into()))
    }
}

#[test]
fn whisper_plans_lower_with_products_on_the_tensor_cores() {
    let files = susurrus_testkit::whisper::small_model_files(5).unwrap();
    for precision in PRECISIONS {
        let launches = Rc::new(RefCell::new(Vec::new()));
        let backend = Box::new(Recorder { precision, launches: Rc::clone(&launches) });
        let (weights, tokenizer) = susurrus_whisper::load::files::load_files(&files).unwrap();
        let err = pollster::block_on(susurrus_whisper::Whisper::new(backend, &weights, tokenizer))
            .err()
            .expect("the recorder refuses to run");
        assert!(err.to_string().contains("recorded"), "{err}");
        let launches = launches.borrow();
        let gemms: Vec<_> = launches
            .iter()
            .filter_map(|l| match l {
                Launch::Gemm(g) => Some(g),
                Launch::Kernel(_) => None,
            })
            .collect();
        assert!(!gemms.is_empty(), "no cuBLAS product in the Whisper program");
        assert!(
            gemms.iter().all(|g| g.f16_inputs == (precision == Precision::F16)),
            "{precision:?}: products on the wrong inputs"
        );
    }
}

/// The parameter structs compiled by the host C compiler have the offsets and sizes Rust
/// gives them (the kernels and the launches agree on every byte).
#[test]
fn parameter_structs_have_the_same_layout_in_c() {
    let dir = std::env::temp_dir().join(format!("susurrus-cuda-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from("#include <stdio.h>\n#include <stddef.h>\n");
    c.push_str(OPERANDS);
    c.push_str(&declarations());
    c.push_str("int main(void) {\n");
    let mut want = String::new();
    for p in all_params() {
        let (fields, size) = (p.layout)();
        for (field, offset) in fields {
            c.push_str(&format!("printf(\"{0}.{1} %zu\\n\", offsetof(struct {0}, {1}));\n", p.name, field));
            want.push_str(&format!("{}.{field} {offset}\n", p.name));
        }
        c.push_str(&format!("printf(\"{0} %zu\\n\", sizeof(struct {0}));\n", p.name));
        want.push_str(&format!("{} {size}\n", p.name));
    }
    c.push_str("return 0;\n}\n");
    std::fs::write(dir.join("layout.c"), c).unwrap();
    let built = std::process::Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "-o"])
        .arg(dir.join("layout"))
        .arg(dir.join("layout.c"))
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let ran = std::process::Command::new(dir.join("layout")).output().unwrap();
    assert_eq!(String::from_utf8(ran.stdout).unwrap(), want);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where the driver library is missing, opening the backend says so (and nothing panics).
#[test]
fn without_a_driver_the_backend_is_an_error() {
    let present = unsafe { cudarc::driver::sys::is_culib_present() };
    match CudaBackend::new(&CudaOptions::default()) {
        Err(e) if !present => assert_eq!(
            e.to_string(),
            "backend error: cuda: no NVIDIA driver: the CUDA driver library (libcuda.so) was not found"
        ),
        Err(e) => assert!(e.to_string().starts_with("backend error: cuda: "), "{e}"),
        Ok(b) => assert!(present, "opened {} without a driver library", b.device_name()),
    }
}
