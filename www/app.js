/**
 * The Susurrus demo page: loads a Whisper model, takes audio from a file, a drop or the
 * microphone, and transcribes it in the package's worker (./pkg/index.js, the npm package
 * `susurrus`), so the page stays responsive while it runs.
 *
 * Element ids (tests/e2e/page.mjs drives the page through them; keep them stable):
 *
 * Page
 *   #error                 error box: the message of the last failure (hidden when none)
 *   #clock                 ticks every 100 ms; data-ticks (tick count), data-max-gap-ms (largest
 *                          gap between ticks while a transcription runs; reset when one starts),
 *                          data-measuring ("true" while a transcription runs)
 *   #clock-gap             that largest gap, in words, after a transcription
 *   #version               the package's version
 *   body[data-ready]       "true" once the package is imported and the page usable
 * Model
 *   #model-source-url, #model-source-files   radio buttons: where the model comes from
 *   #model-url             model folder URL (default "model/", what `susurrus serve` mounts)
 *   #model-files           multi-file input for model.bin, config.json, vocabulary.txt, tokenizer.json
 *   #backend               select: auto | webgpu | cpu
 *   #load                  Load button
 *   #clear-cache           clears the browser's model cache (status in #load-status)
 *   #load-progress         overall download progress
 *   #load-files            one <li data-file=NAME> per model file: bytes, "(from cache)" on a cache hit
 *   #load-status           data-state idle | loading | loaded | error; data-from-cache; the text
 *                          says "from cache" when the model came from the Cache API
 *   #model-info            <dl>: #model-backend, #model-adapter, #model-load-time, #model-bytes,
 *                          #model-vad (data-loaded "true" | "false": whether the Silero VAD
 *                          network came with the model), #model-fallback (why "auto" chose the
 *                          CPU; hidden when it did not)
 * Audio
 *   #drop-zone, #audio-file        drop target and file input
 *   #record, #stop-record, #record-status   microphone recording
 *   #audio-name, #audio-duration   chosen audio (#audio-duration has data-seconds once known)
 *   #audio-player          playback of the chosen audio
 * Transcript
 *   #language              "detect" or one of the model's languages (English-only models: en,
 *                          and the select is disabled)
 *   #task                  transcribe | translate (to English; multilingual models only)
 *   #word-timestamps       checkbox: time every word; each segment's words are then
 *                          <span class="word" data-start data-end>, the one being spoken while
 *                          #audio-player plays has class "spoken" (aria-current), and clicking
 *                          a word plays from it
 *   #vad                   checkbox: skip silence (the Silero VAD network finds the speech);
 *                          enabled only while the loaded model has the network, which the page
 *                          loads with it when the server has vad/silero_vad_v6.onnx
 *   #transcribe, #abort    buttons
 *   #transcribe-progress   seconds of audio done / total
 *   #transcribe-status     data-state idle | running | done | cancelled | error; data-elapsed-ms
 *                          (wall time of the last finished transcription)
 *   #transcribe-elapsed    time spent so far while one runs
 *   #segments              <ol>; one <li data-start data-end> per segment, text
 *                          "[mm:ss.mmm --> mm:ss.mmm] text"; data-streamed counts the segments
 *                          that arrived through onSegment
 *   #text                  the full text
 *   #result-language       the language decoded in, with its detected probability
 *                          (data-language, data-probability)
 *   #result-backend        backend and adapter that ran (data-backend)
 *   #timings               audio decode, transcription, audio duration, real-time factor
 *   #audio-warnings        what was wrong with a file that still gave audio (a cut file's end)
 *   #download-srt, #download-vtt, #download-json, #download-txt   transcript downloads
 * Live captions
 *   #live-hop              select: seconds of new audio between the model's looks (1, 2, 5, 10)
 *   #live-start, #live-stop   start captioning the microphone (a live stream of the loaded
 *                          model, with the VAD when the model has it), and stop it
 *   #live-status           data-state idle | starting | listening | finishing | done | error
 *   #live-committed        the final text so far; #live-partial, the words that may change
 *   #live-latency          seconds from a word's end in the audio to its first appearance and
 *                          to its commit, medians over the committed words (data-first-seen,
 *                          data-committed, data-words), and once stopped the model's busy time
 *                          over the audio's (data-real-time-factor)
 */

