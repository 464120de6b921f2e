"""A test run leaves no temporary folder behind (tests/conftest.py makes one per process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ONE_TEST = "tests/core/report/test_report_files.py::test_header_block_records_everything"


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_run_removes_its_session_folders(tmp_path, workers):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", workers,
                             "--basetemp", str(tmp_path / "base"), ONE_TEST],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in scratch.glob("rooflab-tests-*")) == []
