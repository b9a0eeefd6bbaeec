// The benchmark page: loads the model served at /model/ with the package, reports the WebGPU
// adapter and its features, the load time and a first transcription, then the package's
// bench() (the encoder on one window, decoder tokens chained and one per submission, a step
// on the device alone, whole transcriptions), as JSON in #result and in window.benchResult
// (what scripts/browser_bench.py reads from a headless browser).

const status = document.getElementById("status");
const params = new URLSearchParams(location.search);
const options = {
  backend: params.get("backend") ?? "auto",
  runs: Number(params.get("runs") ?? 5),
  tokens: Number(params.get("tokens") ?? 64),
  audio: params.get("audio") ?? "sample.wav",
  /** Seconds of a long recording (the clip repeated) to transcribe after the bench; 0: none. */
  long: Number(params.get("long") ?? 0),
};

/** `promise`, or null after `ms`. */
function within(promise, ms) {
  return Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve(null), ms))]);
}

/** The default WebGPU adapter's description and features; requestAdapter can answer null right
 * after a headless browser starts (or never answer where Chromium's GPU process failed), so it
 * is asked a few times, 5 s each. */
async function adapterReport() {
  if (!navigator.gpu) return { webgpu: false };
  for (let attempt = 0; attempt < 5; attempt++) {
    const adapter = await within(navigator.gpu.requestAdapter({ powerPreference: "high-performance" }), 5000);
    if (adapter) {
      const info = adapter.info ?? {};
      return {
        webgpu: true,
        vendor: info.vendor ?? "",
        architecture: info.architecture ?? "",
        description: info.description ?? "",
        fallback: Boolean(info.isFallbackAdapter ?? adapter.isFallbackAdapter),
        features: [...adapter.features].sort(),
        maxBufferSize: adapter.limits.maxBufferSize,
        maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      };
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  return { webgpu: true, adapter: null };
}

/** Transcribes `seconds` of the clip repeated (one second of silence between repeats) in one
 * call, recording when each part of the audio was done: with the GPU's memory sampled beside
 * it, that is memory against the recording's length. */
async function transcribeLong(transcriber, clip, seconds) {
  const gap = 16000;
  const total = Math.round(seconds * 16000);
  const long = new Float32Array(total);
  for (let at = 0; at < total; at += clip.length + gap) long.set(clip.subarray(0, Math.min(clip.length, total - at)), at);
  status.textContent = `long recording: ${seconds} s`;
  const started = performance.now();
  const progress = [];
  let segments = 0;
  const result = await transcriber.transcribe(long, {
    temperatures: [0],
    onSegment: () => { segments += 1; },
    onProgress: (p) => {
      progress.push([Math.round(performance.now() - started), Math.round(p.done)]);
      status.textContent = `long recording: ${Math.round(p.done)} of ${seconds} s`;
    },
  });
  return {
    audioS: total / 16000, transcribeMs: performance.now() - started, rtf: result.timings.rtf, segments,
    words: result.text.split(/\s+/).filter(Boolean).length, progress,
  };
}

function show(result) {
  window.benchResult = result;
  document.getElementById("result").textContent = JSON.stringify(result, null, 2);
}

async function main() {
  const pkg = await import("./pkg/index.js");
  status.textContent = "asking for the WebGPU adapter";
  const adapter = await adapterReport();
  status.textContent = "loading the model";
  const loadStarted = performance.now();
  const transcriber = await pkg.Transcriber.load("/model/", { backend: options.backend, cache: false });
  const loadMs = performance.now() - loadStarted;
  status.textContent = `fetching ${options.audio}`;
  const response = await fetch(options.audio);
  if (!response.ok) throw new Error(`${options.audio}: HTTP ${response.status}`);
  const samples = await pkg.decodeAudio(new Uint8Array(await response.arrayBuffer()));
  status.textContent = "first transcription";
  // Greedy: the test compares it with the native command's, whose resampler gives this 22 kHz
  // clip slightly different samples than WebAudio's; beam search is sensitive to that.
  const first = await transcriber.transcribe(samples, { temperatures: [0], beamSize: 1 });
  status.textContent = `bench: ${options.runs} runs, ${options.tokens} tokens`;
  const bench = await transcriber.bench(samples, { runs: options.runs, tokens: options.tokens });
  const long = options.long > 0 ? await transcribeLong(transcriber, samples, options.long) : null;
  show({
    version: pkg.version(),
    userAgent: navigator.userAgent,
    gpu: adapter,
    info: transcriber.info,
    loadMs,
    firstTranscribeMs: first.timings.transcribeMs,
    text: first.text,
    ...bench,
    long,
  });
  status.textContent = "done";
  transcriber.dispose();
}

main().catch((error) => {
  status.textContent = "error";
  show({ error: String(error?.message ?? error) });
});
