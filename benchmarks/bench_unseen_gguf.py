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

Prints per test the expected tokens/s with its band (16th-84th percentile over the fit's
replicates), llama-bench's mean with the standard deviation of its repetitions, the error
expected / measured - 1 and whether it is within the target (generation 10 %, prompt
processing 15 %), plus the model's size, the load average before and after and the time taken.
Then a control: the same tests by llama-bench on one of the calibration's own models, which
the fit saw (the dense one in the unseen model's format nearest it in bytes, or ``--control
KEY``). Its error is the machine's minute and the in-process/llama-bench gap, not a transfer to
an unseen model; the line after it gives the unseen model's error relative to the control's,
(1 + e) / (1 + e_control) - 1. The targets are judged on the unseen model's own error.

    python benchmarks/bench_unseen_gguf.py [--model llama-3.2-1b|gemma-3-270m|qwen2.5-0.5b|KEY|config.json]
        [--weights q4_k_m] [--thorough] [--long] [--llama-bench PATH] [--threads N] [--repetitions 5]
        [--repeats 3] [--keep-machine | --machine-tries 3] [--control KEY | --no-control] [--json FILE]

The GGUF is written to a temporary folder and removed afterwards."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rooflab.core.io import load_model
from rooflab.core.io.gguf import read_gguf
from rooflab.core.io.hf import spec_from_config
from rooflab.core.jobs import Progress, run_job
from rooflab.core.measure.calibration_run import CalibrationPlan, run_calibration
from rooflab.core.measure.engine import gguf_for
from rooflab.core.measure.llamabench.plan import EngineOptions, LlamaBenchPlan
from rooflab.core.measure.llamabench.run import run_llama_bench
from rooflab.core.measure.llamacpp.plan import BenchTest
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.expected import Expected, expected_for
from rooflab.core.values.calibration import EngineCalibration
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

DEFAULT_BINARY = "/tmp/lbbuild/bin/llama-bench"
TARGETS = {"decode": 0.10, "prefill": 0.15}        # |expected / measured - 1|, issue 18
TESTS = (BenchTest(n_prompt=512), BenchTest(n_gen=128))
LONG_TESTS = (BenchTest(n_prompt=2048), BenchTest(n_gen=128, n_depth=2048))
BATCH, UBATCH = 2048, 512                           # llama-bench's -b and -ub (its defaults)

#: Real models' shapes, from their published config.json on Hugging Face; none is among
#: rooflab's calibration models (``calibration_models.py``: toys with a 16k vocabulary, and in
#: the thorough set Qwen3-0.6B, Gemma 3 1B, Qwen3-1.7B and a 2 B Qwen3-MoE).
REAL_SHAPES: dict[str, dict[str, Any]] = {
    "llama-3.2-1b": {       # meta-llama/Llama-3.2-1B
        "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256,
        "max_position_embeddings": 131072, "rope_theta": 500000.0, "tie_word_embeddings": True,
        "_name_or_path": "Llama-3.2-1B"},
    "gemma-3-270m": {       # google/gemma-3-270m: five sliding-window layers to one global
        "model_type": "gemma3_text", "hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
        "sliding_window": 512, "max_position_embeddings": 32768, "tie_word_embeddings": True,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 3, "_name_or_path": "Gemma-3-270M"},
    "qwen2.5-0.5b": {       # Qwen/Qwen2.5-0.5B
        "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
        "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
        "max_position_embeddings": 32768, "tie_word_embeddings": True, "_name_or_path": "Qwen2.5-0.5B"},
}


# --- the pure parts: a model, a test priced from a calibration, the table -------------------

def unseen_spec(model: str, weights: str) -> ModelSpec:
    """The model to test: one of ``REAL_SHAPES``, else a catalogue key or config.json."""
    if model in REAL_SHAPES:
        config = REAL_SHAPES[model]
        return spec_from_config(config, weights=weights, name=f"{config['_name_or_path']} ({weights.upper()})",
                                source=f"unseen:{model}")
    return load_model(model, weights=weights)


