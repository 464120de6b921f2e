"""The pure parts of ``bench_unseen_gguf.py``: the real models it tests, a llama-bench test priced
from a calibration through the expected path, the control's choice and the table. Nothing here
measures, so the tests run it on any machine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rooflab.core.io import load_model
from rooflab.core.io.hf import spec_from_config
from rooflab.core.measure.engines.llamacpp.plan import BenchTest
from rooflab.core.measure.engines.rounds import merge_points
from rooflab.core.predict import work
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.expected import Expected, byte_shares
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

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


def bracketed(before: MeasuredPoint | None, after: MeasuredPoint) -> MeasuredPoint:
    """llama-bench's figure for a test run once before the calibration and once after it: the
    mean of the two runs' mean times, their standard deviation as the spread (``merge_points``,
    each run one sample, as the calibration's rounds merge theirs). A machine that speeds up
    or slows down over the calibration is met halfway, as the calibration's rounds meet it;
    ``after`` alone when nothing ran before."""
    return after if before is None else merge_points([before, after])


def drift_line(test: BenchTest, before: float, after: float) -> str:
    """How far one test's llama-bench figure (tokens/s) moved over the calibration."""
    return f"{test.label:<14} {before:9.2f} before, {after:9.2f} after the calibration ({after / before - 1:+.1%})"


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
    one whose bytes are mostly in the unseen model's format class, nearest it in bytes (by
    ratio). The class, not the file's label: Gemma 3 1B "Q4_K_M" is mostly Q8_0, its widths
    not being multiples of a K-quant's 256-weight block."""
    if key:
        return next((s for s in seen if key in s.name), None)

    def main_class(spec: ModelSpec) -> str:
        shares = byte_shares(spec)
        return max(shares, key=lambda k: shares[k])

    alike = [s for s in seen if main_class(s) == main_class(unseen) and not s.experts] or list(seen)
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


def extra_cache_bytes(spec: ModelSpec, gen: int, depth: int) -> float:
    """The cache bytes a mean step of tg``gen`` @ d``depth`` reads beyond one of tg``gen``
    (``work.kv_bytes`` over each test's contexts)."""
    steps = np.arange(gen, dtype=np.float64)
    return float(np.mean(work.kv_bytes(spec, depth + steps)) - np.mean(work.kv_bytes(spec, steps)))


def walked_pairs(spec: ModelSpec, cache_bytes: float) -> float:
    """The (query head, cached token) pairs a step's attention walks for ``cache_bytes`` of
    cache (``work.attention_walk_per_cache_byte``)."""
    return cache_bytes * work.attention_walk_per_cache_byte(spec)[0]


def depth_cost(spec: ModelSpec, rows: Sequence[Row]) -> str:
    """What the cache adds to a generated token, measured and expected: the time a step of
    tgN @ dD takes beyond one of tgN, in ms, per (query head, cached token) pair and as bytes
    of cache a second (the mean step's extra bytes, ``work.kv_bytes``; pairs: bytes x the query
    heads per cached byte, ``work.attention_walk_per_cache_byte``); "" without both tests."""
    deep = next((r for r in rows if r.test.n_gen and not r.test.n_prompt and r.test.n_depth), None)
    shallow = next((r for r in rows if deep and r.test.n_gen == deep.test.n_gen and not r.test.n_prompt
                    and not r.test.n_depth), None)
    if deep is None or shallow is None:
        return ""
    extra = extra_cache_bytes(spec, deep.test.n_gen, deep.test.n_depth)
    pairs = walked_pairs(spec, extra)

    def cost(deep_rate: float, shallow_rate: float) -> str:
        seconds = 1.0 / deep_rate - 1.0 / shallow_rate
        return f"{seconds * 1e3:.1f} ms ({seconds / pairs * 1e9:.0f} ns a pair, {extra / seconds / 1e9:.1f} GB/s)" \
            if seconds > 0 else f"{seconds * 1e3:.1f} ms"

    return (f"{deep.test.label} beyond {shallow.test.label}, a step: llama-bench "
            f"{cost(deep.measured, shallow.measured)}, expected {cost(deep.expected, shallow.expected)}")


def model_walks(models: Sequence[tuple[str, ModelSpec, Sequence[MeasuredPoint]]]) -> list[str]:
    """Each calibration model's deepest single-sequence step beyond its shallowest, as measured
    in process: "qwen3-0.6b-q4_k_m (head width 128): 97.3 ms at 2,051 cached tokens beyond 3,
    106 ns a pair" (pairs as ``depth_cost`` counts them), so the unseen model's cost per pair is
    read against the calibration's own spread; models without two such steps are left out."""
    lines = []
    for key, spec, points in models:
        steps = sorted((p for p in points if p.kind == "decode" and p.batch <= 1 and not p.disturbed),
                       key=lambda p: p.context)
        if len(steps) < 2 or steps[-1].seconds <= steps[0].seconds:
            continue
        shallow, deep = steps[0], steps[-1]
        pairs = walked_pairs(spec, float(work.kv_bytes(spec, deep.context) - work.kv_bytes(spec, shallow.context)))
        seconds = deep.seconds - shallow.seconds
        if pairs > 0:
            lines.append(f"{key} (head width {spec.attention.head_dim_k}): {seconds * 1e3:.1f} ms at "
                         f"{deep.context:,} cached tokens beyond {shallow.context:,}, "
                         f"{seconds / pairs * 1e9:.0f} ns a pair")
    return lines