import { Latency, median } from "./live-stats.js";

const el = Object.fromEntries(
  [
    "error", "clock", "clock-gap", "version",
    "model-source-url", "model-source-files", "model-url", "model-files", "backend", "load",
    "clear-cache", "load-progress", "load-files", "load-status", "model-info", "model-backend",
    "model-adapter", "model-load-time", "model-bytes", "model-vad", "model-fallback-label", "model-fallback",
    "drop-zone", "audio-file", "record", "stop-record", "record-status", "audio-name",
    "audio-duration", "audio-player",
    "language", "task", "word-timestamps", "vad", "transcribe", "abort", "transcribe-progress", "transcribe-status", "transcribe-elapsed", "segments", "text",
    "result-language", "result-backend", "timings", "audio-warnings", "download-srt", "download-vtt", "download-json", "download-txt",
    "live-hop", "live-start", "live-stop", "live-status", "live-committed", "live-partial", "live-latency",
  ].map((id) => [id.replace(/-(.)/g, (_, c) => c.toUpperCase()), document.getElementById(id)]),
);
const downloadButtons = [el.downloadSrt, el.downloadVtt, el.downloadJson, el.downloadTxt];

/** Where `susurrus serve` puts the Silero VAD network (beside model/, relative to the page). */
const VAD_URL = "vad/silero_vad_v6.onnx";

/** Media types of the downloads, so the browser and the saved file agree on what they hold. */
const MEDIA_TYPES = {
  srt: "application/x-subrip;charset=utf-8",
  vtt: "text/vtt;charset=utf-8",
  json: "application/json;charset=utf-8",
  txt: "text/plain;charset=utf-8",
};

/** Everything the buttons depend on; `render()` derives their state from it. */
const state = {
  pkg: null, // the imported package module
  transcriber: null, // the loaded model
  loading: false,
  audio: null, // { blob, name }
  recording: null, // { recorder, started }
  running: null, // { controller, started }: the running transcription
  result: null, // { transcript, name }: the last finished transcription
  live: null, // { sink, microphone, media, controller, latency }: live captions running
};

// ---- Errors: every failure ends up in the visible error box, never only in the console.

function showError(err) {
  const message = err instanceof Error ? err.message || err.name : String(err);
  el.error.textContent = message || "unknown error";
  el.error.hidden = false;
  console.error(err);
}

function clearError() {
  el.error.textContent = "";
  el.error.hidden = true;
}

window.addEventListener("error", (event) => showError(event.error ?? event.message));
window.addEventListener("unhandledrejection", (event) => showError(event.reason));

/** Runs an async button handler, showing what it throws. */
function action(handler) {
  return (...args) => {
    clearError();
    handler(...args).catch(showError);
  };
}

// ---- Clock: proves the page never freezes. The interval cannot fire while the main thread is
// blocked, so the largest gap between ticks is the longest freeze.

const clock = { started: performance.now(), last: performance.now(), ticks: 0, maxGap: 0, measuring: false };

setInterval(() => {
  const now = performance.now();
  if (clock.measuring) clock.maxGap = Math.max(clock.maxGap, now - clock.last);
  clock.last = now;
  clock.ticks += 1;
  el.clock.textContent = `${((now - clock.started) / 1000).toFixed(1)} s`;
  el.clock.dataset.ticks = String(clock.ticks);
  el.clock.dataset.maxGapMs = String(Math.round(clock.maxGap));
  if (state.recording) el.recordStatus.textContent = `recording ${((now - state.recording.started) / 1000).toFixed(1)} s`;
  if (state.running) showRunning(state.running, now);
}, 100);

