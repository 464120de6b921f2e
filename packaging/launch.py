"""Frozen-build entry point (PyInstaller) for both programs of the one-folder build.

``rooflab-gui`` always opens the window (files given to it open as models), like the wheel's
``rooflab-gui`` script; ``rooflab`` is the command line, and with no arguments the window, like
the wheel's ``rooflab`` script. Both are the same code; the executable's name picks one."""

import sys
from pathlib import Path

from rooflab.gui.main import gui_main, main

if __name__ == "__main__":
    entry = gui_main if Path(sys.executable).stem == "rooflab-gui" else main
    sys.exit(entry())
