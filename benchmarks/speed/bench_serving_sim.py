"""Speed of the serving simulation (``rooflab.core.predict.serving``): building the step clock
once, then one level of N requests at several loads, for a dense and a mixture-of-experts
catalogue model. Prints milliseconds (best and median of repeats) and requests simulated per
second.

    python benchmarks/speed/bench_serving_sim.py [--requests 3000]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import timed  # noqa: E402

from rooflab.core.io import load_model  # noqa: E402
from rooflab.core.io.presets import load_machine  # noqa: E402
from rooflab.core.predict.serving import Lengths, Load, ServingPlan, clock_for, simulate  # noqa: E402
from rooflab.core.values.workload import Workload  # noqa: E402

LOADS = (Load(mode="concurrency", level=1), Load(mode="concurrency", level=16), Load(mode="concurrency", level=64),
         Load(mode="rate", level=2.0), Load(mode="rate", level=20.0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    machine = load_machine("rtx-4090")
    workload = Workload(prompt=2048, answer=256)
    plan = ServingPlan(prompt=Lengths(mean=2048, spread=0.5), answer=Lengths(mean=256, spread=0.5), slots=32,
                       step_tokens=2048, requests=args.requests)
    print(f"{args.requests:,} requests per level, prompts 1,024-3,072 tokens, answers 128-384, 32 slots, "
          f"2,048 tokens per step, {machine.name}")
    for key in ("qwen3-8b-q4_k_m", "qwen3-30b-a3b-q4_k_m"):
        spec = load_model(key)
        best, median = timed(lambda spec=spec: clock_for(spec, machine, workload, plan), repeats=5)
        print(f"\n{spec.name}: step clock built in {best:.1f} ms (median {median:.1f})")
        clock = clock_for(spec, machine, workload, plan)
        for load in LOADS:
            best, median = timed(lambda load=load, clock=clock: simulate(clock, plan, load), repeats=5)
            loops = simulate(clock, plan, load).iterations
            print(f"  {load.mode:<11} {load.level:>5g}: {best:7.1f} ms (median {median:7.1f}), "
                  f"{args.requests / best * 1e3:>9,.0f} requests/s simulated, {loops:,} loop iterations")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
