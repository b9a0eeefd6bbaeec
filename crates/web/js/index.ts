// The package's entry point on the page. `Transcriber` runs the model in a module worker
// (worker.ts) with the same API as the wasm `Model`, so transcribing never blocks the page.
// Files are decoded in the worker as it reads them (symphonia's demuxers, WebCodecs' decoders);
// AudioBuffers and files it cannot decode are decoded here, on the page, because WebAudio
// (decodeAudioData, OfflineAudioContext) exists only here.

import type {
  AudioInput,
  BenchOptions,
  CueOptions,
  BenchResult,
  LiveSummary,
  LiveText,
  LoadOptions,
  LoadProgress,
  ModelInfo,
  ModelSource,
  Segment,
  StreamOptions,
  TranscribeOptions,
  TranscribeResult,
  TranscriptFormat,
} from "./susurrus.js";
import type { DecodingOptions, Reply, Request } from "./protocol.js";

export { captureMicrophone } from "./microphone.js";
export type { AudioSink, Microphone } from "./microphone.js";
export type {
  AudioInput,
  BackendChoice,
  BenchOptions,
  BenchResult,
  CueOptions,
  LiveSummary,
  LiveText,
  LoadOptions,
  LoadProgress,
  ModelInfo,
  ModelSource,
  Segment,
  StreamOptions,
  Timings,
  TranscribeOptions,
  TranscribeResult,
  TranscriptFormat,
  VadOptions,
  Word,
} from "./susurrus.js";

/**
 * A build's module, compiled once: the page instantiates it here and the worker instantiates
 * the same compiled module (sent with the load request), so the page downloads and compiles
 * one build, once.
 */
