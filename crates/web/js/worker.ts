// The package's module worker: holds one Model and runs load, transcribe and bench requests and
// live streams from the page's Transcriber (index.ts), so the page stays responsive while the
// model works.
// An "abort" request aborts the matching transcription's signal; the Rust side checks it
// before every plan run and gives the event loop turns on the CPU backend, so the message
// is seen mid-transcription. On a cross-origin isolated page it runs the threaded build, whose
// CPU backend works on a pool of workers of its own (started from here).

import type { LiveStream, Model } from "./susurrus.js";
import type { Reply, Request } from "./protocol.js";

interface WorkerScope {
  postMessage(message: Reply, transfer?: Transferable[]): void;
  onmessage: ((event: MessageEvent<Request>) => void) | null;
  crossOriginIsolated?: boolean;
}
const scope = self as unknown as WorkerScope;

/** The most CPU threads the threaded build starts (beyond that the decoder steps gain little). */
const MAX_THREADS = 8;

/** The module, instantiated from the page's compiled `module`: the threaded build (the page
 *  is cross-origin isolated) with its CPU pool started on `threads` workers (default one per
 *  core), at most the cores and MAX_THREADS; else the plain one, on this thread. */
async function start(threads: number | undefined, module: WebAssembly.Module, threaded: boolean): Promise<typeof import("./susurrus.js")> {
  if (threaded && scope.crossOriginIsolated === true) {
    const build = await import("./threads/susurrus.js");
    await build.default({ module_or_path: module });
    await build.initThreadPool(Math.max(1, Math.min(threads ?? Infinity, navigator.hardwareConcurrency || 1, MAX_THREADS)));
    return build as unknown as typeof import("./susurrus.js");
  }
  const plain = await import("./susurrus.js");
  await plain.default({ module_or_path: module });
  return plain;
}
/** Started by the first request, the load that says how many threads to use. */
let ready: ReturnType<typeof start> | null = null;
let model: Model | null = null;
const running = new Map<number, AbortController>();
/** Open live streams by the id of the request that opened them. */
const streams = new Map<number, LiveStream>();

function fail(id: number, error: unknown): void {
  const e = error instanceof Error ? error : new Error(String(error));
  scope.postMessage({ id, type: "error", name: e.name, message: e.message });
}

async function handle(request: Request): Promise<void> {
  if (ready === null) {
    if (request.type !== "load") throw new Error("the worker's first request must load a model");
    ready = start(request.threads, request.module, request.threaded);
  }
  const { Model, isModelName } = await ready;
  switch (request.type) {
    case "load": {
      const { id, source, name, hub, backend, cache, vad } = request;
      const loaded = await Model.load(name !== undefined && isModelName(name) ? name : source, {
        backend,
        cache,
        vad,
        hub,
        onProgress: (progress) => scope.postMessage({ id, type: "load-progress", progress }),
      });
      model?.free();
      model = loaded;
      scope.postMessage({ id, type: "loaded", info: loaded.info });
      return;
    }
    case "transcribe": {
      const { id, audio, options } = request;
      if (model === null) throw new Error("no model is loaded");
      const controller = new AbortController();
      running.set(id, controller);
      try {
        const result = await model.transcribe(audio, {
          ...options,
          signal: controller.signal,
          onSegment: (segment) => scope.postMessage({ id, type: "segment", segment }),
          onProgress: (progress) => scope.postMessage({ id, type: "progress", progress }),
          onDeviceLost: (lost) => scope.postMessage({ id, type: "device-lost", lost }),
        });
        scope.postMessage({ id, type: "transcribed", result });
      } finally {
        running.delete(id);
      }
      return;
    }
    case "bench": {
      if (model === null) throw new Error("no model is loaded");
      const result = await model.bench(request.audio, request.options);
      scope.postMessage({ id: request.id, type: "benched", result });
      return;
    }
    case "abort":
      running.get(request.target)?.abort();
      return;
    case "stream": {
      const { id, options } = request;
      if (model === null) throw new Error("no model is loaded");
      const controller = new AbortController();
      // A failed stream stays in `streams` until its finish (which the page sends either way)
      // rejects with the error and frees it.
      const stream = model.stream({
        ...options,
        signal: controller.signal,
        onPartial: (text) => scope.postMessage({ id, type: "partial", text }),
        onCommitted: (text) => scope.postMessage({ id, type: "committed", text }),
        onError: (error) => scope.postMessage({ id, type: "stream-error", name: error.name, message: error.message }),
      });
      running.set(id, controller);
      streams.set(id, stream);
      scope.postMessage({ id, type: "streaming" });
      return;
    }
    case "push": {
      const stream = streams.get(request.target);
      if (stream === undefined) return;
      try {
        stream.push(request.samples, request.sampleRate);
      } catch (error) {
        // The page checked the chunk, so a refusal here ends the stream: the page has
        // nothing to retry it with. Its error is the first the page hears.
        const e = error instanceof Error ? error : new Error(String(error));
        scope.postMessage({ id: request.target, type: "stream-error", name: e.name, message: e.message });
        running.get(request.target)?.abort();
      }
      return;
    }
    case "finish": {
      const { id, target } = request;
      const stream = streams.get(target);
      if (stream === undefined) throw new Error("finish was called already");
      try {
        const summary = await stream.finish();
        scope.postMessage({ id, type: "finished", summary });
      } finally {
        streams.delete(target);
        running.delete(target);
        stream.free();
      }
      return;
    }
  }
}

scope.onmessage = (event) => {
  const request = event.data;
  handle(request).catch((error) => fail(request.id, error));
};
