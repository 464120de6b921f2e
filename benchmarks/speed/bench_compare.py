"""How long ``rooflab compare`` takes: every catalogue model on every machine preset (about 800
rows; target under 3 s), and 1,000 rows naming two mixture-of-experts models over and over on
a CPU preset (merged to the two distinct rows: target a few seconds). Each is timed as the
command runs, in a fresh process from start to the table printed, and again in this process
(the rows alone, models and machines already read). The load average is printed beside:
read the figures against it.

    python benchmarks/speed/bench_compare.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 3.0
MOE = ("gpt-oss-20b-mxfp4", "qwen3-30b-a3b-q4_k_m")


def cases() -> dict[str, list[str]]:
    """The command lines timed, as ``rooflab`` arguments."""
    from rooflab.core.io.catalogue import catalogue_keys
    from rooflab.core.io.presets import preset_keys

    every = ["compare", "--models", ",".join(catalogue_keys()), "--machines", ",".join(preset_keys())]
    repeated = ["compare", "--models", ",".join(MOE * 500), "--machines", "reference-cpu"]
    return {"all models x all presets": every, "1,000 rows of two MoE models on a CPU": repeated}


def in_process(argv: list[str]) -> tuple[float, int]:
    """(wall seconds for the rows alone, rows): models and machines read first, then the table."""
    from rooflab.core.app.compare import entries
    from rooflab.core.app.resolve import expected_machine
    from rooflab.core.cli.compare import compare_workload
    from rooflab.core.cli.parser import build_parser
    from rooflab.core.report.compare import compare_rows

    args = build_parser().parse_args(argv)
    combos = entries(args.models, args.machines, args.weights)
    start = time.perf_counter()
    rows = compare_rows(combos, compare_workload(args), expected=expected_machine)
    return time.perf_counter() - start, len(rows)


def as_command(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of ``rooflab ARGV`` from process start to exit (stdout discarded).
    The CPU time is what a machine with a core to spare would take: on a loaded machine the
    wall clock also counts the time other programs held the cores."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rooflab.gui.main", *argv], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL,
                   check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        # a user's folders of its own: no kept calibration changes what is computed
        env = {**os.environ, "ROOFLAB_DATA_DIR": str(Path(home) / "data"),
               "ROOFLAB_CACHE_DIR": str(Path(home) / "cache"), "ROOFLAB_CONFIG_DIR": str(Path(home) / "config")}
        os.environ.update(env)
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        print(f"{'case':<40} {'rows':>5} {'rows s':>7} {'command s':>10} {'command CPU s':>14}   (medians)")
        worst = 0.0
        for label, argv in cases().items():
            inside = [in_process(argv) for _ in range(args.runs)]
            command = [as_command(argv, env) for _ in range(args.runs)]
            wall, cpu = (statistics.median(c[i] for c in command) for i in (0, 1))
            worst = max(worst, wall)
            print(f"{label:<40} {inside[0][1]:>5} {statistics.median(t for t, _ in inside):>7.2f} {wall:>10.2f} "
                  f"{cpu:>14.2f}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"target: each command under {TARGET_S:.0f} s (wall): {'met' if worst < TARGET_S else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
