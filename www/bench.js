// The benchmark page: loads the model served at /model/ with the package, reports the WebGPU
// adapter and its features, the load time and a first transcription, then the package's
// bench() (the encoder on one window, decoder tokens chained and one per submission, a step
// on the device alone, whole transcriptions) and, with `stream=1`, the clip streamed live
// as if spoken, as JSON in #result and in window.benchResult (what scripts/gpu/browser_bench.py
// reads from a headless browser).

import { Latency, percentile, wordErrorRate } from "./live-stats.js";

const status = document.getElementById("status");
const params = new URLSearchParams(location.search);
const options = {
  backend: params.get("backend") ?? "auto",
  runs: Number(params.get("runs") ?? 5),
  tokens: Number(params.get("tokens") ?? 64),
  audio: params.get("audio") ?? "sample.wav",
  /** Seconds of a long recording (the clip repeated) to transcribe after the bench; 0: none. */
  long: Number(params.get("long") ?? 0),
  /** Stream the clip live after the bench ("1"), as `susurrus bench --stream` does. */
  stream: params.get("stream") === "1",
  /** The Silero VAD network's URL: loaded with the model, and the live stream runs with it. */
  vad: params.get("vad") ?? undefined,
};

/** Milliseconds of audio in each pushed chunk, as a microphone's AudioWorklet sends them. */
const CHUNK_MS = 100;

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

/**
 * The clip streamed as if spoken: 100 ms chunks pushed on a real-time schedule into
 * `transcriber.stream` (with the VAD where it is loaded); the latency of every committed word
 * to its first appearance and to its commit (medians and 90th percentiles, seconds after the
 * word's end), the model's time over the audio's, and the committed text's word error against
 * `offline`, the clip's offline transcript with the same greedy decoding.
 */
async function streamLive(transcriber, clip, offline) {
  status.textContent = "streaming the clip live";
  const latency = new Latency();
  let text = "";
  const sink = await transcriber.stream({
    vad: transcriber.info.vad,
    onPartial: (partial) => latency.partial(partial),
    onCommitted: (committed) => {
      latency.commit(committed);
      text += committed.text;
    },
  });
  const chunk = (16000 * CHUNK_MS) / 1000;
  const started = performance.now();
  for (let at = 0, k = 0; at < clip.length; at += chunk, k++) {
    const wait = started + k * CHUNK_MS - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const samples = clip.subarray(at, Math.min(at + chunk, clip.length));
    latency.push(samples, 16000);
    sink.push(samples);
  }
  const summary = await sink.finish();
  const seconds = (values, fraction) => Number(percentile(values, fraction).toFixed(3));
  return {
    audioS: summary.audioSeconds, vad: transcriber.info.vad, words: latency.committed.length,
    firstSeenP50: seconds(latency.firstSeen, 0.5), firstSeenP90: seconds(latency.firstSeen, 0.9),
    committedP50: seconds(latency.committed, 0.5), committedP90: seconds(latency.committed, 0.9),
    rtf: summary.realTimeFactor, wer: wordErrorRate(offline, text), text,
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
  const transcriber = await pkg.Transcriber.load("/model/", { backend: options.backend, cache: false, vad: options.vad });
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
  const stream = options.stream ? await streamLive(transcriber, samples, first.text) : null;
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
    stream,
  });
  status.textContent = "done";
  transcriber.dispose();
}

main().catch((error) => {
  status.textContent = "error";
  show({ error: String(error?.message ?? error) });
});
