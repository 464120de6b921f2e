"""The About box: what rooflab is, and the versions it runs with."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import qVersion
from PySide6.QtWidgets import QMessageBox, QWidget

from rooflab.core import __version__


def versions() -> dict[str, str]:
    """Name -> version of rooflab and what it runs on (torch only if already imported)."""
    import numpy
    import pyqtgraph

    out = {"rooflab": __version__, "Python": platform.python_version(), "Qt": qVersion(),
           "PySide6": pyside_version, "pyqtgraph": pyqtgraph.__version__, "numpy": numpy.__version__}
    try:
        out["gguf"] = metadata.version("gguf")
    except metadata.PackageNotFoundError:
        pass
    torch = sys.modules.get("torch")       # never imported just to print a version
    if torch is not None:
        out["torch"] = str(getattr(torch, "__version__", "?"))
    out["platform"] = platform.platform(terse=True)
    return out


def about_html() -> str:
    rows = "".join(f"<tr><td>{k}</td><td>&nbsp;{v}</td></tr>" for k, v in versions().items())
    return ("<h3>rooflab</h3><p>Predicts how fast a large language model runs on a machine from the "
            "model's real tensor table: the memory clock (bytes ÷ bandwidth) against the compute clock "
            "(FLOPs ÷ peak), for prefill, decode, batching and memory. Predictions are ceilings "
            "unless the machine's efficiency says otherwise.</p>"
            f"<table>{rows}</table><p>Licensed under Apache-2.0.</p>")


def show_about(parent: QWidget) -> None:
    QMessageBox.about(parent, "About rooflab", about_html())
