"""Batched decode: what b sequences sharing one weight fetch buy, and the three limits
(cache reads, memory, arithmetic) that stop it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict import work
from rooflab.core.predict.clocks import decode_pass
from rooflab.core.predict.request import _crossing
from rooflab.core.predict.work import Array, Flags
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_BATCH, Workload


def memory_resident(spec: ModelSpec, context_length: ArrayLike, batch: ArrayLike = 1,
                    kv_type: str = "f16") -> Array:
    """Bytes held: file size + b x cache of ``context_length`` tokens (sliding layers hold at
    most their window). Engine buffers and activations are left out."""
    b = np.asarray(batch, dtype=np.float64)
    return spec.file_bytes + b * work.kv_bytes(spec, context_length, kv_type)


def max_batch_that_fits(spec: ModelSpec, machine: MachineProfile, context_length: int,
                        kv_type: str = "f16") -> int:
    """Largest b whose weights and caches fit the machine's memory (0 if the weights alone
    do not fit; MAX_BATCH when the cache is empty)."""
    free = machine.memory - spec.file_bytes
    if free < 0:
        return 0
    per_sequence = float(work.kv_bytes(spec, context_length, kv_type))
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

    return _crossing(excess, 1.0, float(MAX_BATCH))


@dataclass(frozen=True, slots=True)
class BatchSweep:
    """Decode at several batch sizes for one context; arrays indexed like ``batch``."""

    batch: Array
    step_seconds: Array
    per_sequence: Array          # tokens/s each sequence sees
    total: Array                 # tokens/s summed over the batch
    bytes_per_step: Array
    cache_bytes_per_step: Array
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
    mem = np.broadcast_to(memory_resident(spec, length, b, workload.kv_type), shape)
    touched = work.experts_touched_per_layer(spec, b) if spec.is_moe else np.zeros_like(b)
    return BatchSweep(batch=b, step_seconds=p.seconds, per_sequence=1.0 / p.seconds,
                      total=b / p.seconds, bytes_per_step=p.bytes, cache_bytes_per_step=p.cache_bytes,
                      flops_per_step=p.flops, experts_touched=np.array(np.broadcast_to(touched, shape)),
                      memory=np.array(mem), fits=np.array(mem <= machine.memory), compute_bound=p.compute_bound)
