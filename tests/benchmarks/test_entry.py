"""The benchmark scripts that take a model, a GGUF or a binary from the user: bad input is one
line naming the script and the problem, exit status 2, never a traceback, and it is found before
any GGUF is written (run as a user runs them)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.factories.scripts import BENCHMARKS, script_path

ROOT = BENCHMARKS.parent
BINARY = "{tmp}/llama-bench"          # an executable file where a llama-bench is asked for


@pytest.mark.parametrize(("script", "args", "says"), [
    ("bench_llamacpp.py", ["--llama-bench", BINARY, "--model", "no-such-model"], "unknown model 'no-such-model'"),
    ("bench_llamacpp.py", ["--llama-bench", BINARY, "--gguf", "/no/such.gguf"], "/no/such.gguf: no such file"),
    ("bench_llamacpp.py", ["--llama-bench", "/no/llama-bench"], "/no/llama-bench: no such file"),
    ("bench_unseen_gguf.py", ["--llama-bench", BINARY, "--model", "no-such-model"], "unknown model 'no-such-model'"),
    ("bench_unseen_gguf.py", ["--llama-bench", "/no/llama-bench"], "/no/llama-bench: no such file"),
    ("bench_cache_shapes.py", ["--llama-bench", "/no/llama-bench"], "/no/llama-bench: no such file"),
])
def test_bad_input_is_one_line_and_exit_2(script, args, says, tmp_path):
    binary = tmp_path / "llama-bench"
    binary.write_text("#!/bin/sh\nexit 1\n")
    binary.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(ROOT), ROOFLAB_CACHE_DIR=str(tmp_path), ROOFLAB_CONFIG_DIR=str(tmp_path),
               ROOFLAB_DATA_DIR=str(tmp_path))
    args = [a.format(tmp=tmp_path) for a in args]
    done = subprocess.run([sys.executable, str(script_path(script)), *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{script}: ") and says in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not list(tmp_path.rglob("*.gguf"))
