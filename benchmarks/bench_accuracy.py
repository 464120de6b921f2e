"""How close are rooflab's predictions to a real run on this machine, before and after
calibration?

Measures this machine (bandwidth, matmul peaks: a spec-free profile, no vendor figures), then
times a random-weight model shaped like Qwen3-0.6B (hidden 1024, 28 layers, 16 heads, 8 KV
heads, head_dim 128, ffn 3072, vocab 151,936, tied head) in fp32 and bf16 with torch on the CPU:
the lessons' three experiments (prefill sweep with logits at the last position, decode after
each prompt, batched decode at two contexts). Prints, per phase, the median and worst
|measured - predicted| / measured with the measured profile as is and after calibration.

Targets: calibrated TPOT median error <= 10 %, TTFT <= 15 %. Takes a few minutes on 2 cores.

One thread by default: on a small machine shared with other jobs, a parallel region waits for
its slowest thread, so every time another process takes a core each pass stalls, and the
timings measure the other jobs instead of the model. ``--threads 2`` uses both cores of an
idle machine. The load average before and after is printed so a disturbed run is visible.

    python benchmarks/bench_accuracy.py [--quick] [--dtypes fp32,bf16] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from rooflab.core.jobs import Progress
from rooflab.core.measure.calibrate import Calibration, calibrate
from rooflab.core.measure.machine import MachinePlan, measure_machine_blocking
from rooflab.core.measure.model import ModelMeasurement, ModelPlan, measure_model_blocking
from rooflab.core.values.machine import MachineProfile

QWEN3_06B_SHAPE = {
    "model_type": "qwen3", "hidden_size": 1024, "num_hidden_layers": 28, "num_attention_heads": 16,
    "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072, "vocab_size": 151936,
    "tie_word_embeddings": True, "max_position_embeddings": 40960, "rope_theta": 1000000,
    "_name_or_path": "Qwen3-0.6B-shaped (random weights)",
}
PHASES = (("prefill", "TTFT (prefill sweep)"), ("decode", "TPOT vs context"), ("batch", "batched decode step"))
TARGETS = {"prefill": 0.15, "decode": 0.10}


def _plan(dtype: str, quick: bool, threads: int | None) -> ModelPlan:
    if quick:
        return ModelPlan(dtype=dtype, threads=threads, prompts=(1, 16, 64, 256), decode_steps=6, repeats=2,
                         contexts=(2, 256), batches=(1, 4, 16), batch_steps=3)
    return ModelPlan(dtype=dtype, threads=threads, prompts=(1, 16, 64, 256, 1024), decode_steps=8, repeats=2,
                     contexts=(2, 256), batches=(1, 2, 4, 8, 16), batch_steps=5)


def _progress(progress: Progress) -> None:
    eta = progress.eta_seconds
    tail = f", ~{eta:.0f} s left" if eta else ""
    print(f"\r  {progress.message[:60]:<60}{tail:<16}", end="", file=sys.stderr, flush=True)


def _pct(x: float) -> str:
    return f"{100 * x:6.1f} %"


def report(measurement: ModelMeasurement, machine: MachineProfile, cal: Calibration) -> list[str]:
    eff = cal.efficiency
    lines = [f"{measurement.label}, {measurement.dtype}, {measurement.threads} threads, "
             f"torch {measurement.torch_version}, {len(cal.points)} points",
             f"  fitted: bandwidth x{eff.bandwidth:.3f} ({cal.effective_bandwidth / 1e9:.1f} GB/s of "
             f"{machine.bandwidth / 1e9:.1f}), compute x{eff.compute:.3f} "
             f"({cal.effective_flops / 1e9:.0f} GFLOP/s of {cal.peak_flops / 1e9:.0f}), "
             f"overhead {eff.step_overhead * 1e3:.2f} ms/pass, kv_read_factor {eff.kv_read_factor:.2f}",
             f"  {'phase':<22} {'points':>6} {'before: median':>15} {'worst':>9} {'after: median':>14} "
             f"{'worst':>9}  target"]
    for kind, title in PHASES:
        if kind not in cal.before:
            continue
        b, a = cal.before[kind], cal.after[kind]
        target = TARGETS.get(kind)
        verdict = "" if target is None else (f"<= {target:.0%} " + ("met" if a.median <= target else "MISSED"))
        lines.append(f"  {title:<22} {b.count:>6} {_pct(b.median):>15} {_pct(b.worst):>9} "
                     f"{_pct(a.median):>14} {_pct(a.worst):>9}  {verdict}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer prompts, batches and repeats")
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1, see above)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print("measuring this machine ...", file=sys.stderr)
    machine_run = measure_machine_blocking(MachinePlan(threads=args.threads, experiments=("bandwidth", "matmul")),
                                           on_progress=_progress)
    machine = machine_run.profile()
    print(file=sys.stderr)
    out = [f"machine: {machine.name}: B {machine.bandwidth / 1e9:.1f} GB/s (best streaming kernel), "
           + ", ".join(f"{d} {f / 1e9:.0f} GFLOP/s" for d, f in machine.peak_flops.items())]
    for dtype in args.dtypes.split(","):
        print(f"timing the Qwen3-0.6B-shaped model in {dtype} ...", file=sys.stderr)
        measured = measure_model_blocking(QWEN3_06B_SHAPE, _plan(dtype, args.quick, args.threads),
                                          on_progress=_progress)
        print(file=sys.stderr)
        cal = calibrate(measured.spec, machine, measured.points, kv_type=measured.kv_type, dtype=dtype,
                        overhead=measured.overhead)
        out += [""] + report(measured, machine, cal)
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    out.append(f"\n(total {time.perf_counter() - start:.0f} s; 1-minute load average {load_before:.2f} before, "
               f"{load_after:.2f} after, on {os.cpu_count()} CPUs)")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
