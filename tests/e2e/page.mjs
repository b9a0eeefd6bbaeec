// End-to-end test of the demo page (www/) in headless Chromium: loads the real whisper-tiny.en
// through the page with an empty model cache (on WebGPU where the browser has a hardware adapter;
// where its only adapter is a software one, as Chromium's SwiftShader in CI, on the CPU backend
// that "auto" picks there: a SwiftShader transcription of the clip takes 200 s, and the browser
// suite runs random models of every kind on it),
// transcribes the golden clip short_2.wav through the UI and compares the text and segment
// times on screen with faster-whisper's reference; checks that the page clock kept ticking
// meanwhile (the work runs in the package's worker), the downloads, and microphone recording
// (Chromium's fake device). Then a second load after a reload, with backend "auto", must come
// from the browser's cache without asking the server for the model again, and pick the backend
// the package promises (the CPU when the only adapter is a software fallback, as SwiftShader
// is); there a transcription is aborted and the next one still gives the reference text: abort
// leaves the model usable, and the cached model is intact; with word timestamps the words have
// the reference's times. Last, "Skip silence (VAD)" (the page loads the Silero VAD network with
// the model, from the server's /vad/ like the model from /model/) on the golden clip vad.wav:
// the segments on screen are faster-whisper's with vad_filter=True and beam search.
// Run by tests/e2e/run.sh; needs target/debug/susurrus, www/pkg and the model.

import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  assert, assertEqual, clipWav, expectedCpuAdapter, launchBrowser, modelDir, reference, repoRoot, runTest, seconds,
  startServer, vadModel,
  watchPage, wordsReference,
} from "./common.mjs";

/** How long the real model may take on SwiftShader (a CPU pretending to be a GPU). */
const LOAD_TIMEOUT_MS = 10 * 60_000;
const TRANSCRIBE_TIMEOUT_MS = 30 * 60_000;
/** The clock ticks every 100 ms; a gap this long would be a visible freeze. */
const MAX_GAP_MS = 2000;

const screenshot = join(repoRoot, "target/e2e/page.png");
/** The golden clip with long pauses, for "Skip silence (VAD)". */
const vadClipWav = join(repoRoot, "tests/fixtures/golden/vad.wav");

/** `mm:ss.mmm` as the page writes segment times. */
function formatTime(seconds) {
  const ms = Math.round(seconds * 1000);
  const pad = (n, width) => String(n).padStart(width, "0");
  return `${pad(Math.floor(ms / 60000), 2)}:${pad(Math.floor(ms / 1000) % 60, 2)}.${pad(ms % 1000, 3)}`;
}

/** The page's error box, or null when it is hidden. */
async function pageError(page) {
  return page.evaluate(() => {
    const box = document.getElementById("error");
    return box.hidden ? null : box.textContent;
  });
}

/**
 * Polls `selector`'s data-state until it is one of `states`, failing at once when the page
 * shows an error. Prints the element's text every 30 s so a long run shows its progress.
 */
