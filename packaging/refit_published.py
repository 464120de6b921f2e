"""Write the shipped fit of the published llama-bench results.

resources/fitted/public-calibrations.json holds every group's calibration (its terms, its band's
replicates) and each published machine's offset, fitted from resources/benchmarks/*.json and
stamped with the data's digest, so that a window's start reads it instead of fitting for seconds.
Run this whenever the data or the fit's code change; tests/core/calibration/test_public_shipped.py
fails until the shipped file is the fit of the data as it is:

    python packaging/refit_published.py
    python packaging/refit_published.py --out /tmp/fit.json     # somewhere else, to compare

How well that fit predicts rows it never saw is benchmarks/accuracy/bench_public_accuracy.py's
question, not this tool's.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rooflab.core.calibration import public
from rooflab.core.calibration.expectations import write_shipped_fits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where to write it (default: the shipped file)")
    args = parser.parse_args()
    start = time.perf_counter()
    data = public.load_public()
    groups = public.group_rows(data)
    target = write_shipped_fits(args.out)
    print(f"{len(data.rows)} published rows, {len(groups)} groups: "
          + ", ".join(f"{g} {len(rows)}" for g, rows in groups.items()))
    print(f"wrote {target} in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
