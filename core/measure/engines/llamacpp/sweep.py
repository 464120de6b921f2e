"""The timed loops of a llama.cpp measurement (see ``timing.py`` for what each one means).

Prompt processing and generation are llama-bench's tests, timed as llama-bench times them
(tools/llama-bench/llama-bench.cpp of the llama.cpp the binding carries):

- each test (``BenchTest``: ppN, or tgN @ dD) gets a context of its own of exactly
  n_prompt + n_gen + n_depth tokens and, unless ``warmup`` is off, one untimed run (its whole
  prompt, or one generated token);
- each of ``repeats`` repetitions empties the cache, brings it to the depth (a prompt of
  n_depth tokens, untimed; its state kept and restored for the next repetition or test at that
  depth), then times the whole test: a prompt submitted ``n_batch`` tokens per ``llama_decode``
  (llama.cpp splits each call into ``n_ubatch`` computations) with one synchronise at the end,
  or n_gen single-token decodes, each synchronised;
- the point is the mean and standard deviation of the repetitions (``bench_point``), the best
  and the median kept as extras; a tgN point is per generated token, at its middle step's context.

Batched decode follows llama-batched-bench. ``Sweep.ticks`` is a generator of ``Tick``s: a
status line, and a ``MeasuredPoint`` when one is finished (without settings: the caller stamps
them). It checks ``cancel`` between llama_decode calls; the engine's abort callback covers the
time inside a prompt-sized one. The clock is injectable, so the method is tested on timings a test chooses."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rooflab.core.errors import MeasurementError
from rooflab.core.jobs import CancelFlag, check_cancel
from rooflab.core.measure.engines.llamacpp.binding import Engine
from rooflab.core.measure.engines.llamacpp.plan import BenchTest, LlamaCppPlan
from rooflab.core.values.measured import MeasuredPoint, bench_point


@dataclass(frozen=True, slots=True)
class Tick:
    """What the sweep is doing (``step``: "prefill", "decode", "batch", ...), and the point
    it just finished, if any."""

    step: str
    message: str
    point: MeasuredPoint | None = None


def _batch_point(times: list[float], *, context: int, batch: int) -> MeasuredPoint:
    """A batched step as llama-batched-bench reports it: the mean over its steps (T_TG / TG),
    with their standard deviation, the best and the median beside it."""
    return MeasuredPoint(kind="batch", prompt=1, context=context, batch=batch, seconds=statistics.fmean(times),
                         median=statistics.median(times), best=min(times), repeats=len(times),
                         stdev=statistics.stdev(times) if len(times) > 1 else 0.0)


class Sweep:
    """The experiments of ``plan`` on a loaded ``engine``, each test in a context of its own."""

    def __init__(self, engine: Engine, plan: LlamaCppPlan, threads: int, cancel: CancelFlag,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.engine = engine
        self.plan = plan
        self.threads = threads
        self.cancel = cancel
        self.clock = clock
        self.rng = np.random.default_rng(plan.seed)
        self._depth_state: tuple[int, Any] | None = None     # (depth, llama.cpp's state of that cache)

    def ticks(self) -> Iterator[Tick]:
        plan = self.plan
        for test in plan.tests:
            yield from self._test(test)
        if plan.batch_context:
            sequences = max(plan.batches)
            yield Tick("context", f"making a context of {sequences} x {plan.batch_context} tokens")
            self._context(plan.batch_context, sequences)
            yield from self._batched()
        self.engine.free_context()

    # -- helpers ---------------------------------------------------------------------------
    def _context(self, tokens_per_seq: int, sequences: int) -> None:
        plan = self.plan
        self.engine.new_context(n_ctx=tokens_per_seq * sequences, n_seq_max=sequences, n_batch=plan.batch_size,
                                n_ubatch=plan.ubatch, threads=self.threads, flash_attention=plan.flash_attention,
                                type_k=plan.cache_type_k, type_v=plan.cache_type_v,
                                capacity=max(plan.ubatch, sequences) if sequences > 1 else plan.batch_size)

    def _tokens(self, n: int) -> np.ndarray[Any, Any]:
        """Random token ids, as llama-bench feeds (the work does not depend on which)."""
        return self.rng.integers(0, self.engine.n_vocab, size=n, dtype=np.int32)

    def _fill(self, seq: int, start: int, n: int) -> None:
        """Feed ``n`` tokens to sequence ``seq`` from position ``start``, one ubatch per call,
        logits at the last token only; cancel is checked between calls (batched contexts)."""
        ubatch = self.plan.ubatch
        for first in range(0, n, ubatch):
            count = min(ubatch, n - first)
            positions = np.arange(start + first, start + first + count, dtype=np.int32)
            seqs = None if seq == 0 else np.full(count, seq, dtype=np.int32)
            self.engine.decode(self._tokens(count), positions, seqs, logits_last=first + count == n)
            check_cancel(self.cancel)

    # -- llama-bench's tests ---------------------------------------------------------------
    def _prompt(self, n: int) -> None:
        """llama-bench's ``test_prompt``: ``n`` tokens after what the cache holds, ``n_batch``
        per llama_decode (logits of each call's last token), one synchronise at the end."""
        start = self.engine.last_position(0) + 1
        batch = self.plan.batch_size
        for first in range(0, n, batch):
            count = min(batch, n - first)
            positions = np.arange(start + first, start + first + count, dtype=np.int32)
            self.engine.decode(self._tokens(count), positions, wait=False)
            check_cancel(self.cancel)
        self.engine.synchronize()

    def _gen(self, n: int) -> None:
        """llama-bench's ``test_gen``: ``n`` single-token decodes, each synchronised."""
        position = self.engine.last_position(0) + 1
        for step in range(n):
            self.engine.decode(self._tokens(1), np.array([position + step], dtype=np.int32))
            check_cancel(self.cancel)

    def _depth(self, depth: int) -> None:
        """The cache brought to ``depth`` tokens, untimed: restored from the state kept at that
        depth, else a prompt of ``depth`` tokens whose state is then kept (as llama-bench)."""
        if self._depth_state is not None and self._depth_state[0] == depth:
            if self.engine.load_state(self._depth_state[1]):
                return
            self.engine.clear()
        self._prompt(depth)
        self._depth_state = (depth, self.engine.save_state())

    def _test(self, test: BenchTest) -> Iterator[Tick]:
        plan, step, label = self.plan, test.kind, test.label
        yield Tick("context", f"{label}: a context of {test.n_ctx} tokens")
        self._context(test.n_ctx, 1)
        if plan.warmup:
            yield Tick(step, f"{label}: warm-up (not timed)")
            self.engine.clear()
            if test.n_prompt:
                self._prompt(test.n_prompt)
            if test.n_gen:
                self._gen(1)
        times = []
        for rep in range(plan.repeats):
            yield Tick(step, f"{label}: run {rep + 1}/{plan.repeats}")
            self.engine.clear()
            if test.n_depth:
                self._depth(test.n_depth)
            began = self.clock()
            if test.n_prompt:
                self._prompt(test.n_prompt)
            if test.n_gen:
                self._gen(test.n_gen)
            times.append(self.clock() - began)
        point = bench_point(test.kind, test.n_prompt or test.n_gen, test.n_depth, times)
        yield Tick(step, f"{label}: {point.rate:.1f} tokens/s", point)

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
                    began = self.clock()
                    self.engine.decode(tokens, positions, seqs, logits_all=True)
                    elapsed = self.clock() - began
                    for seq in range(b):
                        self.engine.remove(seq, context)
                    if step:
                        times.append(elapsed)
                    check_cancel(self.cancel)
                point = _batch_point(times, context=context, batch=b)
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
