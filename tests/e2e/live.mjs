// Live captions in the browser: the demo page's "Live captions" with Chromium's fake microphone
// playing two golden clips (short_1.wav and short_2.wav, with a second of silence before, between
// and after them: 15 s) in real time, on
// the CPU backend with the Silero VAD, through the package's captureMicrophone (an AudioWorklet
// at 16 kHz) and Transcriber.stream in its worker. The committed text must be what the clips say
// (the text espeak-ng spoke, in their fixtures) within 15% word error, with the demo's looks 10 s
// apart so that each clip is committed whole at its pause (see below); the page's latency figures (seconds from a word's end in the audio to
// its first appearance and to its commit, medians) and the model's busy time are printed.
// Then the package's stream API on its own: options checked before any work, a chunk with a
// NaN refused without ending the stream, the model refused to `transcribe` while a stream
// holds it, an abort rejecting `finish` with an AbortError and letting the model go.
// Run by tests/e2e/run.sh; needs target/debug/susurrus, www/pkg, the model (SUSURRUS_MODEL) and
// the network (SUSURRUS_VAD_MODEL).

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { wordErrorRate } from "../../www/live-stats.js";
import { assert, assertEqual, modelDir, openDemoPage, readWav, repoRoot, runTest, seconds, waitForState } from "./common.mjs";

const LOAD_TIMEOUT_MS = 5 * 60_000;
const FINISH_TIMEOUT_MS = 5 * 60_000;
/** The golden clips the fake microphone plays, one after the other. */
const CLIPS = ["short_1", "short_2"];
/** Seconds of silence the fake microphone plays before, between and after the clips. */
const PAD_SECONDS = 1;
/** Each clip is committed by one look at it whole, from 0.4 s before the VAD heard it start.
 * tiny.en's words still change with where in the audio the microphone's chunks start (40 ms
 * earlier or later): "read her book" heard as "breathed her work", "a warm" as "at warm" (as
 * faster-whisper's own transcript of the clip has it); 0-9.1% in six runs here, three of them
 * beside two busy processes. */
const MAX_WORD_ERROR = 0.15;

