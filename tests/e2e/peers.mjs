// Susurrus side by side with the browser peers in one headless Chromium, on the same tiny.en
// weights and the same samples (tests/e2e/peers/page.js runs one engine per page load):
//   - Susurrus's npm package on the CPU (1 and 2 threads; WebGPU where the browser has a
//     hardware adapter), with the f16 weights and with their int8 quantization
//     (scripts/models/fetch_model.sh tiny.en-int8, CTranslate2's own quantizer),
//   - transformers.js 4 on onnxruntime-web's WASM backend, fp32 and q8, with the ONNX export
//     of our weights (scripts/models/onnx_export.py),
//   - whisper.cpp's wasm build (@transcribe/shout) with their ggml conversion
//     (scripts/models/ggml_convert.py).
// Each engine runs in a fresh browser context (nothing cached) on a cross-origin isolated page
// (`susurrus serve` sends COOP/COEP), so every engine may use its threads. It prints, per clip
// and engine: load time, the median transcription time and its real-time factor, the bytes
// fetched (code gzipped as a server would send it, and model), and the transcript's word
// error rate against faster-whisper's greedy transcript.
//
//   node tests/e2e/peers.mjs             smoke check (tests/e2e/run.sh): every engine, one thread,
//                                        once (no warm-up) on a 5 s golden clip; Susurrus's text
//                                        exact, the peers' close to faster-whisper's
//   node tests/e2e/peers.mjs --bench     the benchmark (scripts/bench/bench_browser_peers.sh prepares
//                                        it): jfk.wav (11 s), the median of 3 runs after a
//                                        warm-up, and the 133 s golden clip, once; 1 and 2
//                                        threads. whisper.cpp's wasm build runs jfk once (a run
//                                        takes a minute), not the long clip (it would take 20)
// Options: --runs N, --threads 1,2, --clips jfk,long, --engines susurrus,transformers.js,...
// Paths: SUSURRUS_BIN, SUSURRUS_MODEL (as the other e2e tests), SUSURRUS_ONNX_MODEL (the
// export's folder), SUSURRUS_GGML_MODEL (the ggml file), the peers under ~/.cache/susurrus/peers
// (scripts/setup.sh peers).

import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { assert, launchBrowser, modelDir, repoRoot, runTest, startServer, watchPage } from "./common.mjs";

const cache = join(homedir(), ".cache/susurrus");
const peers = join(cache, "peers");
const onnxModel = process.env.SUSURRUS_ONNX_MODEL ?? join(cache, "models/whisper-tiny.en-onnx");
const ggmlModel = process.env.SUSURRUS_GGML_MODEL ?? join(cache, "models/ggml-tiny.en/ggml-tiny.en.bin");
const int8Model = process.env.SUSURRUS_INT8_MODEL ?? join(cache, "models/whisper-tiny.en-int8-ct2");
const golden = (name) => join(repoRoot, `tests/fixtures/golden/${name}`);

/** The clips: a path and faster-whisper's greedy transcript (the golden files', else computed). */
const CLIPS = {
  short_2: { path: golden("short_2.wav"), reference: () => goldenText("short_2") },
  jfk: { path: join(peers, "jfk.wav"), reference: () => fasterWhisperText(join(peers, "jfk.wav")) },
  // Long: one run, no warm-up (loading is timed apart, and a run takes minutes).
  long: { path: golden("long.wav"), reference: () => goldenText("long"), long: true },
};

/** The engines, as page.js names them, with their query string. */
const ENGINES = {
  "susurrus": (threads) => ({ label: `Susurrus, CPU`, query: `engine=susurrus&backend=cpu&threads=${threads}` }),
  "susurrus-int8": (threads) => ({
    label: "Susurrus, CPU, int8",
    query: `engine=susurrus&backend=cpu&threads=${threads}&model=/models/whisper-tiny.en-int8-ct2/`,
  }),
  "susurrus-webgpu": () => ({ label: "Susurrus, WebGPU", query: "engine=susurrus&backend=webgpu&threads=1" }),
  "transformers.js-fp32": (threads) => ({ label: "transformers.js 4.3.2, WASM, fp32", query: `engine=transformers.js&dtype=fp32&threads=${threads}` }),
  "transformers.js-q8": (threads) => ({ label: "transformers.js 4.3.2, WASM, q8", query: `engine=transformers.js&dtype=q8&threads=${threads}` }),
  "whisper.cpp": (threads) => ({ label: "whisper.cpp wasm (@transcribe/shout 1.0.7)", query: `engine=whisper.cpp&threads=${threads}` }),
};

