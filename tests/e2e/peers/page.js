// The side-by-side benchmark's page (tests/e2e/peers.mjs serves and drives it): one engine per
// page load, named by the query string, loads Whisper tiny.en and transcribes one clip greedily
// `runs` times after `warmup` runs (default 1) to warm up, then sets window.peerResult. Every engine gets the same
// 16 kHz samples, read here from a 16-bit PCM WAV file; only loading and transcribing are timed.
//
//   ?engine=susurrus&backend=cpu|webgpu&threads=N&clip=URL&runs=N&warmup=0|1[&model=URL]
//   ?engine=transformers.js&dtype=fp32|q8&threads=N&clip=URL&runs=N&warmup=0|1
//   ?engine=whisper.cpp&threads=N&clip=URL&runs=N&warmup=0|1

const params = new URLSearchParams(location.search);
const engine = params.get("engine");
const threads = Number(params.get("threads") ?? 1);
const runs = Number(params.get("runs") ?? 1);
const warmup = Number(params.get("warmup") ?? 1);
const clipUrl = params.get("clip");

/** A 16 kHz mono 16-bit PCM WAV file as samples in [-1, 1) and as the file's Blob. */
async function readWav(url) {
  const reply = await fetch(url);
  if (!reply.ok) throw new Error(`${url}: HTTP ${reply.status}`);
  const bytes = await reply.arrayBuffer();
  const view = new DataView(bytes);
  const tag = (at) => String.fromCharCode(...new Uint8Array(bytes, at, 4));
  if (tag(0) !== "RIFF" || tag(8) !== "WAVE") throw new Error(`${url}: not a WAV file`);
  let format = null;
  for (let at = 12; at + 8 <= bytes.byteLength; ) {
    const len = view.getUint32(at + 4, true);
    if (tag(at) === "fmt ") {
      format = [view.getUint16(at + 8, true), view.getUint16(at + 10, true), view.getUint32(at + 12, true), view.getUint16(at + 22, true)];
    } else if (tag(at) === "data") {
      if (JSON.stringify(format) !== "[1,1,16000,16]") throw new Error(`${url}: format ${format}, not 16 kHz mono 16-bit PCM`);
      const samples = new Float32Array(len / 2);
      for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(at + 8 + 2 * i, true) / 32768;
      return { samples, blob: new Blob([bytes], { type: "audio/wav" }) };
    }
    at += 8 + len + (len & 1);
  }
  throw new Error(`${url}: no data chunk`);
}

/**
 * Susurrus's npm package (target/npm/susurrus served as /pkg/) with the model served at
 * /model/, or the folder `model` names (the int8 conversion).
 */
async function susurrus() {
  const { Transcriber } = await import("/pkg/index.js");
  const backend = params.get("backend") ?? "cpu";
  const transcriber = await Transcriber.load(params.get("model") ?? "/model/", { backend, threads, cache: false });
  return {
    info: { backend: transcriber.info.backend, adapter: transcriber.info.adapter, threads: transcriber.info.threads },
    // Greedy, as the other engines run; the package's default is beam search with 5 beams.
    transcribe: async ({ samples }) => (await transcriber.transcribe(samples, { beamSize: 1 })).text,
  };
}

/**
 * transformers.js's browser bundle (onnxruntime-web inside; its .wasm files served as /ort/)
 * with the ONNX export of the same weights (scripts/models/onnx_export.py) at /models/.
 */
async function transformersJs() {
  const { pipeline, env } = await import("/transformers/transformers.min.js");
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.useBrowserCache = false;
  // A path, not a URL: transformers.js checks which files exist (tokenizer, processor) only
  // for local paths when remote models are off.
  env.localModelPath = "/models/";
  env.backends.onnx.wasm.wasmPaths = new URL("/ort/", location.href).href;
  env.backends.onnx.wasm.numThreads = threads;
  const dtype = params.get("dtype") ?? "fp32";
  const asr = await pipeline("automatic-speech-recognition", "whisper-tiny.en-onnx", { device: "wasm", dtype });
  return {
    info: { dtype, threads: env.backends.onnx.wasm.numThreads },
    // Its long-form recipe (30 s chunks overlapping by 5 s); one chunk for clips up to 30 s.
    transcribe: async ({ samples }) =>
      (await asr(samples, { return_timestamps: true, chunk_length_s: 30, stride_length_s: 5 })).text,
  };
}

/**
 * whisper.cpp's wasm build (@transcribe/shout, its module at /shout/) through its own
 * FileTranscriber (/transcriber/), with the ggml conversion of the same weights
 * (scripts/models/ggml_convert.py). It decodes the WAV Blob with WebAudio itself (milliseconds).
 */
async function whisperCpp() {
  const { default: createModule } = await import("/shout/shout.wasm.js");
  const { FileTranscriber } = await import("/transcriber/index.js");
  const quiet = () => {};
  const transcriber = new FileTranscriber({ createModule, model: "/models/ggml-tiny.en.bin", print: quiet, printErr: quiet });
  await transcriber.init();
  return {
    info: { threads },
    transcribe: async ({ blob }) => {
      const result = await transcriber.transcribe(blob, { lang: "en", threads, token_timestamps: false });
      return result.transcription.map((segment) => segment.text).join("");
    },
  };
}

const engines = { susurrus, "transformers.js": transformersJs, "whisper.cpp": whisperCpp };

async function main() {
  if (!(engine in engines)) throw new Error(`unknown engine ${engine}`);
  if (![threads, runs].every((n) => Number.isInteger(n) && n >= 1) || ![0, 1].includes(warmup)) {
    throw new Error("threads and runs are whole numbers of at least 1, warmup 0 or 1");
  }
  const clip = await readWav(clipUrl);
  const started = performance.now();
  const loaded = await engines[engine]();
  const loadMs = performance.now() - started;
  const timed = async () => {
    const t0 = performance.now();
    const text = await loaded.transcribe(clip);
    return { ms: performance.now() - t0, text };
  };
  const first = warmup > 0 ? await timed() : null;
  const times = [];
  let text = "";
  for (let i = 0; i < runs; i++) {
    const run = await timed();
    times.push(run.ms);
    text = run.text;
  }
  return {
    engine,
    info: loaded.info,
    crossOriginIsolated,
    loadMs,
    firstMs: first?.ms ?? null,
    times,
    audioS: clip.samples.length / 16000,
    text,
  };
}

main().then(
  (result) => (window.peerResult = result),
  (error) => (window.peerResult = { engine, error: `${error?.name}: ${error?.message}\n${error?.stack ?? ""}` }),
);
