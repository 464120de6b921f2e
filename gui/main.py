"""The ``rooflab`` and ``rooflab-gui`` entry points.

No Qt here at module level: ``rooflab inspect`` and the other core commands must start fast,
so the desktop modules are imported only when a window or a report is wanted."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence


def gui_command(args: argparse.Namespace) -> int:
    from rooflab.gui.shell.app import run_gui as run

    return run(args)


def report_command(args: argparse.Namespace) -> int:
    from rooflab.gui.shell.app import run_report as run

    return run(args)


def compare_command(args: argparse.Namespace) -> int:
    """``rooflab compare``: the command line's table, plus compare.png with --out."""
    from rooflab.core.cli.compare import run_compare as run

    if not args.out:
        return run(args)
    from rooflab.gui.plots.compare_plot import write_compare_png
    from rooflab.gui.shell.app import make_app

    make_app(headless=True)
    return run(args, png=write_compare_png)


# the commands that need Qt, which core/cli cannot import
HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "gui": gui_command, "report": report_command, "compare": compare_command}


def main(argv: Sequence[str] | None = None) -> int:
    """``rooflab``: no arguments opens the window on the defaults; otherwise the command line."""
    args = list(sys.argv[1:] if argv is None else argv)
    from rooflab.core.cli.main import main as cli_main

    return cli_main(args or ["gui"], handlers=HANDLERS)


def gui_main(argv: Sequence[str] | None = None) -> int:
    """``rooflab-gui [MODEL] [--machine M]``: always the window (what desktop launchers run)."""
    args = list(sys.argv[1:] if argv is None else argv)
    from rooflab.core.cli.main import main as cli_main

    return cli_main(["gui", *args], handlers=HANDLERS)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
