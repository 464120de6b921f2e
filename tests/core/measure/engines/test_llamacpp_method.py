"""The in-process llama.cpp timing is llama-bench's method (issue 18), checked on a recording
stand-in for the engine and a clock the test drives, so no real timing decides:

- one context per test, of exactly n_prompt + n_gen + n_depth tokens, and one warm-up per test;
- a prompt submitted n_batch tokens per llama_decode with one synchronise per run; generation
  one synchronised token at a time;
- the depth filled once (untimed), its state restored for the next runs;
- each point the mean and standard deviation of whole runs, best and median as extras;
- threads default to the physical cores."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from rooflab.core.measure.engines.llamacpp import binding
from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan
from rooflab.core.measure.engines.llamacpp.sweep import Sweep
from rooflab.core.measure.machine import sysinfo
from rooflab.core.values.measured import MeasuredPoint


class RecordingEngine:
    """What the sweep asked llama.cpp to do, call by call; the cache is a position counter."""

    n_vocab = 1000

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.cached = 0

    def new_context(self, **params: Any) -> None:
        self.calls.append(("context", params["n_ctx"], params["n_batch"], params["n_ubatch"], params["threads"]))
        self.cached = 0

    def free_context(self) -> None:
        self.calls.append(("free",))

    def clear(self) -> None:
        self.calls.append(("clear",))
        self.cached = 0

    def last_position(self, seq: int) -> int:
        return self.cached - 1

    def decode(self, tokens: np.ndarray[Any, Any], positions: np.ndarray[Any, Any], seqs: Any = None, *,
               logits_last: bool = True, logits_all: bool = False, wait: bool = True) -> None:
        assert positions[0] == self.cached and len(positions) == len(tokens)
        self.cached += len(tokens)
        self.calls.append(("decode", len(tokens), wait))

    def synchronize(self) -> None:
        self.calls.append(("sync",))

    def save_state(self, seq: int = 0) -> tuple[str, int]:
        self.calls.append(("save", self.cached))
        return ("state", self.cached)

    def load_state(self, buffer: tuple[str, int], seq: int = 0) -> bool:
        self.calls.append(("load", buffer[1]))
        self.cached = buffer[1]
        return True


def _clock(run_seconds: list[float]) -> Any:
    """A clock read twice a run (start, end) whose runs last ``run_seconds`` in turn."""
    def ticks() -> Iterator[float]:
        now = 100.0
        for seconds in run_seconds:
            yield now
            now += seconds
            yield now
            now += 7.0                      # what happens between runs is not timed
    it = ticks()
    return lambda: next(it)


def _sweep(plan: LlamaCppPlan, runs: list[float]) -> tuple[RecordingEngine, list[MeasuredPoint]]:
    engine = RecordingEngine()
    sweep = Sweep(engine, plan, threads=3, cancel=None, clock=_clock(runs))    # type: ignore[arg-type]
    points = [t.point for t in sweep.ticks() if t.point is not None]
    return engine, points


def _segments(calls: list[tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
    """The calls split at each new context: one list per test."""
    out: list[list[tuple[Any, ...]]] = []
    for call in calls:
        if call[0] == "context":
            out.append([])
        if out:
            out[-1].append(call)
    return out


def test_a_prompt_test_submits_n_batch_per_call_and_synchronises_once():
    plan = LlamaCppPlan(prompts=(600,), batch_size=256, ubatch_size=128, experiments=("prefill",), repeats=3)
    engine, (point,) = _sweep(plan, [1.0, 2.0, 3.0])
    (test,) = _segments(engine.calls)
    assert test[0] == ("context", 600, 256, 128, 3)                  # n_ctx = n_prompt + n_gen + n_depth
    one_run = [("clear",), ("decode", 256, False), ("decode", 256, False), ("decode", 88, False), ("sync",)]
    assert test[1:] == one_run * 4 + [("free",)]                     # the warm-up, then three timed runs
    # llama-bench's statistic over whole runs; best and median as extras; named as llama-bench names it
    assert point.seconds == pytest.approx(2.0) and point.stdev == pytest.approx(1.0)
    assert point.best == pytest.approx(1.0) and point.median == pytest.approx(2.0)
    assert (point.kind, point.prompt, point.context, point.repeats, point.test) == ("prefill", 600, 0, 3, "pp600")


def test_a_generation_test_at_depth_fills_the_depth_once_and_times_whole_runs():
    plan = LlamaCppPlan(depths=(0, 512), gen_tokens=4, experiments=("decode",), repeats=2, batch_size=2048)
    engine, points = _sweep(plan, [0.4, 0.8, 0.2, 0.6])
    shallow, deep = _segments(engine.calls)
    assert shallow[0][1] == 4 and deep[0][1] == 4 + 512
    step = ("decode", 1, True)                                       # each token decoded and waited for
    assert shallow[1:] == [("clear",), step] + [("clear",), step, step, step, step] * 2
    # warm-up: one token; run 1 fills the depth (untimed) and keeps its state; run 2 restores it
    assert deep[1:] == [("clear",), step, ("clear",), ("decode", 512, False), ("sync",), ("save", 512),
                        step, step, step, step, ("clear",), ("load", 512), step, step, step, step, ("free",)]
    tg, tg_deep = points
    assert (tg.test, tg.context, tg.prompt) == ("tg4", 1, 1)         # the middle step's context
    assert tg.seconds == pytest.approx(0.6 / 4) and tg.stdev == pytest.approx(statistics.stdev([0.4, 0.8]) / 4)
    assert (tg_deep.test, tg_deep.context) == ("tg4 @ d512", 513)
    assert tg_deep.seconds == pytest.approx(0.4 / 4) and tg_deep.best == pytest.approx(0.2 / 4)


def test_without_warm_up_every_run_is_timed():
    plan = LlamaCppPlan(prompts=(64,), experiments=("prefill",), repeats=2, warmup=False)
    engine, (point,) = _sweep(plan, [1.0, 1.0])
    assert sum(1 for c in engine.calls if c[0] == "decode") == 2 and point.repeats == 2


def test_threads_default_to_the_physical_cores(monkeypatch):
    """llama-bench's default (common_cpu_get_num_math): one thread a core, not one a hardware thread."""
    monkeypatch.setattr(sysinfo.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(sysinfo, "_sibling_sets", lambda allowed: {"00000003", "0000000c"})
    assert sysinfo.physical_cores() == 2 and binding.default_threads() == 2
    monkeypatch.setattr(sysinfo, "_sibling_sets", lambda allowed: set())
    monkeypatch.setattr(sysinfo, "_cpuinfo_cores", lambda allowed: 0)
    assert sysinfo.physical_cores() == 4                              # nothing says: every CPU it may use


def test_the_memory_check_counts_the_depths_kept_cache():
    """The state kept at a depth is a second copy of that cache: the check before loading counts it."""
    from rooflab.core.measure.engines.llamacpp.plan import kv_cache_bytes, llamacpp_memory
    from tests.factories.llm_configs import llama_config, spec_of

    spec = spec_of(llama_config(), "q8_0")
    shallow = LlamaCppPlan(prompts=(64,), depths=(0,), gen_tokens=8, experiments=("decode",))
    deep = LlamaCppPlan(prompts=(64,), depths=(0, 4096), gen_tokens=8, experiments=("decode",))
    context = kv_cache_bytes(spec, deep, deep.single_context, 1)
    assert llamacpp_memory(spec, deep).cache == pytest.approx(context + kv_cache_bytes(spec, deep, 4096, 1))
    only_context = kv_cache_bytes(spec, shallow, shallow.single_context, 1)
    assert llamacpp_memory(spec, shallow).cache == pytest.approx(only_context)