function startMeasuring() {
  clock.maxGap = 0;
  clock.last = performance.now();
  clock.measuring = true;
  el.clock.dataset.maxGapMs = "0";
  el.clock.dataset.measuring = "true";
  el.clockGap.textContent = "";
}

function stopMeasuring() {
  // A freeze that lasted until the very end has no tick after it: count it too.
  clock.maxGap = Math.max(clock.maxGap, performance.now() - clock.last);
  clock.measuring = false;
  el.clock.dataset.maxGapMs = String(Math.round(clock.maxGap));
  el.clock.dataset.measuring = "false";
  el.clockGap.textContent = `(longest pause while transcribing: ${Math.round(clock.maxGap)} ms)`;
}

// ---- Formatting

function formatBytes(bytes) {
  if (bytes >= 1e6) return `${(bytes / 1e6).toFixed(1)} MB`;
  if (bytes >= 1e3) return `${(bytes / 1e3).toFixed(1)} KB`;
  return `${bytes} B`;
}

function formatMs(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

/** `mm:ss.mmm`, rounded to the millisecond once so 59.9996 s reads 01:00.000. */
function formatTime(seconds) {
  const total = Math.round(seconds * 1000);
  const minutes = Math.floor(total / 60000);
  const secs = Math.floor(total / 1000) % 60;
  return `${String(minutes).padStart(2, "0")}:${String(secs).padStart(2, "0")}.${String(total % 1000).padStart(3, "0")}`;
}

function setStatus(node, stateName, text) {
  node.dataset.state = stateName;
  node.textContent = text;
}

// ---- Buttons

function render() {
  const { pkg, transcriber, loading, audio, recording, result } = state;
  const running = state.running !== null || state.live !== null;
  el.load.disabled = !pkg || loading || running;
  el.clearCache.disabled = !pkg || loading;
  el.transcribe.disabled = !transcriber || !audio || loading || running || recording !== null;
  const multilingual = transcriber?.info.multilingual ?? false;
  el.language.disabled = el.task.disabled = !multilingual || running;
  el.wordTimestamps.disabled = running;
  el.vad.disabled = running || !transcriber?.info.vad;
  el.abort.disabled = !running;
  el.record.disabled = recording !== null;
  el.stopRecord.disabled = recording === null;
  for (const button of downloadButtons) button.disabled = !result || running;
  el.liveStart.disabled = !transcriber || loading || running;
  el.liveHop.disabled = state.live !== null;
  el.liveStop.disabled = !state.live?.microphone || state.live.stopping;
}

// ---- Model

/** One row per model file, created when its first progress report arrives. */
const fileRows = new Map();

function resetLoadProgress() {
  fileRows.clear();
  el.loadFiles.replaceChildren();
  el.loadProgress.value = 0;
  el.modelInfo.hidden = true;
}

function onLoadProgress({ file, loaded, total, fromCache }) {
  let row = fileRows.get(file);
  if (!row) {
    row = { li: document.createElement("li"), loaded: 0, total: null };
    row.li.dataset.file = file;
    fileRows.set(file, row);
    el.loadFiles.append(row.li);
  }
  row.loaded = loaded;
  row.total = total;
  row.li.dataset.fromCache = String(fromCache);
  const size = total === null ? formatBytes(loaded) : `${formatBytes(loaded)} of ${formatBytes(total)}`;
  row.li.textContent = `${file}: ${size}${fromCache ? " (from cache)" : ""}`;
  // Overall progress is only meaningful while every file seen so far has a known size.
  const rows = [...fileRows.values()];
  if (rows.every((r) => r.total !== null)) {
    const sum = (key) => rows.reduce((acc, r) => acc + r[key], 0);
    el.loadProgress.value = sum("total") > 0 ? sum("loaded") / sum("total") : 1;
  } else {
    el.loadProgress.removeAttribute("value");
  }
}

function modelSource() {
  if (el.modelSourceFiles.checked) {
    if (el.modelFiles.files.length === 0) {
      throw new Error("choose the model files (model.bin, config.json, vocabulary.txt, tokenizer.json) first");
    }
    return el.modelFiles.files;
  }
  const url = el.modelUrl.value.trim();
  if (!url) throw new Error("enter the URL of a model folder, e.g. model/");
  return url;
}

/**
 * The VAD network's URL when the server has it, else undefined. Asked before every load: a
 * `vad` URL that 404s fails the whole load, and the page must keep working from a server
 * without the network (the checkbox then stays off).
 */
async function vadUrl() {
  try {
    const response = await fetch(VAD_URL, { method: "HEAD", cache: "no-store" });
    return response.ok ? VAD_URL : undefined;
  } catch {
    return undefined; // no answer: load without it rather than fail
  }
}

async function loadModel() {
  const source = modelSource();
  const backend = el.backend.value;
  state.loading = true;
  render();
  resetLoadProgress();
  setStatus(el.loadStatus, "loading", "Loading the model…");
  delete el.loadStatus.dataset.fromCache;
  try {
    const vad = await vadUrl();
    const transcriber = await state.pkg.Transcriber.load(source, { backend, vad, onProgress: onLoadProgress });
    // The new model replaces the old only once it loaded, so a failed load keeps the old one.
    state.transcriber?.dispose();
    state.transcriber = transcriber;
    const { info } = transcriber;
    el.loadProgress.value = 1;
    el.modelBackend.textContent = info.backend;
    el.modelAdapter.textContent = info.adapter;
    el.modelLoadTime.textContent = formatMs(info.loadMs);
    el.modelBytes.textContent = formatBytes(info.bytes);
    el.modelVad.dataset.loaded = String(info.vad);
    el.modelVad.textContent = info.vad ? "Silero VAD v6 (skip silence)" : `none (the server has no ${VAD_URL})`;
    if (!info.vad) el.vad.checked = false;
    // The package says why "auto" fell back to the CPU (no navigator.gpu, no adapter, ...).
    const fallback = info.fallbackReason ?? "";
    el.modelFallback.textContent = fallback;
    el.modelFallback.hidden = el.modelFallbackLabel.hidden = fallback === "";
    el.modelInfo.hidden = false;
    showLanguages(info);
    el.loadStatus.dataset.fromCache = String(info.fromCache);
    el.loadStatus.dataset.backend = info.backend;
    const origin = info.fromCache ? "from cache" : "downloaded";
    setStatus(el.loadStatus, "loaded",
      `Model loaded in ${formatMs(info.loadMs)} (${formatBytes(info.bytes)}, ${origin}) on ${info.backend}: ${info.adapter}.`);
  } catch (err) {
    // The info list still describes the previous model, if any: show it again.
    el.modelInfo.hidden = !state.transcriber;
    setStatus(el.loadStatus, "error", state.transcriber ? "Loading failed; the previous model stays loaded." : "Loading failed.");
    throw err;
  } finally {
    state.loading = false;
    render();
  }
}

/** The language choices of the loaded model: detection, then its languages. */
function showLanguages({ multilingual, languages }) {
  const options = multilingual ? [["", "detect"], ...languages.map((code) => [code, code])] : [["en", "en"]];
  el.language.replaceChildren(...options.map(([value, label]) => new Option(label, value)));
  if (!multilingual) el.task.value = "transcribe";
}

async function clearCache() {
  const removed = await state.pkg.clearModelCache();
  setStatus(el.loadStatus, "cache-cleared", removed ? "Model cache cleared." : "The model cache was already empty.");
}

// ---- Audio

async function audioDuration(blob, url) {
  // The media element reads the duration from the header, cheaply. MediaRecorder's WebM files
  // have none (it reports Infinity), so those are decoded instead.
  const fromHeader = await new Promise((resolve) => {
    const probe = new Audio();
    probe.preload = "metadata";
    probe.addEventListener("loadedmetadata", () => resolve(probe.duration));
    probe.addEventListener("error", () => resolve(NaN));
    probe.src = url;
  });
  if (Number.isFinite(fromHeader)) return fromHeader;
  const samples = await state.pkg.decodeAudio(blob);
  return samples.length / 16000;
}

async function setAudio(blob, name) {
  if (el.audioPlayer.src) URL.revokeObjectURL(el.audioPlayer.src);
  const url = URL.createObjectURL(blob);
  const audio = { blob, name };
  state.audio = audio;
  render();
  el.audioName.textContent = name;
  el.audioDuration.textContent = "(duration: reading…)";
  delete el.audioDuration.dataset.seconds;
  el.audioPlayer.src = url;
  el.audioPlayer.hidden = false;
  const seconds = await audioDuration(blob, url);
  if (state.audio !== audio) return; // another file was chosen meanwhile
  el.audioDuration.dataset.seconds = String(seconds);
  el.audioDuration.textContent = `(${seconds.toFixed(2)} s, ${formatBytes(blob.size)})`;
}

function onDrop(event) {
  event.preventDefault();
  el.dropZone.classList.remove("dragging");
  const file = event.dataTransfer?.files[0];
  if (!file) throw new Error("the drop held no file: drop an audio file");
  return setAudio(file, file.name);
}

/** A file name for a recording, with the extension its container type implies. */
function recordingName(type) {
  const extension = type.includes("ogg") ? "ogg" : type.includes("mp4") ? "m4a" : "webm";
  const stamp = new Date().toISOString().replace(/[:.]/g, "-").slice(0, 19);
  return `recording-${stamp}.${extension}`;
}

async function startRecording() {
  if (!navigator.mediaDevices?.getUserMedia || typeof MediaRecorder === "undefined") {
    throw new Error("this browser cannot record here: microphone access needs https or localhost and MediaRecorder");
  }
  const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  const recorder = new MediaRecorder(stream);
  const chunks = [];
  recorder.addEventListener("dataavailable", (event) => {
    if (event.data.size > 0) chunks.push(event.data);
  });
  recorder.addEventListener("stop", () => {
    for (const track of stream.getTracks()) track.stop();
    state.recording = null;
    el.recordStatus.textContent = "";
    render();
    const type = recorder.mimeType || chunks[0]?.type || "audio/webm";
    const blob = new Blob(chunks, { type });
    if (blob.size === 0) {
      showError(new Error("the recording is empty: no audio arrived from the microphone"));
      return;
    }
    setAudio(blob, recordingName(type)).catch(showError);
  });
  recorder.addEventListener("error", (event) => showError(event.error ?? new Error("recording failed")));
  recorder.start();
  state.recording = { recorder, started: performance.now() };
  render();
}

async function stopRecording() {
  state.recording?.recorder.stop();
}

// ---- Transcription

function segmentItem(segment) {
  const li = document.createElement("li");
  li.dataset.start = String(segment.start);
  li.dataset.end = String(segment.end);
  const time = document.createElement("span");
  time.className = "time";
  time.textContent = `[${formatTime(segment.start)} --> ${formatTime(segment.end)}]`;
  if (!segment.words) {
    li.append(time, ` ${segment.text.trim()}`);
    return li;
  }
  li.append(time, " ");
  segment.words.forEach((word, i) => {
    const span = document.createElement("span");
    span.className = "word";
    span.dataset.start = String(word.start);
    span.dataset.end = String(word.end);
    span.title = `${formatTime(word.start)} (probability ${word.probability.toFixed(2)})`;
    span.textContent = i === 0 ? word.word.trimStart() : word.word;
    li.append(span);
  });
  return li;
}

/** Marks the word being spoken at the player's position, if any. */
function highlightSpokenWord() {
  const now = el.audioPlayer.currentTime;
  for (const span of el.segments.querySelectorAll(".word")) {
    const spoken = now >= Number(span.dataset.start) && now < Number(span.dataset.end);
    span.classList.toggle("spoken", spoken);
    if (spoken) span.setAttribute("aria-current", "true");
    else span.removeAttribute("aria-current");
  }
}

/** While the audio plays, the highlight follows it every frame (timeupdate fires ~4 times a second). */
function followPlayback() {
  highlightSpokenWord();
  if (!el.audioPlayer.paused) requestAnimationFrame(followPlayback);
}

function resetTranscript() {
  state.result = null;
  el.segments.replaceChildren();
  el.segments.dataset.streamed = "0";
  el.text.textContent = "";
  el.resultLanguage.textContent = "";
  delete el.resultLanguage.dataset.language;
  delete el.resultLanguage.dataset.probability;
  el.resultBackend.textContent = "";
  delete el.resultBackend.dataset.backend;
  el.timings.textContent = "";
  el.audioWarnings.textContent = "";
  el.transcribeProgress.value = 0;
}

function showResult(transcript, detected) {
  // The streamed list and the result should agree; the result is what the downloads hold.
  el.segments.replaceChildren(...transcript.segments.map(segmentItem));
  el.text.textContent = transcript.text.trim();
  const { language, languageProbability } = transcript;
  el.resultLanguage.textContent = detected
    ? `${language} (detected, probability ${languageProbability.toFixed(3)})`
    : language;
  el.resultLanguage.dataset.language = language;
  el.resultLanguage.dataset.probability = String(languageProbability);
  el.resultBackend.textContent = `${transcript.backend} (${transcript.adapter})`;
  el.resultBackend.dataset.backend = transcript.backend;
  const { decodeMs, transcribeMs, audioDurationS, rtf } = transcript.timings;
  el.timings.textContent = [
    `audio decode ${formatMs(decodeMs)}`,
    `transcription ${formatMs(transcribeMs)}`,
    `audio ${audioDurationS.toFixed(2)} s`,
    `RTF ${rtf === null ? "n/a" : rtf.toFixed(3)}`,
  ].join(" · ");
  el.audioWarnings.textContent = transcript.warnings.length === 0 ? "none" : transcript.warnings.join("; ");
}

/**
 * The running transcription's time so far, every clock tick (apart from the status line, so
 * screen readers announce progress, not every tick).
 */
function showRunning({ started }, now) {
  el.transcribeElapsed.textContent = `(${((now - started) / 1000).toFixed(0)} s so far)`;
}

async function transcribe() {
  const { transcriber, audio } = state;
  const controller = new AbortController();
  const started = performance.now();
  const run = { controller, started };
  state.running = run;
  resetTranscript();
  render();
  setStatus(el.transcribeStatus, "running", "Transcribing…");
  showRunning(run, started);
  el.transcribeProgress.removeAttribute("value"); // indeterminate until the first report
  delete el.transcribeStatus.dataset.elapsedMs;
  startMeasuring();
  let streamed = 0;
  try {
    const detected = el.language.value === "";
    const transcript = await transcriber.transcribe(audio.blob, {
      language: detected ? null : el.language.value,
      task: el.task.value,
      wordTimestamps: el.wordTimestamps.checked,
      vad: el.vad.checked,
      signal: controller.signal,
      onSegment: (segment) => {
        streamed += 1;
        el.segments.dataset.streamed = String(streamed);
        el.segments.append(segmentItem(segment));
      },
      onProgress: ({ done, total }) => {
        el.transcribeProgress.value = total > 0 ? done / total : 1;
        el.transcribeStatus.textContent = `Transcribing… ${done.toFixed(1)} of ${total.toFixed(1)} s of audio`;
      },
    });
    stopMeasuring();
    const elapsed = performance.now() - started;
    state.result = { transcript, name: audio.name };
    showResult(transcript, detected);
    el.transcribeProgress.value = 1;
    el.transcribeStatus.dataset.elapsedMs = String(Math.round(elapsed));
    setStatus(el.transcribeStatus, "done", `Done in ${formatMs(elapsed)}.`);
  } catch (err) {
    stopMeasuring();
    if (err?.name === "AbortError") {
      setStatus(el.transcribeStatus, "cancelled", "Transcription cancelled; the model stays loaded.");
    } else {
      setStatus(el.transcribeStatus, "error", "Transcription failed.");
      throw err;
    }
  } finally {
    state.running = null;
    el.transcribeElapsed.textContent = "";
    render();
  }
}

async function abort() {
  state.running?.controller.abort();
}

// ---- Live captions

function showLatency(latency, summary) {
  const { firstSeen, committed } = latency;
  const node = el.liveLatency;
  node.dataset.words = String(committed.length);
  if (committed.length === 0) {
    node.textContent = "no words yet";
    return;
  }
  node.dataset.firstSeen = median(firstSeen).toFixed(3);
  node.dataset.committed = median(committed).toFixed(3);
  let text = `words appear ${median(firstSeen).toFixed(2)} s after they are spoken and are final after ` +
    `${median(committed).toFixed(2)} s (medians of ${committed.length} words)`;
  if (summary) {
    node.dataset.realTimeFactor = summary.realTimeFactor.toFixed(3);
    text += `; the model was busy ${(summary.realTimeFactor * 100).toFixed(0)}% of the ${summary.audioSeconds.toFixed(1)} s`;
  }
  node.textContent = text;
}

async function startLive() {
  if (!navigator.mediaDevices?.getUserMedia) {
    throw new Error("this browser cannot capture the microphone here: it needs https or localhost");
  }
  const { transcriber } = state;
  el.liveCommitted.textContent = el.livePartial.textContent = el.liveLatency.textContent = "";
  for (const key of Object.keys(el.liveLatency.dataset)) delete el.liveLatency.dataset[key];
  setStatus(el.liveStatus, "starting", "Opening the microphone…");
  const latency = new Latency();
  const controller = new AbortController();
  state.live = { latency, controller, stopping: false };
  render();
  try {
    // The stream first: the microphone's audio is captured from the moment it opens.
    const sink = await transcriber.stream({
      vad: transcriber.info.vad,
      hop: Number(el.liveHop.value),
      language: el.language.value || null,
      signal: controller.signal,
      onPartial: (text) => {
        latency.partial(text);
        el.livePartial.textContent = text.text;
      },
      onCommitted: (text) => {
        latency.commit(text);
        el.liveCommitted.textContent += text.text;
        showLatency(latency);
      },
      onError: (error) => {
        if (error.name === "AbortError") return;
        showError(error);
        setStatus(el.liveStatus, "error", "Live captions stopped.");
        endLive().catch(showError);
      },
    });
    state.live.sink = sink;
    // The browser's call processing off: Whisper learned from unprocessed audio, and Chromium's
    // noise suppression and gain control reshape speech differently from run to run (the fake
    // microphone's clips came out with a difference from the file as loud as the speech itself).
    const media = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
    });
    state.live.media = media;
    const timed = { push: (samples, rate) => (latency.push(samples, rate), sink.push(samples, rate)) };
    state.live.microphone = await state.pkg.captureMicrophone(media, timed, { onError: showError });
    setStatus(el.liveStatus, "listening", `Listening (${transcriber.info.vad ? "with" : "without"} the VAD)…`);
  } catch (err) {
    await endLive();
    setStatus(el.liveStatus, "error", "Live captions stopped.");
    throw err;
  }
  render();
}