def seen_shape(spec: ModelSpec, seen: Sequence[ModelSpec]) -> str:
    """The calibration model with ``spec``'s shape (architecture, width, layers, vocabulary),
    "" when none: a model the calibration timed is not unseen."""
    def shape(s: ModelSpec) -> tuple[Any, ...]:
        return (s.architecture, s.hidden, s.layers, s.vocab)

    return next((s.name for s in seen if shape(s) == shape(spec)), "")


def workload_for(test: BenchTest, threads: int | None) -> Workload:
    """The workload llama-bench runs ``test`` with here: -b 2048 -ub 512, -fa 1, an f16 cache."""
    return Workload(prompt=max(1, test.n_prompt), ubatch=min(BATCH, UBATCH), flash_attention=True,
                    threads=threads, kv_type="f16")


def bench_rate(spec: ModelSpec, machine: MachineProfile, test: BenchTest, threads: int | None = None) -> float:
    """tokens/s ``machine`` (its efficiency applied) gives llama-bench's ``test``:
    tgN = N / the sum of decode steps at contexts d..d+N-1; ppN = N / one prefill of N tokens
    after d cached ones."""
    wl = workload_for(test, threads)
    if test.n_gen and not test.n_prompt:
        steps = decode_pass(spec, machine, wl, context=test.n_depth + np.arange(test.n_gen, dtype=np.float64),
                            batch=1)
        return test.n_gen / float(np.sum(steps.seconds))
    return test.n_prompt / float(prefill_pass(spec, machine, wl, prompt=test.n_prompt, context=test.n_depth).seconds)


def expected_rate(expected: Expected, spec: ModelSpec, test: BenchTest,
                  threads: int | None = None) -> tuple[float, float, float]:
    """(central, low, high) tokens/s the calibration behind ``expected`` expects for ``test``."""
    return expected.band(lambda m: bench_rate(spec, m, test, threads))


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One test: what the calibration expects (tokens/s and its band) and what llama-bench measured."""

    test: BenchTest
    expected: float
    low: float
    high: float
    measured: float         # tokens / the mean time of the repetitions (llama-bench's figure)
    stdev: float            # of the repetitions, as tokens/s

    @property
    def error(self) -> float:
        return self.expected / self.measured - 1.0

    @property
    def target(self) -> float:
        return TARGETS[self.test.kind]

    @property
    def met(self) -> bool:
        return abs(self.error) <= self.target


def row_for(expected: Expected, spec: ModelSpec, test: BenchTest, point: MeasuredPoint,
            threads: int | None = None) -> Row:
    """The row of ``test``: its expected figure and llama-bench's ``point`` of it."""
    central, low, high = expected_rate(expected, spec, test, threads)
    return Row(test=test, expected=central, low=low, high=high, measured=point.rate,
               stdev=point.rate * point.stdev / point.seconds)


def table(rows: Sequence[Row]) -> list[str]:
    """The rows as text: test, expected t/s [band], llama-bench t/s ± sd, error, target, result."""
    lines = [f"{'test':<14} {'expected t/s [band]':>28} {'llama-bench t/s':>18} {'error':>7} {'target':>7}  result"]
    for r in rows:
        band = f"{r.expected:8.2f} [{r.low:7.2f} .. {r.high:7.2f}]"
        lines.append(f"{r.test.label:<14} {band:>28} {r.measured:9.2f} ± {r.stdev:6.2f} {r.error:>+7.1%} "
                     f"{r.target:>7.0%}  {'met' if r.met else 'NOT met'}")
    return lines


def control_spec(unseen: ModelSpec, seen: Sequence[ModelSpec], key: str | None) -> ModelSpec | None:
    """The calibration model the control runs: ``key`` (a name containing it), else the dense
    one in the unseen model's weight format nearest it in bytes (by ratio)."""
    if key:
        return next((s for s in seen if key in s.name), None)
    alike = [s for s in seen if s.weights_format == unseen.weights_format and not s.experts] or list(seen)
    return min(alike, key=lambda s: abs(np.log(s.weight_bytes / unseen.weight_bytes))) if alike else None


