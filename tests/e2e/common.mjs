// What both end-to-end scripts share: the repository's paths, `susurrus serve` as a child
// process with its request log, headless Chromium through playwright-core, the reference
// transcript, and assertions that print what was expected and what came.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const npmTools = join(homedir(), ".cache/susurrus/npm");
/** The `susurrus` binary (run.sh builds it); SUSURRUS_BIN names another. */
export const susurrusBin = process.env.SUSURRUS_BIN ?? join(repoRoot, "target/debug/susurrus");
/** The real model folder (scripts/models/fetch_model.sh prints it; run.sh passes it on). */
export const modelDir = process.env.SUSURRUS_MODEL ?? join(homedir(), ".cache/susurrus/models/whisper-tiny.en-ct2");
/** The Silero VAD network (scripts/models/fetch_model.sh silero-vad prints it; run.sh passes it on). */
export const vadModel =
  process.env.SUSURRUS_VAD_MODEL ?? join(homedir(), ".cache/susurrus/models/silero-vad-v6/silero_vad_v6.onnx");
export const clipWav = join(repoRoot, "tests/fixtures/golden/short_2.wav");

/**
 * The golden clip's reference run with faster-whisper's default options (beam search with 5
 * beams, as the package's defaults): its text and segment times.
 */
export function reference() {
  const golden = JSON.parse(readFileSync(join(repoRoot, "tests/fixtures/golden/short_2.json"), "utf8"));
  const run = golden.runs.find((r) => r.name === "beam_5");
  if (!run) throw new Error("tests/fixtures/golden/short_2.json has no run named \"beam_5\"");
  return { text: run.text.trim(), segments: run.segments.map(({ start, end, text }) => ({ start, end, text: text.trim() })) };
}

/** The golden clip's words as faster-whisper times them (run "word_timestamps"). */
export function wordsReference() {
  const golden = JSON.parse(readFileSync(join(repoRoot, "tests/fixtures/golden/short_2.json"), "utf8"));
  const run = golden.runs.find((r) => r.name === "word_timestamps");
  if (!run) throw new Error("tests/fixtures/golden/short_2.json has no run named \"word_timestamps\"");
  return run.segments.flatMap((s) => s.words);
}

