"""Batched decode: what b sequences sharing one weight fetch buy, and the three limits
(cache reads, memory, arithmetic) that stop it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict import work
from rooflab.core.predict.clocks import decode_pass
from rooflab.core.predict.crossover import crossing
from rooflab.core.predict.work import Array, Flags
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import DEFAULT_UBATCH, MAX_BATCH, Workload


def cache_resident(spec: ModelSpec, context_length: ArrayLike, batch: ArrayLike = 1,
                   kv_type: str = "f16", ubatch: int = DEFAULT_UBATCH) -> Array:
    """Bytes the caches of b sequences of ``context_length`` tokens hold: b x
    ``work.kv_bytes_held`` (cells padded to 256; sliding layers hold their window plus a
    ubatch), the one rule a placement's bill uses too. Paging slack is left out."""
    return np.asarray(batch, dtype=np.float64) * work.kv_bytes_held(spec, context_length, kv_type, ubatch)


def memory_resident(spec: ModelSpec, context_length: ArrayLike, batch: ArrayLike = 1,
                    kv_type: str = "f16", ubatch: int = DEFAULT_UBATCH) -> Array:
    """Bytes held: file size + ``cache_resident``. Engine buffers and activations are left out."""
    return spec.file_bytes + cache_resident(spec, context_length, batch, kv_type, ubatch)


def max_batch_that_fits(spec: ModelSpec, machine: MachineProfile, context_length: int,
                        kv_type: str = "f16", ubatch: int = DEFAULT_UBATCH) -> int:
    """Largest b whose weights and caches fit the machine's memory (0 if the weights alone
    do not fit; MAX_BATCH when the cache is empty)."""
    free = machine.memory - spec.file_bytes
    if free < 0:
        return 0
    per_sequence = float(cache_resident(spec, context_length, 1, kv_type, ubatch))
    if per_sequence <= 0:
        return MAX_BATCH
    return int(min(MAX_BATCH, math.floor(free / per_sequence)))


def batch_crossover(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                    context: float | None = None) -> float:
    """The batch where a decode step turns compute-bound: 2 x N x b / C = (W + b x k x t) / B.

    Without cache this is the lesson's balance x bytes_per_weight / 2. Each sequence's cache
    moves it later; the experts' union (a MoE) is counted. inf when never below 65,536."""
    t = workload.context if context is None else context

    def excess(b: float) -> float:
        p = decode_pass(spec, machine, workload, context=t, batch=b)
        return float(p.compute_seconds - p.memory_seconds)

    return crossing(excess, 1.0, float(MAX_BATCH))


@dataclass(frozen=True, slots=True)
class BatchSweep:
    """Decode at several batch sizes, for one context or a column of them (``sweep.decode_grid``).

    Every field but ``batch`` has the broadcast shape of the batches and contexts asked for."""

    batch: Array
    step_seconds: Array
    per_sequence: Array          # tokens/s each sequence sees
    total: Array                 # tokens/s summed over the batch
    bytes_per_step: Array
    cache_bytes_per_step: Array
    kv_share: Array              # share of the bytes per step that is cache
    flops_per_step: Array
    experts_touched: Array       # per layer (0 for dense)
    memory: Array                # resident bytes
    fits: Flags
    compute_bound: Flags


def batch_sweep(spec: ModelSpec, machine: MachineProfile, workload: Workload, batches: ArrayLike,
                context: ArrayLike | None = None, context_length: ArrayLike | None = None) -> BatchSweep:
    """Per-sequence and total decode rates for each b, with memory resident for sequences of
    ``context_length`` tokens (default: the step's context). ``context`` may be an array that
    broadcasts against ``batches`` (a column of contexts gives a context x batch grid); every
    field then has the broadcast shape."""
    t = np.asarray(workload.context if context is None else context, dtype=np.float64)
    length = t if context_length is None else np.asarray(context_length, dtype=np.float64)
    b = np.asarray(batches, dtype=np.float64)
    p = decode_pass(spec, machine, workload, context=t, batch=b)
    shape = p.seconds.shape
    mem = np.broadcast_to(memory_resident(spec, length, b, workload.kv_type, workload.ubatch), shape)
    touched = work.experts_touched_per_layer(spec, b) if spec.is_moe else np.zeros_like(b)
    return BatchSweep(batch=b, step_seconds=p.seconds, per_sequence=1.0 / p.seconds,
                      total=b / p.seconds, bytes_per_step=p.bytes, cache_bytes_per_step=p.cache_bytes,
                      kv_share=p.kv_share,
                      flops_per_step=p.flops, experts_touched=np.array(np.broadcast_to(touched, shape)),
                      memory=np.array(mem), fits=np.array(mem <= machine.memory), compute_bound=p.compute_bound)