def relative(rows: Sequence[Row], control: Sequence[Row]) -> str:
    """The unseen rows' errors relative to the control's, test by test."""
    by = {r.test.label: r for r in control}
    parts = [f"{r.test.label} {(1 + r.error) / (1 + by[r.test.label].error) - 1:+.1%}"
             for r in rows if r.test.label in by]
    return ", ".join(parts)


def model_line(spec: ModelSpec) -> str:
    return (f"{spec.name}: {spec.params_total / 1e9:.2f} B parameters, {spec.weight_bytes / 1e9:.2f} GB of weights "
            f"({spec.weights_format}), {spec.vocab:,}-entry vocabulary, {spec.architecture}")


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


def machine_profile(args: argparse.Namespace) -> MachineProfile:
    """This machine's profile as ``measure calibrate`` measures it (bandwidth and matmul peaks,
    3 repeats, kept nowhere), measured again up to ``--machine-tries`` times while its checks
    call a run disturbed (a shared machine's load moves between minutes); with
    ``--keep-machine`` the profile kept before."""
    from rooflab.core.errors import MeasurementError
    from rooflab.core.io.presets import load_measured_machine
    from rooflab.core.measure.machine import MachinePlan, measure_machine
    from rooflab.core.measure.workflow import keep_machine_run

    if args.keep_machine:
        stored = load_measured_machine()
        if stored is None:
            raise SystemExit("this machine has not been measured yet: run without --keep-machine")
        return stored
    plan = MachinePlan(threads=args.threads, repeats=3, experiments=("bandwidth", "matmul"))
    for attempt in range(1, args.machine_tries + 1):
        run = run_job(measure_machine(plan), _progress)
        print(file=sys.stderr)
        try:
            return keep_machine_run(run, keep=False)
        except MeasurementError as exc:
            print(f"machine measurement {attempt} of {args.machine_tries}: {exc}")
            if attempt == args.machine_tries:
                raise
            time.sleep(30)
    raise AssertionError("unreachable")


def calibrate(args: argparse.Namespace) -> tuple[EngineCalibration, MachineProfile, int, tuple[ModelSpec, ...],
                                                 dict[str, list[dict[str, Any]]]]:
    """The calibration ``rooflab measure calibrate --engine llamacpp [--thorough]`` makes (quick
    unless thorough), kept nowhere; with it the machine, the threads it ran, its models and each
    model's measured points (for ``--json``)."""
    from rooflab.core.cli.calibrate import print_calibration

    plan = CalibrationPlan(engine="llamacpp", threads=args.threads, repeats=args.repeats, quick=not args.thorough,
                           thorough=args.thorough, measure_machine=False)
    began = time.perf_counter()
    run = run_job(run_calibration(plan, keep=False, machine=machine_profile(args)), _progress)
    print(file=sys.stderr)
    m = run.machine
    print(f"calibration: {time.perf_counter() - began:.0f} s; machine {m.name}: {m.bandwidth / 1e9:.1f} GB/s, "
          f"{m.flops() / 1e9:.0f} GFLOP/s {m.default_dtype}")
    print_calibration(run.calibration)
    threads = run.runs[0].settings.threads or 0
    points = {r.spec.name: [p.to_dict() for p in r.points] for r in run.runs}
    return run.calibration, run.machine, threads, tuple(r.spec for r in run.runs), points


