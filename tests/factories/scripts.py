"""A script of ``benchmarks/`` loaded as a module, so its pure parts can be tested."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
FOLDERS = ("speed", "accuracy", "robustness")       # what a script checks: time, agreement, bad input


def script_path(name: str) -> Path:
    """``benchmarks/<folder>/<name>`` for the one folder that holds it (``name`` with or without
    ``.py``)."""
    file = name if name.endswith(".py") else f"{name}.py"
    found = [BENCHMARKS / folder / file for folder in FOLDERS if (BENCHMARKS / folder / file).is_file()]
    assert len(found) == 1, f"{file}: in {len(found)} of benchmarks/{{{','.join(FOLDERS)}}}"
    return found[0]


def load_script(name: str) -> ModuleType:
    """``benchmarks/<folder>/<name>.py`` as the module ``name`` (registered in ``sys.modules``:
    dataclasses look their module up by name)."""
    path = script_path(name)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
