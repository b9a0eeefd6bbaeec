// The benchmark page (www/bench.html, what scripts/gpu/bench_browser_gpu.sh opens on the GPU
// machine) in headless Chromium with the real tiny.en model on the CPU backend (this machine
// has no GPU): it loads the model through the package's worker, transcribes the bundled sample
// with the native CLI's text, and reports the package's bench() figures consistently; then it
// streams the sample live with the VAD (`stream=1`), whose committed text must be within 15%
// word error of the offline one, with the latencies of its words. Then the page as a person
// uses it: the form filled by hand with two model folders (the second missing), Run, a table
// row per pair (the missing one's error in its row), and the JSON the Download button saves.
// Run by tests/e2e/run.sh.

import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import {
  assert, assertEqual, launchBrowser, modelDir, repoRoot, runTest, seconds, startServer, susurrusBin, vadModel, watchPage,
} from "./common.mjs";

const sample = join(repoRoot, "samples/sample.wav");
const TIMEOUT_MS = 10 * 60_000;

await runTest("bench-page", async (onCleanup) => {
  // The page fetches its clip beside itself, as the GPU script serves it.
  const root = join(repoRoot, "target/e2e/bench-root");
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  cpSync(join(repoRoot, "www"), root, { recursive: true });
  cpSync(sample, join(root, "sample.wav"));
  const server = await startServer(["--root", root, "--model", modelDir, "--vad-model", vadModel]);
  onCleanup(() => server.stop());
  const browser = await launchBrowser();
  onCleanup(() => browser.close());
  const page = await browser.newPage();
  const problems = watchPage(page, (line) => console.log(`bench-page:${line}`));
  const started = Date.now();
  await page.goto(`${server.url}bench.html?backend=cpu&runs=1&tokens=4&stream=1&vad=/vad/silero_vad_v6.onnx`);
  await page.waitForFunction(() => window.benchResult !== undefined, null, { timeout: TIMEOUT_MS });
  const r = await page.evaluate(() => window.benchResult);
  console.log(`bench-page: ${seconds(Date.now() - started)}: ${JSON.stringify(r)}`);
  assert(r.error === undefined, `the page failed: ${r.error}`);
  assertEqual(problems, [], "uncaught errors and console errors on the page");

  const native = JSON.parse(execFileSync(susurrusBin, [
    "transcribe", "--backend", "cpu", "--model", modelDir, "--temperature", "0", "--beam-size", "1", "--format", "json", sample,
  ], { encoding: "utf8" }));
  assertEqual(r.text, native.text, "the page's first transcription vs the native CLI's");
  assertEqual([r.backend, r.info.backend], ["cpu", "cpu"], "backend of the bench and of the loaded model");
  for (const key of ["loadMs", "firstTranscribeMs", "encoderMs", "msPerToken", "msPerTokenSingle", "deviceMsPerStep",
    "beamMsPerStep", "transcribeMs", "transcribeBeamMs"]) {
    assert(typeof r[key] === "number" && r[key] > 0, `${key} is ${r[key]}`);
  }
  assertEqual([r.encoderKernels, r.stepKernels], [null, null], "kernel counts (the CPU backend records none)");
  // WebAudio's resampler and the CLI's may end a sample apart.
  assert(Math.abs(r.audioDurationS - native.timings.audio_duration_s) < 1e-3,
    `audio duration ${r.audioDurationS} s in the page, ${native.timings.audio_duration_s} s natively`);
  assert(Math.abs(r.rtf - r.transcribeMs / 1e3 / r.audioDurationS) < 1e-9, `rtf ${r.rtf} vs transcribeMs ${r.transcribeMs}`);
  assert(Math.abs(r.beamRtf - r.transcribeBeamMs / 1e3 / r.audioDurationS) < 1e-9,
    `beamRtf ${r.beamRtf} vs transcribeBeamMs ${r.transcribeBeamMs}`);
  assertEqual(r.beams, 5, "beams of the timed beam step (the default beam size)");
  assertEqual(typeof r.gpu, "object", "the WebGPU adapter report");

  const live = r.stream;
  assertEqual([live.vad, Math.abs(live.audioS - r.audioDurationS) < 0.01], [true, true], "the live stream's VAD and length");
  assert(live.wer <= 0.15, `the live stream's committed text is ${(live.wer * 100).toFixed(1)}% off the offline one: ${live.text}`);
  assertEqual(live.words, live.text.split(/\s+/).filter((w) => /[\p{L}\p{N}]/u.test(w)).length, "latencies of every committed word");
  assert(live.firstSeenP50 <= live.committedP50 && live.committedP50 <= live.committedP90 && live.rtf > 0,
    `live stream figures: ${JSON.stringify(live)}`);

  await byHand(page, r.text);
});

/** The form as a person fills it: tiny.en and a folder that does not exist, the CPU backend,
 * one run of 4 tokens; the table's rows against the results, and the downloaded JSON. */
async function byHand(page, text) {
  const started = Date.now();
  await page.goto(page.url().split("?")[0]);
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("ready"), null,
    { timeout: TIMEOUT_MS });
  await page.fill("#models", "/model/\n  \n/missing-model/");
  await page.uncheck("#backend-webgpu");
  await page.fill("#runs", "1");
  await page.fill("#tokens", "4");
  await page.click("#run");
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("done"), null,
    { timeout: TIMEOUT_MS });
  const [status, rows, r] = await page.evaluate(() => [
    document.getElementById("status").textContent,
    [...document.querySelectorAll("#results tbody tr")].map((tr) => [...tr.cells].map((td) => td.textContent)),
    window.benchResult,
  ]);
  console.log(`bench-page: by hand, ${seconds(Date.now() - started)}: ${JSON.stringify(rows)}`);
  assertEqual(status, "done; 1 of 2 failed", "the page's status after the run");
  assertEqual(r.results.map((x) => [x.model, x.choice]), [["/model/", "cpu"], ["/missing-model/", "cpu"]], "pairs run");
  const [ok, missing] = r.results;
  assertEqual([ok.text, ok.backend, ok.error], [text, "cpu", undefined], "the first pair's transcript and backend");
  const shown = (v) => String(Number(v.toPrecision(3)));
  assertEqual(rows[0], ["/model/", "cpu", shown(ok.loadMs), shown(ok.encoderMs), shown(ok.msPerToken),
    shown(ok.beamMsPerStep), shown(1 / ok.rtf), shown(1 / ok.beamRtf)], "the first row against its result");
  assert(missing.error.includes("/missing-model/"), `the missing folder's error names it: ${missing.error}`);
  assertEqual(rows[1], ["/missing-model/", "cpu", `error: ${missing.error}`], "the missing folder's row");

  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download")]);
  const saved = JSON.parse(readFileSync(await download.path(), "utf8"));
  assert(download.suggestedFilename().startsWith("susurrus-bench-"), `file name ${download.suggestedFilename()}`);
  assertEqual(saved.results, r.results, "the downloaded results against the page's");
  assertEqual([saved.runs, saved.tokens, saved.backends, saved.models], [1, 4, ["cpu"], ["/model/", "/missing-model/"]],
    "the downloaded settings");
  assertEqual(typeof saved.gpu, "object", "the adapter report in the download");
}
