//! Running a compiled plan: inputs and runtime scalars in, dispatches recorded in one command
//! encoder, requested outputs copied into their staging buffers and mapped asynchronously. A
//! chain of runs is fed on the device and read back once.

use std::collections::HashMap;

use super::compile::{Loc, Readback, WgpuExecutable, decode, encode, padded};
use super::device::check_alive;
use susurrus_core::error::{Error, Result};
use susurrus_core::exec::link::{SCALAR_TABLE_BYTES, scalar_table};
use susurrus_core::exec::{BoxFuture, Chain, Executable, chain_on_host, check_chain};
use susurrus_core::ir::TensorType;
use susurrus_core::tensor::Tensor;

impl Executable for WgpuExecutable {
    fn launches(&self) -> Option<usize> {
        Some(self.dispatches.len())
    }

    fn feeds_on_device(&self) -> bool {
        self.timing.is_none()
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
                encoder.copy_buffer_to_buffer(
                    &self.buffers[&r.loc.buf],
                    r.loc.offset,
                    r.staging(&self.device),
                    0,
                    r.loc.size,
                );
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
            encoder.copy_buffer_to_buffer(
                &self.buffers[&r.loc.buf],
                r.loc.offset,
                r.staging(&self.device),
                0,
                r.loc.size,
            );
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

    fn run_chain<'a>(&'a mut self, chain: Chain<'a>) -> BoxFuture<'a, Vec<HashMap<String, Tensor>>> {
        Box::pin(async move {
            if self.timing.is_some() {
                // A profile times one run's dispatches at a time.
                check_chain(&self.graph, &chain)?;
                return chain_on_host(self, chain).await;
            }
            self.chain(chain).await
        })
    }
}

impl WgpuExecutable {
    /// [`Executable::run_chain`] with one readback: run k+1's runtime scalars and inputs are
    /// copied into place between run k's dispatches and run k+1's (the scalar tables and the
    /// inputs not fed uploaded once beforehand, the fed ones from run k's outputs), and every
    /// run's outputs are copied into one staging buffer read back once at the end. Fed values pass through a carry buffer: a
    /// source may share arena bytes with a destination (the arena reuses dead inputs), and a
    /// copy within one buffer is not allowed.
    async fn chain(&mut self, chain: Chain<'_>) -> Result<Vec<HashMap<String, Tensor>>> {
        let fed = check_chain(&self.graph, &chain)?;
        let loc_of_output = |name: &str| -> Result<Loc> {
            self.outputs
                .get(name)
                .map(|r| r.loc)
                .ok_or_else(|| Error::BadArgument(format!("graph '{}' has no output '{name}'", self.graph.name())))
        };
        let loc_of_input = |name: &str| -> Result<Loc> {
            self.inputs
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, _, loc)| *loc)
                .ok_or_else(|| Error::BadArgument(format!("graph '{}' has no input '{name}'", self.graph.name())))
        };
        let mut feeds = Vec::with_capacity(fed.len());
        for &(from, to) in chain.feeds {
            let (src, dst) = (loc_of_output(from)?, loc_of_input(to)?);
            if src.elem != dst.elem || src.size != dst.size {
                return Err(Error::Backend(format!("output '{from}' and input '{to}' are stored differently")));
            }
            feeds.push((src, dst));
        }
        let wanted: Vec<(&str, Loc, TensorType)> = chain
            .outputs
            .iter()
            .map(|&name| Ok((name, loc_of_output(name)?, self.outputs[name].ty.clone())))
            .collect::<Result<_>>()?;
        let mut tables = Vec::with_capacity(chain.scalars.len() * SCALAR_TABLE_BYTES);
        for scalars in chain.scalars {
            let words = scalar_table(&self.graph, scalars)?;
            let start = tables.len();
            tables.extend_from_slice(bytemuck::cast_slice(&words));
            tables.resize(start + SCALAR_TABLE_BYTES, 0);
        }
        // The inputs not fed: the arena reuses an input's bytes once it is dead, so every
        // run gets them again, copied from one upload.
        let mut kept = Vec::new();
        let mut again = Vec::new();
        for (name, _, loc) in &self.inputs {
            if chain.feeds.iter().any(|&(_, to)| to == name) {
                continue;
            }
            let t =
                chain.inputs.get(name).ok_or_else(|| Error::BadArgument(format!("input '{name}' was not supplied")))?;
            again.push((kept.len() as u64, *loc));
            kept.extend_from_slice(&encode(t, loc.elem));
        }
        let carry_bytes: u64 = feeds.iter().map(|(src, _)| src.size).sum();
        let per_run: u64 = wanted.iter().map(|(_, loc, _)| loc.size).sum();
        let sizes = ChainSizes {
            tables: tables.len() as u64,
            kept: kept.len() as u64,
            carry: carry_bytes,
            staging: per_run * chain.scalars.len() as u64,
        };
        // Kept for the next chain, grown when this one needs more: a chain allocates nothing
        // once the first has run (in a browser, buffers are freed only when collected).
        let fits = self.chain_buffers.as_ref().is_some_and(|c| c.sizes.holds(&sizes));
        if !fits {
            self.chain_buffers = Some(ChainBuffers::new(&self.device, sizes));
        }
        let Some(buffers) = self.chain_buffers.as_ref() else {
            return Err(Error::Backend("the chain's buffers are missing".into()));
        };
        let (tables_buffer, kept_buffer, carry, staging) =
            (&buffers.tables, &buffers.kept, &buffers.carry, &buffers.staging);
        self.queue.write_buffer(tables_buffer, 0, &tables);
        if !kept.is_empty() {
            self.queue.write_buffer(kept_buffer, 0, &padded(&kept));
        }
        let tables = tables_buffer;
        let kept = kept_buffer;