/** Stops the microphone and its tracks and lets the model go (aborting the stream). */
async function endLive() {
  const live = state.live;
  if (!live) return;
  await live.microphone?.stop();
  for (const track of live.media?.getTracks() ?? []) track.stop();
  live.controller.abort();
  await live.sink?.finish().catch(() => {});
  state.live = null;
  render();
}

async function stopLive() {
  const live = state.live;
  live.stopping = true;
  render();
  setStatus(el.liveStatus, "finishing", "Finishing…");
  try {
    await live.microphone.stop();
    for (const track of live.media.getTracks()) track.stop();
    const summary = await live.sink.finish();
    el.livePartial.textContent = "";
    showLatency(live.latency, summary);
    setStatus(el.liveStatus, "done", `Stopped after ${summary.audioSeconds.toFixed(1)} s.`);
  } catch (err) {
    setStatus(el.liveStatus, "error", "Live captions failed.");
    throw err;
  } finally {
    state.live = null;
    render();
  }
}

// ---- Downloads

async function download(format) {
  const { transcript, name } = state.result;
  const text = state.pkg.formatTranscript(transcript, format);
  const url = URL.createObjectURL(new Blob([text], { type: MEDIA_TYPES[format] }));
  const link = document.createElement("a");
  link.href = url;
  link.download = `${name.replace(/\.[^.]*$/, "") || "transcript"}.${format}`;
  document.body.append(link);
  link.click();
  link.remove();
  // The download reads the URL asynchronously; revoking it at once could cut it off.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

// ---- Wiring

el.modelUrl.addEventListener("input", () => (el.modelSourceUrl.checked = true));
el.modelFiles.addEventListener("change", () => (el.modelSourceFiles.checked = el.modelFiles.files.length > 0));
el.load.addEventListener("click", action(loadModel));
el.clearCache.addEventListener("click", action(clearCache));
el.audioFile.addEventListener("change", action(async () => {
  const file = el.audioFile.files[0];
  if (file) await setAudio(file, file.name);
}));
el.dropZone.addEventListener("dragover", (event) => {
  event.preventDefault();
  el.dropZone.classList.add("dragging");
});
el.dropZone.addEventListener("dragleave", () => el.dropZone.classList.remove("dragging"));
el.dropZone.addEventListener("drop", action(async (event) => onDrop(event)));
// A file dropped beside the zone would make the browser leave the page to open it.
window.addEventListener("dragover", (event) => event.preventDefault());
window.addEventListener("drop", (event) => event.preventDefault());
el.record.addEventListener("click", action(startRecording));
el.stopRecord.addEventListener("click", action(stopRecording));
el.transcribe.addEventListener("click", action(transcribe));
el.audioPlayer.addEventListener("play", followPlayback);
el.audioPlayer.addEventListener("seeked", highlightSpokenWord);
el.audioPlayer.addEventListener("timeupdate", highlightSpokenWord);
el.segments.addEventListener("click", (event) => {
  const word = event.target.closest?.(".word");
  if (!word) return;
  el.audioPlayer.currentTime = Number(word.dataset.start);
  el.audioPlayer.play().catch(() => {}); // a page without a user gesture may not play; the seek stands
});
el.abort.addEventListener("click", action(abort));
el.liveStart.addEventListener("click", action(startLive));
el.liveStop.addEventListener("click", action(stopLive));
for (const button of downloadButtons) {
  button.addEventListener("click", action(() => download(button.dataset.format)));
}

async function start() {
  render();
  try {
    // Imported dynamically so a missing build shows in the error box instead of a dead page.
    state.pkg = await import("./pkg/index.js");
  } catch (err) {
    setStatus(el.loadStatus, "error", "The susurrus package could not be loaded.");
    throw new Error(`could not import ./pkg/index.js (build it with scripts/web/build_web.sh): ${err.message}`);
  }
  el.version.textContent = state.pkg.version();
  setStatus(el.loadStatus, "idle", "No model loaded.");
  render();
  document.body.dataset.ready = "true";
}

start().catch(showError);
