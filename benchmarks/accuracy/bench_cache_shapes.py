"""What a deep cache adds to a generated token in llama-bench, model shape by model shape, and
whether one rate a byte of cache or the costs of the walk (a byte's, a (query head, cached
token) pair's and a value's of those pairs) carries over to a shape it was not fitted on.

Writes random-weight GGUFs of real models' exact tensor tables (their published config.json;
Q4_K_M) and of rooflab's calibration toys, runs llama-bench's tgN at depth 0 and at depth D on
each (-fa 1, -b 2048 -ub 512, the engine's threads), back to back, and takes each model's cache
cost a generated token: the mean step at depth D less the mean step at depth 0. Per model it
prints that cost in ms, as bytes of cache a second (the extra bytes a mean step reads,
``work.kv_bytes``), per (query head, cached token) pair and per query-head value (those bytes
times ``work.attention_walk_per_cache_byte``). Then each model left out in turn: the others'
costs per byte fitted as one rate a byte (their median: how a calibration priced a model it did
not see before 2026-12-02) and as the walk's costs (``calibration_solver.cache_terms``, how it
prices one now), and the left-out model's cost and deep step priced by each. The default
models span query heads per cached byte 7x (Qwen3's 16 query heads on 8 cached heads of 128
values to Qwen2.5-0.5B's 14 on 2 of 64) and four head shapes.

    python benchmarks/accuracy/bench_cache_shapes.py [--models KEY,KEY,...] [--depth 1024] [--gen 32]
        [--repetitions 3] [--llama-bench PATH] [--threads N]

KEY: one of ``unseen_pricing.REAL_SHAPES`` or a llama.cpp calibration model's key. The GGUFs
go to a temporary folder, removed afterwards. Needs a llama-bench binary; takes about 15 minutes
on two cores (the deep test fills the cache with a D-token prompt at every repetition)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rooflab.core.calibration.models import calibration_models
from rooflab.core.calibration.solver import cache_terms
from rooflab.core.measure.engines.llamabench.plan import find_binary
from rooflab.core.measure.engines.llamacpp.binding import default_threads
from rooflab.core.measure.engines.llamacpp.plan import BenchTest
from rooflab.core.predict import work
from rooflab.core.values.model import ModelSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_unseen_gguf as unseen  # noqa: E402  (the GGUF writing and llama-bench run, beside this script)
from entry import finish  # noqa: E402
from unseen_pricing import extra_cache_bytes  # noqa: E402

DEFAULT_MODELS = ("wide-q4_k_m", "deep-q4_k_m", "qwen3-0.6b-q4_k_m", "qwen3-1.7b-q4_k_m", "llama-3.2-1b",
                  "qwen2.5-0.5b")


@dataclass(frozen=True, slots=True)
class Cost:
    """One model's cache cost a generated token: the mean step at depth 0 and at the depth (s),
    the extra cache bytes a mean deep step reads, and its (query heads, query-head values) per
    cached byte."""

    name: str
    shallow: float
    deep: float
    extra_bytes: float
    walk: tuple[float, float]

    @property
    def seconds(self) -> float:
        return self.deep - self.shallow

    @property
    def per_byte(self) -> float:
        return self.seconds / self.extra_bytes

    @property
    def per_pair(self) -> float:
        return self.seconds / (self.extra_bytes * self.walk[0])

    @property
    def per_value(self) -> float:
        return self.seconds / (self.extra_bytes * self.walk[1])


def cost_of(spec: ModelSpec, gen: int, depth: int, shallow_rate: float, deep_rate: float) -> Cost:
    """``spec``'s cost from llama-bench's tg``gen`` rates at depth 0 and at ``depth``."""
    return Cost(name=spec.name, shallow=1.0 / shallow_rate, deep=1.0 / deep_rate,
                extra_bytes=extra_cache_bytes(spec, gen, depth),
                walk=work.attention_walk_per_cache_byte(spec))


@dataclass(frozen=True, slots=True)
class Held:
    """One model priced by the others' fit: its cost per byte by one rate a byte and by the
    walk's costs, and those (s a byte, a pair, a value)."""

    cost: Cost
    one_rate: float
    walked: float
    terms: tuple[float, float, float]

    def step_error(self, per_byte: float) -> float:
        """The deep step priced with ``per_byte`` against the measured one."""
        return (self.cost.shallow + per_byte * self.cost.extra_bytes) / self.cost.deep - 1.0


def leave_one_out(costs: Sequence[Cost]) -> list[Held]:
    """Each model's cost priced from the others': their median cost per byte, and
    ``cache_terms`` through their costs per byte against their walks per byte (equal weights,
    no floor: no machine was measured)."""
    out = []
    for k, c in enumerate(costs):
        rest = [x for i, x in enumerate(costs) if i != k]
        y = np.array([x.per_byte for x in rest])
        walk = np.array([x.walk for x in rest])
        one = float(np.median(y))
        b, p, v = cache_terms(y, np.ones_like(y), walk, 0.0, one)
        out.append(Held(cost=c, one_rate=one, walked=b + p * c.walk[0] + v * c.walk[1], terms=(b, p, v)))
    return out


