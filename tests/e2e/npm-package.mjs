// The npm package as a user gets it: `npm pack` of target/npm/susurrus (built by
// scripts/web/build_web.sh), `npm install` of the tarball into a fresh folder, the README's example
// run verbatim in headless Chromium against the real model (its text must equal the reference
// transcript), and `tsc --strict` on a TypeScript file that uses the installed package's API
// (tests/e2e/consumer-check.ts) and on the JavaScript quick starts of README.md and docs/web.md.
// Run by tests/e2e/run.sh.

import { execFileSync } from "node:child_process";
import {
  copyFileSync, createReadStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync,
} from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  assert, assertEqual, clipWav, launchBrowser, modelDir, npmTools, reference, repoRoot, runTest, seconds, startServer, watchPage,
} from "./common.mjs";

const packageDir = join(repoRoot, "target/npm/susurrus");
const EXAMPLE_TIMEOUT_MS = 30 * 60_000;
/** A body text that stays unchanged this long is the example's final output. */
const SETTLED_MS = 120_000;

function run(command, args, cwd) {
  try {
    return execFileSync(command, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (err) {
    throw new Error(`${command} ${args.join(" ")} (in ${cwd}) failed: ${err.message}\n${err.stdout ?? ""}${err.stderr ?? ""}`);
  }
}

/** The README's first ```js block: the example a user copies. */
function readmeExample(readme) {
  const match = /```(?:js|javascript)\r?\n([\s\S]*?)```/.exec(readme);
  assert(match, "node_modules/susurrus/README.md has no ```js code block (the usage example)");
  return match[1];
}

/**
 * A Hugging Face hub for one repository: the default model's files served as the hub serves
 * Systran/faster-whisper-tiny.en, each at /{repo}/resolve/main/{file}, model.bin (an LFS file
 * there) by a 302 to another path as the hub sends LFS files to its CDN, with the CORS header the
 * hub sends; anything else is the hub's 404. Records the paths asked for.
 */
function startHub() {
  const repo = "Systran/faster-whisper-tiny.en";
  const prefix = `/${repo}/resolve/main/`;
  const asked = [];
  const server = createServer((req, res) => {
    const path = new URL(req.url, "http://hub").pathname;
    asked.push(path);
    res.setHeader("Access-Control-Allow-Origin", "*");
    const send = (file) => {
      const on = join(modelDir, file);
      if (!/^[\w.-]+$/.test(file) || !existsSync(on)) {
        res.writeHead(404, { "Content-Type": "text/plain" });
        res.end("Entry not found");
        return;
      }
      res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": statSync(on).size });
      createReadStream(on).pipe(res);
    };
    if (path === `${prefix}model.bin`) {
      res.writeHead(302, { Location: "/lfs/model.bin" });
      res.end();
    } else if (path.startsWith(prefix)) {
      send(path.slice(prefix.length));
    } else if (path.startsWith("/lfs/")) {
      send(path.slice("/lfs/".length));
    } else {
      res.writeHead(404, { "Content-Type": "text/plain" });
      res.end("Repository not found");
    }
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => {
    resolve({ url: `http://127.0.0.1:${server.address().port}`, asked, close: () => server.close() });
  }));
}

function examplePage(example) {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>susurrus README example</title><link rel="icon" href="data:,">
<script type="importmap">{"imports": {"susurrus": "./node_modules/susurrus/index.js"}}</script>
</head>
<body>
<script type="module">
${example}
</script>
</body>
</html>
`;
}

/**
 * Waits until the page body shows `expected`. Fails at once on an uncaught page error, and when
 * the body holds another text that no longer changes (a finished but wrong transcript).
 */
async function waitForBody(page, problems, expected) {
  const started = Date.now();
  let last = null;
  let lastChange = started;
  for (;;) {
    const body = (await page.evaluate(() => document.body.innerText)).trim();
    if (body === expected) return Date.now() - started;
    assertEqual(problems, [], "uncaught errors and console errors while the README example ran");
    if (body !== last) {
      console.log(`npm-package:   body after ${seconds(Date.now() - started)}: ${JSON.stringify(body)}`);
      last = body;
      lastChange = Date.now();
    }
    if (body !== "" && Date.now() - lastChange > SETTLED_MS) {
      assertEqual(body, expected, `page body (unchanged for ${seconds(SETTLED_MS)}) vs the reference transcript`);
    }
    assert(Date.now() - started < EXAMPLE_TIMEOUT_MS,
      `the README example showed no transcript within ${seconds(EXAMPLE_TIMEOUT_MS)}; body: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * The JavaScript quick starts of the repository's README and docs/web.md as TypeScript modules:
 * the names they take from the page around them (the picked `file`, an abort `signal`) are
 * declared, the rest is each page's first ```js block verbatim, so tsc checks every call and
 * option name against the installed package's index.d.ts.
 */
function quickStarts(dir) {
  const names = [];
  for (const page of ["README.md", "docs/web.md"]) {
    const example = readmeExample(readFileSync(join(repoRoot, page), "utf8"));
    const name = `quickstart-${page.replace(/[^a-z]+/gi, "-").toLowerCase()}.ts`;
    writeFileSync(join(dir, name), `export {};\ndeclare const file: File;\ndeclare const signal: AbortSignal;\n${example}`);
    names.push(name);
  }
  return names;
}

function typeCheck(dir) {
  copyFileSync(join(repoRoot, "tests/e2e/consumer-check.ts"), join(dir, "check.ts"));
  const files = ["check.ts", ...quickStarts(dir)];
  const tsc = join(npmTools, "node_modules/.bin/tsc");
  // Both resolutions a TypeScript user may have; skipLibCheck off so index.d.ts itself is checked.
  for (const [module, moduleResolution] of [["esnext", "bundler"], ["nodenext", "nodenext"]]) {
    const config = {
      compilerOptions: {
        strict: true, noEmit: true, skipLibCheck: false, target: "es2022", lib: ["dom", "es2022"],
        module, moduleResolution, types: [],
      },
      files,
    };
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(config, null, 2));
    run(tsc, ["-p", "tsconfig.json"], dir);
    console.log(`npm-package: tsc --strict (module ${module}, moduleResolution ${moduleResolution}) accepts ${files.join(", ")}`);
  }
}

await runTest("npm-package", async (onCleanup) => {
  const ref = reference();
  const work = mkdtempSync(join(tmpdir(), "susurrus-npm-"));
  onCleanup(() => rmSync(work, { recursive: true, force: true }));

  // npm pack.
  const packed = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", work], packageDir));
  const tarball = join(work, packed[0].filename);
  console.log(`npm-package: npm pack: ${packed[0].filename}, ${(statSync(tarball).size / 1024).toFixed(1)} KB ` +
    `(${(packed[0].unpackedSize / 1024).toFixed(1)} KB unpacked, ${packed[0].entryCount} files)`);

  // npm install into a fresh folder (no registry needed: the package has no dependencies).
  const app = join(work, "app");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "susurrus-e2e-consumer", version: "0.0.0", private: true, type: "module" }));
  run("npm", ["install", "--offline", "--no-audit", "--no-fund", tarball], app);
  const installed = join(app, "node_modules/susurrus");
  assertEqual(JSON.parse(readFileSync(join(installed, "package.json"), "utf8")).name, "susurrus", "name of the installed package");
  const files = readdirSync(installed);
  for (const file of ["index.js", "index.d.ts", "worker.js", "README.md"]) {
    assert(existsSync(join(installed, file)), `node_modules/susurrus lacks ${file}; it has: ${files.join(", ")}`);
  }
  assert(files.some((f) => f.endsWith(".wasm")), `node_modules/susurrus has no .wasm file; it has: ${files.join(", ")}`);
  console.log(`npm-package: installed into ${app}: ${files.join(", ")}`);

  // The README's example, verbatim, against the real model and the golden clip.
  const example = readmeExample(readFileSync(join(installed, "README.md"), "utf8"));
  console.log(`npm-package: README example:\n${example.replace(/^/gm, "    ")}`);
  writeFileSync(join(app, "index.html"), examplePage(example));
  copyFileSync(clipWav, join(app, "audio.wav"));
  const server = await startServer(["--root", app, "--model", modelDir]);
  onCleanup(() => server.stop());
  const browser = await launchBrowser();
  onCleanup(() => browser.close());
  const page = await browser.newPage();
  const problems = watchPage(page, (line) => console.log(`npm-package:${line}`));
  await page.goto(server.url);
  const ms = await waitForBody(page, problems, ref.text);
  assertEqual(problems, [], "uncaught errors and console errors while the README example ran");
  assert(server.requests().some((r) => r.path === "/audio.wav" && r.status === 200), "the README example never fetched /audio.wav");
  console.log(`npm-package: the README example shows the reference transcript after ${seconds(ms)}`);

  // A model by name, from a hub (here a local one, as `hub` points a page at a mirror).
  const hub = await startHub();
  onCleanup(() => hub.close());
  writeFileSync(join(app, "by-name.html"), examplePage(`import { Transcriber } from "susurrus";
const transcriber = await Transcriber.load("tiny.en", { hub: ${JSON.stringify(hub.url)}, cache: false });
const audio = await (await fetch("/audio.wav")).arrayBuffer();
const { text } = await transcriber.transcribe(audio);
document.body.textContent = text;`));
  const byName = await browser.newPage();
  const byNameProblems = watchPage(byName, (line) => console.log(`npm-package (by name):${line}`));
  await byName.goto(`${server.url}by-name.html`);
  const nameMs = await waitForBody(byName, byNameProblems, ref.text);
  for (const path of ["config.json", "model.bin", "tokenizer.json"].map((f) => `/Systran/faster-whisper-tiny.en/resolve/main/${f}`)) {
    assert(hub.asked.includes(path), `the hub was never asked for ${path}; it was asked for ${hub.asked.join(", ")}`);
  }
  assert(hub.asked.includes("/lfs/model.bin"), `model.bin's redirect was not followed: ${hub.asked.join(", ")}`);
  console.log(`npm-package: Transcriber.load("tiny.en") from the hub shows the reference transcript after ${seconds(nameMs)}`);

  // Any recording: a phone's voice memo (M4A/AAC), a video (MP4: H.264, two AAC tracks; WebM:
  // VP8, Opus), a browser recording (WebM/Opus), and every other container and codec the
  // fixtures hold, read a block at a time by the package's worker (demuxed in wasm, AAC and Opus
  // decoded by WebCodecs, ALAC, FLAC and PCM by the package), give the WAV's words; a cut M4A
  // says where it was cut.
  const recordings = { "speech.wav": "speech_16k_s16.wav", "memo.m4a": "speech_44k1_stereo.m4a",
    "screen.mp4": "video_two_audio_tracks.mp4", "recording.webm": "speech_opus.webm", "video.webm": "video_opus.webm",
    "faststart-less.m4a": "speech_moov_last.m4a", "alac.m4a": "speech_alac.m4a", "alac.caf": "speech_alac.caf",
    "speech.aiff": "speech_16k.aiff", "speech.aac": "speech_22k05.aac", "flac.mkv": "speech_flac.mkv",
    "cut.m4a": "truncated_44k1_stereo.m4a" };
  for (const [name, fixture] of Object.entries(recordings)) {
    copyFileSync(join(repoRoot, "tests/fixtures/audio", fixture), join(app, name));
  }
  writeFileSync(join(app, "recordings.html"), examplePage(`import { Transcriber } from "susurrus";
const transcriber = await Transcriber.load("/model/", { cache: false });
const heard = {};
for (const name of ${JSON.stringify(Object.keys(recordings))}) {
  const { text, warnings } = await transcriber.transcribe(await (await fetch("/" + name)).blob());
  heard[name] = name === "cut.m4a" ? warnings.map((w) => w.split(" at byte")[0]) : text.trim();
}
document.body.textContent = JSON.stringify(heard);`));
  const recordingsPage = await browser.newPage();
  const recordingsProblems = watchPage(recordingsPage, (line) => console.log(`npm-package (recordings):${line}`));
  await recordingsPage.goto(`${server.url}recordings.html`);
  const spoken = "Please read this short sentence aloud.";
  const expected = Object.fromEntries(Object.keys(recordings).map((name) =>
    [name, name === "cut.m4a" ? ["the file ends inside a packet"] : spoken]));
  const recordingsMs = await waitForBody(recordingsPage, recordingsProblems, JSON.stringify(expected));
  console.log(`npm-package: ${Object.keys(recordings).length - 2} recordings (M4A, MP4, WebM, CAF, AIFF, AAC, MKV) give ` +
    `the WAV's words, a cut M4A its warning, after ${seconds(recordingsMs)}`);

  typeCheck(app);
});
