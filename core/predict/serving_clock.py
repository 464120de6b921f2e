"""The clock a serving simulation steps by: what one engine step of a continuous-batching server
costs, read off rooflab's own pass clocks so a served request agrees with ``rooflab predict``.

A step of llama-server or vLLM runs b decoding sequences (one token each, mean context t) and,
in the same forward pass, prefill chunks of n prompt tokens in all (after c cached tokens):

    decode(b, t)      = the decode step of ``clocks.decode_pass`` (placed or on several devices
                        as the headline is: ``offload.placed_decode``, ``parallel.parallel_decode``)
    prefill(n, c)     = the prefill pass of a chunk (``prefill_pass`` and its placed twins)
    step(b, t, n, c)  = max(prefill(n, c) + decode(b, t) - decode(b, 0), prefill(n, c), decode(b, t))

The weights are read once for the whole step, so the decode tokens add only what their caches
cost beyond an empty-cache step of the same batch: exact when both parts are bandwidth-bound,
and never less than either part alone. Left out: the decode tokens' arithmetic when the chunk is
compute-bound (a few rows beside hundreds), and several chunks' attention is priced as one
chunk at their mean context.

The simulation asks for thousands of steps, so the clocks are priced once on grids (one
vectorised call each) and read back by linear interpolation in plain Python: contexts on an
even grid (the decode step is piecewise linear in t), every chunk size up to 8,192 tokens (a
placed model's prefill jumps where llama.cpp copies host weights per ubatch, and below 32
tokens where it stops copying them), a coarser grid above."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.offload import placed_decode, placed_prefill
from rooflab.core.predict.parallel import Parallel, parallel_decode, parallel_prefill
from rooflab.core.predict.placement import Placement, input_on_host, split
from rooflab.core.predict.work import Array
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

CONTEXT_POINTS = 33          # decode grid: contexts 0..max, evenly spaced
PREFILL_CONTEXT_POINTS = 17  # prefill grid: cached tokens before a chunk, evenly spaced
EVERY_CHUNK = 8192           # prefill grid: every chunk size up to this many tokens
CHUNK_STEP = 64              # then every 64th, and both sides of each 512 (llama.cpp's ubatch)

#: Where the requests run: the whole model on one device (None), a placement across device and
#: host memory, or several devices sharing it (``report.expected.StandsOn``).
On = Placement | Parallel | None
Decode = Callable[[ArrayLike, ArrayLike], Array]      # (context, batch) -> seconds
Prefill = Callable[[ArrayLike, float], Array]         # (chunk tokens, cached tokens) -> seconds


def pass_clocks(spec: ModelSpec, machine: MachineProfile, workload: Workload, on: On = None) -> tuple[Decode, Prefill]:
    """The (decode, prefill) seconds functions of ``spec`` on ``machine`` where ``on`` says, the
    same pass functions ``rooflab predict`` prices its headline with."""
    if isinstance(on, Parallel):
        par = on

        def decode(t: ArrayLike, b: ArrayLike) -> Array:
            return parallel_decode(spec, machine, workload, par, context=t, batch=b).seconds

        def prefill(n: ArrayLike, c: float) -> Array:
            at = dataclasses.replace(workload, context=int(round(c)))
            return parallel_prefill(spec, machine, at, par, prompt=n, batch=1).seconds

        return decode, prefill
    if isinstance(on, Placement) and split(spec, on, embedding_on_host=input_on_host(machine)).on_host:
        placement = on

        def placed_d(t: ArrayLike, b: ArrayLike) -> Array:
            return placed_decode(spec, machine, workload, placement, context=t, batch=b).seconds

        def placed_p(n: ArrayLike, c: float) -> Array:
            return placed_prefill(spec, machine, workload, placement, prompt=n, context=c, batch=1).seconds

        return placed_d, placed_p

    def one_d(t: ArrayLike, b: ArrayLike) -> Array:
        return decode_pass(spec, machine, workload, context=t, batch=b).seconds

    def one_p(n: ArrayLike, c: float) -> Array:
        return prefill_pass(spec, machine, workload, prompt=n, context=c, batch=1).seconds

    return one_d, one_p


def _interp(xs: list[float], ys: list[float], x: float) -> float:
    """Linear interpolation on a sorted grid, extended linearly past its ends."""
    i = bisect.bisect_right(xs, x) - 1
    i = 0 if i < 0 else (len(xs) - 2 if i >= len(xs) - 1 else i)
    x0, x1 = xs[i], xs[i + 1]
    return ys[i] + (ys[i + 1] - ys[i]) * (x - x0) / (x1 - x0)


def chunk_grid(budget: int) -> np.ndarray:
    """Chunk sizes the prefill table is priced at: 1..min(budget, ``EVERY_CHUNK``) each, then
    every ``CHUNK_STEP`` tokens and each multiple of 512 with its neighbours, up to ``budget``."""
    top = max(int(budget), 2)
    dense = np.arange(1, min(top, EVERY_CHUNK) + 1, dtype=np.float64)
    if top <= EVERY_CHUNK:
        return dense
    coarse = np.arange(EVERY_CHUNK, top + 1, CHUNK_STEP, dtype=np.float64)
    edges = np.arange(EVERY_CHUNK, top + 1, 512, dtype=np.float64)
    return np.unique(np.concatenate([dense, coarse, edges - 1, edges, edges + 1, [float(top)]]).clip(1, top))


class StepClock:
    """Seconds of one serving step, from tables priced once (see the module docstring).

    ``decode(b, t)``: b sequences at mean context t (b in 1..slots); ``prefill(n, c)``: a chunk
    of n tokens after c cached ones; ``step``: both in one pass."""

    __slots__ = ("slots", "_t0", "_dt", "_nt", "_decode", "_chunks", "_contexts", "_prefill")

    def __init__(self, decode: Decode, prefill: Prefill, *, slots: int, budget: int, max_context: float,
                 max_prefill_context: float) -> None:
        self.slots = slots
        top = max(float(max_context), 1.0)
        t = np.linspace(0.0, top, CONTEXT_POINTS)
        b = np.arange(1, slots + 1, dtype=np.float64)
        grid = np.broadcast_to(decode(t.reshape(-1, 1), b.reshape(1, -1)), (t.size, b.size))
        self._t0, self._dt, self._nt = 0.0, float(t[1] - t[0]), int(t.size)
        self._decode = [[float(x) for x in grid[:, j]] for j in range(b.size)]   # per batch, over t
        chunks = chunk_grid(budget)
        contexts = np.linspace(0.0, max(float(max_prefill_context), 1.0), PREFILL_CONTEXT_POINTS)
        table = np.stack([np.asarray(prefill(chunks, float(c)), dtype=np.float64).ravel() for c in contexts])
        self._chunks = [float(x) for x in chunks]
        self._contexts = [float(x) for x in contexts]
        self._prefill = [[float(x) for x in row] for row in table]                 # per context, over n

    def decode(self, batch: int, context: float) -> float:
        """Seconds of a decode step of ``batch`` sequences at mean ``context`` tokens."""
        ys = self._decode[min(max(batch, 1), self.slots) - 1]
        pos = (context - self._t0) / self._dt
        i = int(pos)
        i = 0 if i < 0 else (self._nt - 2 if i > self._nt - 2 else i)
        return ys[i] + (ys[i + 1] - ys[i]) * (pos - i)

    def prefill(self, tokens: float, context: float) -> float:
        """Seconds of a prefill chunk of ``tokens`` after ``context`` cached tokens."""
        cs = self._contexts
        j = bisect.bisect_right(cs, context) - 1
        j = 0 if j < 0 else (len(cs) - 2 if j >= len(cs) - 1 else j)
        low = _interp(self._chunks, self._prefill[j], tokens)
        high = _interp(self._chunks, self._prefill[j + 1], tokens)
        return low + (high - low) * (context - cs[j]) / (cs[j + 1] - cs[j])

    def step(self, batch: int, context: float, tokens: float, chunk_context: float) -> float:
        """Seconds of one step: ``batch`` decoding sequences at mean ``context`` and prefill
        chunks of ``tokens`` in all at mean ``chunk_context`` (either part may be empty)."""
        if tokens <= 0:
            return self.decode(batch, context)
        pre = self.prefill(tokens, chunk_context)
        if batch <= 0:
            return pre
        dec = self.decode(batch, context)
        return max(pre + dec - self.decode(batch, 0.0), pre, dec)


def step_clock(spec: ModelSpec, machine: MachineProfile, workload: Workload, on: On = None, *, slots: int,
               budget: int, max_context: float, max_prefill_context: float) -> StepClock:
    """The ``StepClock`` of ``spec`` on ``machine`` (placed as ``on``) for up to ``slots``
    sequences, chunks of up to ``budget`` tokens, decode contexts up to ``max_context`` and
    chunks after up to ``max_prefill_context`` cached tokens."""
    decode, prefill = pass_clocks(spec, machine, workload, on)
    return StepClock(decode, prefill, slots=slots, budget=budget, max_context=max_context,
                     max_prefill_context=max_prefill_context)