async function compileModule(url: URL): Promise<WebAssembly.Module> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url.href}: HTTP ${response.status}`);
  try {
    return await WebAssembly.compileStreaming(response.clone());
  } catch (error) {
    // compileStreaming needs the `application/wasm` type; elsewhere compile the bytes.
    if (response.headers.get("content-type")?.split(";")[0] === "application/wasm") throw error;
    return WebAssembly.compile(await response.arrayBuffer());
  }
}
/**
 * Where the page is cross-origin isolated (WebAssembly may share memory) the threaded build,
 * which the worker runs there; else the plain one. The page's own instance has a memory of
 * its own and starts no threads.
 */
const threaded = (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated === true && typeof SharedArrayBuffer === "function";
const wasmModule = await compileModule(
  threaded ? new URL("./threads/susurrus_bg.wasm", import.meta.url) : new URL("./susurrus_bg.wasm", import.meta.url),
);
const wasm: typeof import("./susurrus.js") = threaded
  ? ((await import("./threads/susurrus.js")) as unknown as typeof import("./susurrus.js"))
  : await import("./susurrus.js");
await wasm.default({ module_or_path: wasmModule });

/** 16 kHz mono samples of `input`, decoded and resampled with WebAudio. */
export function decodeAudio(input: AudioInput): Promise<Float32Array> {
  return wasm.decodeAudio(input);
}

/**
 * A result as a document: "txt" (one segment a line), "srt", "vtt" or "json"; `options` cut
 * "srt"/"vtt" cues from words (results of `wordTimestamps: true`).
 */
export function formatTranscript(result: TranscribeResult, format: TranscriptFormat, options?: CueOptions): string {
  return wasm.formatTranscript(result, format, options);
}

/** Deletes every cached model file; resolves to whether there was a cache. */
export function clearModelCache(): Promise<boolean> {
  return wasm.clearModelCache();
}

/** The package version. */
export function version(): string {
  return wasm.version();
}

/** `Transcriber.load`'s options: a model's, and how many threads its worker may use. */
export interface TranscriberLoadOptions extends LoadOptions {
  /**
   * The most CPU threads (default: one per core, at most 8). More than one needs a cross-origin
   * isolated page; `info.threads` says how many run.
   */
  threads?: number;
}

/** Callbacks of one request to the worker. */
interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
  onLoadProgress?: (progress: LoadProgress) => void;
  onProgress?: (progress: { done: number; total: number }) => void;
  onSegment?: (segment: Segment) => void;
  onDeviceLost?: (lost: { reason: string; resumeAt: number }) => void;
}

function errorNamed(name: string, message: string): Error {
  const error = new Error(message);
  error.name = name;
  return error;
}

/** A Whisper model in a worker of its own. */
export class Transcriber {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  readonly #streams = new Map<number, LiveSink>();
  #next = 1;
  #info: ModelInfo | null = null;

  private constructor() {
    this.#worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module", name: "susurrus" });
    this.#worker.onmessage = (event: MessageEvent<Reply>) => this.#receive(event.data);
    this.#worker.onerror = (event) => {
      event.preventDefault();
      this.#failAll(new Error(`the susurrus worker failed: ${event.message || "it could not start"}`));
    };
    this.#worker.onmessageerror = () => this.#failAll(new Error("the susurrus worker sent an unreadable message"));
  }

  /**
   * Starts a worker and loads a model in it: by name ("tiny.en", "base", "small", ...
   * "large-v3-turbo", faster-whisper's names, fetched from the Hugging Face hub or the `hub`
   * option's mirror), from the URL of a model folder (fetched through the model cache, with
   * download progress; "./base/" for a folder that has a model's name) or from the files a
   * user picked.
   */
  static async load(source: ModelSource, options: TranscriberLoadOptions = {}): Promise<Transcriber> {
    const { threads } = options;
    if (threads !== undefined && !(Number.isInteger(threads) && threads >= 1)) {
      throw new RangeError(`threads must be a whole number of at least 1, not ${String(threads)}`);
    }
    const transcriber = new Transcriber();
    const resolved = typeof source === "string" ? new URL(source, location.href).href : Array.from(source);
    try {
      const info = await transcriber.#request(
        {
          type: "load",
          source: resolved,
          name: typeof source === "string" ? source : undefined,
          hub: options.hub,
          backend: options.backend,
          cache: options.cache,
          vad: options.vad === undefined ? undefined : new URL(options.vad, location.href).href,
          threads,
          module: wasmModule,
          threaded,
        },
        { onLoadProgress: options.onProgress },
      );
      transcriber.#info = info as ModelInfo;
    } catch (error) {
      transcriber.dispose();
      throw error;
    }
    return transcriber;
  }

  /** Where the model runs and how it was loaded. */
  get info(): ModelInfo {
    if (this.#info === null) throw new Error("the model is not loaded");
    return this.#info;
  }

  /**
   * Transcribes `audio`. Files (bytes, Blobs) go to the worker, which decodes them as it reads
   * them, so a long recording is never in memory whole; AudioBuffers, and files the worker
   * cannot decode (a codec without WebCodecs there), are decoded on the page with WebAudio.
   * Segments reach `onSegment` as the worker decodes them. Aborting `signal` rejects with an
   * Error named "AbortError" and keeps the model loaded.
   */
  async transcribe(audio: AudioInput, options: TranscribeOptions = {}): Promise<TranscribeResult> {
    const { onSegment, onProgress, onDeviceLost, signal, ...decoding } = options;
    const aborted = () => {
      if (signal?.aborted) throw errorNamed("AbortError", "the transcription was aborted");
    };
    const call = { onSegment, onProgress, onDeviceLost, signal, decoding };
    aborted();
    if (!(typeof AudioBuffer === "function" && audio instanceof AudioBuffer)) {
      try {
        return await this.#transcribeIn(audio as Float32Array | ArrayBuffer | Uint8Array | Blob, [], 0, call);
      } catch (error) {
        if (!(error instanceof Error) || error.name !== "UnsupportedAudioError") throw error;
      }
    }
    const started = performance.now();
    const samples = await decodeAudio(audio);
    aborted();
    // Samples decoded here are handed over, not copied.
    return this.#transcribeIn(samples, [samples.buffer], performance.now() - started, call);
  }

  async #transcribeIn(
    audio: Float32Array | ArrayBuffer | Uint8Array | Blob,
    transfer: Transferable[],
    decodeMs: number,
    call: Pick<TranscribeOptions, "onSegment" | "onProgress" | "onDeviceLost" | "signal"> & { decoding: DecodingOptions },
  ): Promise<TranscribeResult> {
    const { onSegment, onProgress, onDeviceLost, signal, decoding } = call;
    const id = this.#next;
    const abort = () => this.#worker.postMessage({ id: 0, type: "abort", target: id } satisfies Request);
    signal?.addEventListener("abort", abort, { once: true });
    try {
      const result = (await this.#request(
        { type: "transcribe", audio, options: decoding },
        { onSegment, onProgress, onDeviceLost },
        transfer,
      )) as TranscribeResult;
      result.timings.decodeMs += decodeMs;
      return result;
    } finally {
      signal?.removeEventListener("abort", abort);
    }
  }

  /**
   * Times the model's pieces on `audio` as `susurrus bench` does (the encoder on one window,
   * decoder tokens chained and one per submission, a step on the device alone, whole greedy
   * transcriptions): medians of `runs` runs after one to warm up. For benchmark pages.
   */
  async bench(audio: AudioInput, options: BenchOptions = {}): Promise<BenchResult> {
    const samples = audio instanceof Float32Array ? audio : await decodeAudio(audio);
    const transfer = samples === audio ? [] : [samples.buffer];
    return (await this.#request({ type: "bench", audio: samples, options }, {}, transfer)) as BenchResult;
  }

  /**
   * Opens a live transcription in the worker: push audio to the returned sink as it is
   * recorded (`captureMicrophone` does it for a microphone); text reaches `onPartial` (words
   * that may still change) and `onCommitted` (final words) as it is spoken. Options are
   * checked before this resolves (an unknown or out-of-range one rejects). The stream holds
   * the model until it finishes, fails or is aborted: a `transcribe` meanwhile is refused.
   */
  async stream(options: StreamOptions = {}): Promise<LiveSink> {
    const { onPartial, onCommitted, onError, signal, ...decoding } = options;
    if (signal?.aborted) throw errorNamed("AbortError", "the live stream was aborted");
    const id = this.#next;
    const sink = new LiveSink(this.#worker, id, { onPartial, onCommitted, onError, signal }, (request) =>
      this.#request(request, {}),
    );
    this.#streams.set(id, sink);
    try {
      await this.#request({ type: "stream", options: decoding }, {});
    } catch (error) {
      this.#streams.delete(id);
      throw error;
    }
    sink.listen(() => this.#streams.delete(id));
    return sink;
  }

  /** Ends the worker; pending requests reject. */
  dispose(): void {
    this.#worker.terminate();
    this.#failAll(new Error("the transcriber was disposed"));
  }

  #request(
    request:
      | Omit<Extract<Request, { type: "load" }>, "id">
      | Omit<Extract<Request, { type: "transcribe" }>, "id">
      | Omit<Extract<Request, { type: "bench" }>, "id">
      | Omit<Extract<Request, { type: "stream" }>, "id">
      | Omit<Extract<Request, { type: "finish" }>, "id">,
    callbacks: Omit<Pending, "resolve" | "reject">,
    transfer: Transferable[] = [],
  ): Promise<unknown> {
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, ...callbacks });
      this.#worker.postMessage({ ...request, id } as Request, transfer);
    });
  }

  #receive(reply: Reply): void {
    const stream = this.#streams.get(reply.id);
    if (stream !== undefined && stream.receive(reply)) return;
    const pending = this.#pending.get(reply.id);
    if (pending === undefined) return;
    switch (reply.type) {
      case "load-progress":
        pending.onLoadProgress?.(reply.progress);
        return;
      case "progress":
        pending.onProgress?.(reply.progress);
        return;
      case "segment":
        pending.onSegment?.(reply.segment);
        return;
      case "device-lost":
        pending.onDeviceLost?.(reply.lost);
        return;
      case "loaded":
        this.#pending.delete(reply.id);
        pending.resolve(reply.info);
        return;
      case "transcribed":
      case "benched":
        this.#pending.delete(reply.id);
        pending.resolve(reply.result);
        return;
      case "streaming":
        this.#pending.delete(reply.id);
        pending.resolve(undefined);
        return;
      case "finished":
        this.#pending.delete(reply.id);
        pending.resolve(reply.summary);
        return;
      case "error":
        this.#pending.delete(reply.id);
        pending.reject(errorNamed(reply.name, reply.message));
        return;
    }
  }

  #failAll(error: Error): void {
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
    for (const stream of this.#streams.values()) stream.fail(error);
    this.#streams.clear();
  }
}

/** The callbacks of one live stream, which stay on the page. */
type LiveCallbacks = Pick<StreamOptions, "onPartial" | "onCommitted" | "onError" | "signal">;

/**
 * A live stream in the worker (`Transcriber.stream`): `push` audio as it comes, `finish` at the
 * end. Chunks are checked here, so a bad one throws from `push` and is not taken; the model
 * looks at the audio in the worker, in the background.
 */
export class LiveSink {
  readonly #worker: Worker;
  readonly #id: number;
  readonly #callbacks: LiveCallbacks;
  readonly #finishRequest: (request: Omit<Extract<Request, { type: "finish" }>, "id">) => Promise<unknown>;
  #rate: number | null = null;
  #failed: Error | null = null;
  #finish: Promise<LiveSummary> | null = null;
  #closed: () => void = () => {};

  /** @internal */
  constructor(
    worker: Worker,
    id: number,
    callbacks: LiveCallbacks,
    finishRequest: (request: Omit<Extract<Request, { type: "finish" }>, "id">) => Promise<unknown>,
  ) {
    this.#worker = worker;
    this.#id = id;
    this.#callbacks = callbacks;
    this.#finishRequest = finishRequest;
  }

  /** @internal Starts forwarding the signal once the worker opened the stream. */
  listen(closed: () => void): void {
    this.#closed = closed;
    const signal = this.#callbacks.signal;
    signal?.addEventListener("abort", () => this.#worker.postMessage({ id: 0, type: "abort", target: this.#id } satisfies Request), {
      once: true,
    });
  }

  /**
   * Takes the next chunk: mono samples at `sampleRate` Hz (default 16000; every chunk at the
   * rate of the first), resampled in the worker when not 16 kHz. The chunk is copied, so the
   * caller may reuse its array. Throws, taking nothing, for a sample that is not a finite
   * number or another rate; after the stream ended (finished, failed, aborted), throws why.
   */
  push(samples: Float32Array, sampleRate = 16000): void {
    if (this.#failed !== null) throw this.#failed;
    if (this.#callbacks.signal?.aborted) throw errorNamed("AbortError", "the live stream was aborted");
    if (this.#finish !== null) throw new Error("the live stream is finished; open another to go on");
    if (!(samples instanceof Float32Array)) throw new TypeError("push takes a Float32Array of samples");
    if (!(Number.isInteger(sampleRate) && sampleRate >= 1)) {
      throw new RangeError(`sampleRate must be a whole number of Hz, not ${String(sampleRate)}`);
    }
    if (this.#rate !== null && sampleRate !== this.#rate) {
      throw new RangeError(
        `this chunk's sample rate is ${sampleRate} Hz, the stream's ${this.#rate} Hz: a stream keeps the rate of its first chunk`,
      );
    }
    const bad = samples.findIndex((s) => !Number.isFinite(s));
    if (bad >= 0) throw new RangeError(`sample ${bad} of this chunk is ${samples[bad]}; audio must be finite numbers`);
    this.#rate = sampleRate;
    const copy = samples.slice();
    this.#worker.postMessage({ id: 0, type: "push", target: this.#id, samples: copy, sampleRate } satisfies Request, [copy.buffer]);
  }

  /**
   * Ends the stream: the worker looks at what is left and commits all of it (the last
   * `onCommitted` comes before this resolves). Resolves to the seconds heard and the model's
   * time on them; rejects with what ended the stream early (an Error named "AbortError" when
   * it was aborted).
   */
  finish(): Promise<LiveSummary> {
    this.#finish ??= this.#end();
    return this.#finish;
  }

  async #end(): Promise<LiveSummary> {
    try {
      const summary = (await this.#finishRequest({ type: "finish", target: this.#id })) as LiveSummary;
      if (this.#failed !== null) throw this.#failed;
      return summary;
    } catch (error) {
      throw this.#failed ?? error;
    } finally {
      this.#closed();
    }
  }

  /** @internal The worker's replies for this stream; false for those that are not its own. */
  receive(reply: Reply): boolean {
    switch (reply.type) {
      case "partial":
        this.#callbacks.onPartial?.(reply.text);
        return true;
      case "committed":
        this.#callbacks.onCommitted?.(reply.text);
        return true;
      case "stream-error":
        this.fail(errorNamed(reply.name, reply.message));
        // The worker keeps the failed stream until its finish: send it now, whoever waits.
        this.finish().catch(() => {});
        return true;
      default:
        return false;
    }
  }

  /** @internal Ends the stream with `error` (the first one counts), told to `onError`. */
  fail(error: Error): void {
    if (this.#failed !== null) return;
    this.#failed = error;
    this.#callbacks.onError?.(error);
  }
}
