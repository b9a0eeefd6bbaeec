// The multilingual base model in the browser: the npm package (www/pkg, in its worker) loads
// the real CTranslate2 base folder from `susurrus serve` with backend "cpu" and transcribes one
// golden run of each kind — German with the language detected, French translated to English,
// Japanese with the language given — and every segment's token ids, text and times, the
// language and its detected probability must be faster-whisper's (tests/fixtures/golden/base,
// made by tests/golden/make_golden.sh). Then the demo page itself, through its controls: the
// base model loads with its 99 languages in the language list, and German speech transcribed
// with "detect" shows the reference's language and probability. The CPU backend in wasm: on
// Chromium's SwiftShader
// WebGPU adapter a base-model window takes minutes (wgpu on lavapipe checks the GPU kernels
// on these clips natively).
// Run by tests/e2e/run.sh; needs target/debug/susurrus, www/pkg and the base model
// (SUSURRUS_BASE_MODEL, from scripts/models/fetch_model.sh base).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  assert, assertEqual, compareWithRun, openDemoPage, packageOptions, readWav, repoRoot, runTest, seconds, waitForState,
} from "./common.mjs";

const baseModel = process.env.SUSURRUS_BASE_MODEL;
const fixtures = join(repoRoot, "tests/fixtures/golden/base");
/**
 * The runs checked, as the Rust suites name them (`MULTILINGUAL_RUNS` in the test kit), German
 * with beam search, and Japanese with word timestamps (words split at characters).
 */
const RUNS = [["de", "detect"], ["fr", "translate"], ["ja", "language"], ["de", "beam_5"], ["ja", "word_timestamps"]];
const LOAD_TIMEOUT_MS = 5 * 60_000;
const TRANSCRIBE_TIMEOUT_MS = 10 * 60_000;

await runTest("multilingual", async (onCleanup) => {
  assert(baseModel, "SUSURRUS_BASE_MODEL is not set (tests/e2e/run.sh sets it from scripts/models/fetch_model.sh base)");
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
    problems.push(...compareWithRun(result, run, `${clip}/${name}`));
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
