// Skipping silence in the browser: the npm package (www/pkg, in its worker) loads the real
// whisper-tiny.en with the Silero VAD network (`load`'s `vad` URL, served by `susurrus serve
// --vad-model` at /vad/silero_vad_v6.onnx) and transcribes the golden clip vad.wav (68 s: three
// passages between long noisy pauses) with `vad: true`, greedy: every segment's token ids, text
// and times must be faster-whisper's with vad_filter=True (run "vad" of
// tests/fixtures/golden/vad.json), on the CPU backend. (The network on WebGPU is checked against
// onnxruntime natively on lavapipe, whisper_golden.rs; a tiny.en window on Chromium's
// SwiftShader adapter takes minutes, and the page test runs the real model there.)
// First, a model loaded without the network says so in `info.vad`, and `vad: true` on it
// rejects with an error naming the network.
// Run by tests/e2e/run.sh; needs target/debug/susurrus, www/pkg, the model (SUSURRUS_MODEL) and
// the network (SUSURRUS_VAD_MODEL, from scripts/models/fetch_model.sh silero-vad). The page is served
// without cross-origin isolation, so this is the package's plain (one-thread) build.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  assert, assertEqual, compareWithRun, expectedCpuAdapter, modelDir, openDemoPage, packageOptions, readWav, repoRoot, runTest,
  seconds,
} from "./common.mjs";

const LOAD_TIMEOUT_MS = 5 * 60_000;
const TRANSCRIBE_TIMEOUT_MS = 15 * 60_000;
const VAD_URL = "/vad/silero_vad_v6.onnx";

/**
 * Loads the model in the page on `backend`, with the VAD network when `vad` is its URL, as
 * `window.transcriber` (the one before is disposed); returns its info and the load time.
 */
async function load(page, backend, vad) {
  return page.evaluate(async ({ backend, vad, timeoutMs }) => {
    const { Transcriber } = await import("./pkg/index.js");
    window.transcriber?.dispose();
    const started = performance.now();
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("the model did not load in time")), timeoutMs));
    window.transcriber = await Promise.race([Transcriber.load("/model/", { backend, vad }), timeout]);
    return { ms: performance.now() - started, info: window.transcriber.info };
  }, { backend, vad, timeoutMs: LOAD_TIMEOUT_MS });
}

/**
 * Transcribes `samples` (base64 of their f32 bytes: a 68 s clip as a JSON array of numbers
 * would be tens of MB) with `options`; resolves to the result's parts the comparison reads, or
 * `{ error }` with the rejection's message.
 */
async function transcribe(page, samples, options) {
  return page.evaluate(async ({ samples, options }) => {
    const bytes = Uint8Array.from(atob(samples), (c) => c.charCodeAt(0));
    const parts = ({ start, end, text, tokens }) => ({ start, end, text, tokens });
    try {
      const r = await window.transcriber.transcribe(new Float32Array(bytes.buffer), options);
      return { text: r.text, language: r.language, languageProbability: r.languageProbability, segments: r.segments.map(parts) };
    } catch (err) {
      return { error: err.message };
    }
  }, { samples, options });
}

await runTest("vad", async (onCleanup) => {
  // Served without cross-origin isolation: the package's plain build, one thread (the page
  // test runs the threaded one).
  const { page, problems: pageProblems } =
    await openDemoPage("vad", modelDir, onCleanup, TRANSCRIBE_TIMEOUT_MS, { isolated: false });
  const record = JSON.parse(readFileSync(join(repoRoot, "tests/fixtures/golden/vad.json"), "utf8"));
  const run = record.runs.find((r) => r.name === "vad");
  assert(run, "vad.json has no run named vad");
  const samples = Buffer.from(new Float32Array(readWav(join(repoRoot, "tests/fixtures/golden", record.audio.file))).buffer)
    .toString("base64");
  const options = packageOptions(run.options);
  assertEqual([options.vad, options.beamSize, options.language], [true, 1, "en"], "the vad run's options in the package");

  // Without the network: info says so, and `vad: true` is refused before any work.
  const plain = await load(page, "cpu", undefined);
  assertEqual(plain.info.vad, false, "info.vad of a model loaded without `vad`");
  const refused = await transcribe(page, samples, options);
  assert(/Silero VAD network is not loaded/.test(refused.error ?? ""),
    `vad: true without the network should reject naming the network; got ${JSON.stringify(refused.error ?? refused.text)}`);
  console.log(`vad: without the network: ${refused.error}`);

  const loaded = await load(page, "cpu", VAD_URL);
  assertEqual([loaded.info.backend, loaded.info.vad], ["cpu", true], "backend and info.vad loaded with vad");
  assertEqual([loaded.info.adapter, loaded.info.threads], [await expectedCpuAdapter(page, false), 1],
    "the CPU backend's adapter and threads where the page is not cross-origin isolated");
  const started = Date.now();
  const result = await transcribe(page, samples, options);
  assert(!result.error, `vad: ${result.error}`);
  console.log(`vad: loaded in ${seconds(loaded.ms)}; ${seconds(Date.now() - started)} for ` +
    `${record.audio.duration.toFixed(1)} s of audio (${run.info.duration_after_vad} s of speech): ${result.text}`);
  assertEqual(compareWithRun(result, run, "vad"), [], "differences from faster-whisper's vad_filter run");
  assertEqual(pageProblems, [], "uncaught errors and console errors on the page");
});