        // Each run is submitted as soon as it is recorded: the device runs one while the host
        // records the next (recording a run's dispatches costs about half of running them).
        let mut first = Some(self.prepare(chain.inputs, &chain.scalars[0])?);
        let mut at = 0;
        for k in 0..chain.scalars.len() {
            let mut encoder = first.take().unwrap_or_else(|| {
                self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("run") })
            });
            if k > 0 {
                let table = (k * SCALAR_TABLE_BYTES) as u64;
                encoder.copy_buffer_to_buffer(tables, table, &self.runtime, 0, SCALAR_TABLE_BYTES as u64);
                let mut c = 0;
                for (src, _) in &feeds {
                    encoder.copy_buffer_to_buffer(&self.buffers[&src.buf], src.offset, carry, c, src.size);
                    c += src.size;
                }
                let mut c = 0;
                for (_, dst) in &feeds {
                    encoder.copy_buffer_to_buffer(carry, c, &self.buffers[&dst.buf], dst.offset, dst.size);
                    c += dst.size;
                }
                for (at, dst) in &again {
                    encoder.copy_buffer_to_buffer(kept, *at, &self.buffers[&dst.buf], dst.offset, dst.size);
                }
            }
            self.record(&mut encoder);
            for (_, loc, _) in &wanted {
                encoder.copy_buffer_to_buffer(&self.buffers[&loc.buf], loc.offset, staging, at, loc.size);
                at += loc.size;
            }
            self.queue.submit([encoder.finish()]);
        }
        let bytes = self.read_bytes(staging).await?;
        let mut results = Vec::with_capacity(chain.scalars.len());
        let mut at = 0;
        for _ in chain.scalars {
            let mut out = HashMap::with_capacity(wanted.len());
            for (name, loc, ty) in &wanted {
                let end = at + loc.size as usize;
                out.insert(name.to_string(), decode(&bytes[at..end], loc.elem, ty)?);
                at = end;
            }
            results.push(out);
        }
        Ok(results)
    }

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

    /// Maps `r`'s staging buffer (filled by the last submission) and decodes it.
    async fn read(&self, r: &Readback) -> Result<Tensor> {
        decode(&self.read_bytes(r.staging(&self.device)).await?, r.loc.elem, &r.ty)
    }

    /// Maps `staging` (filled by the last submission), copies its bytes out and unmaps it.
    /// Natively the device is polled until the copy is done; in the browser the future waits
    /// without blocking the thread.
    async fn read_bytes(&self, staging: &wgpu::Buffer) -> Result<Vec<u8>> {
        let (send, receive) = futures_channel::oneshot::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |result| {
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
        let bytes = staging
            .get_mapped_range(..)
            .map_err(|e| Error::Backend(format!("mapping a readback buffer: {e}")))?
            .to_vec();
        staging.unmap();
        Ok(bytes)
    }
}

/// Bytes of each buffer a chain of runs copies through.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ChainSizes {
    tables: u64,
    kept: u64,
    carry: u64,
    staging: u64,
}

impl ChainSizes {
    fn holds(&self, other: &ChainSizes) -> bool {
        self.tables >= other.tables
            && self.kept >= other.kept
            && self.carry >= other.carry
            && self.staging >= other.staging
    }
}

/// The buffers of [`WgpuExecutable::chain`], kept between chains: every run's scalar table,
/// the inputs not fed, the fed values in passing, every run's outputs to read back.
pub(super) struct ChainBuffers {
    sizes: ChainSizes,
    tables: wgpu::Buffer,
    kept: wgpu::Buffer,
    carry: wgpu::Buffer,
    staging: wgpu::Buffer,
}

impl ChainBuffers {
    fn new(device: &wgpu::Device, sizes: ChainSizes) -> ChainBuffers {
        let buffer = |label: &str, size: u64, usage: wgpu::BufferUsages| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: size.max(4).div_ceil(4) * 4,
                usage,
                mapped_at_creation: false,
            })
        };
        let copies = wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        ChainBuffers {
            sizes,
            tables: buffer("chained runtime scalars", sizes.tables, copies),
            kept: buffer("chained inputs", sizes.kept, copies),
            carry: buffer("chained values", sizes.carry, copies),
            staging: buffer(
                "chained outputs",
                sizes.staging,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
        }
    }
}
