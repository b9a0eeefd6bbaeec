//! GPU time per dispatch, for a profile ([`super::WgpuOptions::profile`]): every dispatch runs
//! in a compute pass of its own whose start and end write timestamps into a query set; after
//! the run the timestamps are resolved, read back and added to the profile under the op and
//! its type. Profiling changes how a run is recorded (a pass per dispatch), never what it
//! computes; runs without a profile record one pass as always.

use super::device::check_alive;
use susurrus_core::error::{Error, Result};
use susurrus_core::exec::Profile;

/// Dispatches one query set times (two timestamps each).
const PER_SET: usize = (wgpu::QUERY_SET_MAX_QUERIES / 2) as usize;

pub(super) struct Timing {
    sets: Vec<wgpu::QuerySet>,
    resolve: wgpu::Buffer,
    staging: wgpu::Buffer,
    /// The op and type of every dispatch, in order.
    labels: Vec<String>,
    /// Nanoseconds per timestamp tick.
    period_ns: f64,
    profile: Profile,
}

impl Timing {
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue, labels: Vec<String>, profile: Profile) -> Self {
        let sets = (0..labels.len().div_ceil(PER_SET))
            .map(|k| {
                let count = (labels.len() - k * PER_SET).min(PER_SET) as u32 * 2;
                device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("dispatch timestamps"),
                    ty: wgpu::QueryType::Timestamp,
                    count,
                })
            })
            .collect();
        let bytes = (labels.len().max(1) * 2 * 8) as u64;
        let buffer = |usage, label| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        Timing {
            sets,
            resolve: buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC, "timestamps"),
            staging: buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST, "timestamps readback"),
            labels,
            period_ns: f64::from(queue.get_timestamp_period()),
            profile,
        }
    }

    /// Where dispatch `k`'s pass writes its start and end.
    pub fn writes(&self, k: usize) -> wgpu::ComputePassTimestampWrites<'_> {
        let at = (k % PER_SET) as u32 * 2;
        wgpu::ComputePassTimestampWrites {
            query_set: &self.sets[k / PER_SET],
            beginning_of_pass_write_index: Some(at),
            end_of_pass_write_index: Some(at + 1),
        }
    }

    /// Records the resolve of every timestamp and its copy into the readback buffer.
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder) {
        for (k, set) in self.sets.iter().enumerate() {
            let count = (self.labels.len() - k * PER_SET).min(PER_SET) as u32 * 2;
            encoder.resolve_query_set(set, 0..count, &self.resolve, (k * PER_SET * 16) as u64);
        }
        encoder.copy_buffer_to_buffer(&self.resolve, 0, &self.staging, 0, self.resolve.size());
    }

    /// Reads the timestamps of the last submitted run and adds each dispatch's time to the
    /// profile. `wait` polls the device until the readback is done.
    pub async fn collect(
        &self,
        wait: impl Fn() -> Result<()>,
        lost: &std::sync::Mutex<Option<String>>,
        errors: &std::sync::Mutex<Option<String>>,
    ) -> Result<()> {
        let (send, receive) = futures_channel::oneshot::channel();
        self.staging.map_async(wgpu::MapMode::Read, .., move |result| {
            let _ = send.send(result);
        });
        wait()?;
        check_alive(lost, errors)?;
        let mapped = receive.await.map_err(|_| Error::DeviceLost("the GPU dropped a readback".into()))?;
        mapped.map_err(|e| Error::Backend(format!("reading the dispatch timestamps failed: {e}")))?;
        {
            let view = self
                .staging
                .get_mapped_range(..)
                .map_err(|e| Error::Backend(format!("mapping the timestamp buffer: {e}")))?;
            let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&view[..self.labels.len() * 16]);
            for (label, pair) in self.labels.iter().zip(ticks.chunks_exact(2)) {
                let ns = pair[1].saturating_sub(pair[0]) as f64 * self.period_ns;
                self.profile.add(label.clone(), std::time::Duration::from_nanos(ns as u64));
            }
        }
        self.staging.unmap();
        Ok(())
    }
}
