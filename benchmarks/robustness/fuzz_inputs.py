"""Mutation fuzz of every input rooflab reads besides GGUF files (whose header reader has its own
fuzz in tests/core/io/test_gguf_hostile.py): config.json, safetensors headers, llama-bench
output (JSON, JSONL, CSV, markdown, llama-batched-bench tables) and rooflab's stored files
(measurements, calibrations, the measured machine, a user profile).

Each case mutates a real input (structurally: a field replaced by a hostile value, deleted,
wrapped or added; or as bytes: flipped, inserted, cut, repeated, truncated) and runs every
reader of that surface on it (tests/factories/fuzz.py). Per surface it prints how many cases
were refused with a clean one-line RooflabError, accepted, crashed (any other exception; the
first few shown) or hung (past the per-case limit), the slowest case and the largest Python
heap one case took (after 20 uncounted warm-up cases). Target: zero crashes and hangs, a peak
of a few MB.

    python benchmarks/robustness/fuzz_inputs.py [--cases 10000] [--seed 1] [--timeout 10] [--surface NAME ...]

Exit status 1 when any case crashed or hung.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for tests.factories

from tests.factories.fuzz import (  # noqa: E402
    Surface,
    bench_surface,
    config_surface,
    run_surface,
    safetensors_surface,
    store_surface,
)

SURFACES = ("config.json", "safetensors", "llama-bench", "stored files")


def surfaces(root: Path, chosen: list[str]) -> list[Surface]:
    makers = {"config.json": config_surface, "safetensors": safetensors_surface, "llama-bench": bench_surface,
              "stored files": lambda: store_surface(root / "store-seeds")}
    return [makers[name]() for name in chosen]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="mutations per surface (default 10,000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds one case may take (default 10)")
    parser.add_argument("--surface", action="append", choices=SURFACES, help="only these (default: all)")
    parser.add_argument("--examples", type=int, default=3, help="crashes and hangs shown per surface")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)      # every set-aside record logs a warning: 10,000 lines
    failed = False
    with tempfile.TemporaryDirectory(prefix="rooflab-fuzz-") as tmp:
        root = Path(tmp)
        os.environ["ROOFLAB_DATA_DIR"] = os.environ["ROOFLAB_CONFIG_DIR"] = str(root / "user")
        print(f"{args.cases:,} cases per surface, seed {args.seed}, {args.timeout:g} s per case\n")
        print(f"{'surface':<14} {'cases':>7} {'clean errors':>13} {'accepted':>9} {'crashes':>8} {'hangs':>6} "
              f"{'slowest':>8} {'peak MB':>8} {'time':>7}")
        shown: list[str] = []
        for surface in surfaces(root, args.surface or list(SURFACES)):
            # not counted: the first cases import what the readers load lazily (numpy's linear
            # algebra, the CLI's output), which would read as one case's memory
            run_surface(surface, 20, root / "warm-up", seed=args.seed + 1, limit=args.timeout)
            start = time.perf_counter()
            tally = run_surface(surface, args.cases, root / surface.name.replace(" ", "-"), seed=args.seed,
                                limit=args.timeout)
            print(f"{tally.surface:<14} {tally.cases:>7,} {tally.errors:>13,} {tally.accepted:>9,} "
                  f"{len(tally.crashes):>8,} {len(tally.hangs):>6,} {tally.slowest:>7.2f}s "
                  f"{tally.peak / 1e6:>8.1f} {time.perf_counter() - start:>6.0f}s", flush=True)
            failed = failed or bool(tally.crashes or tally.hangs)
            shown += [f"  {surface.name}: crash: {c}" for c in tally.crashes[:args.examples]]
            shown += [f"  {surface.name}: hang: {h}" for h in tally.hangs[:args.examples]]
        if shown:
            print("\nfirst crashes and hangs:")
            print("\n".join(shown))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
