"""How well does a calibration predict what it has not seen? rooflab's own out-of-sample check.

For each engine (llama.cpp in process, torch): measures this machine, times rooflab's
calibration models (dense in two shapes and two weight formats, sliding-window, mixture of
experts; ``rooflab measure calibrate`` runs exactly this), fits the calibration of (machine,
engine, settings) and scores it:

- leave one model out: each model predicted by the fit of the others;
- leave one architecture out: every model of one architecture (llama, qwen3, gemma3, qwen3moe)
  predicted by the fit of the others;
- extrapolation: fitted on prompts <= 512, caches <= 1,100 tokens and batches <= 4; scored
  on the longer prompts, deeper caches and larger batches;
- in sample, labelled fit quality (not accuracy).

Prints per phase (prompt processing / TTFT, generation at depth / TPOT, batched decode) the
points, the in-sample median, leave-one-model-out median and worst, extrapolation median and
worst; the fitted terms with their 16th-84th percentile band; the load average before and after
and the median spread of the repeats. With ``--twice`` the calibration is made a second time and
each term is checked against the first run's band (stable factors). Targets, out of sample:
TPOT median <= 10 %, TTFT <= 15 %, batched decode <= 15 %. Nothing is kept in the user's
store. The published-benchmark check of the presets is ``bench_public_accuracy.py``.

With ``--thorough`` llama.cpp's set adds models at real sizes and vocabularies (Qwen3-0.6B,
Gemma 3 1B with 262k entries, Qwen3-1.7B, a 2 B mixture of experts: tens of minutes on two
cores); every model is listed with its parameters, weight bytes and vocabulary.

    python benchmarks/accuracy/bench_accuracy.py [--engines llamacpp,torch] [--threads N] [--repeats 3]
                                        [--quick|--thorough] [--twice] [--points FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from rooflab.core.jobs import Progress, run_job
from rooflab.core.measure.calibration_run import CalibrationPlan, CalibrationRun, run_calibration
from rooflab.core.values.calibration import EngineCalibration

PHASES = (("prefill", "prompt processing (TTFT)"), ("decode", "generation at depth (TPOT)"),
          ("batch", "batched decode"))
TARGETS = {"prefill": 0.15, "decode": 0.10, "batch": 0.15}


def _progress(p: Progress) -> None:
    print(f"\r  [{(p.fraction or 0.0):4.0%}] {p.message[:90]:<90}", end="", file=sys.stderr, flush=True)


def _cell(cal: EngineCalibration, protocol: str, phase: str, worst: bool = True) -> str:
    acc = cal.accuracy.get(protocol, {}).get(phase)
    if acc is None:
        return f"{'-':>15}"
    return f"{acc.median:6.1%} / {acc.worst:6.1%}" if worst else f"{acc.median:6.1%}         "


def report(run: CalibrationRun, load: tuple[float, float], seconds: float) -> list[str]:
    """The table of one engine's calibration; returns the targets missed."""
    cal = run.calibration
    spreads = [p.spread for r in run.runs for p in r.points]
    disturbed = sum(1 for r in run.runs for p in r.points if p.disturbed)
    print(f"\n{cal.describe()}: {cal.points} points in {seconds:.0f} s")
    print(f"  load average {load[0]:.2f} before, {load[1]:.2f} after; median spread of repeats "
          f"{statistics.median(spreads):.1%}; {disturbed} point(s) marked disturbed (left out of the fit)")
    for model in run.runs:
        spec = model.spec
        print(f"  model {model.label:<44} {spec.params_total / 1e9:5.2f} B parameters, "
              f"{spec.weight_bytes / 1e9:5.2f} GB, {spec.vocab:>7,}-entry vocabulary, {spec.architecture}")
    print(f"  {'phase':<28} {'points':>6} {'fit quality':>11} {'leave one model out':>19} "
          f"{'leave one arch out':>19} {'extrapolation':>15}  target (out of sample)")
    missed = []
    for phase, label in PHASES:
        count = cal.accuracy.get("in_sample", {}).get(phase)
        lomo = cal.accuracy.get("leave_one_model_out", {}).get(phase)
        loao = cal.accuracy.get("leave_one_architecture_out", {}).get(phase)
        extra = cal.accuracy.get("extrapolation", {}).get(phase)
        worst_median = max((a.median for a in (lomo, loao, extra) if a is not None), default=float("nan"))
        met = worst_median <= TARGETS[phase]
        if not met:
            missed.append(f"{cal.engine_label} {label}")
        print(f"  {label:<28} {count.count if count else 0:>6} {_cell(cal, 'in_sample', phase, False)[:11]:>11} "
              f"{_cell(cal, 'leave_one_model_out', phase):>19} {_cell(cal, 'leave_one_architecture_out', phase):>19} "
              f"{_cell(cal, 'extrapolation', phase):>15}  "
              f"median <= {TARGETS[phase]:.0%}: {'met' if met else 'NOT met'}")
    print("  fitted terms (16th-84th percentile over resampled fits):")
    for name, unit, central, low, high in cal.bands():
        scale, shown = {"B/s": (1e9, "GB/s"), "FLOP/s": (1e9, "GFLOP/s"), "s": (1e-3, "ms")}.get(unit, (1.0, ""))
        print(f"    {name:<36} {central / scale:10.3f} {shown:<8} [{low / scale:.3f} .. {high / scale:.3f}]")
    for note in cal.notes:
        print(f"  note: {note}")
    return missed


