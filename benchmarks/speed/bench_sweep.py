"""How fast the engine recomputes what the window draws.

Prints the time of a 64 x 64 (context x batch) decode grid, a 256-point prefill sweep, and a
full request estimate, for a dense and a mixture-of-experts catalogue model (best and median
of many runs). Target: the 64 x 64 grid well under 20 ms, so live plotting never stutters.

    python benchmarks/speed/bench_sweep.py
"""

from __future__ import annotations

import numpy as np
from timing import timed  # benchmarks/speed/timing.py: the shared timing loop

from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.crossover import prefill_crossover
from rooflab.core.predict.request import request
from rooflab.core.predict.sweep import decode_grid, prefill_sweep
from rooflab.core.values.workload import Workload


def main() -> None:
    machine = load_machine("dgx-spark")
    workload = Workload(prompt=2048, answer=256)
    contexts = np.linspace(0, 131072, 64)
    batches = np.round(np.geomspace(1, 4096, 64))
    prompts = np.geomspace(1, 131072, 256)
    print(f"{'model':<24} {'what':<28} {'best ms':>8} {'median ms':>10}")
    for key in ("qwen3-8b-q4_k_m", "gpt-oss-120b-mxfp4"):
        spec = load_model(key)
        rows = [
            ("decode grid 64 x 64", lambda spec=spec: decode_grid(spec, machine, workload, contexts, batches)),
            ("prefill sweep 256", lambda spec=spec: prefill_sweep(spec, machine, workload, prompts)),
            ("request (TTFT, TPOT, e2e)", lambda spec=spec: request(spec, machine, workload)),
            ("prefill crossover n*", lambda spec=spec: prefill_crossover(spec, machine, workload)),
        ]
        for label, fn in rows:
            best, median = timed(fn, repeats=50)
            print(f"{key:<24} {label:<28} {best:>8.3f} {median:>10.3f}")


if __name__ == "__main__":
    main()
