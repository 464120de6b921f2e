"""How a benchmark script ends: ``sys.exit(finish(main))``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rooflab.core.errors import RooflabError


def finish(main: Callable[[], int]) -> int:
    """``main()``'s exit status; bad input it meets (a model, file or binary rooflab cannot use, a
    measurement that cannot run) as one line naming the script and the problem, status 2."""
    try:
        return main()
    except RooflabError as exc:
        print(f"{Path(sys.argv[0]).name}: {exc}", file=sys.stderr)
        return 2


def recorded(args: argparse.Namespace, measure: Callable[[argparse.Namespace], dict[str, Any]]) -> dict[str, Any]:
    """The run's record: read back from ``--from-record FILE`` (a committed one under docs/runs/
    prints again as it printed), else measured now and, with ``--json FILE``, written there."""
    if args.from_record:
        run: dict[str, Any] = json.loads(Path(args.from_record).read_text())
        return run
    run = measure(args)
    if args.json:
        Path(args.json).write_text(json.dumps(run, indent=1) + "\n")
    return run
