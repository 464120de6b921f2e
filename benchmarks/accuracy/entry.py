"""How a benchmark script ends: ``sys.exit(finish(main))``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from rooflab.core.errors import RooflabError


def finish(main: Callable[[], int]) -> int:
    """``main()``'s exit status; bad input it meets (a model, file or binary rooflab cannot use, a
    measurement that cannot run) as one line naming the script and the problem, status 2."""
    try:
        return main()
    except RooflabError as exc:
        print(f"{Path(sys.argv[0]).name}: {exc}", file=sys.stderr)
        return 2
