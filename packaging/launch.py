"""Frozen-build entry point (PyInstaller): the desktop window, or the command line when given
arguments, exactly as the installed ``rooflab`` script."""

import sys

from rooflab.gui.main import main

if __name__ == "__main__":
    sys.exit(main())