const { values: args } = parseArgs({
  options: {
    bench: { type: "boolean", default: false },
    runs: { type: "string" },
    threads: { type: "string" },
    clips: { type: "string" },
    engines: { type: "string" },
  },
});
const list = (value, fallback) => (value ?? fallback).split(",").filter(Boolean);
const runs = Number(args.runs ?? (args.bench ? 3 : 1));
const threadCounts = list(args.threads, args.bench ? "1,2" : "1").map(Number);
const clips = list(args.clips, args.bench ? "jfk,long" : "short_2");
/** Timed runs and warm-up runs of an engine on a clip. */
function plan(name, clip) {
  if (!args.bench || (name === "whisper.cpp" && !CLIPS[clip].long)) return { runs: 1, warmup: 0 };
  if (name === "whisper.cpp") return null;
  return CLIPS[clip].long ? { runs: 1, warmup: 0 } : { runs, warmup: 1 };
}
const engines = list(args.engines, Object.keys(ENGINES).join(","));
for (const name of clips) assert(name in CLIPS, `unknown clip ${name} (${Object.keys(CLIPS)})`);
for (const name of engines) assert(name in ENGINES, `unknown engine ${name} (${Object.keys(ENGINES)})`);

function goldenText(name) {
  const run = JSON.parse(readFileSync(golden(`${name}.json`), "utf8")).runs.find((r) => r.name === "default");
  return run.text.trim();
}

/** faster-whisper's greedy float32 transcript (the reference environment, scripts/python_venv.sh). */
function fasterWhisperText(path) {
  const python = join(cache, "venv/bin/python");
  const script = `import sys
from faster_whisper import WhisperModel
m = WhisperModel(sys.argv[1], device="cpu", compute_type="float32", cpu_threads=2)
segments, _ = m.transcribe(sys.argv[2], beam_size=1, language="en")
print("".join(s.text for s in segments).strip())`;
  return execFileSync(python, ["-c", script, modelDir, path], { encoding: "utf8" }).trim();
}

