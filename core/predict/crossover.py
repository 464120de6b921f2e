"""Where one clock overtakes the other: the generic search, and n*, the prompt length where
prefill turns compute-bound. (b*, the batch where decode does, is ``batching.batch_crossover``.)"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rooflab.core.predict.clocks import prefill_pass
from rooflab.core.predict.work import Array
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_TOKENS, Workload


def crossing(excess: Callable[[float], float], low: float, high: float) -> float:
    """Smallest x in [low, high] where ``excess(x) >= 0``, to 1e-6 relative, by bisection.

    ``excess`` must be non-decreasing in x (compute seconds minus memory seconds, say).
    Returns ``low`` when it is already >= 0 there and inf when it is still < 0 at ``high``."""
    if excess(low) >= 0:
        return low
    if excess(high) < 0:
        return float("inf")
    for _ in range(200):
        mid = (low + high) / 2
        if excess(mid) >= 0:
            high = mid
        else:
            low = mid
        if high - low <= 1e-6 * high:
            break
    return high


def first_crossing(excess: Callable[[Array], Array], low: float, high: float, points: int = 385) -> float:
    """Smallest x in [low, high] where ``excess(x) >= 0`` when the excess need not keep its
    sign once past zero: its first sign change on a log grid of ``points`` (``excess`` takes an
    array), refined by ``crossing`` inside that bracket. low when already >= 0 there; inf
    when no grid point reaches 0."""
    grid = np.geomspace(low, high, points)
    over = np.flatnonzero(np.broadcast_to(excess(grid), grid.shape) >= 0)
    if over.size == 0:
        return float("inf")
    if over[0] == 0:
        return low
    return crossing(lambda x: float(excess(np.asarray(x, dtype=np.float64))), float(grid[over[0] - 1]),
                    float(grid[over[0]]))


def prefill_crossover(spec: ModelSpec, machine: MachineProfile, workload: Workload) -> float:
    """n*, tokens: the prompt length where the workload's prefill (its batch of prompts after
    its cached context) turns compute-bound, solving compute seconds = memory seconds of
    ``prefill_pass``, the clocks the prefill chart draws.

    At batch 1 with nothing cached this is the lessons' n* = W x C / (2 x N x B), less the
    output head's one-off FLOPs and with the cache the prompt writes; a batch divides it about
    b-fold, a cached context adds the bytes it reads. A mixture of experts counts the prompt's
    expert union. inf if prefill never turns compute-bound below MAX_TOKENS (16M tokens)."""

    def excess(n: float) -> float:
        p = prefill_pass(spec, machine, workload, prompt=n)
        return float(p.compute_seconds - p.memory_seconds)

    return crossing(excess, 1.0, float(MAX_TOKENS))
