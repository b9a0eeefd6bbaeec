// The multilingual base model in the browser: the npm package (www/pkg, in its worker) loads
// the real CTranslate2 base folder from `susurrus serve` with backend "cpu" and transcribes one
// golden run of each kind — German with the language detected, French translated to English,
// Japanese with the language given — and every segment's token ids, text and times, the
// language and its detected probability must be faster-whisper's (tests/fixtures/golden/base,
// made by tests/golden/make_golden.sh). Then the demo page itself, through its controls: the
// base model loads with its 99 languages in the language list, and German speech transcribed
// with "detect" shows the reference's language and probability. The CPU executor in wasm: on
// Chromium's SwiftShader
// WebGPU adapter a base-model window takes minutes (wgpu on lavapipe checks the GPU kernels
// on these clips natively).
// Run by tests/e2e/run.sh; needs target/debug/susurrus, www/pkg and the base model
// (SUSURRUS_BASE_MODEL, from scripts/fetch-model.sh base).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { assert, assertEqual, openDemoPage, repoRoot, runTest, seconds, waitForState } from "./common.mjs";

const baseModel = process.env.SUSURRUS_BASE_MODEL;
const fixtures = join(repoRoot, "tests/fixtures/golden/base");
/**
 * The runs checked, as the Rust suites name them (`MULTILINGUAL_RUNS` in the test kit), German
 * with beam search, and Japanese with word timestamps (words split at characters).
 */
const RUNS = [["de", "detect"], ["fr", "translate"], ["ja", "language"], ["de", "beam_5"], ["ja", "word_timestamps"]];
const LOAD_TIMEOUT_MS = 5 * 60_000;
const TRANSCRIBE_TIMEOUT_MS = 10 * 60_000;

/** A 16 kHz mono 16-bit PCM WAV fixture as samples in [-1, 1) (`int16 / 32768`, as the reference reads it). */
function readWav(path) {
  const bytes = readFileSync(path);
  assertEqual(bytes.toString("latin1", 0, 4) + bytes.toString("latin1", 8, 12), "RIFFWAVE", `${path} header`);
  let at = 12;
  let format = null;
  while (at + 8 <= bytes.length) {
    const id = bytes.toString("latin1", at, at + 4);
    const len = bytes.readUInt32LE(at + 4);
    if (id === "fmt ") {
      format = [bytes.readUInt16LE(at + 10), bytes.readUInt32LE(at + 12), bytes.readUInt16LE(at + 22)];
    } else if (id === "data") {
      assertEqual(format, [1, 16000, 16], `${path}: fixtures are 16 kHz mono 16-bit`);
      const samples = [];
      for (let i = 0; i < len; i += 2) samples.push(bytes.readInt16LE(at + 8 + i) / 32768);
      return samples;
    }
    at += 8 + len + (len & 1);
  }
  throw new Error(`${path}: no data chunk`);
}

/** The package's options for a reference run's `transcribe()` keyword arguments. */
function packageOptions(options) {
  return {
    beamSize: options.beam_size,
    language: options.language ?? null,
    task: options.task ?? "transcribe",
    temperatures: [options.temperature],
    wordTimestamps: options.word_timestamps ?? false,
  };
}

/** Every difference between the package's result and the reference run. */
function compare(result, run, label) {
  const problems = [];
  if (result.language !== run.info.language) problems.push(`${label}: language ${result.language}, reference ${run.info.language}`);
  if (Math.abs(result.languageProbability - run.info.language_probability) > 1e-3) {
    problems.push(`${label}: language probability ${result.languageProbability}, reference ${run.info.language_probability}`);
  }
  if (result.segments.length !== run.segments.length) {
    problems.push(`${label}: ${result.segments.length} segments, reference ${run.segments.length}`);
  }
  run.segments.forEach((want, i) => {
    const got = result.segments[i];
    if (!got) return;
    if (JSON.stringify(got.tokens) !== JSON.stringify(want.tokens)) {
      problems.push(`${label} segment ${i}: tokens ${JSON.stringify(got.tokens)}\n  reference ${JSON.stringify(want.tokens)}`);
    }
    if (got.text !== want.text) problems.push(`${label} segment ${i}: text ${JSON.stringify(got.text)}, reference ${JSON.stringify(want.text)}`);
    for (const key of ["start", "end"]) {
      if (Math.abs(got[key] - want[key]) > 0.02) problems.push(`${label} segment ${i}: ${key} ${got[key]}, reference ${want[key]}`);
    }
    if ((got.words === undefined) !== (want.words === undefined) || (want.words && got.words.length !== want.words.length)) {
      problems.push(`${label} segment ${i}: words ${JSON.stringify(got.words)}\n  reference ${JSON.stringify(want.words)}`);
    } else if (want.words) {
      want.words.forEach((w, k) => {
        const g = got.words[k];
        if (g.word !== w.word || Math.abs(g.start - w.start) > 0.02 + 1e-9 || Math.abs(g.end - w.end) > 0.02 + 1e-9) {
          problems.push(`${label} segment ${i} word ${k}: ${JSON.stringify(g)}\n  reference ${JSON.stringify(w)}`);
        }
      });
    }
  });
  if (result.text !== run.text) problems.push(`${label}: text ${JSON.stringify(result.text)}, reference ${JSON.stringify(run.text)}`);
  return problems;
}

