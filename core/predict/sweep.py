"""Grids of predictions for plots and tables: contexts x batches for decode, prompts for
prefill. One vectorised call each, fast enough to redraw on every slider move."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict import work
from rooflab.core.predict.batching import batch_sweep
from rooflab.core.predict.clocks import prefill_pass
from rooflab.core.predict.work import Array, Flags
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload


def _readonly(*arrays: Array) -> None:
    for a in arrays:
        a.flags.writeable = False


@dataclass(frozen=True, slots=True)
class DecodeGrid:
    """Decode predictions on a (context, batch) grid; every array has shape (contexts, batches)."""

    contexts: Array
    batches: Array
    step_seconds: Array
    per_sequence: Array           # tokens/s each sequence sees
    total: Array                  # tokens/s summed over the batch
    bytes_per_step: Array
    kv_bytes_per_step: Array
    flops_per_step: Array
    experts_touched: Array        # per layer; 0 for a dense model
    memory: Array                 # resident bytes with sequences of `context` tokens
    fits: Flags
    compute_bound: Flags


def decode_grid(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                contexts: ArrayLike, batches: ArrayLike) -> DecodeGrid:
    """Decode at every (context, batch): one broadcast evaluation of the decode clocks."""
    t = np.asarray(contexts, dtype=np.float64).reshape(-1, 1)
    b = np.asarray(batches, dtype=np.float64).reshape(1, -1)
    s = batch_sweep(spec, machine, workload, b, context=t)
    grid = DecodeGrid(contexts=t.ravel(), batches=b.ravel(), step_seconds=s.step_seconds,
                      per_sequence=s.per_sequence, total=s.total, bytes_per_step=s.bytes_per_step,
                      kv_bytes_per_step=s.cache_bytes_per_step, flops_per_step=s.flops_per_step,
                      experts_touched=s.experts_touched, memory=s.memory, fits=s.fits,
                      compute_bound=s.compute_bound)
    _readonly(grid.step_seconds, grid.per_sequence, grid.total, grid.bytes_per_step)
    return grid


@dataclass(frozen=True, slots=True)
class PrefillSweep:
    prompts: Array
    seconds: Array
    tokens_per_second: Array
    memory_seconds: Array
    compute_seconds: Array
    attention_flops: Array
    flops: Array
    compute_bound: Flags


def prefill_sweep(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                  prompts: ArrayLike, context: float | None = None) -> PrefillSweep:
    """Prefill time and prompt rate for each prompt length (one sequence, ``context`` cached)."""
    n = np.asarray(prompts, dtype=np.float64).ravel()
    t = workload.context if context is None else context
    p = prefill_pass(spec, machine, workload, prompt=n, context=t, batch=1)
    return PrefillSweep(prompts=n, seconds=p.seconds, tokens_per_second=n / p.seconds,
                        memory_seconds=p.memory_seconds, compute_seconds=p.compute_seconds,
                        attention_flops=work.attention_flops(spec, n, t), flops=p.flops,
                        compute_bound=p.compute_bound)
