// The npm package as a user gets it: `npm pack` of target/npm/susurrus (built by
// scripts/web/build_web.sh), `npm install` of the tarball into a fresh folder, the README's example
// run verbatim in headless Chromium against the real model (its text must equal the reference
// transcript), and `tsc --strict` on a TypeScript file that uses the installed package's API
// (tests/e2e/consumer-check.ts) and on the JavaScript quick starts of README.md and docs/web.md.
// Run by tests/e2e/run.sh.

import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
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

  typeCheck(app);
});
