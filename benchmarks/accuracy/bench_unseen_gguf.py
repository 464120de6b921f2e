"""What a calibration of this machine expects of a real GGUF it never saw, against llama-bench.

Calibrates this machine as ``rooflab measure calibrate --engine llamacpp`` does (measure the
machine, time rooflab's calibration models in process, fit; the quick set by default, the
real-size set with ``--thorough``; nothing is kept in the user's store), writes a random-weight
GGUF of a real model's exact tensor table that is not among the calibration models (default
Llama-3.2-1B in Q4_K_M with its 128,256-entry vocabulary; Gemma-3-270M and Qwen2.5-0.5B are
built in too, or any catalogue key or config.json), runs a llama-bench binary on it (pp512 and
tg128, with ``--long`` also pp2048 and tg128 @ d2048; 5 repetitions, the calibration's threads,
-fa 1 -b 2048 -ub 512) and prices the same tests from the calibration through the app's
expected path (``predict.expected.expected_for``, then the clocks every expected figure uses).

llama-bench runs every test twice: once before the calibration (after the GGUFs are written)
and once after it, and its figure is the mean of the two runs' means (``--after-only``: the run
after it alone). A shared machine's speed moves over the tens of minutes a calibration takes, and
the calibration's rounds spread over them meet it halfway; a figure taken at one end of the
stretch does not. Both runs are printed, and the move between them.

Prints per test the expected tokens/s with its band (16th-84th percentile over the fit's
replicates), llama-bench's figure with its spread (the two runs', or its repetitions'), the error
expected / measured - 1 and whether it is within the target (generation 10 %, prompt
processing 15 %), plus the model's size, the load average before and after and the time taken.
Then a control: the same tests by llama-bench on one of the calibration's own models, which
the fit saw (the dense one mostly in the unseen model's format class, nearest it in bytes, or
``--control KEY``), each test right after the unseen model's, so that a slow minute lands on
both. Its error is the machine's minute and the in-process/llama-bench gap, not a transfer to an
unseen model; the line after it gives the unseen model's error relative to the control's,
(1 + e) / (1 + e_control) - 1. The targets are judged on the unseen model's own error.

    python benchmarks/accuracy/bench_unseen_gguf.py [--model llama-3.2-1b|gemma-3-270m|qwen2.5-0.5b|KEY|config.json]
        [--weights q4_k_m] [--thorough] [--long] [--llama-bench PATH] [--threads N] [--repetitions 5]
        [--repeats 3] [--keep-machine | --machine-tries 3] [--control KEY | --no-control] [--after-only]
        [--json FILE]
    python benchmarks/accuracy/bench_unseen_gguf.py --from-record FILE
    python benchmarks/accuracy/bench_unseen_gguf.py --refit FILE

The GGUF is written to a temporary folder and removed afterwards. ``--json FILE`` writes the
run's record (its settings, load and time, the machine, the calibration and every point it was
fitted to, the priced rows and each llama-bench run); the run prints by rendering that record,
and ``--from-record`` prints a kept one again the same way (docs/runs/ holds the records the
docs quote; tests/test_docs.py prints them and compares). ``--refit`` measures nothing: it fits
the points a record kept with the code as it is now and prices that run's tests again against
the same llama-bench figures (a model change scored on the same measurements).

On cores other work shares, run it with ``--threads 1``: llama.cpp's threads wait for each other
by spinning at every operation, and two of them on two busy cores put llama-bench's own
repetitions a factor of two apart (docs/measured-here.md).

Llama-3.2-1B, the default model, is a design-era model: it steered the calibration's design, so
its score is not an unseen model's; Gemma-3-270M is the built-in one no design step used
(Qwen2.5-0.5B was one of ``bench_cache_shapes.py``'s models when the cache's walk was chosen)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rooflab.core.calibration.engine_calibration import ModelPoints, calibrate_engine
from rooflab.core.calibration.models import calibration_models
from rooflab.core.io.gguf import read_gguf
from rooflab.core.jobs import Progress, run_job
from rooflab.core.measure.calibration_run import CalibrationPlan, run_calibration
from rooflab.core.measure.engines.engine import gguf_for
from rooflab.core.measure.engines.llamabench.plan import EngineOptions, LlamaBenchPlan, find_binary
from rooflab.core.measure.engines.llamabench.run import run_llama_bench
from rooflab.core.measure.engines.llamacpp.binding import default_threads
from rooflab.core.measure.engines.llamacpp.plan import BenchTest
from rooflab.core.predict.expected import Expected, expected_for
from rooflab.core.values.calibration import EngineCalibration
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from rooflab.core.values.model import ModelSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from entry import finish  # noqa: E402
from unseen_pricing import (  # noqa: E402  (the pure parts, beside this script)
    BATCH,
    LONG_TESTS,
    REAL_SHAPES,
    TARGETS,
    TESTS,
    UBATCH,
    Row,
    bench_rate,
    bracketed,
    control_spec,
    depth_cost,
    drift_line,
    expected_rate,
    model_line,
    model_walks,
    relative,
    row_for,
    seen_shape,
    table,
    unseen_spec,
    workload_for,
)

__all__ = ["BATCH", "UBATCH", "LONG_TESTS", "REAL_SHAPES", "TARGETS", "TESTS", "Row", "bench_rate", "bracketed",
           "control_spec", "drift_line", "expected_rate", "model_line", "relative", "row_for", "seen_shape", "table",
           "unseen_spec", "workload_for"]



def beside_python() -> str | None:
    """The llama-bench beside this Python (a virtual environment's bin holding llama.cpp's tools), else None (PATH)."""
    here = Path(sys.executable).parent / "llama-bench"
    return str(here) if here.is_file() else None


# --- the measuring parts ----------------------------------------------------------------------

def _progress(p: Progress) -> None:
    print(f"\r  [{(p.fraction or 0.0):4.0%}] {p.message[:90]:<90}", end="", file=sys.stderr, flush=True)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@contextlib.contextmanager
def _cache_in(folder: str) -> Iterator[None]:
    """Random-weight GGUFs written meanwhile go to ``folder`` (the user's cache is left alone)."""
    before = os.environ.get("ROOFLAB_CACHE_DIR")
    os.environ["ROOFLAB_CACHE_DIR"] = folder
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ROOFLAB_CACHE_DIR", None)
        else:
            os.environ["ROOFLAB_CACHE_DIR"] = before


def llama_bench(binary: str, path: str, test: BenchTest, threads: int, repetitions: int) -> MeasuredPoint:
    """llama-bench's figure for ``test`` on ``path``: one run of the binary, one row."""
    options = EngineOptions(threads=threads, gpu_layers=0, flash_attention=True, batch_size=BATCH,
                            ubatch_size=UBATCH)
    plan = LlamaBenchPlan(model=path, prompts=(test.n_prompt,) if test.n_prompt else (), gen=test.n_gen,
                          depths=(test.n_depth,), repetitions=repetitions, options=options)
    (point,) = run_job(run_llama_bench(plan, binary)).points
    return point


def calibration_plan(args: argparse.Namespace) -> CalibrationPlan:
    """The plan ``rooflab measure calibrate --engine llamacpp [--thorough]`` runs (quick unless thorough)."""
    return CalibrationPlan(engine="llamacpp", threads=args.threads, repeats=args.repeats, quick=not args.thorough,
                           thorough=args.thorough, measure_machine=not args.keep_machine,
                           machine_tries=args.machine_tries)


def calibrate(args: argparse.Namespace, plan: CalibrationPlan) -> tuple[EngineCalibration, MachineProfile, int,
                                                                        tuple[ModelSpec, ...],
                                                                        dict[str, list[dict[str, Any]]]]:
    """The calibration ``plan`` makes, kept nowhere (the machine measured before and after its
    timings as ``measure calibrate`` measures it, the faster run that passes its checks used;
    with ``--keep-machine`` the profile kept before); with it the machine, the threads it ran,
    its models and each model's measured points (for ``--json``)."""
    from rooflab.core.cli.calibrate import print_calibration

    began = time.perf_counter()
    run = run_job(run_calibration(plan, keep=False), _progress)
    print(file=sys.stderr)
    m = run.machine
    print(f"calibration: {time.perf_counter() - began:.0f} s; machine {m.name}: {m.bandwidth / 1e9:.1f} GB/s, "
          f"{m.flops() / 1e9:.0f} GFLOP/s {m.default_dtype}")
    print_calibration(run.calibration)
    threads = run.runs[0].settings.threads or 0
    points = {r.spec.name: [p.to_dict() for p in r.points] for r in run.runs}
    return run.calibration, run.machine, threads, tuple(r.spec for r in run.runs), points


def _written(spec: ModelSpec, folder: str) -> tuple[str, ModelSpec]:
    """A random-weight GGUF of ``spec``'s tensor table in ``folder``: its path and the spec read
    back from it (what a user opening the file gets: its own tensor table)."""
    with _cache_in(folder):
        path = str(run_job(gguf_for(spec, spec, synthetic=True), _progress))
    print(file=sys.stderr)
    return path, read_gguf(path)


def _bench_all(args: argparse.Namespace, tests: Sequence[BenchTest], threads: int,
               models: Sequence[tuple[str, str]]) -> list[list[MeasuredPoint]]:
    """llama-bench on each (name, path) of ``models`` for every test, the models back to back
    within a test (a slow minute lands on all of them): per model, its points in test order."""
    out: list[list[MeasuredPoint]] = [[] for _ in models]
    for test in tests:
        for i, (name, path) in enumerate(models):
            out[i].append(llama_bench(args.llama_bench, path, test, threads, args.repetitions))
            print(f"  {test.label}: {out[i][-1].rate:.2f} tokens/s ({name})", file=sys.stderr, flush=True)
    return out


def _walks(lines: Sequence[str]) -> list[str]:
    """The calibration models' own deep steps beneath the unseen model's (``model_walks``)."""
    if not lines:
        return []
    return ["  the calibration's models in process, their deepest step beyond their shallowest:",
            *(f"    {line}" for line in lines)]


def refit(path: str) -> int:
    """``--refit``: the run in ``path`` (a ``--json`` file) fitted again and its tests priced again."""
    from rooflab.core.cli.calibrate import print_calibration

    run = json.loads(Path(path).read_text())
    machine = MachineProfile.from_dict(run["machine"], key="measured")
    settings = run["calibration"]["settings"]
    threads = int(run.get("threads") or settings.get("threads") or 0) or None
    specs = {m.spec().name: m for m in calibration_models("llamacpp", thorough=True)}
    gone = [name for name in run["points"] if name not in specs]
    if gone:                        # the set changed since the run: its other models still fit
        print(f"left out, no longer calibration models: {', '.join(gone)}")
    models = [ModelPoints(key=specs[name].key, spec=specs[name].spec(), kv_type=settings.get("kv_type") or "f16",
                          points=tuple(MeasuredPoint.from_dict(p) for p in points))
              for name, points in run["points"].items() if name in specs]
    cal = calibrate_engine(models, machine, engine_label=run["calibration"]["engine_label"])
    print(f"refitted {path}: {len(models)} models, machine {machine.bandwidth / 1e9:.1f} GB/s, "
          f"{machine.flops() / 1e9:.0f} GFLOP/s {machine.default_dtype}")
    print_calibration(cal)
    tests = {t.label: t for t in TESTS + LONG_TESTS}

    def priced(spec: ModelSpec, rows: Sequence[dict[str, Any]]) -> list[Row]:
        expected = expected_for(spec, machine, cal)
        out = []
        for r in rows:
            central, low, high = expected_rate(expected, spec, tests[r["test"]], threads)
            out.append(Row(test=tests[r["test"]], expected=central, low=low, high=high, measured=r["measured"],
                           stdev=r["stdev"]))
        return out

    rows = priced(unseen_spec(run["model"], run["weights"]), run["rows"])
    print(f"unseen model {model_line(unseen_spec(run['model'], run['weights']))}")
    print("\n".join(table(rows)))
    if cost := depth_cost(unseen_spec(run["model"], run["weights"]), rows):
        print(cost)
        print("\n".join(_walks(model_walks([(m.key, m.spec, m.points) for m in models]))))
    control = run.get("control_model")
    if control in specs and run.get("control"):
        control_rows = priced(specs[control].spec(), run["control"])
        print(f"control, a calibration model (the fit saw it): {control}")
        print("\n".join(table(control_rows)))
        if cost := depth_cost(specs[control].spec(), control_rows):
            print(cost)
        print(f"unseen relative to the control: {relative(rows, control_rows)}")
    missed = [r.test.label for r in rows if not r.met]
    print("targets missed: " + (", ".join(missed) if missed else "none"))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.2-1b",
                        help=f"{', '.join(REAL_SHAPES)}, a catalogue key or a config.json (default llama-3.2-1b)")
    parser.add_argument("--weights", default="q4_k_m", help="its weight format (default q4_k_m)")
    parser.add_argument("--thorough", action="store_true", help="calibrate on the real-size set too (tens of minutes)")
    parser.add_argument("--long", action="store_true", help="also pp2048 and tg128 @ d2048")
    parser.add_argument("--llama-bench", default=None, metavar="PATH",
                        help="the llama-bench binary (default: the one beside this Python, else on PATH)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: the engine's choice)")
    parser.add_argument("--repetitions", type=int, default=5, help="llama-bench's -r (default 5)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="the calibration's rounds over its models, a repetition of each test a round (default 3)")
    parser.add_argument("--json", metavar="FILE", help="also write the machine, the calibration and the rows here")
    parser.add_argument("--keep-machine", action="store_true", help="use the machine measured before")
    parser.add_argument("--machine-tries", type=int, default=3,
                        help="measure the machine again after the calibration's timings while no run has passed "
                        "its checks, at most this often (default 3)")
    parser.add_argument("--control", metavar="KEY", help="the calibration model the control runs "
                        "(default: the dense one mostly in its format class, nearest it in bytes)")
    parser.add_argument("--no-control", action="store_true", help="skip the control")
    parser.add_argument("--after-only", action="store_true",
                        help="run llama-bench only after the calibration (default: before it and after it, "
                        "the figure the mean of the two)")
    parser.add_argument("--refit", metavar="FILE", help="measure nothing: fit a --json run's points again and "
                        "price its tests (the code as it is now, the same llama-bench figures)")
    parser.add_argument("--from-record", metavar="FILE", help="measure nothing: print a --json run's record "
                        "as the run printed it (docs/runs/ holds the records the docs quote)")
    return parser


def measure(args: argparse.Namespace) -> int:
    """The run: llama-bench and a calibration, its record written (``--json``) and printed."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))      # ``timeout``: remove the GGUF on the way out
    began, load0 = time.perf_counter(), _load()
    began_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"load average before: {load0}")
    args.llama_bench = str(find_binary("llama-bench", args.llama_bench or beside_python()))   # before any GGUF
    spec = unseen_spec(args.model, args.weights)
    plan = calibration_plan(args)
    seen = tuple(m.spec() for m in plan.models())
    same = seen_shape(spec, seen)
    if same:
        print(f"{spec.name} has the shape of calibration model {same}: choose a model it did not see", file=sys.stderr)
        return 2
    tests = TESTS + (LONG_TESTS if args.long else ())
    with tempfile.TemporaryDirectory(prefix="rooflab-unseen-") as folder:
        path, opened = _written(spec, folder)
        control = None if args.no_control else control_spec(opened, seen, args.control)
        if control is None and not args.no_control:
            print(f"control: no calibration model named {args.control!r}")
        models = [(opened.name, path)]
        if control is not None:
            control_path, control_opened = _written(control, folder)
            models.append((control_opened.name, control_path))
        threads = args.threads or default_threads()
        before: list[list[MeasuredPoint]] | None = None
        if not args.after_only:
            print(f"llama-bench before the calibration: {threads} threads; load average {_load()}")
            before = _bench_all(args, tests, threads, models)
        cal_began = time.perf_counter()
        cal, machine, cal_threads, seen, points = calibrate(args, plan)
        cal_seconds = round(time.perf_counter() - cal_began)
        if cal_threads != threads:
            print(f"the calibration ran {cal_threads} threads, llama-bench before it {threads}: "
                  f"only the runs after it count")
            threads, before = cal_threads, None
        print(f"llama-bench {args.llama_bench}: {threads} threads, -fa 1 -b {BATCH} -ub {UBATCH}, "
              f"{args.repetitions} repetitions{'' if before is None else ', before and after the calibration'}; "
              f"load average {_load()}")
        after = _bench_all(args, tests, threads, models)
        expected = expected_for(opened, machine, cal)

        def rows_of(k: int, spec: ModelSpec, expected: Expected) -> list[Row]:
            """Model ``k``'s rows (0 the unseen one, 1 the control): each test priced and its
            llama-bench runs merged (``bracketed``)."""
            return [row_for(expected, spec, test, bracketed(before[k][i] if before else None, point), threads)
                    for i, (test, point) in enumerate(zip(tests, after[k], strict=True))]

        rows = rows_of(0, opened, expected)
        control_rows = rows_of(1, control_opened, expected_for(control_opened, machine, cal)) \
            if control is not None else []
        record = {
            "date": began_at, "argv": sys.argv[1:], "load_before": load0, "load_after": _load(),
            "seconds": round(time.perf_counter() - began), "calibration_seconds": cal_seconds,
            "llama_bench": {"threads": threads, "repetitions": args.repetitions, "batch": BATCH, "ubatch": UBATCH,
                            "when": "after" if before is None else "before and after"},
            "model": args.model, "weights": args.weights, "model_line": model_line(opened),
            "calibration_models": [{"name": s.name, "vocab": s.vocab} for s in seen],
            "machine": machine.to_dict(), "calibration": cal.to_dict(), "points": points, "threads": threads,
            "rows": _row_dicts(rows, before, after, 0), "control_model": control.name if control else "",
            "control_line": model_line(control_opened) if control else "",
            "control": _row_dicts(control_rows, before, after, 1), "notes": list(expected.notes)}
    if args.json:                   # the run's record: --from-record prints it again, --refit fits it again
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    print("\n".join(render(record)))
    return 0


def _row_dicts(rows: Sequence[Row], before: list[list[MeasuredPoint]] | None, after: list[list[MeasuredPoint]],
               k: int) -> list[dict[str, Any]]:
    """Model ``k``'s rows as the record keeps them: the priced figures and each llama-bench run's rate."""
    return [{"test": r.test.label, "expected": r.expected, "low": r.low, "high": r.high, "measured": r.measured,
             "stdev": r.stdev, "before": before[k][j].rate if before else None, "after": after[k][j].rate}
            for j, r in enumerate(rows)]


def _rows(items: Sequence[dict[str, Any]]) -> list[Row]:
    tests = {t.label: t for t in TESTS + LONG_TESTS}
    return [Row(test=tests[r["test"]], expected=r["expected"], low=r.get("low", r["expected"]),
                high=r.get("high", r["expected"]), measured=r["measured"], stdev=r["stdev"]) for r in items]


def _calibration_lines(run: dict[str, Any]) -> list[str]:
    """The record's machine and calibration as the calibration command prints them (its fitted
    terms and its own out-of-sample scores)."""
    from rooflab.core.cli.calibrate import print_calibration

    machine = MachineProfile.from_dict(run["machine"], key="measured")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        print_calibration(EngineCalibration.from_dict(run["calibration"]))
    return [f"machine {machine.name}: {machine.bandwidth / 1e9:.1f} GB/s, {machine.flops() / 1e9:.0f} GFLOP/s "
            f"{machine.default_dtype}", *printed.getvalue().splitlines()]


def render(run: dict[str, Any]) -> list[str]:
    """A run's record as text: what the run printed once its measuring was done (``--from-record``
    prints the committed records of docs/runs/ this way, and the docs test compares)."""
    bench = run["llama_bench"]
    lines = [f"run {run['date']}: bench_unseen_gguf.py {' '.join(run['argv'])}",
             f"  load average before: {run['load_before']}; after: {run['load_after']}; {run['seconds']} s in all "
             f"(the calibration {run['calibration_seconds']} s)",
             f"  llama-bench: {bench['threads']} threads, -fa 1 -b {bench['batch']} -ub {bench['ubatch']}, "
             f"{bench['repetitions']} repetitions, {bench['when']} the calibration",
             *_calibration_lines(run),
             f"unseen model {run['model_line']}",
             "  calibration models: " + ", ".join(f"{m['name']} ({m['vocab']:,})" for m in run["calibration_models"])]
    rows = _rows(run["rows"])
    if all(r.get("before") for r in run["rows"]):
        lines.append("llama-bench's figure is the mean of its run before the calibration and its run after; "
                     "± is their spread")
        lines += ["  " + drift_line(row.test, r["before"], r["after"])
                  for row, r in zip(rows, run["rows"], strict=True)]
    lines += table(rows)
    spec = unseen_spec(run["model"], run["weights"])
    if cost := depth_cost(spec, rows):
        specs = {m.spec().name: m.spec() for m in calibration_models("llamacpp", thorough=True)}
        lines.append(cost)
        lines += _walks(model_walks([(name, specs[name], [MeasuredPoint.from_dict(p) for p in points])
                                     for name, points in run["points"].items() if name in specs]))
    if run.get("control"):
        control_rows = _rows(run["control"])
        lines.append(f"control, a calibration model (the fit saw it), each test run right after the unseen "
                     f"model's: {run['control_line']}")
        lines += table(control_rows)
        lines.append(f"unseen relative to the control: {relative(rows, control_rows)}")
    lines += [f"note: {note}" for note in run.get("notes", ())]
    missed = [r.test.label for r in rows if not r.met]
    lines.append("targets missed: " + (", ".join(missed) if missed else "none"))
    return lines


def main() -> int:
    args = _parser().parse_args()
    if args.from_record:
        print("\n".join(render(json.loads(Path(args.from_record).read_text()))))
        return 0
    if args.refit:
        return refit(args.refit)
    return measure(args)


if __name__ == "__main__":
    sys.exit(finish(main))
