"""llama.cpp on this machine against rooflab's ceiling: random-weight GGUFs of three shapes (dense,
sliding-window, mixture of experts) in Q4_K_M and Q8_0, timed in process through the same code
the window and `rooflab measure model --engine llamacpp` use.

For every point: the measured rate (mean of the repeats, as llama-bench), the spread of the repeats, the ceiling
rooflab predicts for the same pass on this machine's measured profile (efficiency 1.0), and
their ratio (measured / ceiling: the share of the ceiling llama.cpp reaches). The load average
before and after the run is printed: read the figures against it.

    python benchmarks/accuracy/bench_llamacpp.py [--threads N] [--quick] [--json FILE]
    python benchmarks/accuracy/bench_llamacpp.py --from-record FILE
    python benchmarks/accuracy/bench_llamacpp.py --llama-bench [PATH] [--gguf FILE] [--threads N]

The second form times llama-bench's tests in process and with a llama-bench binary on the same
GGUF, test by test, and prints the two side by side (``llama_bench_side_by_side.py``).

``--json FILE`` writes the run's record (the machine, each model's points); the run prints by
rendering it, the ceilings predicted again from the kept machine, and ``--from-record`` prints a
kept one the same way (docs/runs/ holds the records the docs quote).

The GGUFs are written to a temporary folder and removed afterwards (about 100-200 MB each)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rooflab.core.calibration.calibrate import predict_points
from rooflab.core.io.hf import spec_from_config
from rooflab.core.io.presets import load_measured_machine
from rooflab.core.jobs import run_job
from rooflab.core.measure.engines.engine import measure_in_llamacpp
from rooflab.core.measure.engines.llamacpp.binding import default_threads
from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_bench_side_by_side as side_by_side  # noqa: E402
from entry import finish, recorded  # noqa: E402

BASE = dict(hidden_size=768, num_hidden_layers=8, num_attention_heads=12, num_key_value_heads=4, head_dim=64,
            intermediate_size=2048, vocab_size=32000, max_position_embeddings=8192, tie_word_embeddings=False)
SHAPES = {
    "dense (llama)": dict(BASE, model_type="llama"),
    "sliding window (gemma3, 512)": dict(BASE, model_type="gemma3_text", sliding_window=512, num_hidden_layers=12),
    "mixture of experts (qwen3-moe, 4 of 32)": dict(BASE, model_type="qwen3_moe", num_experts=32,
                                                    num_experts_per_tok=4, moe_intermediate_size=512),
}
FORMATS = ("q4_k_m", "q8_0")


def machine_profile(threads: int | None) -> MachineProfile:
    """The measured profile of this machine (measured now, quickly, when none is kept)."""
    stored = load_measured_machine()
    if stored is not None:
        return stored
    from rooflab.core.measure.machine.benchmark import MachinePlan, measure_machine_blocking
    from rooflab.core.measure.workflow import keep_machine_run

    print("no measured machine kept: measuring bandwidth and matmul peaks first", file=sys.stderr)
    run = measure_machine_blocking(MachinePlan(threads=threads, repeats=3, experiments=("bandwidth", "matmul")))
    return keep_machine_run(run, keep=False)          # a disturbed run: one line, and no ceiling from it


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Time every shape in llama.cpp in process; the run's record (the machine, each model's points)."""
    args.threads = args.threads or default_threads()
    plan = LlamaCppPlan(threads=args.threads, prompts=(64, 256) if args.quick else (64, 256, 1024),
                        depths=(0, 1024) if args.quick else (0, 1024, 4096), gen_tokens=16, contexts=(512,),
                        batches=(1, 4) if args.quick else (1, 4, 16), batch_steps=8, repeats=3)
    machine = machine_profile(args.threads)
    load0, began = _load(), time.perf_counter()
    began_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    models = []
    with tempfile.TemporaryDirectory(prefix="rooflab-bench-") as folder:
        os.environ["ROOFLAB_CACHE_DIR"] = folder          # the random-weight GGUFs go here, and go
        for shape, config in SHAPES.items():
            for weights in FORMATS[:1] if args.quick else FORMATS:
                spec = spec_from_config(config, weights=weights, name=f"{shape} {weights.upper()}")
                run = run_job(measure_in_llamacpp(spec, spec, plan, synthetic=True))
                print(f"  {spec.name}: {len(run.points)} points", file=sys.stderr, flush=True)
                models.append({"shape": shape, "weights": weights, "settings": run.settings.label,
                               "kv_type": run.kv_type, "points": [p.to_dict() for p in run.points]})
                for written in Path(folder).rglob("*.gguf"):
                    written.unlink()
    return {"date": began_at, "argv": sys.argv[1:], "load_before": load0, "load_after": _load(),
            "seconds": round(time.perf_counter() - began), "threads": args.threads, "machine": machine.to_dict(),
            "models": models}


def render(run: dict[str, Any]) -> list[str]:
    """A run's record as text: each point measured beside the ceiling rooflab predicts for it now
    on the machine the record kept."""
    machine = MachineProfile.from_dict(run["machine"])
    lines = [f"run {run['date']}: bench_llamacpp.py {' '.join(run['argv'])}",
             f"machine: {machine.name}: {machine.bandwidth / 1e9:.1f} GB/s, "
             f"{machine.flops() / 1e9:.0f} GFLOP/s {machine.default_dtype} (the ceiling's figures)",
             f"llama.cpp threads {run['threads']}; load average before: {run['load_before']}"]
    for model in run["models"]:
        spec = spec_from_config(SHAPES[model["shape"]], weights=model["weights"],
                                name=f"{model['shape']} {model['weights'].upper()}")
        points = [MeasuredPoint.from_dict(p) for p in model["points"]]
        ceiling = predict_points(spec, machine, points, kv_type=model["kv_type"])
        lines += ["", f"{spec.name}: {spec.weight_bytes / 1e6:.0f} MB of weights, {model['settings']}",
                  f"  {'pass':<8} {'prompt':>6} {'context':>7} {'batch':>5} {'measured tok/s':>14} "
                  f"{'spread':>7} {'ceiling tok/s':>13} {'measured/ceiling':>16}"]
        for point, predicted in zip(points, ceiling, strict=True):
            rate_ceiling = point.batch * point.prompt / predicted
            flag = "  disturbed" if point.disturbed else ""
            lines.append(f"  {point.kind:<8} {point.prompt:>6} {point.context:>7} {point.batch:>5} "
                         f"{point.rate:>14.1f} {point.spread:>7.1%} {rate_ceiling:>13.1f} "
                         f"{point.rate / rate_ceiling:>16.1%}{flag}")
    lines += ["", f"load average after: {run['load_after']}; {run['seconds']} s in all"]
    return lines


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the physical cores)")
    parser.add_argument("--quick", action="store_true", help="one format, fewer points")
    parser.add_argument("--json", metavar="FILE", help="also write the run's record here")
    parser.add_argument("--from-record", metavar="FILE", help="measure nothing: print a --json run's record "
                        "(docs/runs/ holds the records the docs quote)")
    side_by_side.add_arguments(parser)
    args = parser.parse_args()
    if args.llama_bench is not None:
        return side_by_side.compare(args)
    print("\n".join(render(recorded(args, measure))))
    return 0


if __name__ == "__main__":
    raise SystemExit(finish(main))