/** A 16 kHz mono 16-bit PCM WAV fixture as samples in [-1, 1) (`int16 / 32768`, as the reference reads it). */
export function readWav(path) {
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

/**
 * The package's options for a golden run's `transcribe()` keyword arguments. Runs without a
 * temperature keep the package's default fallback list, as faster-whisper's default.
 */
export function packageOptions(options) {
  return {
    beamSize: options.beam_size,
    language: options.language ?? null,
    task: options.task ?? "transcribe",
    ...(options.temperature === undefined ? {} : { temperatures: [options.temperature] }),
    wordTimestamps: options.word_timestamps ?? false,
    vad: options.vad_filter ?? false,
  };
}

/**
 * Every difference between the package's result and a golden run: language and its
 * probability, text, and the segments (`compareSegments`).
 */
export function compareWithRun(result, run, label) {
  const problems = [];
  if (result.language !== run.info.language) problems.push(`${label}: language ${result.language}, reference ${run.info.language}`);
  if (Math.abs(result.languageProbability - run.info.language_probability) > 1e-3) {
    problems.push(`${label}: language probability ${result.languageProbability}, reference ${run.info.language_probability}`);
  }
  if (result.segments.length !== run.segments.length) {
    problems.push(`${label}: ${result.segments.length} segments, reference ${run.segments.length}`);
  }
  problems.push(...compareSegments(result.segments, run.segments, label));
  if (result.text !== run.text) problems.push(`${label}: text ${JSON.stringify(result.text)}, reference ${JSON.stringify(run.text)}`);
  return problems;
}

/**
 * Every difference between segments and a golden run's, pairwise as far as both go: token ids,
 * text, times and words (times within 0.02 s).
 */
export function compareSegments(segments, reference, label) {
  const problems = [];
  reference.forEach((want, i) => {
    const got = segments[i];
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
  return problems;
}

export class AssertionError extends Error {}

// Ctrl-C or a CI timeout: exit normally, so the "exit" handlers below kill the server.
for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => process.exit(130));

/** Fails with `what`, the expected and the actual value, each on its own line. */
export function assertEqual(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new AssertionError(`${what}\n  expected: ${e}\n  got:      ${a}`);
}

export function assert(condition, message) {
  if (!condition) throw new AssertionError(message);
}

/** playwright-core from the folder scripts/setup.sh installs it in (ESM imports ignore NODE_PATH). */
export function playwright() {
  const require = createRequire(join(npmTools, "node_modules/"));
  return require("playwright-core");
}

/**
 * Headless Chromium from Debian with the flags the wasm-bindgen tests use (WebGPU on
 * SwiftShader), plus `extraArgs`.
 */
export async function launchBrowser(extraArgs = []) {
  const options = JSON.parse(readFileSync(join(repoRoot, "crates/web/webdriver.json"), "utf8"))["goog:chromeOptions"];
  return playwright().chromium.launch({ executablePath: "/usr/bin/chromium", args: [...options.args, ...extraArgs] });
}

/**
 * Collects a page's uncaught errors and console errors, so a failure names its cause rather
 * than only timing out.
 */
export function watchPage(page, log = console.log) {
  const problems = [];
  page.on("pageerror", (err) => {
    problems.push(`uncaught: ${err.message}`);
    log(`  [page error] ${err.message}`);
  });
  page.on("console", (msg) => {
    if (msg.type() === "error" || msg.type() === "warning") log(`  [console ${msg.type()}] ${msg.text()}`);
    if (msg.type() === "error") problems.push(`console: ${msg.text()}`);
  });
  return problems;
}

/**
 * Starts `susurrus serve --port 0 ...args` and resolves once it printed its URL. `requests()`
 * returns the request log so far ({ method, path, status, bytes } per stderr line);
 * `stop()` kills it. It is also killed when this process exits, failing or not.
 */
export function startServer(args) {
  const child = spawn(susurrusBin, ["serve", "--port", "0", ...args], { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] });
  const killOnExit = () => child.kill("SIGKILL");
  process.on("exit", killOnExit);
  const log = [];
  const stderrLines = [];
  let stderrRest = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk) => {
    const lines = (stderrRest + chunk).split("\n");
    stderrRest = lines.pop();
    for (const line of lines) {
      stderrLines.push(line);
      const m = /^([A-Z]+) (\S+) (\d{3}) (\d+)$/.exec(line.trim());
      if (m) log.push({ method: m[1], path: m[2], status: Number(m[3]), bytes: Number(m[4]) });
    }
  });
  let stopped = false;
  const server = {
    url: null,
    requests: () => [...log],
    stderr: () => stderrLines.join("\n"),
    stop() {
      stopped = true;
      process.off("exit", killOnExit);
      child.kill("SIGTERM");
    },
  };
  return new Promise((resolvePromise, reject) => {
    let stdout = "";
    let settled = false;
    const fail = (why) => {
      if (settled) return;
      settled = true;
      server.stop();
      reject(new Error(`susurrus serve ${args.join(" ")}: ${why}\nstderr:\n${server.stderr()}${stderrRest}`));
    };
    const timer = setTimeout(() => fail("printed no URL within 30 s"), 30_000);
    child.on("error", (err) => {
      clearTimeout(timer);
      fail(`could not start ${susurrusBin}: ${err.message}`);
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      // Give stderr a moment to drain so the failure shows the server's last words.
      if (!server.url) setTimeout(() => fail(`exited (code ${code}, signal ${signal}) before printing its URL`), 100);
      else if (!stopped) console.error(`susurrus serve exited during the test (code ${code}, signal ${signal})`);
    });
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
      if (server.url || !stdout.includes("\n")) return;
      const firstLine = stdout.slice(0, stdout.indexOf("\n"));
      const url = /http:\/\/\S+/.exec(firstLine)?.[0];
      clearTimeout(timer);
      if (!url) return fail(`its first stdout line has no http:// URL: ${JSON.stringify(firstLine)}`);
      server.url = url.endsWith("/") ? url : `${url}/`;
      settled = true;
      resolvePromise(server);
    });
  });
}

