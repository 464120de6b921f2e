"""rooflab's desktop window (PySide6 + pyqtgraph) over ``rooflab.core``.

Importing this package loads no Qt: ``rooflab.gui.main`` is the console entry point and must
stay light for the command-line subcommands. The Qt modules are imported by the modules that
need them.
"""

from __future__ import annotations

import os

# pyqtgraph picks its Qt binding when first imported; make it PySide6 before anyone does.
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

