"""The benchmarks' Python: the reference environment scripts/python_venv.sh makes (once;
faster-whisper and onnx, pinned) and prints. A benchmark run with any python3 calls
`run_in_venv()` before importing faster-whisper, which starts it again under the venv's
interpreter unless it already runs there."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_in_venv():
    """Makes sure the venv exists; re-executes the running script in it when needed."""
    out = subprocess.run([str(ROOT / "scripts" / "python_venv.sh")], check=True, stdout=subprocess.PIPE, text=True)
    python = out.stdout.strip().splitlines()[-1]
    venv = os.path.dirname(os.path.dirname(python))
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(python, [python, os.path.abspath(sys.argv[0]), *sys.argv[1:]])
