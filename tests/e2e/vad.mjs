// Skipping silence in the browser: the npm package (www/pkg, in its worker) loads the real
// whisper-tiny.en with the Silero VAD network (`load`'s `vad` URL, served by `susurrus serve
// --vad-model` at /vad/silero_vad_v6.onnx) and transcribes the golden clip vad.wav (68 s: three
// passages between long noisy pauses) with `vad: true`, greedy: every segment's token ids, text
// and times must be faster-whisper's with vad_filter=True (run "vad" of
// tests/fixtures/golden/vad.json). On the CPU executor the whole run; on WebGPU (Chromium's
// SwiftShader adapter, where a tiny.en window takes minutes) the network over the whole clip
// and the first 30 s window of the speech it keeps, then an abort: its six segments cross both
// cuts between passages, so they check the network's stretches and the times mapped back.
// First, a model loaded without the network says so in `info.vad`, and `vad: true` on it
// rejects with an error naming the network.
// Run by tests/e2e/run.sh; needs target/debug/susurrus, www/pkg, the model (SUSURRUS_MODEL) and
// the network (SUSURRUS_VAD_MODEL, from scripts/fetch-model.sh silero-vad).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  assert, assertEqual, compareSegments, compareWithRun, modelDir, openDemoPage, packageOptions, readWav, repoRoot, runTest,
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
 * `{ error }` with the rejection's message. With `firstWindow`, aborts once the first window is
 * done and resolves to `{ segments }`, those that came through onSegment.
 */
async function transcribe(page, samples, options, firstWindow = false) {
  return page.evaluate(async ({ samples, options, firstWindow }) => {
    const bytes = Uint8Array.from(atob(samples), (c) => c.charCodeAt(0));
    const streamed = [];
    const controller = new AbortController();
    const stop = firstWindow
      ? { signal: controller.signal, onSegment: (s) => streamed.push(s), onProgress: ({ done }) => done > 0 && controller.abort() }
      : {};
    const parts = ({ start, end, text, tokens }) => ({ start, end, text, tokens });
    try {
      const r = await window.transcriber.transcribe(new Float32Array(bytes.buffer), { ...options, ...stop });
      return { text: r.text, language: r.language, languageProbability: r.languageProbability, segments: r.segments.map(parts) };
    } catch (err) {
      return err.name === "AbortError" && firstWindow ? { segments: streamed.map(parts) } : { error: err.message };
    }
  }, { samples, options, firstWindow });
}

await runTest("vad", async (onCleanup) => {
  const { page, problems: pageProblems } = await openDemoPage("vad", modelDir, onCleanup, TRANSCRIBE_TIMEOUT_MS);
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

  const problems = [];
  for (const backend of ["cpu", "webgpu"]) {
    const loaded = await load(page, backend, VAD_URL);
    assertEqual([loaded.info.backend, loaded.info.vad], [backend, true], `backend and info.vad loaded with vad on ${backend}`);
    const started = Date.now();
    const firstWindow = backend === "webgpu";
    const result = await transcribe(page, samples, options, firstWindow);
    assert(!result.error, `vad on ${backend}: ${result.error}`);
    const took = `loaded in ${seconds(loaded.ms)}; ${seconds(Date.now() - started)} for`;
    if (firstWindow) {
      console.log(`vad: ${backend}: ${took} the network and the first window: ${result.segments.map((s) => s.text).join("")}`);
      assert(result.segments.length >= 6, `vad on ${backend}: ${result.segments.length} segments in the first window, expected 6`);
      problems.push(...compareSegments(result.segments, run.segments, `vad/${backend}`));
    } else {
      console.log(`vad: ${backend}: ${took} ${record.audio.duration.toFixed(1)} s of audio ` +
        `(${run.info.duration_after_vad} s of speech): ${result.text}`);
      problems.push(...compareWithRun(result, run, `vad/${backend}`));
    }
  }
  assertEqual(problems, [], "differences from faster-whisper's vad_filter run");
  assertEqual(pageProblems, [], "uncaught errors and console errors on the page");
});