async function waitForState(page, selector, states, timeoutMs, what) {
  const started = Date.now();
  let lastReport = started;
  for (;;) {
    const { state, text, error } = await page.evaluate((sel) => {
      const node = document.querySelector(sel);
      const box = document.getElementById("error");
      return { state: node.dataset.state, text: node.textContent, error: box.hidden ? null : box.textContent };
    }, selector);
    if (error !== null) throw new Error(`${what}: the page shows an error: ${error}`);
    if (states.includes(state)) return { state, text, ms: Date.now() - started };
    if (Date.now() - started > timeoutMs) {
      throw new Error(`${what}: still "${state}" (${text}) after ${seconds(timeoutMs)}`);
    }
    if (Date.now() - lastReport >= 30_000) {
      lastReport = Date.now();
      console.log(`page:   ... ${seconds(Date.now() - started)}: ${text}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function openPage(page, url) {
  await page.goto(url);
  await page.waitForFunction(
    () => document.body.dataset.ready === "true" || !document.getElementById("error").hidden,
    null,
    { timeout: 60_000 },
  );
  const error = await pageError(page);
  assert(error === null, `the page did not start: ${error}`);
}

/** GETs of a model file or the VAD network in the server's request log. */
function modelRequests(server) {
  return server.requests().filter((r) => r.method === "GET" && (r.path.startsWith("/model/") || r.path.startsWith("/vad/")));
}

/** The server logs a request after answering it: give the log line a moment to arrive. */
async function settledRequests(server) {
  await new Promise((r) => setTimeout(r, 500));
  return modelRequests(server);
}

async function loadModel(page, backend, what) {
  await page.selectOption("#backend", backend);
  await page.fill("#model-url", "model/");
  await page.click("#load");
  const { text, ms } = await waitForState(page, "#load-status", ["loaded", "error"], LOAD_TIMEOUT_MS, what);
  const info = await page.evaluate(() => ({
    fromCache: document.getElementById("load-status").dataset.fromCache,
    backend: document.getElementById("model-backend").textContent,
    adapter: document.getElementById("model-adapter").textContent,
    loadTime: document.getElementById("model-load-time").textContent,
    bytes: document.getElementById("model-bytes").textContent,
    fallback: document.getElementById("model-fallback").textContent,
    files: [...document.querySelectorAll("#load-files li")].map((li) => li.textContent),
  }));
  console.log(`page: ${what}: ${seconds(ms)}: ${text}`);
  for (const file of info.files) console.log(`page:   ${file}`);
  return { ...info, text, ms };
}

async function download(page, format) {
  const [file] = await Promise.all([page.waitForEvent("download", { timeout: 30_000 }), page.click(`#download-${format}`)]);
  const failure = await file.failure();
  assert(failure === null, `the ${format} download failed: ${failure}`);
  return { name: file.suggestedFilename(), text: readFileSync(await file.path(), "utf8") };
}

/** The VAD clip's run with faster-whisper's vad_filter and beam search (the page's defaults). */
function vadReference() {
  const golden = JSON.parse(readFileSync(join(repoRoot, "tests/fixtures/golden/vad.json"), "utf8"));
  const run = golden.runs.find((r) => r.name === "vad_beam_5");
  assert(run, "tests/fixtures/golden/vad.json has no run named \"vad_beam_5\"");
  return run;
}

await runTest("page", async (onCleanup) => {
  const ref = reference();
  const server = await startServer(["--root", "www", "--model", modelDir, "--vad-model", vadModel]);
  onCleanup(() => server.stop());
  console.log(`page: serving www/ and ${modelDir} at ${server.url}`);

  const browser = await launchBrowser(["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]);
  onCleanup(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1000, height: 1000 } });
  await context.grantPermissions(["microphone"], { origin: new URL(server.url).origin });
  const page = await context.newPage();
  const problems = watchPage(page, (line) => console.log(`page:${line}`));
  await openPage(page, server.url);
  console.log(`page: package ${await page.textContent("#version")}`);
  assertEqual(await page.isDisabled("#vad"), true, "#vad before a model is loaded");

  // The package's rule for "auto": WebGPU on a hardware adapter, else the CPU.
  const softwareAdapter = await page.evaluate(async () => {
    const adapter = await navigator.gpu?.requestAdapter();
    return adapter ? adapter.info.isFallbackAdapter : true;
  });
  const expectedBackend = softwareAdapter ? "cpu" : "webgpu";

  // First load, from the network: the cache is emptied first.
  await page.click("#clear-cache");
  await waitForState(page, "#load-status", ["cache-cleared"], 30_000, "clearing the model cache");
  const first = await loadModel(page, expectedBackend, `first load (cache cleared), backend ${expectedBackend}`);
  assertEqual(first.backend, expectedBackend, `backend the page reports after loading with backend ${expectedBackend}`);
  // `susurrus serve` makes the page cross-origin isolated: the CPU runs the threaded build.
  assertEqual(await page.evaluate(() => self.crossOriginIsolated), true, "the served page's crossOriginIsolated");
  if (expectedBackend === "cpu") {
    assertEqual(first.adapter, await expectedCpuAdapter(page, true), "the CPU backend on a cross-origin isolated page");
  }
  assertEqual(first.fromCache, "false", "data-from-cache of #load-status after the cache was cleared");
  assert(!first.text.includes("from cache"), `#load-status claims a cache hit right after clearing the cache: ${first.text}`);
  const firstRequests = await settledRequests(server);
  assertEqual(firstRequests.filter((r) => r.path === "/model/model.bin").map((r) => r.status), [200],
    "statuses of the GET /model/model.bin requests of the first load");
  assertEqual(firstRequests.filter((r) => r.path.startsWith("/vad/")).map((r) => `${r.path} ${r.status}`),
    ["/vad/silero_vad_v6.onnx 200"], "GETs of the VAD network in the first load");
  assertEqual(await page.getAttribute("#model-vad", "data-loaded"), "true", "#model-vad data-loaded");

  // The golden clip through the UI.
  await page.setInputFiles("#audio-file", clipWav);
  await page.waitForFunction(() =>
    (document.getElementById("audio-name").textContent === "short_2.wav" &&
      document.getElementById("audio-duration").dataset.seconds) ||
    !document.getElementById("error").hidden);
  assertEqual(await pageError(page), null, "error box after choosing the audio file");
  const duration = Number(await page.getAttribute("#audio-duration", "data-seconds"));
  assert(Math.abs(duration - 5.04125) < 0.01, `duration the page shows for short_2.wav: expected 5.041 s, got ${duration}`);
  assertEqual(await page.textContent("#audio-name"), "short_2.wav", "audio name the page shows");

  const ticksBefore = Number(await page.getAttribute("#clock", "data-ticks"));
  await page.click("#transcribe");
  const run = await waitForState(page, "#transcribe-status", ["done", "cancelled", "error"], TRANSCRIBE_TIMEOUT_MS, "transcription");
  assertEqual(run.state, "done", `state of #transcribe-status after the transcription (${run.text})`);
  assertEqual(await page.textContent("#audio-warnings"), "none", "#audio-warnings of an undamaged WAV file");
  const ticksAfter = Number(await page.getAttribute("#clock", "data-ticks"));
  const shown = await page.evaluate(() => ({
    text: document.getElementById("text").textContent,
    segments: [...document.querySelectorAll("#segments li")].map((li) => ({
      start: Number(li.dataset.start), end: Number(li.dataset.end), line: li.textContent,
    })),
    streamed: Number(document.getElementById("segments").dataset.streamed),
    backend: document.getElementById("result-backend").dataset.backend,
    backendText: document.getElementById("result-backend").textContent,
    timings: document.getElementById("timings").textContent,
    elapsedMs: Number(document.getElementById("transcribe-status").dataset.elapsedMs),
    maxGapMs: Number(document.getElementById("clock").dataset.maxGapMs),
  }));
  console.log(`page: transcription took ${seconds(shown.elapsedMs)} in the page (${seconds(run.ms)} seen by the test)`);
  console.log(`page:   backend ${shown.backendText}; ${shown.timings}`);
  console.log(`page:   text: ${shown.text}`);
  for (const s of shown.segments) console.log(`page:   segment: ${s.line}`);
  console.log(`page:   clock: ${ticksAfter - ticksBefore} ticks, largest gap between ticks ${shown.maxGapMs} ms`);

  assertEqual(shown.text.trim(), ref.text, "transcript text on the page vs tests/fixtures/golden/short_2.json (run \"default\")");
  assertEqual(
    shown.segments.map((s) => [Math.round(s.start * 1000), Math.round(s.end * 1000)]),
    ref.segments.map((s) => [Math.round(s.start * 1000), Math.round(s.end * 1000)]),
    "segment [start, end] times in ms on the page vs the reference",
  );
  assertEqual(
    shown.segments.map((s) => s.line),
    ref.segments.map((s) => `[${formatTime(s.start)} --> ${formatTime(s.end)}] ${s.text}`),
    "segment lines on the page",
  );
  assertEqual(shown.streamed, ref.segments.length, "segments that arrived through onSegment while transcribing");
  assertEqual(shown.backend, expectedBackend, "backend the transcription result reports");
  assert(/RTF \d/.test(shown.timings), `#timings shows no real-time factor: ${shown.timings}`);
  assert(ticksAfter > ticksBefore, `the clock did not tick during the transcription: ${ticksBefore} ticks before, ${ticksAfter} after`);
  assert(shown.maxGapMs < MAX_GAP_MS,
    `the page froze: the largest gap between clock ticks during the transcription was ${shown.maxGapMs} ms (limit ${MAX_GAP_MS} ms)`);

  mkdirSync(join(repoRoot, "target/e2e"), { recursive: true });
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`page: screenshot ${screenshot}`);

  // Downloads.
  const srt = await download(page, "srt");
  assertEqual(srt.name, "short_2.srt", "file name of the SRT download");
  assert(srt.text.startsWith("1\n00:00:0"), `the SRT download does not start with "1\\n00:00:0": ${JSON.stringify(srt.text)}`);
  assert(srt.text.includes(ref.text), `the SRT download lacks the reference text ${JSON.stringify(ref.text)}: ${JSON.stringify(srt.text)}`);
  const vtt = await download(page, "vtt");
  assertEqual(vtt.name, "short_2.vtt", "file name of the VTT download");
  assert(vtt.text.startsWith("WEBVTT") && vtt.text.includes(ref.text), `unexpected VTT download: ${JSON.stringify(vtt.text)}`);
  const json = await download(page, "json");
  assertEqual(JSON.parse(json.text).text.trim(), ref.text, "text of the JSON download");
  const txt = await download(page, "txt");
  assert(txt.text.includes(ref.text), `the TXT download lacks the reference text: ${JSON.stringify(txt.text)}`);
  console.log("page: downloads SRT, VTT, JSON, TXT hold the reference text");

  // Microphone: Chromium's fake device plays a tone; the recording becomes the chosen audio.
  await page.click("#record");
  await page.waitForTimeout(1500);
  await page.click("#stop-record");
  // The recorder's stop event comes after the click: wait for the recording to replace the
  // clip chosen before (whose duration is still shown until then).
  await page.waitForFunction(() =>
    (document.getElementById("audio-name").textContent.startsWith("recording-") &&
      document.getElementById("audio-duration").dataset.seconds) ||
    !document.getElementById("error").hidden);
  assertEqual(await pageError(page), null, "error box after recording from the (fake) microphone");
  const recorded = await page.evaluate(() => ({
    name: document.getElementById("audio-name").textContent,
    seconds: Number(document.getElementById("audio-duration").dataset.seconds),
  }));
  assert(/^recording-.*\.(webm|ogg|m4a)$/.test(recorded.name) && recorded.seconds > 0.5 && recorded.seconds < 10,
    `a 1.5 s recording should show as recording-*.webm of about 1.5 s; got ${JSON.stringify(recorded)}`);
  console.log(`page: microphone recording: ${recorded.name}, ${recorded.seconds.toFixed(2)} s`);
  // The package's worker reads the recording (WebM or MP4, as the browser records) as it
  // decodes it, and transcribes it like any file.
  await page.click("#transcribe");
  const fromRecording = await waitForState(page, "#transcribe-status", ["done", "cancelled", "error"], TRANSCRIBE_TIMEOUT_MS,
    "transcription of the recording");
  assertEqual(fromRecording.state, "done", `state of #transcribe-status after transcribing the recording (${fromRecording.text})`);
  const recordedTimings = await page.textContent("#timings");
  const heard = Number(/audio ([0-9.]+) s/.exec(recordedTimings)?.[1]);
  assert(Math.abs(heard - recorded.seconds) < 0.1, `the recording's transcription heard ${heard} s of its ${recorded.seconds} s (${recordedTimings})`);
  console.log(`page: the recording transcribed: ${recordedTimings}`);

  // Second load after a reload: from the Cache API, no model request reaches the server.
  const requestsBefore = modelRequests(server).length;
  await openPage(page, server.url);
  const second = await loadModel(page, "auto", "second load (after reload), backend auto");
  assertEqual(second.fromCache, "true", "data-from-cache of #load-status on the second load");
  assert(second.text.includes("from cache"), `#load-status does not say "from cache" on the second load: ${second.text}`);
  assertEqual(second.backend, expectedBackend,
    `backend "auto" chose (the browser's WebGPU adapter is ${softwareAdapter ? "a software fallback or missing" : "a GPU"})`);
  if (second.backend === "cpu") {
    assert(second.fallback !== "", "backend auto chose the CPU but the page shows no reason (#model-fallback)");
    console.log(`page:   auto chose the CPU because ${second.fallback}`);
  }
  const secondRequests = (await settledRequests(server)).slice(requestsBefore);
  assertEqual(secondRequests.map((r) => `${r.method} ${r.path}`), [],
    "model requests the server saw during the second load (the cache should have answered them all)");

  // Abort, then transcribe again with the same (cached) model.
  await page.setInputFiles("#audio-file", clipWav);
  await page.waitForFunction(() =>
    (document.getElementById("audio-name").textContent === "short_2.wav" &&
      document.getElementById("audio-duration").dataset.seconds) ||
    !document.getElementById("error").hidden);
  await page.click("#transcribe");
  // Mid-transcription (about 3 s of it): half a second after Abort is enabled. A fixed wait
  // from the click could outlast a fast transcription, leaving Abort disabled.
  await page.waitForSelector("#abort:not([disabled])", { timeout: 30_000 });
  await page.waitForTimeout(500);
  const abortClicked = Date.now();
  await page.click("#abort");
  const aborted = await waitForState(page, "#transcribe-status", ["done", "cancelled", "error"], TRANSCRIBE_TIMEOUT_MS, "aborted transcription");
  assertEqual(aborted.state, "cancelled", `state of #transcribe-status after Abort (${aborted.text})`);
  assertEqual(await pageError(page), null, "error box after aborting (an abort is no error)");
  console.log(`page: abort took effect after ${seconds(Date.now() - abortClicked)}: ${aborted.text}`);
  // This time with word timestamps.
  await page.check("#word-timestamps");
  await page.click("#transcribe");
  const again = await waitForState(page, "#transcribe-status", ["done", "cancelled", "error"], TRANSCRIBE_TIMEOUT_MS, "transcription after the abort");
  assertEqual(again.state, "done", `state of #transcribe-status after transcribing again (${again.text})`);
  const retry = await page.evaluate(() => ({
    text: document.getElementById("text").textContent,
    backend: document.getElementById("result-backend").dataset.backend,
    timings: document.getElementById("timings").textContent,
    maxGapMs: Number(document.getElementById("clock").dataset.maxGapMs),
  }));
  console.log(`page: transcription after the abort (${retry.backend}): ${seconds(again.ms)}; ${retry.timings}; ` +
    `largest clock gap ${retry.maxGapMs} ms`);
  assertEqual(retry.text.trim(), ref.text, "transcript text on the page after the abort, with the cached model");
  assertEqual(retry.backend, expectedBackend, "backend the transcription after the abort reports");
  // Its words, with the reference's times; the player's position marks the word being spoken.
  const refWords = wordsReference();
  const words = await page.evaluate(() =>
    [...document.querySelectorAll("#segments .word")].map((w) => ({
      word: w.textContent.trim(), start: Number(w.dataset.start), end: Number(w.dataset.end),
    })));
  assertEqual(words.map((w) => w.word), refWords.map((w) => w.word.trim()), "words shown on the page vs the reference's word_timestamps run");
  const off = words.filter((w, i) => Math.abs(w.start - refWords[i].start) > 0.02 || Math.abs(w.end - refWords[i].end) > 0.02);
  assertEqual(off, [], "words whose times are more than 0.02 s from the reference's");
  const k = Math.floor(words.length / 2);
  const spoken = await page.evaluate(async (at) => {
    const player = document.getElementById("audio-player");
    if (player.readyState < 1) await new Promise((resolve) => player.addEventListener("loadedmetadata", resolve, { once: true }));
    const seeked = new Promise((resolve) => player.addEventListener("seeked", resolve, { once: true }));
    player.currentTime = at;
    await seeked;
    return [...document.querySelectorAll("#segments .word.spoken")].map((w) => w.textContent.trim());
  }, (words[k].start + words[k].end) / 2);
  assertEqual(spoken, [words[k].word], `the word marked as spoken at ${((words[k].start + words[k].end) / 2).toFixed(2)} s`);
  console.log(`page: ${words.length} words with the reference's times; "${words[k].word}" marked while the player is inside it`);
  assert(retry.maxGapMs < MAX_GAP_MS, `the page froze during the transcription after the abort: largest clock gap ${retry.maxGapMs} ms`);

  // Skip silence, on the golden VAD clip: the page's options (beam search, "en") are the run
  // vad_beam_5's.
  const vadRun = vadReference();
  await page.uncheck("#word-timestamps");
  await page.check("#vad");
  await page.setInputFiles("#audio-file", vadClipWav);
  await page.waitForFunction(() =>
    (document.getElementById("audio-name").textContent === "vad.wav" && document.getElementById("audio-duration").dataset.seconds) ||
    !document.getElementById("error").hidden);
  await page.click("#transcribe");
  const skipped = await waitForState(page, "#transcribe-status", ["done", "cancelled", "error"], TRANSCRIBE_TIMEOUT_MS, "transcription with VAD");
  assertEqual(skipped.state, "done", `state of #transcribe-status after transcribing with VAD (${skipped.text})`);
  const speech = await page.evaluate(() =>
    [...document.querySelectorAll("#segments li")].map((li) => ({ start: Number(li.dataset.start), end: Number(li.dataset.end), line: li.textContent })));
  assertEqual(speech.map((s) => s.line.replace(/^\[.*?\] /, "")), vadRun.segments.map((s) => s.text.trim()),
    "segment texts on the page with VAD vs the reference's vad_beam_5 run");
  const offTimes = speech.filter((s, i) => Math.abs(s.start - vadRun.segments[i].start) > 0.02 || Math.abs(s.end - vadRun.segments[i].end) > 0.02);
  assertEqual(offTimes, [], "segments with VAD whose times are more than 0.02 s from the reference's");
  console.log(`page: with VAD (${retry.backend}): ${seconds(skipped.ms)}; ${speech.length} segments as the reference's vad_beam_5`);

  assertEqual(problems, [], "uncaught errors and console errors in the page");
  console.log(
    `page: summary: first load ${seconds(first.ms)} (${first.bytes}), transcription ${seconds(shown.elapsedMs)} ` +
      `(${shown.timings}), largest clock gap ${shown.maxGapMs} ms, second load ${seconds(second.ms)} from cache, ` +
      `transcription after the abort on ${retry.backend} ${seconds(again.ms)}`,
  );
});
