//! The threads kernels run on: natively a rayon pool of the backend's own; in the browser
//! (where WebAssembly has no threads without shared memory) the calling thread, through
//! rayon's fallback for targets without threads, which runs parallel iterators in order.

use susurrus_core::{Error, Result};

#[derive(Clone)]
pub(crate) struct Pool {
    #[cfg(not(target_family = "wasm"))]
    pool: std::sync::Arc<rayon::ThreadPool>,
}

impl Pool {
    /// `threads` threads (default: one per core); in the browser one.
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
        match threads {
            None | Some(1) => Ok(Pool {}),
            Some(n) => Err(Error::BadOption(format!("threads: {n}: the WebAssembly build runs on one thread"))),
        }
    }

    pub fn threads(&self) -> usize {
        #[cfg(not(target_family = "wasm"))]
        return self.pool.current_num_threads();
        #[cfg(target_family = "wasm")]
        1
    }

    /// Runs `work` with parallel iterators on this pool's threads.
    pub fn install<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        #[cfg(not(target_family = "wasm"))]
        return self.pool.install(work);
        #[cfg(target_family = "wasm")]
        work()
    }
}
