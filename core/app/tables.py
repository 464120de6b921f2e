"""``rooflab predict``'s tables: decode at every (context, batch) and prefill at every prompt
length, each priced twice from one answer (``figures.Figures``): on the model's device alone
(the lessons' one-memory figures, every byte there, nothing reserved) and where the headline
stands (its placement, or the devices sharing the model). The command line writes both as JSON
and CSV and shows the placed ones as text; it prices nothing itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rooflab.core.app.figures import Figures
from rooflab.core.predict.batching import BatchSweep
from rooflab.core.predict.offload import PlacedPass, placed_batch_sweep, placed_prefill
from rooflab.core.predict.parallel import Parallel, ParallelPass, device_memory, parallel_decode, parallel_prefill
from rooflab.core.predict.sweep import PrefillSweep, decode_grid, prefill_sweep
from rooflab.core.predict.work import Array


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacedDecode:
    """Decode steps as placed, shape (contexts, batches): seconds, compute-bound or not, the
    memory both memories hold (bytes: weights placed, KV, buffers, reserves) and whether it fits."""

    step_seconds: Array
    compute_bound: Array
    memory: Array
    fits: Array


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacedPrefill:
    """Prefills as placed, one per prompt length: seconds and the clock that bounds each."""

    seconds: Array
    bounds: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tables:
    """The decode grid and the prefill sweep, on one memory and as placed."""

    contexts: tuple[int, ...]
    batches: tuple[int, ...]
    prompts: tuple[int, ...]
    decode: BatchSweep              # one memory, shape (contexts, batches)
    prefill: PrefillSweep           # one memory, one sequence
    placed_decode: PlacedDecode
    placed_prefill: PlacedPrefill


def tables(figures: Figures, contexts: Sequence[int], batches: Sequence[int], prompts: Sequence[int]) -> Tables:
    """``figures``' scenario at every context x batch and prompt length, on one memory and where
    its headline is priced (``PlacedSummary.priced_on``: the placement, fitting or not, or the
    devices sharing every layer)."""
    sc = figures.scenario
    spec, machine, workload = sc.model, sc.machine, sc.workload
    t = np.asarray(contexts, dtype=np.float64).reshape(-1, 1)
    b = np.asarray(batches, dtype=np.float64).reshape(1, -1)
    n = np.asarray(prompts, dtype=np.float64)
    on = figures.placed.priced_on
    if isinstance(on, Parallel):
        decode = parallel_decode(spec, machine, workload, on, context=t, batch=b)
        step, bound = decode.seconds, decode.device.compute_bound
        uses = [[device_memory(spec, machine, workload, on, length=int(x), batch=int(y)) for y in batches]
                for x in contexts]
        used = np.array([[u.used for u in row] for row in uses])
        fits = np.array([[u.fits for u in row] for row in uses])
        pre: ParallelPass | PlacedPass = parallel_prefill(spec, machine, workload, on, prompt=n, batch=1)
    else:
        sweep = placed_batch_sweep(spec, machine, workload, on, b, context=t).sweep
        step, bound, used, fits = sweep.step_seconds, sweep.compute_bound, sweep.memory, sweep.fits
        pre = placed_prefill(spec, machine, workload, on, prompt=n, batch=1)
    shape = (len(contexts), len(batches))
    bounds = pre.bound()
    return Tables(
        contexts=tuple(contexts), batches=tuple(batches), prompts=tuple(prompts),
        decode=decode_grid(spec, machine, workload, contexts, batches),
        prefill=prefill_sweep(spec, machine, workload, [max(1, p) for p in prompts]),
        placed_decode=PlacedDecode(step_seconds=np.broadcast_to(step, shape),
                                   compute_bound=np.broadcast_to(bound, shape),
                                   memory=np.broadcast_to(used, shape), fits=np.broadcast_to(fits, shape)),
        placed_prefill=PlacedPrefill(seconds=np.broadcast_to(pre.seconds, n.shape),
                                     bounds=tuple(bounds) if isinstance(bounds, list) else (str(bounds),) * len(n)))
