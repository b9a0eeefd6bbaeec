// The package's module worker: holds one Model and runs load, transcribe and bench requests from
// the page's Transcriber (index.ts), so the page stays responsive while the model works.
// An "abort" request aborts the matching transcription's signal; the Rust side checks it
// before every plan run and gives the event loop turns on the CPU backend, so the message
// is seen mid-transcription. On a cross-origin isolated page it runs the threaded build, whose
// CPU backend works on a pool of workers of its own (started from here).

import type { Model } from "./susurrus.js";
import type { Reply, Request } from "./protocol.js";

interface WorkerScope {
  postMessage(message: Reply, transfer?: Transferable[]): void;
  onmessage: ((event: MessageEvent<Request>) => void) | null;
  crossOriginIsolated?: boolean;
}
const scope = self as unknown as WorkerScope;

/** The most CPU threads the threaded build starts (beyond that the decoder steps gain little). */
const MAX_THREADS = 8;

/** The module: where the page is cross-origin isolated (so WebAssembly may share memory) the
 *  threaded build, with its CPU pool started on one worker per core, else the plain one. */
async function start(): Promise<typeof import("./susurrus.js")> {
  if (scope.crossOriginIsolated === true && typeof SharedArrayBuffer === "function") {
    const threaded = await import("./threads/susurrus.js");
    await threaded.default();
    await threaded.initThreadPool(Math.max(1, Math.min(navigator.hardwareConcurrency || 1, MAX_THREADS)));
    return threaded as unknown as typeof import("./susurrus.js");
  }
  const plain = await import("./susurrus.js");
  await plain.default();
  return plain;
}
const ready = start();
let model: Model | null = null;
const running = new Map<number, AbortController>();

function fail(id: number, error: unknown): void {
  const e = error instanceof Error ? error : new Error(String(error));
  scope.postMessage({ id, type: "error", name: e.name, message: e.message });
}

async function handle(request: Request): Promise<void> {
  const { Model } = await ready;
  switch (request.type) {
    case "load": {
      const { id, source, backend, cache, vad } = request;
      const loaded = await Model.load(source, {
        backend,
        cache,
        vad,
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
  }
}

scope.onmessage = (event) => {
  const request = event.data;
  handle(request).catch((error) => fail(request.id, error));
};
