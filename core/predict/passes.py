"""The passes a chart draws, priced where the headline stands: the model on one memory (None), a
placement across the device(s) and host memory (``Placement``), or several devices sharing
every layer (``Parallel``). Each chart reads its clocks, its link time and its memory bills
from here, so it draws the placement and the device count the numbers report.

Nothing here is a new formula: each function picks the prediction function for where the model
stands (``clocks``, ``offload``, ``parallel``) and names its parts alike."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict import work
from rooflab.core.predict.autofit import largest_batch
from rooflab.core.predict.clocks import Pass, combined_seconds, decode_pass, prefill_pass
from rooflab.core.predict.crossover import first_crossing
from rooflab.core.predict.footprint import MemoryUse, plan_memory
from rooflab.core.predict.offload import PlacedPass, placed_decode, placed_prefill, placed_request
from rooflab.core.predict.parallel import (
    Parallel,
    ParallelPass,
    device_memory,
    parallel_decode,
    parallel_estimate,
    parallel_largest_batch,
    parallel_prefill,
)
from rooflab.core.predict.placement import Placement
from rooflab.core.predict.request import RequestEstimate, request
from rooflab.core.predict.work import Array
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS, Workload

#: Where a request's figures stand: one memory (None), a placement, or several devices.
On = Placement | Parallel | None


@dataclass(frozen=True, slots=True)
class DrawnPass:
    """A pass as a chart draws it (arrays of one shape): its time, its two clocks (summed over
    a placement's parts; on several devices each device's share, times the turns the devices
    take), the link's seconds (0 on one device) and the KV share of the bytes read. ``flops``
    and ``bytes``: one device's (``devices`` of them share the pass)."""

    seconds: Array
    memory_seconds: Array
    compute_seconds: Array
    link_seconds: Array
    kv_share: Array
    flops: Array
    bytes: Array
    devices: int = 1

    @property
    def link_share(self) -> Array:
        """The link's share of the pass's time."""
        return np.asarray(self.link_seconds / self.seconds)


def _drawn(p: Pass | PlacedPass) -> DrawnPass:
    """A pass on one memory or placed across the device(s) and host memory."""
    seconds = np.asarray(p.seconds)
    link = p.communication if isinstance(p, PlacedPass) else 0.0
    return DrawnPass(seconds=seconds, memory_seconds=np.asarray(p.memory_seconds),
                     compute_seconds=np.asarray(p.compute_seconds), link_seconds=np.zeros_like(seconds) + link,
                     kv_share=np.asarray(p.kv_share), flops=np.asarray(p.flops), bytes=np.asarray(p.bytes))


def decode_on(spec: ModelSpec, m: MachineProfile, w: Workload, on: On, *, context: ArrayLike,
              batch: ArrayLike | None = None) -> DrawnPass:
    """One decode step of ``batch`` sequences at ``context`` where the model stands."""
    if isinstance(on, Parallel):
        return _parallel(parallel_decode(spec, m, w, on, context=context, batch=batch), on, m)
    if isinstance(on, Placement):
        return _drawn(placed_decode(spec, m, w, on, context=context, batch=batch))
    return _drawn(decode_pass(spec, m, w, context=context, batch=batch))


def prefill_on(spec: ModelSpec, m: MachineProfile, w: Workload, on: On, *, prompt: ArrayLike | None = None,
               batch: ArrayLike | None = None) -> DrawnPass:
    """A prefill of ``batch`` prompts of ``prompt`` tokens where the model stands."""
    if isinstance(on, Parallel):
        return _parallel(parallel_prefill(spec, m, w, on, prompt=prompt, batch=batch), on, m)
    if isinstance(on, Placement):
        return _drawn(placed_prefill(spec, m, w, on, prompt=prompt, batch=batch))
    return _drawn(prefill_pass(spec, m, w, prompt=prompt, batch=batch))


def _parallel(p: ParallelPass, on: Parallel, m: MachineProfile) -> DrawnPass:
    """Several devices: each device's clocks times the turns ``parallel`` priced the pass with
    (a layer split's devices run one after the other, a long prompt pipelined), recovered from
    the device's time so that the clocks drawn add up as ``parallel`` adds them."""
    d = p.device
    one_turn = combined_seconds(d.memory_seconds, d.compute_seconds, m.efficiency.overlap)
    turns = np.divide(d.seconds, one_turn, out=np.ones_like(one_turn), where=one_turn > 0)
    return DrawnPass(seconds=np.asarray(p.seconds), memory_seconds=d.memory_seconds * turns,
                     compute_seconds=d.compute_seconds * turns, link_seconds=np.asarray(p.communication),
                     kv_share=d.kv_share, flops=d.flops, bytes=d.bytes, devices=on.devices)


def request_on(spec: ModelSpec, m: MachineProfile, w: Workload, on: On) -> RequestEstimate:
    """The request where the model stands (the headline's estimate, priced again)."""
    if isinstance(on, Parallel):
        return parallel_estimate(spec, m, w, on)
    if isinstance(on, Placement):
        return placed_request(spec, m, w, on)
    return request(spec, m, w)


def bills_on(spec: ModelSpec, m: MachineProfile, w: Workload, on: Placement | Parallel, *,
             length: int | None = None, batch: int | None = None) -> tuple[tuple[MemoryUse, ...], MemoryUse | None]:
    """(each device's bill, the host memory's or None) for ``batch`` sequences of ``length``
    tokens (the workload's by default): ``footprint.plan_memory`` or ``parallel.device_memory``
    (the devices of a tensor parallel or layer split share alike)."""
    if isinstance(on, Parallel):
        one = device_memory(spec, m, w, on, length=length, batch=batch)
        return tuple(one for _ in range(on.devices)), None
    plan = plan_memory(spec, m, w, on, context_length=length, batch=batch)
    return plan.device_bills, plan.host


def largest_batch_on(spec: ModelSpec, m: MachineProfile, w: Workload, on: Placement | Parallel,
                     length: int) -> int:
    """Most sequences of ``length`` tokens the placement, or each of the devices, holds."""
    if isinstance(on, Parallel):
        return parallel_largest_batch(spec, m, w, on)
    return largest_batch(spec, m, w, on, context_length=length)


def crossovers_on(spec: ModelSpec, m: MachineProfile, w: Workload, on: Parallel) -> tuple[float, float]:
    """(n*, b*) on several devices sharing every layer: the first prompt length and the first
    batch (at context + prompt) where the devices' compute clock passes their memory clock (inf:
    never), as ``offload.placed_*_crossover`` find them for a placement."""

    def prompt_excess(n: Array) -> Array:
        p = prefill_on(spec, m, w, on, prompt=n)
        return p.compute_seconds - p.memory_seconds

    def batch_excess(b: Array) -> Array:
        p = decode_on(spec, m, w, on, context=w.context + w.prompt, batch=b)
        return p.compute_seconds - p.memory_seconds

    return (first_crossing(prompt_excess, 1.0, float(MAX_TOKENS)),
            first_crossing(batch_excess, 1.0, float(MAX_BATCH)))


def experts_touched(spec: ModelSpec, batches: Array) -> Array:
    """Routed experts a step of each batch reads per layer (0 for a dense model)."""
    return work.experts_touched_per_layer(spec, batches) if spec.is_moe else np.zeros_like(batches)
