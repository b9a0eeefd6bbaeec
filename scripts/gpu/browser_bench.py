#!/usr/bin/env python3
"""Opens the benchmark page (www/bench.html) in a headless Chromium driven over the DevTools
protocol on a pipe (--remote-debugging-pipe: no node, no websocket library), waits for the
page's window.benchResult, samples the GPU's used memory (nvidia-smi) while it runs, and prints
the result as one JSON object. Used by scripts/gpu/bench_browser_gpu.sh on the GPU machine."""

import argparse
import fcntl
import json
import os
import subprocess
import sys
import time

# Headless Chromium on a real GPU through Vulkan (../shared/TOOLCHAIN.md): without
# --use-vulkan=native and --disable-vulkan-surface WebGPU falls back to SwiftShader.
FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu-sandbox", "--disable-dev-shm-usage",
    "--enable-unsafe-webgpu", "--ignore-gpu-blocklist", "--enable-features=Vulkan,WebGPU",
    "--use-vulkan=native", "--use-angle=vulkan", "--disable-vulkan-surface",
    "--enable-webgpu-developer-features", "--no-first-run", "--no-default-browser-check",
]


class Browser:
    """A Chromium process and its DevTools pipe (fd 3: commands in, fd 4: replies out)."""

    def __init__(self, chromium, user_dir):
        to_child, self.out = os.pipe()
        self.inp, from_child = os.pipe()
        # Moved above 3 and 4 first, so that the child's dup2 onto 3 and 4 always copies
        # (a copy is inheritable; pipes are not, and dup2 of a descriptor onto itself keeps that).
        high_in, high_out = fcntl.fcntl(to_child, fcntl.F_DUPFD, 10), fcntl.fcntl(from_child, fcntl.F_DUPFD, 10)
        os.close(to_child)
        os.close(from_child)
        to_child, from_child = high_in, high_out

        def fds():
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        self.proc = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={user_dir}", "--remote-debugging-pipe", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        os.close(to_child)
        os.close(from_child)
        self.next_id = 0
        self.buffer = b""

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.out, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def receive(self):
        while b"\0" not in self.buffer:
            chunk = os.read(self.inp, 1 << 16)
            if not chunk:
                err = self.proc.stderr.read().decode(errors="replace")[-2000:] if self.proc.stderr else ""
                raise RuntimeError(f"Chromium closed its DevTools pipe: {err}")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self):
        try:
            self.send("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def gpu_memory_mib():
    """The GPU's used memory in MiB (nvidia-smi), or None without it."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10)
        return float(out.stdout.split()[0])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chromium", required=True)
    parser.add_argument("--url", required=True, help="the benchmark page's URL with its query")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for the result")
    args = parser.parse_args()

    baseline = gpu_memory_mib()
    browser = Browser(args.chromium, f"/tmp/susurrus-chromium-profile-{os.getpid()}")
    try:
        target = browser.send("Target.createTarget", {"url": args.url})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        started, peak, samples, shown = time.time(), baseline, [], None
        result = None
        while time.time() - started < args.timeout:
            memory = gpu_memory_mib()
            state = browser.send("Runtime.evaluate", {
                "expression": "JSON.stringify([document.getElementById('status')?.textContent ?? null,"
                              " window.benchResult === undefined ? null : window.benchResult])",
                "returnByValue": True,
            }, session)["result"].get("value")
            status, value = json.loads(state) if state else (None, None)
            if memory is not None:
                # With the page's status: what it was doing (how far into a long recording).
                samples.append((round(time.time() - started, 1), memory, status))
                peak = memory if peak is None else max(peak, memory)
            if status != shown:
                print(f"browser_bench: {time.time() - started:.1f} s: {status}", file=sys.stderr)
                shown = status
            if value is not None:
                result = value
                break
            time.sleep(1)
        if result is None:
            status = browser.send("Runtime.evaluate", {
                "expression": "document.getElementById('status')?.textContent", "returnByValue": True,
            }, session)["result"].get("value")
            result = {"error": f"no result after {args.timeout:.0f} s (page status: {status})"}
        result["gpuMemoryMiB"] = {"before": baseline, "peak": peak, "samples": samples}
        print(json.dumps(result))
    finally:
        browser.close()
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