def report(costs: Sequence[Cost], depth: int) -> list[str]:
    """The per-model table and the leave-one-out table, as text."""
    lines = [f"{'model':<44} {'heads/KB':>8} {'step d0':>8} {'d' + str(depth):>8} {'cache':>8} "
             f"{'GB/s':>6} {'ns/pair':>8} {'ns/value':>8}"]
    for c in costs:
        lines.append(f"{c.name[:44]:<44} {c.walk[0] * 1e3:8.2f} {c.shallow * 1e3:6.1f}ms "
                     f"{c.deep * 1e3:6.1f}ms {c.seconds * 1e3:6.1f}ms {1e-9 / c.per_byte:6.2f} "
                     f"{c.per_pair * 1e9:8.1f} {c.per_value * 1e9:8.3f}")
    held = leave_one_out(costs)
    lines.append("each model left out, priced by the others' fit (error of its cache cost / of its deep step):")
    lines.append(f"{'model':<44} {'one rate a byte':>22} {'the walk':>22}")
    for h in held:
        one = f"{h.one_rate / h.cost.per_byte - 1:+7.0%} / {h.step_error(h.one_rate):+6.1%}"
        line = f"{h.walked / h.cost.per_byte - 1:+7.0%} / {h.step_error(h.walked):+6.1%}"
        lines.append(f"{h.cost.name[:44]:<44} {one:>22} {line:>22}")

    def median(errors: list[float]) -> str:
        return f"{float(np.median(np.abs(errors))):.1%}"

    one_rate = median([h.step_error(h.one_rate) for h in held])
    lines.append(f"median |error| of the deep step: one rate a byte {one_rate}, "
                 f"the walk {median([h.step_error(h.walked) for h in held])}")
    b, p, v = cache_terms(np.array([c.per_byte for c in costs]), np.ones(len(costs)),
                          np.array([c.walk for c in costs]), 0.0, float(np.median([c.per_byte for c in costs])))
    lines.append(f"fitted to every model: {b * 1e9:.3f} ns a byte, {p * 1e9:.1f} ns a pair, {v * 1e9:.3f} ns a value")
    return lines


def spec_for(key: str) -> ModelSpec:
    if key in unseen.REAL_SHAPES:
        return unseen.unseen_spec(key, "q4_k_m")
    models = {m.key: m for m in calibration_models("llamacpp", thorough=True)}
    if key not in models:
        raise ValueError(f"no model {key!r}: one of {', '.join([*unseen.REAL_SHAPES, *models])}")
    return models[key].spec()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated keys")
    parser.add_argument("--depth", type=int, default=1024, help="the deep test's cached tokens (default 1024)")
    parser.add_argument("--gen", type=int, default=32, help="tokens generated a test (default 32)")
    parser.add_argument("--repetitions", type=int, default=3, help="llama-bench's -r (default 3)")
    parser.add_argument("--llama-bench", default=None, metavar="PATH",
                        help="the llama-bench binary (default: the one beside this Python, else on PATH)")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.depth < 1 or args.gen < 1 or args.repetitions < 1:
        print("--depth, --gen and --repetitions must be at least 1", file=sys.stderr)
        return 2
    try:
        specs = [spec_for(k.strip()) for k in args.models.split(",") if k.strip()]
    except ValueError as exc:
        print(f"--models: {exc}", file=sys.stderr)
        return 2
    args.llama_bench = str(find_binary("llama-bench", args.llama_bench or unseen.beside_python()))   # before a GGUF
    threads = args.threads or default_threads()
    began, load0 = time.perf_counter(), unseen._load()
    print(f"load average before: {load0}; llama-bench {args.llama_bench}, {threads} threads, -fa 1, "
          f"tg{args.gen} at depth 0 and {args.depth}, {args.repetitions} repetitions")
    costs = []
    with tempfile.TemporaryDirectory(prefix="rooflab-cache-shapes-") as folder:
        for spec in specs:
            path, opened = unseen._written(spec, folder)
            rates = [unseen.llama_bench(args.llama_bench, path, BenchTest(n_gen=args.gen, n_depth=d), threads,
                                        args.repetitions).rate for d in (0, args.depth)]
            if rates[1] < rates[0]:
                costs.append(cost_of(opened, args.gen, args.depth, *rates))
            else:
                print(f"  {opened.name}: no cost of the cache measured (left out)", file=sys.stderr)
            print(f"  {opened.name}: tg{args.gen} {rates[0]:.2f}, @ d{args.depth} {rates[1]:.2f} tokens/s",
                  file=sys.stderr, flush=True)
            Path(path).unlink()
    print("\n".join(report(costs, args.depth)))
    print(f"load average before: {load0}; after: {unseen._load()}; {time.perf_counter() - began:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(finish(main))
