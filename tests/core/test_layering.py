"""The engine never pulls in Qt or torch: importing all of core loads neither."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import rooflab.core


def test_core_imports_no_qt_or_torch():
    modules = [m.name for m in pkgutil.walk_packages(rooflab.core.__path__, "rooflab.core.")]
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('PySide6', 'pyqtgraph', 'torch', 'transformers', 'shiboken6'))\n"
            "print(','.join(bad))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
    assert len(modules) > 10
