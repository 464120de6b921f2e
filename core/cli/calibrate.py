"""``rooflab measure calibrate``: measure this machine, time rooflab's calibration models in an
engine, fit the calibration of (machine, engine, settings) and print it with its accuracy on
points the fit did not see."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rooflab.core.cli.args import int_in
from rooflab.core.jobs import CancelToken
from rooflab.core.values.calibration import EngineCalibration
from rooflab.core.values.measured import MAX_PLAN_REPEATS, MAX_THREADS

PROTOCOL_LABELS = {
    "leave_one_model_out": "accuracy, leave one model out",
    "leave_one_architecture_out": "accuracy, leave one architecture out",
    "extrapolation": "accuracy, extrapolated (fit short/shallow/small, score long/deep/large)",
    "in_sample": "fit quality (in sample, not accuracy)",
}
PHASE_LABELS = {"prefill": "prompt processing (TTFT)", "decode": "generation at depth (TPOT)",
                "batch": "batched decode"}


def add_calibrate_parser(sub: Any) -> None:
    p = sub.add_parser("calibrate", help="calibrate this machine and engine for every model (several minutes)")
    p.add_argument("--engine", choices=("llamacpp", "torch"), default="llamacpp",
                   help="the engine to calibrate (default llamacpp)")
    p.add_argument("--threads", type=int_in(1, MAX_THREADS), default=None,
                   help="CPU threads (default: the engine's choice)")
    p.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="torch: compute dtype (default fp32)")
    p.add_argument("--repeats", type=int_in(1, MAX_PLAN_REPEATS), default=3,
                   help="rounds over every model, one repetition of each test a round: a point is the "
                        "mean of its rounds (default 3)")
    p.add_argument("--quick", action="store_true", help="the dense models only, shallower sweeps (about half the time)")
    p.add_argument("--thorough", action="store_true",
                   help="llama.cpp: add models at real sizes and vocabularies (0.6-2 B, 152k-262k; tens of minutes)")
    p.add_argument("--keep-machine", action="store_true",
                   help="use the machine measured before instead of measuring it again")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-save", action="store_true", help="keep nothing")


def run_calibrate(args: argparse.Namespace, cancel: CancelToken, status: Any) -> int:
    from rooflab.core.jobs import run_job
    from rooflab.core.measure.calibration_run import CalibrationPlan, run_calibration

    plan = CalibrationPlan(engine=args.engine, threads=args.threads, dtype=args.dtype, repeats=args.repeats,
                           quick=args.quick, thorough=args.thorough, measure_machine=not args.keep_machine)
    run = run_job(run_calibration(plan, cancel, keep=not args.no_save), status)
    status.done()
    if run.keep_error:
        print(f"rooflab: warning: could not keep the calibration: {run.keep_error}", file=sys.stderr)
    cal = run.calibration
    if args.json:
        from rooflab.core.cli.output import print_json

        print_json({"calibration": cal.to_dict(), "machine": run.machine.to_dict(), "kept": run.kept,
                    "factors": [{"term": n, "unit": u, "value": c, "low": lo, "high": hi}
                                for n, u, c, lo, hi in cal.bands()]})
        return 0
    print_calibration(cal)
    if run.kept:
        print(f"  kept: every model opened with --machine {cal.machine_key} now shows expected figures")
    return 0


def _value(value: float, unit: str) -> str:
    if unit == "B/s":
        return f"{value / 1e9:.1f} GB/s"
    if unit == "FLOP/s":
        return f"{value / 1e9:.0f} GFLOP/s"
    if unit == "s":
        return f"{value * 1e9:.1f} ns" if 0 < value < 1e-6 else f"{value * 1e3:.3f} ms"
    return f"{value:.2f}"


def print_calibration(cal: EngineCalibration) -> None:
    """The calibration as text: what, the fitted terms with their band, the accuracy table."""
    print(cal.describe())
    print(f"  models: {', '.join(cal.models)} ({cal.points} points)")
    print("  fitted terms (16th-84th percentile over resampled fits):")
    bands = cal.bands()
    width = max([34, *(len(row[0]) for row in bands)])    # "each added sequence's multiplies, routed experts"
    for name, unit, central, low, high in bands:
        print(f"    {name:<{width}} {_value(central, unit):>14}   [{_value(low, unit)} .. {_value(high, unit)}]")
    if "leave_one_architecture_out" in cal.accuracy:
        print("  the overlap is the one that priced each left-out architecture best (its score below)")
    if cal.central.kv_chunks:
        print(f"  one sequence's cache is read in {cal.central.kv_chunks} whole chunks, as llama.cpp's CPU flash "
              "attention splits it over its threads")
    print("  |predicted - measured| / measured, median / worst (points):")
    shown = ("leave_one_model_out", "leave_one_architecture_out", "extrapolation", "in_sample")
    for protocol in (p for p in shown if p in cal.accuracy or p != "leave_one_architecture_out"):
        table = cal.accuracy.get(protocol, {})
        print(f"    {PROTOCOL_LABELS[protocol]}:")
        if not table:
            print("      (not enough models or points to score this way)")
        for phase, acc in table.items():
            print(f"      {PHASE_LABELS.get(phase, phase):<28} {acc.median:6.1%} / {acc.worst:6.1%}  ({acc.count})")
    for note in cal.notes:
        print(f"  note: {note}")
