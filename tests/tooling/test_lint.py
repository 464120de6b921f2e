"""ruff over the project: house style, and no module-level torch/transformers import anywhere
(the rule that keeps start-up fast and core importable without torch)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_clean():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "core", "gui", "tests", "benchmarks",
                           "packaging"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
