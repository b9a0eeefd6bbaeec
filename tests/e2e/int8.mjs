// An int8 model in the demo page: tiny.en quantized by CTranslate2 (scripts/models/fetch_model.sh
// tiny.en-int8, a CTranslate2 folder as faster-whisper users have it) served by `susurrus
// serve`, loaded and run through the page's own controls on the CPU backend (wasm). Its
// transcript of the golden clip short_2 stays within 10% word error of the f16 reference's
// (faster-whisper on tiny.en, tests/fixtures/golden/short_2.json); the native suites check
// int8 token for token against the reference executor on every backend.
// Run by tests/e2e/run.sh; needs target/debug/susurrus, www/pkg and SUSURRUS_INT8_MODEL.

import { statSync } from "node:fs";
import { join } from "node:path";
import { assert, assertEqual, clipWav, openDemoPage, reference, runTest, waitForState } from "./common.mjs";

const int8Model = process.env.SUSURRUS_INT8_MODEL;
const TIMEOUT_MS = 5 * 60_000;

/** Word error rate of `hypothesis` against `reference` (lower-cased, punctuation dropped). */
function wordErrorRate(reference, hypothesis) {
  const words = (s) => s.toLowerCase().split(/\s+/).map((w) => w.replace(/[^\p{L}\p{N}']/gu, "")).filter(Boolean);
  const [r, h] = [words(reference), words(hypothesis)];
  let row = [...Array(h.length + 1).keys()];
  r.forEach((rw, i) => {
    const next = [i + 1];
    h.forEach((hw, j) => next.push(Math.min(row[j] + (rw === hw ? 0 : 1), row[j + 1] + 1, next[j] + 1)));
    row = next;
  });
  return r.length ? row[h.length] / r.length : h.length ? 1 : 0;
}

await runTest("int8", async (onCleanup) => {
  assert(int8Model, "SUSURRUS_INT8_MODEL is not set (tests/e2e/run.sh sets it from scripts/models/fetch_model.sh tiny.en-int8)");
  const { page, problems: pageProblems } = await openDemoPage("int8", int8Model, onCleanup, TIMEOUT_MS);

  await page.selectOption("#backend", "cpu");
  await page.click("#load");
  assertEqual(await waitForState(page, "#load-status", ["loaded", "error"], "loading the int8 model", TIMEOUT_MS), "loaded", "#load-status");
  const bytes = await page.textContent("#model-bytes");
  const onDisk = statSync(join(int8Model, "model.bin")).size;
  console.log(`int8: loaded, the page says ${bytes} (model.bin is ${(onDisk / 1e6).toFixed(1)} MB)`);

  await page.setInputFiles("#audio-file", clipWav);
  await page.waitForFunction(() => !document.getElementById("transcribe").disabled);
  await page.click("#transcribe");
  assertEqual(await waitForState(page, "#transcribe-status", ["done", "error"], "transcribing", TIMEOUT_MS), "done", "#transcribe-status");
  const text = (await page.textContent("#text")).trim();
  const ref = reference();
  const wer = wordErrorRate(ref.text, text);
  console.log(`int8: ${JSON.stringify(text)}: word error rate ${wer.toFixed(3)} against the f16 reference`);
  assert(wer <= 0.1, `int8 transcript ${JSON.stringify(text)} is ${wer} words off the f16 reference ${JSON.stringify(ref.text)}`);
  assertEqual(pageProblems, [], "uncaught errors and console errors on the page");
});