/** Runs `main`, printing its failure and exiting non-zero; `cleanup` runs either way. */
export async function runTest(name, main) {
  const started = Date.now();
  const cleanups = [];
  try {
    await main((fn) => cleanups.push(fn));
    console.log(`${name}: PASS (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  } catch (err) {
    process.exitCode = 1;
    const detail = err instanceof AssertionError ? err.message : (err?.stack ?? String(err));
    console.error(`${name}: FAIL after ${((Date.now() - started) / 1000).toFixed(1)} s\n${detail}`);
  } finally {
    for (const fn of cleanups.reverse()) {
      try {
        await fn();
      } catch (err) {
        console.error(`${name}: cleanup failed: ${err.message}`);
        process.exitCode = 1;
      }
    }
  }
}

export function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

/**
 * Waits until `selector`'s data-state on the demo page is one of `states` and returns it;
 * fails when the page shows its error box, or after `timeoutMs`.
 */
export async function waitForState(page, selector, states, what, timeoutMs) {
  const started = Date.now();
  for (;;) {
    const { state, error } = await page.evaluate((sel) => {
      const box = document.getElementById("error");
      return { state: document.querySelector(sel).dataset.state, error: box.hidden ? null : box.textContent };
    }, selector);
    if (error !== null) throw new Error(`${what}: the page shows an error: ${error}`);
    if (states.includes(state)) return state;
    assert(Date.now() - started < timeoutMs, `${what}: still "${state}" after ${seconds(timeoutMs)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * The demo page (`www/`) served by `susurrus serve` with the model folder `model` and the VAD
 * network, open in a fresh headless Chromium with `timeoutMs` as the page's default timeout; the server and the
 * browser close through `onCleanup`. Returns the page and the problems `watchPage` collects
 * (its lines logged under `name`). `susurrus serve` makes the page cross-origin isolated (so the
 * package runs its threaded build); with `isolated: false` the browser gets every reply without
 * the two headers that do it, as from a server that does not send them (the plain build).
 * `browserArgs` go to Chromium's command line.
 */
export async function openDemoPage(name, model, onCleanup, timeoutMs, { isolated = true, browserArgs = [] } = {}) {
  const server = await startServer(["--root", join(repoRoot, "www"), "--model", model, "--vad-model", vadModel]);
  onCleanup(() => server.stop());
  const browser = await launchBrowser(browserArgs);
  onCleanup(() => browser.close());
  const page = await browser.newPage();
  page.setDefaultTimeout(timeoutMs);
  const problems = watchPage(page, (line) => console.log(`${name}:${line}`));
  if (!isolated) {
    await page.route("**/*", async (route) => {
      const response = await route.fetch();
      const headers = { ...response.headers() };
      delete headers["cross-origin-opener-policy"];
      delete headers["cross-origin-embedder-policy"];
      await route.fulfill({ response, headers });
    });
  }
  await page.goto(server.url);
  assertEqual(await page.evaluate(() => self.crossOriginIsolated), isolated, "the page's crossOriginIsolated");
  return { page, problems };
}

/** What the package's CPU backend calls itself on a page that is (or is not) cross-origin
 *  isolated: the threaded build with one worker per core (at most 8), else one thread. */
export async function expectedCpuAdapter(page, isolated) {
  const cores = await page.evaluate(() => navigator.hardwareConcurrency);
  const threads = isolated ? Math.max(1, Math.min(cores, 8)) : 1;
  return threads === 1 ? "CPU (WebAssembly, one thread)" : `CPU (WebAssembly, ${threads} threads)`;
}
