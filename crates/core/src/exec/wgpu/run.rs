//! Running a compiled plan: inputs and runtime scalars in, dispatches recorded in one command
//! encoder, requested outputs copied into their staging buffers and mapped asynchronously.

use std::collections::HashMap;

use super::compile::{Readback, WgpuExecutable, decode, encode};
use super::device::check_alive;
use crate::error::{Error, Result};
use crate::exec::link::scalar_table;
use crate::exec::{BoxFuture, Executable};
use crate::tensor::Tensor;

impl Executable for WgpuExecutable {
    fn launches(&self) -> Option<usize> {
        Some(self.dispatches.len())
    }

    fn run<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        outputs: &'a [&'a str],
    ) -> BoxFuture<'a, HashMap<String, Tensor>> {
        Box::pin(async move {
            let wanted: Vec<&Readback> = outputs
                .iter()
                .map(|name| {
                    self.outputs.get(*name).ok_or_else(|| {
                        Error::BadArgument(format!("graph '{}' has no output '{name}'", self.graph.name()))
                    })
                })
                .collect::<Result<_>>()?;
            let mut encoder = self.prepare(inputs, scalars)?;
            self.record(&mut encoder);
            for r in &wanted {
                encoder.copy_buffer_to_buffer(&self.buffers[&r.loc.buf], r.loc.offset, &r.staging, 0, r.loc.size);
            }
            self.queue.submit([encoder.finish()]);
            let mut result = HashMap::with_capacity(wanted.len());
            for (name, r) in outputs.iter().zip(&wanted) {
                result.insert(name.to_string(), self.read(r).await?);
            }
            self.collect_timing().await?;
            Ok(result)
        })
    }

    fn read_state<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Tensor> {
        Box::pin(async move {
            check_alive(&self.lost, &self.errors)?;
            let r = self.states.get(name).ok_or_else(|| {
                Error::BadArgument(format!("graph '{}' has no persistent buffer '{name}'", self.graph.name()))
            })?;
            let mut encoder =
                self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("read state") });
            encoder.copy_buffer_to_buffer(&self.buffers[&r.loc.buf], r.loc.offset, &r.staging, 0, r.loc.size);
            self.queue.submit([encoder.finish()]);
            self.read(r).await
        })
    }

    fn run_repeatedly<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        times: usize,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // Every run uploads its inputs again: the arena reuses an input's bytes once the
            // input is dead, so a second pass over the same dispatches would read garbage.
            // Profiled runs are read one by one (each overwrites the timestamps).
            for _ in 0..times {
                let mut encoder = self.prepare(inputs, scalars)?;
                self.record(&mut encoder);
                self.queue.submit([encoder.finish()]);
                self.collect_timing().await?;
            }
            let (send, receive) = futures_channel::oneshot::channel();
            self.queue.on_submitted_work_done(move || {
                let _ = send.send(());
            });
            self.wait()?;
            receive.await.map_err(|_| Error::DeviceLost("the GPU dropped a submission".into()))?;
            check_alive(&self.lost, &self.errors)
        })
    }
}

impl WgpuExecutable {
    /// Checks the run's arguments, writes the inputs and runtime scalars, and returns the
    /// command encoder the run records into.
    fn prepare(
        &self,
        inputs: &HashMap<String, Tensor>,
        scalars: &HashMap<String, u32>,
    ) -> Result<wgpu::CommandEncoder> {
        check_alive(&self.lost, &self.errors)?;
        if let Some(unknown) = inputs.keys().find(|k| !self.inputs.iter().any(|(n, _, _)| n == *k)) {
            return Err(Error::BadArgument(format!("graph '{}' has no input '{unknown}'", self.graph.name())));
        }
        let mut uploads = Vec::with_capacity(self.inputs.len());
        for (name, ty, loc) in &self.inputs {
            let t = inputs.get(name).ok_or_else(|| Error::BadArgument(format!("input '{name}' was not supplied")))?;
            t.expect_type(ty, &format!("input '{name}'"))?;
            uploads.push((loc, encode(t, loc.elem)));
        }
        let words = scalar_table(&self.graph, scalars)?;
        for (loc, bytes) in uploads {
            self.queue.write_buffer(&self.buffers[&loc.buf], loc.offset, &bytes);
        }
        self.queue.write_buffer(&self.runtime, 0, bytemuck::cast_slice(&words));
        Ok(self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("run") }))
    }

    /// Records every dispatch of the plan in one compute pass; when profiling, each in a
    /// pass of its own between timestamps, then their resolve.
    fn record(&self, encoder: &mut wgpu::CommandEncoder) {
        let Some(timing) = &self.timing else {
            let mut pass =
                encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
            for d in &self.dispatches {
                pass.set_pipeline(&d.pipeline);
                pass.set_bind_group(0, &d.bind_group, &[d.uniform_offset]);
                pass.dispatch_workgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2]);
            }
            return;
        };
        for (k, d) in self.dispatches.iter().enumerate() {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(timing.writes(k)),
            });
            pass.set_pipeline(&d.pipeline);
            pass.set_bind_group(0, &d.bind_group, &[d.uniform_offset]);
            pass.dispatch_workgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2]);
        }
        timing.resolve(encoder);
    }

    /// With a profile, adds the last run's dispatch times to it.
    async fn collect_timing(&self) -> Result<()> {
        match &self.timing {
            Some(timing) if !self.dispatches.is_empty() => {
                timing.collect(|| self.wait(), &self.lost, &self.errors).await
            }
            _ => Ok(()),
        }
    }

    /// Natively, blocks until the device has finished the submitted work (callbacks run);
    /// in the browser the callbacks' futures are awaited instead.
    fn wait(&self) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::DeviceLost(format!("waiting for the GPU failed: {e}")))?;
        Ok(())
    }

    /// Maps `r`'s staging buffer (filled by the last submission), decodes it and unmaps it.
    /// Natively the device is polled until the copy is done; in the browser the future waits
    /// without blocking the thread.
    async fn read(&self, r: &Readback) -> Result<Tensor> {
        let (send, receive) = futures_channel::oneshot::channel();
        r.staging.map_async(wgpu::MapMode::Read, .., move |result| {
            let _ = send.send(result);
        });
        self.wait()?;
        check_alive(&self.lost, &self.errors)?;
        let mapped = receive.await.map_err(|_| Error::DeviceLost("the GPU dropped a readback".into()))?;
        mapped.map_err(|e| {
            check_alive(&self.lost, &self.errors)
                .err()
                .unwrap_or_else(|| Error::Backend(format!("reading back from the GPU failed: {e}")))
        })?;
        let tensor = {
            let view = r
                .staging
                .get_mapped_range(..)
                .map_err(|e| Error::Backend(format!("mapping a readback buffer: {e}")))?;
            decode(&view, r.loc.elem, &r.ty)
        };
        r.staging.unmap();
        tensor
    }
}
