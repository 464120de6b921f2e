"""How long `rooflab predict --json` takes on the largest grid it accepts (400 x 250 contexts x
batches = 100,000 decode rows), as a user's script runs it: a child process, its stdout read.
Target: seconds, not minutes (its rows were once priced per row on whole grids: 100,000 rows
ran past 200 s). Prints the wall time of three runs and the rows it read back.

    python benchmarks/speed/bench_predict_grid.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

CONTEXTS = ",".join(str(64 * i) for i in range(400))
BATCHES = ",".join(str(b) for b in range(1, 251))


def main() -> None:
    argv = [sys.executable, "-m", "rooflab.gui.main", "predict", "--model", "qwen3-8b-q4_k_m", "--machine",
            "rtx-4090", "--contexts", CONTEXTS, "--batches", BATCHES, "--json"]
    print(f"{'run':>3} {'seconds':>8} {'decode rows':>12} {'MB of JSON':>11}")
    for run in range(1, 4):
        began = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - began
        rows = len(json.loads(done.stdout)["decode"])
        print(f"{run:>3} {seconds:>8.1f} {rows:>12,} {len(done.stdout) / 1e6:>11.1f}")


if __name__ == "__main__":
    main()