def stability(first: EngineCalibration, second: EngineCalibration) -> int:
    """Terms of ``second`` whose central value falls outside ``first``'s band (and the other way)."""
    bands = {name: (low, high) for name, _u, _c, low, high in first.bands()}
    outside = 0
    print(f"\n  repeated calibration of {second.engine_label}: each term against the first run's band")
    for name, _unit, central, low, high in second.bands():
        if name not in bands:
            continue
        lo1, hi1 = bands[name]
        first_central = next(c for n, _u, c, _l, _h in first.bands() if n == name)
        agree = lo1 <= central <= hi1 or low <= first_central <= high
        outside += not agree
        print(f"    {name:<36} {'agrees' if agree else 'OUTSIDE both bands'}")
    return outside


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="llamacpp,torch", help="llamacpp, torch or both (default both)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: the engine's choice)")
    parser.add_argument("--repeats", type=int, default=3, help="the calibration's rounds over its models (default 3)")
    parser.add_argument("--quick", action="store_true", help="the dense models only, shallower sweeps")
    parser.add_argument("--thorough", action="store_true", help="llama.cpp: add the real-size models")
    parser.add_argument("--twice", action="store_true", help="calibrate twice and compare the terms")
    parser.add_argument("--points", metavar="FILE.json", default=None,
                        help="also write every measured point (per engine and model) to this file")
    args = parser.parse_args()
    missed: list[str] = []
    unstable = 0
    machine = None                 # measured once, by the first calibration
    timed: dict[str, dict[str, list[dict[str, object]]]] = {}
    for engine in (e.strip() for e in args.engines.split(",") if e.strip()):
        plan = CalibrationPlan(engine=engine, threads=args.threads, repeats=args.repeats, quick=args.quick,
                               thorough=args.thorough and engine == "llamacpp")
        results = []
        for _ in range(2 if args.twice else 1):
            before, began = os.getloadavg()[0], time.perf_counter()
            run = run_job(run_calibration(plan, keep=False, machine=machine), _progress)
            machine = run.machine
            print(file=sys.stderr)
            missed += report(run, (before, os.getloadavg()[0]), time.perf_counter() - began)
            results.append(run.calibration)
            timed[f"{engine}-{len(results)}"] = {m.key: [p.to_dict() for p in r.points]
                                                 for m, r in zip(plan.models(), run.runs, strict=True)}
        if len(results) == 2:
            unstable += stability(results[0], results[1])
    if args.points:
        Path(args.points).write_text(json.dumps({"machine": machine.to_dict() if machine else None, "runs": timed}))
    print("\ntargets missed: " + ("; ".join(missed) if missed else "none"))
    if args.twice:
        print(f"terms outside both runs' bands: {unstable}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
