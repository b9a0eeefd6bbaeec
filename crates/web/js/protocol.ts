// Messages between the main-thread client (index.ts) and the module worker (worker.ts).
// Every request carries an id; the worker answers with progress, segments, and one final
// "done" or "error" for that id.

import type {
  BackendChoice, BenchOptions, BenchResult, LiveSummary, LiveText, LoadProgress, ModelInfo, Segment, TranscribeResult,
} from "./susurrus.js";

/** Decoding options only: callbacks and the signal stay on the page. */
export type DecodingOptions = Record<string, unknown>;

export type Request =
  /** The first request: it starts `module`, the page's compiled copy of a build (`threaded`
   *  says which), with `threads` (the most CPU threads; default one per core). */
  | {
      id: number;
      type: "load";
      /** A folder's URL (resolved against the page) or the files picked. */
      source: string | File[];
      /** The string the page gave, which may be a model's name (the worker's module knows the names). */
      name?: string;
      hub?: string;
      backend?: BackendChoice;
      cache?: boolean;
      vad?: string;
      threads?: number;
      module: WebAssembly.Module;
      threaded: boolean;
    }
  /** 16 kHz samples, or a file the worker decodes as it reads it. */
  | { id: number; type: "transcribe"; audio: Float32Array | ArrayBuffer | Uint8Array | Blob; options: DecodingOptions }
  | { id: number; type: "bench"; audio: Float32Array; options: BenchOptions }
  | { id: number; type: "abort"; target: number }
  /** Opens a live stream (its id names it in the pushes, the finish and the replies). */
  | { id: number; type: "stream"; options: DecodingOptions }
  /** A chunk for stream `target`, at `sampleRate` Hz (no reply unless the stream fails). */
  | { id: number; type: "push"; target: number; samples: Float32Array; sampleRate: number }
  | { id: number; type: "finish"; target: number };

export type Reply =
  | { id: number; type: "load-progress"; progress: LoadProgress }
  | { id: number; type: "progress"; progress: { done: number; total: number } }
  | { id: number; type: "device-lost"; lost: { reason: string; resumeAt: number } }
  | { id: number; type: "segment"; segment: Segment }
  | { id: number; type: "loaded"; info: ModelInfo }
  | { id: number; type: "transcribed"; result: TranscribeResult }
  | { id: number; type: "benched"; result: BenchResult }
  | { id: number; type: "error"; name: string; message: string }
  | { id: number; type: "streaming" }
  | { id: number; type: "partial" | "committed"; text: LiveText }
  /** Stream `id` ended early; its finish rejects with this too. */
  | { id: number; type: "stream-error"; name: string; message: string }
  | { id: number; type: "finished"; summary: LiveSummary };
