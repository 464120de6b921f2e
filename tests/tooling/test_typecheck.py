"""mypy --strict over rooflab.core, as installed (``rooflab.core`` lives in core/).

mypy cannot follow the editable install's import hook, so ``mypy core`` alone sees every
``rooflab.*`` import as Any and checks little across modules. This stages the package the way
a wheel lays it out (links, no copies) and checks that."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("mypy") is None and not (Path(sys.executable).parent / "mypy").exists(),
                    reason="mypy is not installed")
def test_core_is_mypy_strict_clean(tmp_path):
    package = tmp_path / "rooflab"
    package.mkdir()
    for name in ("core", "resources"):
        os.symlink(ROOT / name, package / name)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--explicit-package-bases",
         "--namespace-packages", "--cache-dir", str(tmp_path / "cache"), "-p", "rooflab.core"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
