"""Every dotted reference to one of our modules in a docstring or comment of core/ or gui/
(````measure.engines.engine````, ````rooflab.core.io.gguf````, ````predict.expected.expected_on````)
names a module, or a name in a module, that exists: a reference left behind by a move points a
newcomer at nothing (round 3 found ````measure.transfer```` and ````measure.model````, gone for
several rounds)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = {"values", "io", "predict", "calibration", "report", "measure", "cli", "files", "app", "jobs", "errors"}
GUI = {"shell", "export", "controllers", "dialogs", "panels", "plots", "state", "widgets", "workers", "main"}
REFERENCE = re.compile(r"``((?:rooflab\.)?(?:(?:core|gui)\.)?[a-z_]+(?:\.[A-Za-z_]+)+)``")


def resolves(reference: str) -> bool | None:
    """True when ``reference`` names a module or a name in one; None when it is not ours."""
    parts = reference.split(".")
    if parts[0] == "rooflab":
        parts = parts[1:]
    if parts and parts[0] in ("core", "gui"):
        top, parts = parts[0], parts[1:]
    elif parts[0] in CORE:
        top = "core"
    elif parts[0] in GUI:
        top = "gui"
    else:
        return None
    for cut in range(len(parts), -1, -1):
        try:
            found: object = importlib.import_module(".".join(["rooflab", top, *parts[:cut]]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                found = getattr(found, name)
        except AttributeError:
            return False
        return True
    return False


def test_docstring_references_resolve() -> None:
    broken = []
    for path in sorted([*ROOT.glob("core/**/*.py"), *ROOT.glob("gui/**/*.py")]):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in REFERENCE.finditer(line):
                if resolves(match.group(1)) is False:
                    broken.append(f"{path.relative_to(ROOT)}:{number}: {match.group(1)}")
    assert not broken, "\n".join(broken)


def test_a_reference_to_a_module_that_is_gone_is_found() -> None:
    assert resolves("measure.engines.engine.gguf_for") is True
    assert resolves("rooflab.core.io") is True
    assert resolves("measure.transfer") is False
    assert resolves("predict.expected.no_such_function") is False
    assert resolves("numpy.linalg") is None
