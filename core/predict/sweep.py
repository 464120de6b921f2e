"""Grids of predictions for plots and tables: contexts x batches for decode, prompts for
prefill. One vectorised call each, fast enough to redraw on every slider move."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict import work
from rooflab.core.predict.batching import BatchSweep, batch_sweep
from rooflab.core.predict.clocks import prefill_pass
from rooflab.core.predict.work import Array, Flags
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload


def decode_grid(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                contexts: ArrayLike, batches: ArrayLike) -> BatchSweep:
    """Decode at every (context, batch): ``batch_sweep`` over a column of contexts, so every
    field has shape (contexts, batches) and memory is that of sequences of each context."""
    t = np.asarray(contexts, dtype=np.float64).reshape(-1, 1)
    b = np.asarray(batches, dtype=np.float64).reshape(1, -1)
    return batch_sweep(spec, machine, workload, b, context=t)


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
