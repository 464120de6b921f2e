"""What llama.cpp's timings show on this machine's clock, for the tiny random-weight models the
tests time (tests/core/measure/test_llamacpp.py): more prompt tokens take longer, a deeper cache
is not faster, more sequences take longer and batching pays. Each is a ratio of two real
timings, so the machine's other work decides it as much as llama.cpp: the tests check only what
holds at any load, and this script checks the physics. Read it against the load average it
prints (on an idle machine every check holds; at a load of 5-8, "batching pays" did not).

    python benchmarks/accuracy/bench_llamacpp_physics.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for tests.factories

from rooflab.core.measure.engines.llamacpp.timing import LlamaCppPlan, measure_llamacpp_blocking  # noqa: E402
from rooflab.core.values.measured import MeasuredPoint  # noqa: E402
from tests.factories.llm_configs import llama_config, qwen3_moe_config, random_gguf  # noqa: E402

# the tests' sweep (one thread: two threads meeting at a barrier measure the neighbours)
SWEEP = LlamaCppPlan(threads=1, prompts=(16, 256), depths=(0, 1024), gen_tokens=8, contexts=(64,),
                     batches=(1, 4, 8), batch_steps=8, repeats=3)
Points = dict[tuple[str, int], float]       # (kind, prompt / context / batch) -> best seconds
CHECKS: dict[str, Callable[[Points], bool]] = {
    "256 prompt tokens take longer than 16": lambda p: p["prefill", 256] > p["prefill", 16],
    "a 1,024-deep cache is not faster (within 20 %)": lambda p: p["decode", 1027] > 0.8 * p["decode", 3],
    "4 sequences take longer than 1": lambda p: p["batch", 1] < p["batch", 4],
    "batching pays: 8 sequences in under 8 x 1": lambda p: p["batch", 8] < 8 * p["batch", 1],
}
# a mixture of experts: eight tokens route to most experts, one to a quarter, so batching need
# not pay eightfold; the other checks hold
MOE_CHECKS = ("256 prompt tokens take longer than 16", "4 sequences take longer than 1")


def _key(point: MeasuredPoint) -> tuple[str, int]:
    return point.kind, {"prefill": point.prompt, "decode": point.context, "batch": point.batch}[point.kind]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="rooflab-physics-") as folder:
        models = {"dense (llama, Q8_0)": (random_gguf(Path(folder) / "dense.gguf", llama_config(), "q8_0"),
                                          tuple(CHECKS)),
                  "MoE (qwen3-moe, Q4_K_M)": (random_gguf(Path(folder) / "moe.gguf", qwen3_moe_config(), "q4_k_m"),
                                              MOE_CHECKS)}
        for name, (path, checks) in models.items():
            for run in range(1, args.runs + 1):
                points = {_key(p): p.seconds for p in measure_llamacpp_blocking(path, SWEEP).points}
                for check in checks:
                    ok = CHECKS[check](points)
                    failed += not ok
                    print(f"{name:<24} run {run}  {'holds ' if ok else 'FAILED'}  {check}")
    print(f"load average after: {os.getloadavg()[0]:.2f}; {failed} check(s) failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
