//! cuBLAS: one handle on the backend's stream with a workspace of its own, so products can
//! be recorded into a CUDA graph (cuBLAS allocates nothing while a stream is captured).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublas::sys::{self as blas, cublasComputeType_t, cublasOperation_t, cudaDataType};
use cudarc::driver::{CudaContext, CudaStream};
use susurrus_core::{Error, Result};

use super::device::DeviceBuffer;
use super::lower::CublasGemm;

/// Workspace bytes cuBLAS may use per product (its guide suggests 32 MiB on Hopper).
const WORKSPACE: usize = 32 << 20;

pub(super) struct Blas {
    handle: blas::cublasHandle_t,
    _workspace: DeviceBuffer,
}

fn check(what: &str, status: blas::cublasStatus_t) -> Result<()> {
    match status {
        blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(()),
        other => Err(Error::Backend(format!("cuda: cuBLAS {what} failed: {other:?}"))),
    }
}

impl Blas {
    pub fn new(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>) -> Result<Self> {
        // SAFETY: only tries to open the library.
        if !unsafe { blas::is_culib_present() } {
            return Err(Error::Backend(
                "cuda: cuBLAS (libcublas.so) was not found; install the CUDA toolkit's cuBLAS or put its folder on \
                 LD_LIBRARY_PATH"
                    .into(),
            ));
        }
        let workspace = DeviceBuffer::zeroed(ctx, WORKSPACE, "the cuBLAS workspace")?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: plain handle set-up calls on the bound context.
        unsafe {
            check("start-up", blas::cublasCreate_v2(&mut handle))?;
            let blas = Blas { handle, _workspace: workspace };
            check("setting the stream", blas::cublasSetStream_v2(handle, stream.cu_stream() as _))?;
            check(
                "setting the workspace",
                blas::cublasSetWorkspace_v2(handle, blas._workspace.ptr as *mut c_void, WORKSPACE),
            )?;
            Ok(blas)
        }
    }

    /// Enqueues `g` on the handle's stream.
    ///
    /// # Safety
    /// The addresses in `g` must be device memory that holds the matrices it describes.
    pub unsafe fn gemm(&self, g: &CublasGemm) -> Result<()> {
        let op = |t: bool| if t { cublasOperation_t::CUBLAS_OP_T } else { cublasOperation_t::CUBLAS_OP_N };
        let ty = if g.f16_inputs { cudaDataType::CUDA_R_16F } else { cudaDataType::CUDA_R_32F };
        // f32 compute: f16 inputs go to the tensor cores with f32 accumulation; f32 inputs get
        // f32 arithmetic (the handle's default math mode allows no TF32).
        let compute = cublasComputeType_t::CUBLAS_COMPUTE_32F;
        let (alpha, beta) = (g.alpha, g.beta);
        // SAFETY: the caller vouches for the addresses; the scalars live through the call.
        let status = unsafe {
            blas::cublasGemmStridedBatchedEx(
                self.handle,
                op(g.trans_a),
                op(g.trans_b),
                g.m,
                g.n,
                g.k,
                (&alpha as *const f32).cast(),
                g.a as *const c_void,
                ty,
                g.lda,
                g.stride_a,
                g.b as *const c_void,
                ty,
                g.ldb,
                g.stride_b,
                (&beta as *const f32).cast(),
                g.c as *mut c_void,
                cudaDataType::CUDA_R_32F,
                g.ldc,
                g.stride_c,
                g.batch,
                compute,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        check(&format!("product {}x{}x{} (batch {})", g.m, g.n, g.k, g.batch), status)
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { blas::cublasDestroy_v2(self.handle) };
    }
}
