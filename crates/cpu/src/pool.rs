//! The threads kernels run on: natively a rayon pool of the backend's own; in WebAssembly
//! rayon's global pool: with shared memory (the threaded build, where the page started
//! workers for it, wasm-bindgen-rayon's `initThreadPool`) those workers, else the calling
//! thread alone through rayon's fallback for targets without threads, which runs parallel
//! iterators in order.

use susurrus_core::{Error, Result};

#[derive(Clone)]
pub(crate) struct Pool {
    #[cfg(not(target_family = "wasm"))]
    pool: std::sync::Arc<rayon::ThreadPool>,
}

impl Pool {
    /// `threads` threads (default: one per core); in WebAssembly the global pool's, which
    /// `threads` must then match.
    pub fn new(threads: Option<usize>) -> Result<Pool> {
        if threads == Some(0) {
            return Err(Error::BadOption("--threads must be at least 1".into()));
        }
        #[cfg(not(target_family = "wasm"))]
        {
            let n = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("susurrus-cpu-{i}"))
                .build()
                .map_err(|e| Error::Backend(format!("cpu: cannot start {n} threads: {e}")))?;
            Ok(Pool { pool: std::sync::Arc::new(pool) })
        }
        #[cfg(target_family = "wasm")]
        match (threads, rayon::current_num_threads()) {
            (Some(asked), n) if asked != n => {
                Err(Error::BadOption(format!("threads: {asked}: this WebAssembly build runs on {n}")))
            }
            _ => Ok(Pool {}),
        }
    }

    pub fn threads(&self) -> usize {
        #[cfg(not(target_family = "wasm"))]
        return self.pool.current_num_threads();
        #[cfg(target_family = "wasm")]
        rayon::current_num_threads()
    }

    /// Runs `work` with parallel iterators on this pool's threads.
    pub fn install<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        #[cfg(not(target_family = "wasm"))]
        return self.pool.install(work);
        #[cfg(target_family = "wasm")]
        work()
    }
}