/** Words, lowercased, without punctuation: what the word error rate compares. */
const words = (text) => text.toLowerCase().replace(/[^a-z0-9' ]+/g, " ").split(/\s+/).filter(Boolean);

/** Word error rate of `text` against `reference` (Levenshtein distance over words). */
function wordErrorRate(text, reference) {
  const a = words(reference), b = words(text);
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length] / Math.max(1, a.length);
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** The served folder: the page, the package, the peers' files, the converted models, the clips (links). */
function stage() {
  const root = join(repoRoot, "target/e2e/peers-root");
  rmSync(root, { recursive: true, force: true });
  mkdirSync(join(root, "models"), { recursive: true });
  mkdirSync(join(root, "clips"));
  const links = {
    "index.html": join(repoRoot, "tests/e2e/peers/index.html"),
    "page.js": join(repoRoot, "tests/e2e/peers/page.js"),
    "pkg": join(repoRoot, "target/npm/susurrus"),
  };
  if (engines.includes("susurrus-int8")) links["models/whisper-tiny.en-int8-ct2"] = int8Model;
  if (engines.some((name) => name.startsWith("transformers.js"))) {
    links["transformers"] = join(peers, "npm/@huggingface/transformers/dist");
    links["ort"] = join(peers, "npm/onnxruntime-web/dist");
    links["models/whisper-tiny.en-onnx"] = onnxModel;
  }
  if (engines.includes("whisper.cpp")) {
    links["shout"] = join(peers, "npm/@transcribe/shout/src/shout");
    links["transcriber"] = join(peers, "npm/@transcribe/transcriber/src");
    links["models/ggml-tiny.en.bin"] = ggmlModel;
  }
  for (const name of clips) links[`clips/${name}.wav`] = CLIPS[name].path;
  for (const [name, target] of Object.entries(links)) {
    assert(existsSync(target), `${target} is missing (scripts/bench/bench_browser_peers.sh prepares everything)`);
    symlinkSync(target, join(root, name));
  }
  return root;
}

/**
 * The bytes an engine fetched, from the server's request log: model files (the model folders)
 * and code, the latter also gzipped (as a web server would send it; this one sends files as
 * they are).
 */
function fetched(requests, root) {
  let model = 0, code = 0, codeGzip = 0;
  for (const { path, status, bytes } of requests) {
    if (status !== 200 || path.startsWith("/clips/") || path === "/page.js" || path.startsWith("/index.html") || path.startsWith("/?")) continue;
    const file = decodeURIComponent(path.split("?")[0]);
    if (file.startsWith("/model/") || file.startsWith("/models/")) {
      model += bytes;
    } else {
      code += bytes;
      codeGzip += gzipSync(readFileSync(join(root, file)), { level: 6 }).length;
    }
  }
  return { model, code, codeGzip };
}

async function runEngine(browser, server, root, name, threads, clip, { runs, warmup }) {
  const { label, query } = ENGINES[name](threads);
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    const problems = watchPage(page, (line) => console.log(`peers ${name}:${line}`));
    const before = server.requests().length;
    await page.goto(`${server.url}index.html?${query}&clip=/clips/${clip}.wav&runs=${runs}&warmup=${warmup}`);
    await page.waitForFunction(() => window.peerResult !== undefined, null, { timeout: 20 * 60_000, polling: 250 });
    const result = await page.evaluate(() => window.peerResult);
    if (result.error) throw new Error(`${label} failed on the page: ${result.error}\n${problems.join("\n")}\nrequests: ${server.requests().slice(before).map((r) => `${r.status} ${r.path}`).join(", ")}`);
    return { name, label, threads, clip, ...result, bytes: fetched(server.requests().slice(before), root) };
  } finally {
    await context.close();
  }
}

const mb = (n) => (n / 1e6).toFixed(2);

await runTest(args.bench ? "peers (benchmark)" : "peers", async (onCleanup) => {
  const root = stage();
  const server = await startServer(["--root", root, "--model", modelDir]);
  onCleanup(() => server.stop());
  const browser = await launchBrowser();
  onCleanup(() => browser.close());
  // WebGPU only where the adapter is real hardware: on a software one (SwiftShader) the package's
  // auto picks the CPU, and timing it there says nothing.
  const probe = await browser.newPage();
  await probe.goto(`${server.url}index.html`);
  const hardwareGpu = await probe.evaluate(async () => {
    const adapter = await navigator.gpu?.requestAdapter();
    return adapter ? !(adapter.info?.isFallbackAdapter ?? false) && !/swiftshader/i.test(adapter.info?.architecture + adapter.info?.description) : false;
  });
  await probe.close();

  const rows = [];
  const problems = [];
  for (const clip of clips) {
    const reference = CLIPS[clip].reference();
    console.log(`\n${clip}: faster-whisper greedy: ${reference}`);
    for (const name of engines) {
      if (name === "susurrus-webgpu" && !hardwareGpu) {
        console.log(`peers: ${name}: skipped (no hardware WebGPU adapter in this browser)`);
        continue;
      }
      const runPlan = plan(name, clip);
      if (runPlan === null) {
        console.log(`peers: ${name}: not run on ${clip} (minutes per run at its speed on the short clip)`);
        continue;
      }
      for (const threads of name === "susurrus-webgpu" ? [1] : threadCounts) {
        const r = await runEngine(browser, server, root, name, threads, clip, runPlan);
        const ms = median(r.times);
        const wer = wordErrorRate(r.text, reference);
        rows.push({ ...r, ms, rtf: ms / 1000 / r.audioS, wer, ...runPlan });
        console.log(`peers: ${clip} ${r.label} threads=${threads}: load ${r.loadMs.toFixed(0)} ms, ` +
          `transcribe ${ms.toFixed(0)} ms (runs ${r.times.map((t) => t.toFixed(0)).join(" ")}; warm-up ${r.firstMs?.toFixed(0) ?? "none"}), ` +
          `RTF ${(ms / 1000 / r.audioS).toFixed(3)}, WER ${(100 * wer).toFixed(1)}%, info ${JSON.stringify(r.info)}\n  text: ${r.text}`);
        if (!r.crossOriginIsolated) problems.push(`${r.label}: the page was not cross-origin isolated`);
        const exact = name === "susurrus" || name === "susurrus-webgpu";
        if (exact && r.text.trim() !== reference) problems.push(`${r.label} (${threads} threads) on ${clip}: ${JSON.stringify(r.text)}, faster-whisper ${JSON.stringify(reference)}`);
        if ((name === "susurrus" || name === "susurrus-int8") && r.info.threads !== threads) problems.push(`Susurrus asked for ${threads} threads, info.threads ${r.info.threads}`);
        // The smoke check: the peers run the same weights; whisper.cpp computes its own
        // log-mel, and int8 and q8 round the weights, so a word may differ, not more. (The benchmark
        // reports their long-form word error rates: their long-form methods differ.)
        if (!args.bench && !exact && wer > 0.15) problems.push(`${r.label} (${threads} threads) on ${clip}: WER ${wer}: ${JSON.stringify(r.text)}`);
      }
    }
  }

  console.log(`\n| clip | engine | threads | load (s) | transcribe (s) | runs | RTF | WER | code gz (MB) | model (MB) |`);
  console.log(`|---|---|---|---|---|---|---|---|---|---|`);
  for (const r of rows) {
    console.log(`| ${r.clip} (${r.audioS.toFixed(1)} s) | ${r.label} | ${r.name === "susurrus-webgpu" ? "–" : r.threads} | ` +
      `${(r.loadMs / 1000).toFixed(2)} | ${(r.ms / 1000).toFixed(2)} | ${r.runs}${r.warmup ? " + warm-up" : ", cold"} | ` +
      `${r.rtf.toFixed(3)} | ${(100 * r.wer).toFixed(1)}% | ${mb(r.bytes.codeGzip)} | ${mb(r.bytes.model)} |`);
  }
  console.log(`(transcribe: the median of the runs; Chromium ${browser.version()}; ` +
    `WebGPU ${hardwareGpu ? "on a hardware adapter" : "absent or software: not measured"})`);
  assert(problems.length === 0, problems.join("\n"));
});
