"""The timed loops of a llama.cpp measurement (see ``timing.py`` for what each one means).

``Sweep.ticks`` is a generator of ``Tick``s: a status line, and a ``MeasuredPoint`` when one
is finished (without settings: the caller stamps them). It checks ``cancel`` between
llama_decode calls; the engine's abort callback covers the time inside one."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rooflab.core.errors import MeasurementError
from rooflab.core.jobs import CancelFlag, check_cancel
from rooflab.core.measure.llamacpp.binding import Engine
from rooflab.core.measure.llamacpp.plan import LlamaCppPlan
from rooflab.core.report.text import count
from rooflab.core.values.measured import MeasuredPoint


@dataclass(frozen=True, slots=True)
class Tick:
    """What the sweep is doing (``step``: "prefill", "decode", "batch", ...), and the point
    it just finished, if any."""

    step: str
    message: str
    point: MeasuredPoint | None = None


def _point(kind: str, times: list[float], *, prompt: int = 1, context: int = 0, batch: int = 1) -> MeasuredPoint:
    """Best and median of ``times``, seconds per pass."""
    return MeasuredPoint(kind=kind, prompt=prompt, context=context, batch=batch, seconds=min(times),
                         median=statistics.median(times), repeats=len(times))


class Sweep:
    """The experiments of ``plan`` on a loaded ``engine``, each in a context of its own."""

    def __init__(self, engine: Engine, plan: LlamaCppPlan, threads: int, cancel: CancelFlag) -> None:
        self.engine = engine
        self.plan = plan
        self.threads = threads
        self.cancel = cancel
        self.rng = np.random.default_rng(plan.seed)

    def ticks(self) -> Iterator[Tick]:
        plan, engine = self.plan, self.engine
        if plan.single_context:
            yield Tick("context", f"making a context of {plan.single_context} tokens")
            self._context(plan.single_context, 1)
            if plan.warmup:
                yield Tick("warm-up", "warm-up pass (not timed)")
                self._warm_up()
            if "prefill" in plan.experiments:
                yield from self._prefill()
            if "decode" in plan.experiments:
                yield from self._decode()
        if plan.batch_context:
            sequences = max(plan.batches)
            yield Tick("context", f"making a context of {sequences} x {plan.batch_context} tokens")
            self._context(plan.batch_context, sequences)
            yield from self._batched()
        engine.free_context()

    # -- helpers ---------------------------------------------------------------------------
    def _context(self, tokens_per_seq: int, sequences: int) -> None:
        plan = self.plan
        self.engine.new_context(n_ctx=tokens_per_seq * sequences, n_seq_max=sequences, n_batch=plan.batch_size,
                                n_ubatch=plan.ubatch, threads=self.threads, flash_attention=plan.flash_attention,
                                type_k=plan.cache_type_k, type_v=plan.cache_type_v,
                                capacity=max(plan.ubatch, sequences))

    def _tokens(self, n: int) -> np.ndarray[Any, Any]:
        """Random token ids, as llama-bench feeds (the work does not depend on which)."""
        return self.rng.integers(0, self.engine.n_vocab, size=n, dtype=np.int32)

    def _fill(self, seq: int, start: int, n: int) -> None:
        """Feed ``n`` tokens to sequence ``seq`` from position ``start``, one ubatch per call,
        logits at the last token only; cancel is checked between calls."""
        ubatch = self.plan.ubatch
        for first in range(0, n, ubatch):
            count = min(ubatch, n - first)
            positions = np.arange(start + first, start + first + count, dtype=np.int32)
            seqs = None if seq == 0 else np.full(count, seq, dtype=np.int32)
            self.engine.decode(self._tokens(count), positions, seqs, logits_last=first + count == n)
            check_cancel(self.cancel)

    def _warm_up(self) -> None:
        """One ubatch-sized prompt and one step: page the weights in, let the threads spin up."""
        self.engine.clear()
        n = min(self.plan.ubatch, max(self.plan.prompts), self.plan.single_context - 2)
        self._fill(0, 0, max(n, 1))
        self.engine.decode(self._tokens(1), np.array([max(n, 1)], dtype=np.int32))
        self.engine.clear()

    # -- the experiments -------------------------------------------------------------------
    def _prefill(self) -> Iterator[Tick]:
        """Each prompt into an empty cache, ``repeats`` times; time to the last logits. The
        repeats go round the whole sweep (every length once, then again), so a burst of other
        load on a shared machine slows one run of several lengths, not every run of one, and
        the best run of each length is a quiet one. With a single repeat an untimed run of each
        length goes first, so a new shape's first-call cost is never the only sample."""
        prompts = self.plan.prompts
        if self.plan.repeats == 1 and self.plan.warmup:
            for n in prompts:
                yield Tick("prefill", f"prompt of {count(n, 'token')}: warm-up")
                self.engine.clear()
                self._fill(0, 0, n)
        times: dict[int, list[float]] = {n: [] for n in prompts}
        for run in range(self.plan.repeats):
            for n in prompts:
                yield Tick("prefill", f"prompt of {count(n, 'token')}: run {run + 1}")
                self.engine.clear()
                began = time.perf_counter()
                self._fill(0, 0, n)
                times[n].append(time.perf_counter() - began)
        for n in prompts:
            point = _point("prefill", times[n], prompt=n)
            yield Tick("prefill", f"prompt of {count(n, 'token')}: {point.rate:.1f} tokens/s", point)

    def _decode(self) -> Iterator[Tick]:
        """At each depth d, ``gen_tokens`` single-token steps, each timed. Each repeat goes up
        the depths in order, filling the cache from one depth to the next (untimed) and
        rewinding to d after its steps, so the repeats of one depth are minutes apart, not back
        to back (see ``_prefill``). The point's context is the middle step's."""
        steps, depths = self.plan.gen_tokens, sorted(self.plan.depths)
        times: dict[int, list[float]] = {d: [] for d in depths}
        for run in range(self.plan.repeats):
            self.engine.clear()
            filled = 0
            for depth in depths:
                yield Tick("decode", f"run {run + 1}: filling the cache to {count(depth, 'token')}")
                self._fill(0, filled, depth - filled)
                filled = depth
                yield Tick("decode", f"run {run + 1}: {steps} steps at depth {depth}")
                for step in range(steps):
                    token, position = self._tokens(1), np.array([depth + step], dtype=np.int32)
                    began = time.perf_counter()
                    self.engine.decode(token, position)
                    times[depth].append(time.perf_counter() - began)
                    check_cancel(self.cancel)
                if not self.engine.remove(0, depth):      # a cache that cannot rewind: refill
                    self.engine.clear()
                    self._fill(0, 0, depth)
        for depth in depths:
            point = _point("decode", times[depth], context=depth + (steps - 1) // 2)
            yield Tick("decode", f"depth {depth}: {point.rate:.1f} tokens/s", point)

    def _batched(self) -> Iterator[Tick]:
        """For each context t: one prefill of t tokens copied to every sequence; then for each
        b, steps decoding one token in each of b sequences at position t, rewound after each.
        The first step of each b is a warm-up (a new graph shape), not timed."""
        sequences = max(self.plan.batches)
        for context in self.plan.contexts:
            yield Tick("batch", f"filling {sequences} sequences to {context} tokens")
            self._share_prefix(context, sequences)
            for b in self.plan.batches:
                yield Tick("batch", f"batch of {b} at context {context}")
                seqs = np.arange(b, dtype=np.int32)
                positions = np.full(b, context, dtype=np.int32)
                times = []
                for step in range(self.plan.batch_steps + 1):
                    tokens = self._tokens(b)
                    began = time.perf_counter()
                    self.engine.decode(tokens, positions, seqs, logits_all=True)
                    elapsed = time.perf_counter() - began
                    for seq in range(b):
                        self.engine.remove(seq, context)
                    if step:
                        times.append(elapsed)
                    check_cancel(self.cancel)
                point = _point("batch", times, context=context, batch=b)
                yield Tick("batch", f"batch of {b} at context {context}: {point.rate:.1f} tokens/s", point)

    def _share_prefix(self, context: int, sequences: int) -> None:
        """Sequences 0..n-1 each holding the same ``context`` tokens: one prefill, copied (with
        one cache stream per sequence the copy happens at the next decode, hence a dummy
        token, removed again, as llama-batched-bench does). Falls back to one prefill each."""
        engine = self.engine
        engine.clear()
        if not context:
            return
        self._fill(0, 0, context)
        if sequences == 1:
            return
        for seq in range(1, sequences):
            engine.copy(0, seq)
        engine.decode(self._tokens(1), np.array([context], dtype=np.int32))
        engine.remove(0, context)
        if all(engine.last_position(seq) == context - 1 for seq in range(sequences)):
            return
        for seq in range(1, sequences):         # the copy did not take: fill each one
            engine.remove(seq, 0)
            self._fill(seq, 0, context)
        if not all(engine.last_position(seq) == context - 1 for seq in range(sequences)):
            raise MeasurementError(f"llama.cpp did not keep {context} tokens in each of {sequences} sequences")
