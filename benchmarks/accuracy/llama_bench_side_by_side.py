"""rooflab's in-process llama.cpp timing against a llama-bench binary on the same GGUF, in the
same run, test by test (``python benchmarks/accuracy/bench_llamacpp.py --llama-bench [PATH]``).

Both sides time llama-bench's tests (pp64, pp512, tg32, tg32 @ d2048; ``--long`` adds pp2048) with
the same settings (threads, -b, -ub, flash attention, KV type, repetitions). The two alternate test by test and,
``--rounds`` times, within each test, which goes first alternating too, so a change in the
machine's load lands on both. Each figure is tokens / the mean time of all repetitions
(llama-bench's statistic), with the standard deviation of the repetitions as t/s; then
rooflab / llama-bench - 1 on those means, and on the fastest repetition of each side (the
extra both keep: on a shared machine it is the figure least moved by other programs). On a shared
machine the pooled means move with the neighbours' load by more than the 5 % the two methods
should agree to, so each round is also a pair (the two sides a few seconds apart) and the
``paired`` column is the median over the rounds of each pair's ratio, with the lowest and highest
pair: a drift in the machine's speed lands on both halves of a pair and cancels in its ratio.

The GGUF is the user's (``--gguf``) or a random-weight one of a real model's exact tensor
table (default: Qwen3-0.6B in Q4_K_M, a 151,936-entry vocabulary), written to a temporary
folder and removed afterwards."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from unseen_pricing import REAL_SHAPES, unseen_spec  # beside this script (bench_llamacpp puts it on the path)

from rooflab.core.io.gguf import read_gguf
from rooflab.core.jobs import run_job
from rooflab.core.measure.engines.engine import gguf_for
from rooflab.core.measure.engines.llamabench.plan import EngineOptions, LlamaBenchPlan, find_binary
from rooflab.core.measure.engines.llamabench.run import run_llama_bench
from rooflab.core.measure.engines.llamacpp.binding import default_threads
from rooflab.core.measure.engines.llamacpp.plan import BenchTest, LlamaCppPlan
from rooflab.core.measure.engines.llamacpp.timing import measure_llamacpp_blocking
from rooflab.core.values.measured import MeasuredPoint

TESTS = (BenchTest(n_prompt=64), BenchTest(n_prompt=512), BenchTest(n_gen=32), BenchTest(n_gen=32, n_depth=2048))
LONG_TESTS = (BenchTest(n_prompt=2048),)      # --long: a prompt whose n² attention is a large share


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--llama-bench", nargs="?", const="", default=None, metavar="PATH",
                        help="compare with a llama-bench binary (PATH, or the one on PATH) on the same GGUF")
    parser.add_argument("--gguf", help="with --llama-bench: this GGUF instead of a generated one")
    parser.add_argument("--model", default="qwen3-0.6b", help="with --llama-bench: the model whose tensor table is "
                        f"generated ({', '.join(REAL_SHAPES)}, a catalogue key or a config.json; default qwen3-0.6b)")
    parser.add_argument("--weights", default="q4_k_m", help="its weight format (default q4_k_m)")
    parser.add_argument("--repetitions", type=int, default=5, help="-r of both (default 5, llama-bench's)")
    parser.add_argument("--long", action="store_true", help="with --llama-bench: pp2048 too")
    parser.add_argument("--rounds", type=int, default=5, help="times each test runs on each side, in turn "
                        "(default 5: pairs for the paired ratio)")


def _rooflab(path: str, test: BenchTest, threads: int, repetitions: int) -> MeasuredPoint:
    kind = "prefill" if test.n_prompt else "decode"
    plan = LlamaCppPlan(threads=threads, flash_attention=True, batch_size=2048, ubatch_size=512,
                        prompts=(test.n_prompt or 1,), depths=(test.n_depth,), gen_tokens=test.n_gen or 1,
                        experiments=(kind,), repeats=repetitions)
    (point,) = measure_llamacpp_blocking(path, plan).points
    return point


def _llama_bench(binary: str, path: str, test: BenchTest, threads: int, repetitions: int) -> MeasuredPoint:
    options = EngineOptions(threads=threads, gpu_layers=0, flash_attention=True, batch_size=2048, ubatch_size=512)
    plan = LlamaBenchPlan(model=path, prompts=(test.n_prompt,) if test.n_prompt else (), gen=test.n_gen,
                          depths=(test.n_depth,), repetitions=repetitions, options=options)
    (point,) = run_job(run_llama_bench(plan, binary or None)).points
    return point


def _pooled(points: list[MeasuredPoint]) -> MeasuredPoint:
    """One side's rounds of a test as one point: the mean over every repetition (rounds of equal
    repetitions), the pooled standard deviation, the fastest repetition of all."""
    seconds = statistics.fmean(p.seconds for p in points)
    variance = statistics.fmean(p.stdev ** 2 + (p.seconds - seconds) ** 2 for p in points)
    return dataclasses.replace(points[0], seconds=seconds, stdev=variance ** 0.5, best=min(p.best for p in points),
                               repeats=sum(p.repeats for p in points))


def _rate(p: MeasuredPoint) -> str:
    return f"{p.rate:9.2f} ± {p.rate * p.stdev / p.seconds:6.2f}"


def compare(args: argparse.Namespace) -> int:
    """Print rooflab vs llama-bench per test; exit status 0."""
    threads = args.threads or default_threads()
    find_binary("llama-bench", args.llama_bench or None)     # before a GGUF is written
    with tempfile.TemporaryDirectory(prefix="rooflab-vs-llama-bench-") as folder:
        if args.gguf:
            path = str(Path(args.gguf).expanduser())
        else:
            os.environ["ROOFLAB_CACHE_DIR"] = folder         # the generated GGUF goes here, and goes
            spec = unseen_spec(args.model, args.weights)
            path = str(run_job(gguf_for(spec, spec, synthetic=True)))
        spec = read_gguf(path)
        load0 = os.getloadavg()
        print(f"GGUF: {path}\n  {spec.name}: {spec.params_total / 1e9:.2f} B parameters, {spec.vocab:,}-entry "
              f"vocabulary, {spec.weight_bytes / 1e9:.2f} GB of weights ({spec.weights_format})")
        print(f"  both: {threads} threads, -b 2048 -ub 512, flash attention on, kv f16, "
              f"{args.repetitions} repetitions x {args.rounds} round(s), one warm-up run per test and round")
        print(f"  load average before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
        print(f"{'test':<14} {'rooflab t/s':>18} {'llama-bench t/s':>18} {'mean ratio':>11} {'best ratio':>11} "
              f"{'paired [lowest .. highest]':>30}")
        began = time.perf_counter()
        for i, test in enumerate(TESTS + (LONG_TESTS if args.long else ())):
            sides = (functools.partial(_rooflab, path, test, threads, args.repetitions),
                     functools.partial(_llama_bench, args.llama_bench, path, test, threads, args.repetitions))
            ours: list[MeasuredPoint] = []
            theirs: list[MeasuredPoint] = []
            for round_ in range(args.rounds):
                a, b = _in_turn(sides, first=(i + round_) % 2)
                assert a.test == b.test == test.label, (a.test, b.test)
                ours.append(a)
                theirs.append(b)
            mine, other = _pooled(ours), _pooled(theirs)
            pairs = paired_ratios(ours, theirs)
            print(f"{test.label:<14} {_rate(mine):>18} {_rate(other):>18} {mine.rate / other.rate - 1:>11.1%} "
                  f"{other.best / mine.best - 1:>11.1%} "
                  f"{statistics.median(pairs) - 1:>+12.1%} [{min(pairs) - 1:+.1%} .. {max(pairs) - 1:+.1%}]")
        load1 = os.getloadavg()
        print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; "
              f"{time.perf_counter() - began:.0f} s in all")
    return 0


def paired_ratios(ours: Sequence[MeasuredPoint], theirs: Sequence[MeasuredPoint]) -> list[float]:
    """rooflab's rate / llama-bench's for each round, the two sides of a round timed back to back."""
    return [a.rate / b.rate for a, b in zip(ours, theirs, strict=True)]


def _in_turn(sides: Sequence[Callable[[], MeasuredPoint]], first: int) -> tuple[MeasuredPoint, MeasuredPoint]:
    """Run the two sides, ``first`` of them first; (rooflab's point, llama-bench's point)."""
    results = {index: sides[index]() for index in (first, 1 - first)}
    return results[0], results[1]