def run_control(args: argparse.Namespace, unseen: ModelSpec, cal: EngineCalibration, machine: MachineProfile,
                seen: Sequence[ModelSpec], tests: Sequence[BenchTest], threads: int) -> list[Row]:
    """llama-bench on a calibration model's GGUF (in sample), each row as it is measured."""
    spec = control_spec(unseen, seen, args.control)
    if spec is None:
        print(f"control: no calibration model named {args.control!r}")
        return []
    path = str(run_job(gguf_for(spec, spec, synthetic=True), _progress))
    print(file=sys.stderr)
    opened = read_gguf(path)
    print(f"control, a calibration model (the fit saw it): {model_line(opened)}; load average {_load()}")
    expected = expected_for(opened, machine, cal)
    print(table([])[0], flush=True)
    rows: list[Row] = []
    for test in tests:
        rows.append(row_for(expected, opened, test, llama_bench(args.llama_bench, path, test, threads,
                                                                args.repetitions), threads))
        print(table(rows[-1:])[1], flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.2-1b",
                        help=f"{', '.join(REAL_SHAPES)}, a catalogue key or a config.json (default llama-3.2-1b)")
    parser.add_argument("--weights", default="q4_k_m", help="its weight format (default q4_k_m)")
    parser.add_argument("--thorough", action="store_true", help="calibrate on the real-size set too (tens of minutes)")
    parser.add_argument("--long", action="store_true", help="also pp2048 and tg128 @ d2048")
    parser.add_argument("--llama-bench", default=DEFAULT_BINARY, metavar="PATH",
                        help=f"the llama-bench binary (default {DEFAULT_BINARY})")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: the engine's choice)")
    parser.add_argument("--repetitions", type=int, default=5, help="llama-bench's -r (default 5)")
    parser.add_argument("--repeats", type=int, default=3, help="the calibration's runs per point (default 3)")
    parser.add_argument("--json", metavar="FILE", help="also write the machine, the calibration and the rows here")
    parser.add_argument("--keep-machine", action="store_true", help="use the machine measured before")
    parser.add_argument("--machine-tries", type=int, default=3,
                        help="measure the machine again while its run is disturbed, at most this often (default 3)")
    parser.add_argument("--control", metavar="KEY", help="the calibration model the control runs "
                        "(default: the dense one in its format nearest it in bytes)")
    parser.add_argument("--no-control", action="store_true", help="skip the control")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))      # ``timeout``: remove the GGUF on the way out
    began, load0 = time.perf_counter(), _load()
    print(f"load average before: {load0}")
    spec = unseen_spec(args.model, args.weights)
    cal, machine, threads, seen, points = calibrate(args)
    same = seen_shape(spec, seen)
    if same:
        print(f"{spec.name} has the shape of calibration model {same}: choose a model it did not see", file=sys.stderr)
        return 2
    tests = TESTS + (LONG_TESTS if args.long else ())
    with tempfile.TemporaryDirectory(prefix="rooflab-unseen-") as folder, _cache_in(folder):
        path = str(run_job(gguf_for(spec, spec, synthetic=True), _progress))
        print(file=sys.stderr)
        opened = read_gguf(path)        # what a user opening the file gets: its own tensor table
        print(f"unseen model {model_line(opened)}")
        print(f"  calibration models: {', '.join(f'{s.name} ({s.vocab:,})' for s in seen)}")
        print(f"llama-bench {args.llama_bench}: {threads} threads, -fa 1 -b {BATCH} -ub {UBATCH}, "
              f"{args.repetitions} repetitions; load average {_load()}")
        expected = expected_for(opened, machine, cal)
        print(table([])[0], flush=True)
        rows: list[Row] = []
        for test in tests:          # each row as soon as it is measured (pp2048 takes minutes)
            rows.append(row_for(expected, opened, test, llama_bench(args.llama_bench, path, test, threads,
                                                                    args.repetitions), threads))
            print(table(rows[-1:])[1], flush=True)
        control_rows = [] if args.no_control else run_control(args, opened, cal, machine, seen, tests, threads)
    if control_rows:
        print(f"unseen relative to the control: {relative(rows, control_rows)}")
    for note in expected.notes:
        print(f"note: {note}")
    print(f"load average before: {load0}; after: {_load()}; {time.perf_counter() - began:.0f} s in all")
    if args.json:                   # for a second look at the fit without measuring again
        Path(args.json).write_text(json.dumps({
            "machine": machine.to_dict(), "calibration": cal.to_dict(), "points": points, "model": args.model,
            "weights": args.weights,
            "rows": [{"test": r.test.label, "expected": r.expected, "low": r.low, "high": r.high,
                      "measured": r.measured, "stdev": r.stdev} for r in rows],
            "control": [{"test": r.test.label, "expected": r.expected, "measured": r.measured, "stdev": r.stdev}
                        for r in control_rows]}, indent=1))
    missed = [r.test.label for r in rows if not r.met]
    print("targets missed: " + (", ".join(missed) if missed else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
