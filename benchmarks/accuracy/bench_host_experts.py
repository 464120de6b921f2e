"""The host half of an offload, measured here: llama.cpp's CPU back end reading routed experts one
token at a time (``measure.host_experts``), beside the ceiling and the fitted share it replaces.

For each layout (Qwen3-30B-A3B's experts in Q4_K_M, gpt-oss-20b's in MXFP4; two layers, a 16k
vocabulary) a real-size random-weight GGUF and its one-expert twin are timed in alternating
rounds, in child processes; the difference of their steps is what the extra experts cost. It
prints, per layout: each round's rate and their spread, the median against this machine's
measured bandwidth (the ceiling), that factor as a share of the CPU back end's published
bandwidth factor (what ``offload_terms.HOST_EXPERT_DECODE_SHARE`` is fitted as, on users' rows),
and what the layout's catalogue model's expected token on an RTX 4090 with the experts of 30
layers on the CPU becomes with it. Nothing is kept unless ``--save`` (then it is this machine's
host-expert calibration, as ``rooflab measure host-experts`` keeps it).

On a machine shared with other work keep ``--threads 1`` (the default here): llama.cpp's threads
spin at every operation's barrier, and with neighbours on the cores a two-thread step took
20-40 times a one-thread step. The GGUFs (0.8-1.0 GB each) are written once into the cache
folder. A few minutes on two loaded cores.

    python benchmarks/accuracy/bench_host_experts.py [--rounds N] [--threads N] [--layouts qwen3-moe,gpt-oss] [--save]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from rooflab.core.calibration.expectations import expected_on
from rooflab.core.calibration.host_experts import HostExpertCalibration, save_host_experts, with_host_experts
from rooflab.core.errors import MeasurementError
from rooflab.core.io import load_model, presets
from rooflab.core.jobs import Progress, run_job
from rooflab.core.measure.host_experts import LAYOUTS, measure_host_experts
from rooflab.core.predict import offload_terms
from rooflab.core.predict.placement import Placement
from rooflab.core.predict.step_parts import decode_parts
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
from entry import finish  # noqa: E402

GPU = "rtx-4090"
CPU_MOE = 30                   # the experts of this many layers on the CPU (at most the model's), as --n-cpu-moe
WORKLOAD = Workload(prompt=512, answer=128)


def this_machine() -> MachineProfile:
    """This machine as measured (the ceiling); measured now, and not kept, when it never was."""
    found = presets.load_measured_machine()
    if found is not None:
        return found
    from rooflab.core.measure.machine.benchmark import MachinePlan, measure_machine_blocking
    from rooflab.core.measure.workflow import keep_machine_run

    print("no measured machine: measuring this one's bandwidth first (not kept)", file=sys.stderr)
    run = measure_machine_blocking(MachinePlan(device="cpu", repeats=3, experiments=("bandwidth", "matmul")))
    return keep_machine_run(run, keep=False)


def progress(p: Progress) -> None:
    if p.step != "write" or (p.fraction or 0) in (0.0, 1.0):
        print(f"  [{p.fraction or 0:4.0%}] {p.message}", file=sys.stderr)


def expected_token(cal: HostExpertCalibration, catalogue: str) -> str:
    """The catalogue model's expected token on the GPU with the experts of ``CPU_MOE`` layers on
    the CPU: with the fitted share, then with this measurement (the experts' part, the token)."""
    spec = load_model(catalogue)
    gpu = presets.load_machine(GPU)
    fitted = expected_on(spec, gpu)
    if fitted is None:
        return "no published calibration of the GPU"
    local = with_host_experts(spec, gpu, fitted, cal)
    placement = Placement(gpu_layers=spec.layers + 1, cpu_moe=min(CPU_MOE, spec.layers))
    start = WORKLOAD.context + WORKLOAD.prompt
    a, b = (decode_parts(spec, ex.machine, WORKLOAD, placement, context=start) for ex in (fitted, local))
    return (f"{spec.name} on {gpu.name}, --n-cpu-moe {placement.cpu_moe}: expected token {a.seconds * 1e3:.1f} ms "
            f"(experts on the CPU {a.seconds_of('host_weights') * 1e3:.1f} ms) with the fitted share, "
            f"{b.seconds * 1e3:.1f} ms ({b.seconds_of('host_weights') * 1e3:.1f} ms) with this measurement")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds per layout (default 3)")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1: see the docstring)")
    ap.add_argument("--layers", type=int, default=2, help="layers of each layout (default 2)")
    ap.add_argument("--layouts", default=",".join(layout.name for layout in LAYOUTS))
    ap.add_argument("--save", action="store_true", help="keep it as this machine's host-expert calibration")
    args = ap.parse_args()
    known = {layout.name: layout for layout in LAYOUTS}
    wanted = [w.strip() for w in args.layouts.split(",") if w.strip()]
    if not wanted or any(w not in known for w in wanted):
        raise MeasurementError(f"--layouts {args.layouts!r}: choose from {', '.join(known)}")
    if not 1 <= args.threads <= 256 or not 1 <= args.layers <= 8:
        raise MeasurementError("--threads must be 1 to 256 and --layers 1 to 8")
    began = time.perf_counter()
    load0 = os.getloadavg()
    machine = this_machine()
    cal = run_job(measure_host_experts(machine, rounds=args.rounds, threads=args.threads, layers=args.layers,
                                       layouts=[known[w] for w in wanted]), progress)
    print(f"{machine.name}: {cal.engine}; ceiling: its measured bandwidth {machine.bandwidth / 1e9:.1f} GB/s")
    print(f"fitted HOST_EXPERT_DECODE_SHARE (users' rows): {offload_terms.HOST_EXPERT_DECODE_SHARE:.2f} of the CPU "
          "back end's published bandwidth factor")
    print(f"{'layout':<10} {'format':<8} {'MB/token':>8} {'rounds GB/s':<22} {'median':>7} {'spread':>7} "
          f"{'of ceiling':>10} {'published':>9} {'share':>6}")
    for layout in cal.layouts:
        spec = load_model(known[layout.layout].catalogue)
        ex = expected_on(spec, presets.load_machine(GPU))
        host = ex.machine.efficiency.host_bandwidth if ex is not None else float("nan")
        rounds = ", ".join(f"{r / 1e9:.1f}" for r in layout.rates) or "none"
        dropped = len(layout.extra_seconds) - len(layout.rates)
        factor = cal.factor(layout)
        print(f"{layout.layout:<10} {layout.format_class:<8} {layout.extra_bytes / 1e6:>8.1f} "
              f"{rounds + (f' ({dropped} left out)' if dropped else ''):<22} {layout.rate / 1e9:>6.1f}  "
              f"{layout.spread:>6.0%} {factor:>10.2f} {host:>9.2f} {factor / host:>6.2f}")
    factors = [cal.factor(r) for r in cal.layouts if r.rates]
    print(f"over the layouts: factor {statistics.median(factors):.2f} of the ceiling (median)")
    for layout in cal.layouts:
        print("  " + expected_token(cal, known[layout.layout].catalogue))
    if args.save:
        print(f"kept as this machine's host-expert calibration: {save_host_experts(cal)}")
    load1 = os.getloadavg()
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f}; {time.perf_counter() - began:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(finish(main))
