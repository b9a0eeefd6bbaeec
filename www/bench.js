// The benchmark page: a form of model folders, backends, runs and tokens. Each model on each
// backend is loaded with the package, transcribes the clip once, then runs the package's
// bench() (the encoder on one window, decoder tokens chained and one per submission, a step on
// the device alone, a beam step, whole transcriptions); a row of the table per pair, and the
// whole as JSON to download, so that figures from any device come from the page alone.
//
// With query parameters (`backend`, `models`, `runs`, `tokens`, `audio`, `long`, `stream`,
// `vad`) the form is filled from them and runs at once: how scripts/gpu/browser_bench.py and
// tests/e2e/bench-page.mjs drive it. The results go to #result and window.benchResult, whose top
// level is the first pair's result (what a one-pair run reads) beside `results`, every pair's.

import { Latency, percentile, wordErrorRate } from "./live-stats.js";

const status = document.getElementById("status");
const params = new URLSearchParams(location.search);
/** Query parameters that only automation sets: the run starts with the page. */
const automated = params.has("backend") || params.has("models");
const extras = {
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

/** The form's choices: every non-empty line of the models box, the checked backends. */
function choices() {
  const form = document.getElementById("setup");
  return {
    models: document.getElementById("models").value.split("\n").map((line) => line.trim()).filter(Boolean),
    backends: [...form.querySelectorAll('input[name="backend"]:checked')].map((input) => input.value),
    runs: Number(document.getElementById("runs").value),
    tokens: Number(document.getElementById("tokens").value),
    audio: document.getElementById("audio").value.trim(),
  };
}

/** Fills the form from the query parameters (`models` comma-separated; `backend` one or a
 * comma-separated list, "auto" for the package's choice). */
function fillFromQuery() {
  if (params.has("models")) document.getElementById("models").value = params.get("models").split(",").join("\n");
  if (params.has("backend")) {
    const wanted = params.get("backend").split(",");
    for (const input of document.querySelectorAll('input[name="backend"]')) input.checked = wanted.includes(input.value);
    for (const backend of wanted.filter((b) => !["webgpu", "cpu"].includes(b))) {
      // "auto" (or any other the package knows): a checkbox of its own, checked.
      const span = document.createElement("span");
      span.className = "choice";
      span.innerHTML = `<input type="checkbox" name="backend" checked id="backend-${backend}"><label for="backend-${backend}"></label>`;
      span.querySelector("input").value = backend;
      span.querySelector("label").textContent = backend;
      document.querySelector("#setup fieldset").append(span);
    }
  }
  for (const key of ["runs", "tokens", "audio"]) if (params.has(key)) document.getElementById(key).value = params.get(key);
}

function showAdapter(adapter) {
  const list = document.getElementById("adapter");
  list.replaceChildren();
  const rows = adapter.webgpu === false
    ? [["WebGPU", "not offered by this browser"]]
    : adapter.adapter === null
      ? [["WebGPU", "no adapter answered"]]
      : [
        ["Adapter", [adapter.vendor, adapter.architecture, adapter.description].filter(Boolean).join(" ") || "(unnamed)"],
        ["Fallback (software)", adapter.fallback ? "yes" : "no"],
        ["Features", adapter.features.join(", ") || "none"],
        ["Largest buffer", `${(adapter.maxBufferSize / 2 ** 20).toFixed(0)} MiB`],
      ];
  for (const [term, value] of [...rows, ["Browser", navigator.userAgent]]) {
    const dt = document.createElement("dt");
    const dd = document.createElement("dd");
    dt.textContent = term;
    dd.textContent = value;
    list.append(dt, dd);
  }
}

/** A number as the table shows it: three significant digits, "-" where there is none. */
function cell(value) {
  return typeof value === "number" && Number.isFinite(value) ? Number(value.toPrecision(3)).toString() : "-";
}

function addRow(result) {
  const tr = document.createElement("tr");
  const cells = result.error === undefined
    ? [result.model, result.backend, cell(result.loadMs), cell(result.encoderMs), cell(result.msPerToken),
      cell(result.beamMsPerStep), cell(result.rtf && 1 / result.rtf), cell(result.beamRtf && 1 / result.beamRtf)]
    : [result.model, result.choice, `error: ${result.error}`];
  for (const text of cells) {
    const td = document.createElement("td");
    td.textContent = text;
    tr.append(td);
  }
  if (result.error !== undefined) {
    tr.lastChild.colSpan = 6;
    tr.className = "error";
  }
  document.querySelector("#results tbody").append(tr);
}

/** Loads `model` on `choice`, transcribes the clip once and benches it; the error instead where
 * any step fails, so that the other pairs still run. */
async function benchPair(pkg, model, choice, clip, setup) {
  let transcriber;
  try {
    status.textContent = `${model} on ${choice}: loading`;
    const loadStarted = performance.now();
    transcriber = await pkg.Transcriber.load(model, { backend: choice, cache: false, vad: extras.vad });
    const loadMs = performance.now() - loadStarted;
    status.textContent = `${model} on ${choice}: first transcription`;
    const samples = await pkg.decodeAudio(clip);
    // Greedy: the tests compare it with the native command's, whose resampler gives a 22 kHz
    // clip slightly different samples than WebAudio's; beam search is sensitive to that.
    const first = await transcriber.transcribe(samples, { temperatures: [0], beamSize: 1 });
    status.textContent = `${model} on ${choice}: bench, ${setup.runs} runs, ${setup.tokens} tokens`;
    const bench = await transcriber.bench(samples, { runs: setup.runs, tokens: setup.tokens });
    const long = extras.long > 0 ? await transcribeLong(transcriber, samples, extras.long) : null;
    const stream = extras.stream ? await streamLive(transcriber, samples, first.text) : null;
    return {
      model, choice, info: transcriber.info, loadMs, firstTranscribeMs: first.timings.transcribeMs, text: first.text,
      ...bench, long, stream,
    };
  } catch (error) {
    return { model, choice, error: String(error?.message ?? error) };
  } finally {
    transcriber?.dispose();
  }
}

let report = null;

function show(document_) {
  report = document_;
  const first = document_.results[0] ?? {};
  window.benchResult = { version: document_.version, userAgent: document_.userAgent, gpu: document_.gpu, ...first, results: document_.results };
  document.getElementById("result").textContent = JSON.stringify(document_, null, 2);
  document.getElementById("download").disabled = false;
}

async function run(pkg, adapter) {
  const setup = choices();
  const button = document.getElementById("run");
  if (setup.models.length === 0 || setup.backends.length === 0) {
    status.textContent = "choose at least one model folder and one backend";
    return;
  }
  button.disabled = true;
  document.querySelector("#results tbody").replaceChildren();
  const results = [];
  try {
    status.textContent = `fetching ${setup.audio}`;
    const response = await fetch(setup.audio);
    if (!response.ok) throw new Error(`${setup.audio}: HTTP ${response.status}`);
    const clip = new Uint8Array(await response.arrayBuffer());
    for (const model of setup.models) {
      for (const choice of setup.backends) {
        // Each pair decodes its own copy: the package takes the bytes it is given.
        const result = await benchPair(pkg, model, choice, clip.slice(), setup);
        results.push(result);
        addRow(result);
      }
    }
    const failed = results.filter((r) => r.error !== undefined).length;
    status.textContent = failed === 0 ? "done" : `done; ${failed} of ${results.length} failed`;
  } catch (error) {
    results.push({ error: String(error?.message ?? error) });
    status.textContent = "error";
  }
  show({ version: pkg.version(), userAgent: navigator.userAgent, gpu: adapter, ...setup, results });
  button.disabled = false;
}

function download() {
  const blob = new Blob([JSON.stringify(report, null, 2)], { type: "application/json" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = `susurrus-bench-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

async function main() {
  fillFromQuery();
  const pkg = await import("./pkg/index.js");
  status.textContent = "asking for the WebGPU adapter";
  const adapter = await adapterReport();
  showAdapter(adapter);
  document.getElementById("setup").addEventListener("submit", (event) => {
    event.preventDefault();
    run(pkg, adapter);
  });
  document.getElementById("download").addEventListener("click", download);
  if (automated) {
    await run(pkg, adapter);
  } else {
    status.textContent = "ready: choose what to measure and press Run";
  }
}

main().catch((error) => {
  status.textContent = "error";
  show({ results: [{ error: String(error?.message ?? error) }] });
});