await runTest("multilingual", async (onCleanup) => {
  assert(baseModel, "SUSURRUS_BASE_MODEL is not set (tests/e2e/run.sh sets it from scripts/fetch-model.sh base)");
  const { page, problems: pageProblems } = await openDemoPage("multilingual", baseModel, onCleanup, TRANSCRIBE_TIMEOUT_MS);

  const loaded = await page.evaluate(async (timeoutMs) => {
    const { Transcriber } = await import("./pkg/index.js");
    const started = performance.now();
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("the model did not load in time")), timeoutMs));
    window.transcriber = await Promise.race([Transcriber.load("/model/", { backend: "cpu" }), timeout]);
    return { ms: performance.now() - started, info: window.transcriber.info };
  }, LOAD_TIMEOUT_MS);
  assertEqual(loaded.info.backend, "cpu", "backend of the loaded model");
  console.log(`multilingual: the base model loaded in ${seconds(loaded.ms)} (${(loaded.info.bytes / 1e6).toFixed(1)} MB)`);

  const problems = [];
  for (const [clip, name] of RUNS) {
    const record = JSON.parse(readFileSync(join(fixtures, `${clip}.json`), "utf8"));
    const run = record.runs.find((r) => r.name === name);
    assert(run, `${clip}.json has no run named ${name}`);
    const samples = readWav(join(fixtures, record.audio.file));
    const result = await page.evaluate(async ({ samples, options }) => {
      const r = await window.transcriber.transcribe(new Float32Array(samples), options);
      return {
        text: r.text, language: r.language, languageProbability: r.languageProbability, ms: r.timings.transcribeMs,
        segments: r.segments.map(({ start, end, text, tokens, words }) => ({ start, end, text, tokens, words })),
      };
    }, { samples, options: packageOptions(run.options) });
    console.log(`multilingual: ${clip}/${name}: ${seconds(result.ms)} for ${record.audio.duration.toFixed(1)} s of audio, ` +
      `${result.language} (${result.languageProbability.toFixed(4)}): ${result.text}`);
    problems.push(...compare(result, run, `${clip}/${name}`));
  }
  assertEqual(problems, [], "differences from the reference");

  // The demo page's own controls.
  await page.evaluate(() => window.transcriber.dispose());
  await page.selectOption("#backend", "cpu");
  await page.click("#load");
  assertEqual(await waitForState(page, "#load-status", ["loaded", "error"], "loading through the page", TRANSCRIBE_TIMEOUT_MS), "loaded",
    "#load-status");
  const choices = await page.evaluate(() => ({
    languages: [...document.querySelectorAll("#language option")].map((o) => o.value),
    disabled: document.getElementById("language").disabled || document.getElementById("task").disabled,
  }));
  assertEqual(choices.languages.length, 100, "language choices (detect and the model's 99)");
  assertEqual(choices.languages.slice(0, 4), ["", "en", "zh", "de"], "the first language choices");
  assertEqual(choices.disabled, false, "the language and task choices are enabled for a multilingual model");
  const german = JSON.parse(readFileSync(join(fixtures, "de.json"), "utf8"));
  const detect = german.runs.find((r) => r.name === "detect");
  await page.setInputFiles("#audio-file", join(fixtures, german.audio.file));
  await page.waitForFunction(() => !document.getElementById("transcribe").disabled);
  await page.click("#transcribe");
  assertEqual(await waitForState(page, "#transcribe-status", ["done", "error"], "transcribing through the page", TRANSCRIBE_TIMEOUT_MS),
    "done", "#transcribe-status");
  const shown = await page.evaluate(() => ({ ...document.getElementById("result-language").dataset,
    text: document.getElementById("result-language").textContent }));
  console.log(`multilingual: the page shows language ${shown.text}`);
  assertEqual(shown.language, detect.info.language, "the page's detected language");
  assert(Math.abs(Number(shown.probability) - detect.info.language_probability) <= 1e-3,
    `the page's language probability ${shown.probability}, reference ${detect.info.language_probability}`);
  assertEqual(pageProblems, [], "uncaught errors and console errors on the page");
});
