"""The benchmark scripts that take a model, a GGUF or a binary from the user: bad input is one
line naming the script and the problem, exit status 2, never a traceback (run as a user runs them)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.factories.scripts import BENCHMARKS

ROOT = BENCHMARKS.parent


@pytest.mark.parametrize(("script", "args", "says"), [
    ("bench_llamacpp.py", ["--llama-bench", "--model", "no-such-model"], "unknown model 'no-such-model'"),
    ("bench_llamacpp.py", ["--llama-bench", "--gguf", "/no/such.gguf"], "/no/such.gguf: no such file"),
    ("bench_unseen_gguf.py", ["--model", "no-such-model"], "unknown model 'no-such-model'"),
])
def test_bad_input_is_one_line_and_exit_2(script, args, says, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), ROOFLAB_CACHE_DIR=str(tmp_path), ROOFLAB_CONFIG_DIR=str(tmp_path),
               ROOFLAB_DATA_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{script}: ") and says in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
