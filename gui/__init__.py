"""rooflab's desktop window (PySide6 + pyqtgraph) over ``rooflab.core``.

Importing this package loads no Qt: ``rooflab.gui.main`` is the console entry point and must
stay light for the command-line subcommands. The Qt modules are imported by the modules that
need them.
"""

from __future__ import annotations

import os
import sys

# pyqtgraph picks its Qt binding when first imported; make it PySide6 before anyone does.
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")


def _immortalise_singletons() -> None:
    """Work around PySide6 6.12 on CPython 3.11: its wrappers hand back ``None`` (from every
    void Qt method) and, on some paths, ``True``/``False`` without taking a reference, which is
    correct only since 3.12 made those objects immortal. On 3.11 each call lowers the count
    until Python aborts ("none_dealloc", "bool_dealloc") after a few thousand calls. Give the
    three the huge count 3.12 gives them; a no-op on 3.12+ and on other interpreters."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return
    import ctypes

    for obj in (None, True, False):
        refcount = ctypes.c_ssize_t.from_address(id(obj))   # ob_refcnt is PyObject's first field
        refcount.value = max(refcount.value, 1 << 60)


_immortalise_singletons()
