// A large-v3-shaped model in the demo page: random f16 weights at large-v3's real widths (1280,
// 20 heads, 128 mels, 51866 tokens with large-v3's tokenizer; one layer each side, written by
// `cargo run -p susurrus-testkit --example random_model`), served by `susurrus serve`, loaded
// through the page's controls on WebGPU (Chromium's SwiftShader adapter here). Its 133 MB
// token embedding is more than WebGPU's default 128 MiB storage binding: the package splits
// it into blocks of rows, and the page reports the model loaded on WebGPU, with its size.
// Run by tests/e2e/run.sh; needs target/debug/susurrus, www/pkg and SUSURRUS_LARGE_MODEL.

import { statSync } from "node:fs";
import { join } from "node:path";
import { assert, assertEqual, openDemoPage, runTest, seconds, waitForState } from "./common.mjs";

const largeModel = process.env.SUSURRUS_LARGE_MODEL;
const TIMEOUT_MS = 5 * 60_000;

await runTest("large", async (onCleanup) => {
  assert(largeModel, "SUSURRUS_LARGE_MODEL is not set (tests/e2e/run.sh writes the model and sets it)");
  const { page, problems: pageProblems } = await openDemoPage("large", largeModel, onCleanup, TIMEOUT_MS);

  await page.selectOption("#backend", "webgpu");
  const started = Date.now();
  await page.click("#load");
  assertEqual(await waitForState(page, "#load-status", ["loaded", "error"], "loading the large-v3-shaped model", TIMEOUT_MS),
    "loaded", "#load-status");
  const shown = await page.evaluate(() => ({
    backend: document.getElementById("model-backend").textContent,
    bytes: document.getElementById("model-bytes").textContent,
    fallback: document.getElementById("model-fallback").textContent,
  }));
  const weights = statSync(join(largeModel, "model.safetensors")).size;
  console.log(`large: loaded in ${seconds(Date.now() - started)} on ${shown.backend}, the page says ${shown.bytes} ` +
    `(model.safetensors ${(weights / 1e6).toFixed(1)} MB)`);
  assertEqual(shown.backend, "webgpu", "the backend the page reports");
  assertEqual(shown.fallback, "", "no fallback to the CPU");
  assertEqual(pageProblems, [], "uncaught errors and console errors on the page");
});
