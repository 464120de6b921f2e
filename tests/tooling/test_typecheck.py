"""mypy --strict over rooflab.core and rooflab.gui, as installed (they live in core/ and gui/).

mypy cannot follow the editable install's import hook, so ``mypy core`` alone sees every
``rooflab.*`` import as Any and checks little across modules. This stages the package the way
a wheel lays it out (links, no copies) and checks that.

The staging folder and mypy's cache live in the checkout's .mypy_cache (git ignores it) at a
fixed path, so a re-run checks only what changed since the last one; a clean clone (CI) has no
cache and checks everything. mypy writes each cache file atomically, so two runs at once in one
checkout cost time, not correctness."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _workdir(fallback: Path) -> Path:
    """A fixed folder under the checkout's .mypy_cache (the cache is only reused when the
    staged paths stay the same); ``fallback`` when the checkout cannot be written."""
    work = ROOT / ".mypy_cache" / "rooflab-strict"
    try:
        (work / "rooflab").mkdir(parents=True, exist_ok=True)
    except OSError:
        work = fallback
        (work / "rooflab").mkdir(parents=True, exist_ok=True)
    return work


def _stage(package: Path) -> None:
    """Link core/, gui/ and resources/ into ``package`` (re-linked if a stale link points elsewhere)."""
    for name in ("core", "gui", "resources"):
        link = package / name
        if link.is_symlink() and Path(os.readlink(link)) == ROOT / name:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(ROOT / name, link)


@pytest.mark.skipif(shutil.which("mypy") is None and not (Path(sys.executable).parent / "mypy").exists(),
                    reason="mypy is not installed")
def test_core_and_gui_are_mypy_strict_clean(tmp_path):
    work = _workdir(tmp_path)
    _stage(work / "rooflab")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--explicit-package-bases",
         "--namespace-packages", "--cache-dir", str(work / "cache"), "-p", "rooflab.core", "-p", "rooflab.gui"],
        cwd=work, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