/** `samples` (16 kHz, [-1, 1)) as a 16-bit mono WAV file. */
function wavBytes(samples) {
  const data = Buffer.alloc(samples.length * 2);
  samples.forEach((s, i) => data.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(s * 32768))), i * 2));
  const header = Buffer.alloc(44);
  header.write("RIFF", 0, "latin1");
  header.writeUInt32LE(36 + data.length, 4);
  header.write("WAVEfmt ", 8, "latin1");
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(16000, 24);
  header.writeUInt32LE(32000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write("data", 36, "latin1");
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

await runTest("live", async (onCleanup) => {
  const silence = new Array(PAD_SECONDS * 16000).fill(0);
  let played = silence;
  const texts = [];
  for (const clip of CLIPS) {
    const record = JSON.parse(readFileSync(join(repoRoot, `tests/fixtures/golden/${clip}.json`), "utf8"));
    const spoken = record.audio?.source?.text;
    assert(spoken, `${clip}.json names no spoken text (audio.source.text)`);
    texts.push(spoken.trim());
    played = played.concat(readWav(join(repoRoot, `tests/fixtures/golden/${clip}.wav`)), silence);
  }
  const reference = { text: texts.join(" ") };
  const dir = join(repoRoot, "target/e2e");
  mkdirSync(dir, { recursive: true });
  const microphone = join(dir, "live-microphone.wav");
  writeFileSync(microphone, wavBytes(played));
  const spoken = played.length / 16000;

  const { page, problems } = await openDemoPage("live", modelDir, onCleanup, FINISH_TIMEOUT_MS, {
    browserArgs: [
      "--use-fake-device-for-media-stream",
      "--use-fake-ui-for-media-stream",
      `--use-file-for-fake-audio-capture=${microphone}%noloop`,
    ],
  });
  await page.waitForSelector("body[data-ready=true]");
  await page.selectOption("#backend", "cpu");
  await page.click("#load");
  await waitForState(page, "#load-status", ["loaded"], "loading the model", LOAD_TIMEOUT_MS);
  assertEqual(await page.getAttribute("#model-vad", "data-loaded"), "true", "the VAD network loaded with the model");

  // The demo page: captions from the fake microphone, stopped once the clips have played. The
  // model looks every 10 s: longer than either clip, so the VAD's pause after each ends it and
  // one look commits it whole, and the text does not hang on where the looks fall. (At every
  // 1 s the looks on two busy cores fall where they may, and words agreed on by two looks cut
  // short come out wrong; the agreement's accuracy is checked on simulated clocks by
  // crates/cli/tests/live.rs.)
  await page.selectOption("#live-hop", "10");
  await page.click("#live-start");
  await waitForState(page, "#live-status", ["listening"], "starting live captions", LOAD_TIMEOUT_MS);
  const listening = Date.now();
  let partials = 0;
  let lastPartial = "";
  while (Date.now() - listening < spoken * 1000 + 500) {
    const partial = await page.textContent("#live-partial");
    if (partial !== lastPartial && partial.trim() !== "") partials++;
    lastPartial = partial;
    await new Promise((r) => setTimeout(r, 100));
  }
  await page.click("#live-stop");
  await waitForState(page, "#live-status", ["done"], "finishing live captions", FINISH_TIMEOUT_MS);
  const committed = (await page.textContent("#live-committed")).trim();
  const latency = await page.evaluate(() => ({ ...document.getElementById("live-latency").dataset }));
  const error = wordErrorRate(reference.text, committed);
  console.log(`live: committed ${JSON.stringify(committed)}`);
  console.log(`live: reference ${JSON.stringify(reference.text.trim())}`);
  console.log(
    `live: ${(error * 100).toFixed(1)}% word error; ${latency.words} words, first seen ${latency.firstSeen} s and ` +
      `committed ${latency.committed} s after their end (medians), real-time factor ${latency.realTimeFactor}, ` +
      `${partials} partial texts seen`,
  );
  assert(error <= MAX_WORD_ERROR, `live captions: ${(error * 100).toFixed(1)}% word error, at most ${MAX_WORD_ERROR * 100}%`);
  assertEqual(Number(latency.words), committed.split(/\s+/).filter((w) => /[\p{L}\p{N}]/u.test(w)).length,
    "latency figures cover every committed word");
  const [firstSeen, commitLag, rtf] = [Number(latency.firstSeen), Number(latency.committed), Number(latency.realTimeFactor)];
  assert(Number.isFinite(firstSeen) && firstSeen <= commitLag, `first seen ${firstSeen} s, committed ${commitLag} s`);
  assert(rtf > 0 && Number.isFinite(rtf), `real-time factor ${latency.realTimeFactor}`);

  // The package's stream API, on a model of its own in this page.
  const api = await page.evaluate(async () => {
    const { Transcriber } = await import("./pkg/index.js");
    const t = await Transcriber.load("/model/", { backend: "cpu", vad: "/vad/silero_vad_v6.onnx" });
    const message = (promise) => promise.then(() => "resolved", (e) => `${e.name}: ${e.message}`);
    const out = {};
    out.badHop = await message(t.stream({ hop: 0 }));
    out.unknown = await message(t.stream({ hopp: 1 }));
    out.clipTimestamps = await message(t.stream({ clipTimestamps: [0, 1] }));
    const committed = [];
    const controller = new AbortController();
    const sink = await t.stream({ onCommitted: (c) => committed.push(c.text), signal: controller.signal });
    try {
      sink.push(new Float32Array([0, NaN, 0]));
      out.nan = "taken";
    } catch (e) {
      out.nan = `${e.name}: ${e.message}`;
    }
    sink.push(new Float32Array(16000)); // the stream goes on after a refused chunk
    out.transcribeWhileStreaming = await message(t.transcribe(new Float32Array(16000)));
    controller.abort();
    out.finishAborted = await message(sink.finish());
    try {
      sink.push(new Float32Array(160));
      out.pushAfterAbort = "taken";
    } catch (e) {
      out.pushAfterAbort = `${e.name}: ${e.message}`;
    }
    out.transcribeAfter = await message(t.transcribe(new Float32Array(16000), { beamSize: 1 }));
    const second = await t.stream({ vad: false });
    second.push(new Float32Array(8000), 8000);
    try {
      second.push(new Float32Array(8000), 16000);
      out.otherRate = "taken";
    } catch (e) {
      out.otherRate = `${e.name}: ${e.message}`;
    }
    const summary = await second.finish();
    out.summary = summary;
    out.finishTwice = await message(second.finish().then(() => second.finish()));
    t.dispose();
    return out;
  });
  console.log(`live: the stream API said ${JSON.stringify(api, null, 1)}`);
  assert(/hop must be between 0.1 and 10 seconds, not 0/.test(api.badHop), `hop 0: ${api.badHop}`);
  assert(/unknown field `hopp`.*; or one of the stream.s own: hop, vad, minSilence/.test(api.unknown), `an unknown option: ${api.unknown}`);
  assert(/clip_timestamps: not for live streams/.test(api.clipTimestamps), `clipTimestamps: ${api.clipTimestamps}`);
  assertEqual(api.nan, "RangeError: sample 1 of this chunk is NaN; audio must be finite numbers", "a chunk with a NaN");
  assert(/live stream open/.test(api.transcribeWhileStreaming), `transcribe while a stream is open: ${api.transcribeWhileStreaming}`);
  assertEqual(api.finishAborted, "AbortError: the live stream was aborted", "finish after an abort");
  assertEqual(api.pushAfterAbort, "AbortError: the live stream was aborted", "push after an abort");
  assertEqual(api.transcribeAfter, "resolved", "transcribe once the aborted stream let the model go");
  assert(/this chunk's sample rate is 16000 Hz, the stream's 8000 Hz/.test(api.otherRate), `a chunk at another rate: ${api.otherRate}`);
  assert(Math.abs(api.summary.audioSeconds - 1) < 0.01, `an 8 kHz second is a second: ${JSON.stringify(api.summary)}`);
  assertEqual(api.finishTwice, "resolved", "finish twice gives the same summary");
  assertEqual(problems, [], "uncaught errors and console errors on the page");
  console.log(`live: ${seconds(spoken * 1000)} of audio captured`);
});
