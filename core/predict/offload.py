"""A placed model's clocks: the device computes its part at its bandwidth and FLOP/s, the host
computes the layers (and routed experts) in host memory at the host's, one after the other.

    t_step = max(W_dev / B_dev, F_dev / C_dev) + t_host + overhead

This is the lessons' offload example (GPU time plus CPU time: each token passes through every
layer in order, so the two parts add, no overlap), with each part's bytes and FLOPs from
``work`` applied to the part's sub-model (``placement.split``): the experts' union for a batch,
the cache of the layers whose cache sits there, attention's arithmetic where the cache is.
The host's part runs ubatch by ubatch, each computed by the host or (from 32 tokens on, as
llama.cpp's op_offload does) streamed over the PCIe host link to the GPU: ``host_part``.
Each part's two clocks combine as ``clocks`` combines them (a calibrated overlap, say).

In an expected figure each crossing between GPU and host costs a copy, a synchronisation and
the other side's launches, per graph pass (``offload_terms.crossing_seconds``), carried in
``PlacedPass.communication``; a ceiling leaves them out.

Left out: the bytes of activations copied at each boundary (hidden x tokens x 4 bytes over
PCIe, microseconds)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict import layer_split, work
from rooflab.core.predict.batching import BatchSweep
from rooflab.core.predict.clocks import Clocked, Pass, combined_seconds, memory_seconds, pass_compute, prefill_rows
from rooflab.core.predict.crossover import first_crossing
from rooflab.core.predict.footprint import memory_grid
from rooflab.core.predict.host_part import (
    OP_OFFLOAD_MIN_TOKENS,
    HostPass,
    host_clock,
    host_flops,
    host_link_bandwidth,
)
from rooflab.core.predict.layer_split import pipeline_share, pipelines
from rooflab.core.predict.offload_terms import DEFAULT_HOST_FLOPS, crossing_seconds, is_ceiling
from rooflab.core.predict.parallel import Parallel, communication_seconds
from rooflab.core.predict.placement import Part, Placement, Split, input_on_host, split
from rooflab.core.predict.request import RequestEstimate, request
from rooflab.core.predict.work import Array
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS, Workload

__all__ = ["DEFAULT_HOST_FLOPS", "OP_OFFLOAD_MIN_TOKENS", "PlacedPass", "PlacedSweep", "host_flops",
           "host_link_bandwidth", "layer_link", "placed_batch_crossover", "placed_batch_sweep", "placed_decode",
           "placed_prefill", "placed_prefill_crossover", "placed_request"]


@dataclass(frozen=True, slots=True)
class PlacedPass(Clocked):
    """One pass of a placed model: the device's clocks, the host's, and their sum.

    ``device`` and ``host`` are ``clocks.Pass``es whose ``seconds`` leave out the per-step
    overhead; ``seconds`` = device + host + communication + overhead (on several devices the
    device part is all of them in turn, and ``communication`` their hops). Bytes, FLOPs,
    ``memory_seconds`` and ``compute_seconds`` sum the two parts; the bound and KV share follow
    from the sums (``clocks.Clocked``)."""

    device: Pass
    host: HostPass
    seconds: Array
    communication: Array         # seconds the hidden state spends between devices (0 on one)
    round_trips: Array           # of ``communication``, the GPU <-> host crossings' (``offload_terms``)

    @property
    def weight_bytes(self) -> Array:
        return self.device.weight_bytes + self.host.weight_bytes

    @property
    def cache_bytes(self) -> Array:
        return self.device.cache_bytes + self.host.cache_bytes

    @property
    def flops(self) -> Array:
        return self.device.flops + self.host.flops

    @property
    def memory_seconds(self) -> Array:
        return self.device.memory_seconds + self.host.memory_seconds

    @property
    def compute_seconds(self) -> Array:
        return self.device.compute_seconds + self.host.compute_seconds



def _rows(spec: ModelSpec, part: Part, tokens: Array) -> Array:
    """Embedding rows the input lookups read here: tokens x ``ModelSpec.lookup_row_bytes`` (a
    tied head is read whole as the head, so no rows of it, as in ``work.weight_bytes_read``)."""
    if not part.embedding_rows:
        return np.zeros_like(tokens)
    return tokens * spec.lookup_row_bytes


def _clock(machine: MachineProfile, workload: Workload, weights: Array, cache: Array, flops: Array,
           *, batch: ArrayLike | None, rows: ArrayLike | None = None, row_reads: ArrayLike | None = None,
           attention: ArrayLike = 0.0) -> Pass:
    """The device part's clocks, combined as ``clocks`` combines them (the efficiency's overlap,
    decode compute factor, each further decode sequence's arithmetic and rows per multiply, no
    slower than reading the weights once a row: ``row_reads``; a prefill's ``attention`` FLOPs at
    its own factor, as on one device; per-step overhead left to the caller). ``batch``: a decode
    step's sequences (None: a prefill)."""
    eff = machine.efficiency
    mem = memory_seconds(machine, weights + cache)
    comp, added = pass_compute(machine, workload, flops, batch=batch, rows=rows, row_reads=row_reads,
                               attention=attention)
    w, c, f, m, k, a = np.broadcast_arrays(weights, cache, flops, mem, comp, added)
    return Pass(w, c, f, m, k + a, combined_seconds(m, k, eff.overlap) + a)


def layer_link(machine: MachineProfile, devices: int) -> Parallel:
    """The link the hidden state crosses between ``devices`` devices of a layer split: the
    machine's interconnect, else its PCIe host link (the devices talk through the host)."""
    if machine.interconnect_bandwidth > 0 or machine.host_link is None:
        return Parallel.on(machine, devices, "layer")
    return Parallel(devices=devices, mode="layer", link_bandwidth=machine.host_link.bandwidth,
                    link_name=machine.host_link.name)


def _placed(machine: MachineProfile, spec: ModelSpec, placement: Placement, device: Pass, host: HostPass,
            tokens: Array, passes: ArrayLike = 1.0) -> PlacedPass:
    """The parts' sum, with the hops between devices and the ``passes`` graph passes' crossings
    between GPU and host (``offload_terms.crossing_seconds``, 0 in a ceiling) as communication."""
    comm = np.zeros_like(device.seconds + host.seconds)
    trips = comm
    if placement.devices > 1:
        comm = comm + communication_seconds(spec, layer_link(machine, placement.devices), tokens)
    if bool(np.any(host.seconds > 0)):
        trips = np.where(host.seconds > 0, crossing_seconds(machine, spec, placement, passes), 0.0)
        comm = comm + trips
    return PlacedPass(device=device, host=host, communication=comm, round_trips=trips,
                      seconds=device.seconds + host.seconds + comm + machine.efficiency.step_overhead)


Work = tuple[Array, Array, Array]       # weight bytes, cache bytes, FLOPs of one part


def _parts_work(spec: ModelSpec, machine: MachineProfile, placement: Placement, tokens: Array,
                shape: tuple[int, ...], price: Callable[[ModelSpec], tuple[Array, Array, Array]]
                ) -> tuple[Work, Work, Split]:
    """(device, host) work of one pass: ``price`` applied to each part's sub-model, broadcast
    to ``shape``, the input lookup's embedding rows (``tokens`` of them) added where it sits;
    and the split itself (a part's ``spec`` None where it holds no tensor)."""
    s = split(spec, placement, embedding_on_host=input_on_host(machine))
    out = []
    for part in (s.device, s.host):
        zero = np.zeros(shape)
        weights, cache, flops = price(part.spec) if part.spec is not None else (zero, zero, zero)
        out.append((weights + _rows(spec, part, tokens + zero), cache + zero, flops + zero))
    return out[0], out[1], s


def placed_decode(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement, *,
                  context: ArrayLike | None = None, batch: ArrayLike | None = None) -> PlacedPass:
    """One decode step of b sequences with ``context`` tokens cached (the workload's by default):
    each part prices ``work.decode_bytes`` and ``work.decode_flops`` of its sub-model on its
    memory; the input lookup adds b embedding rows."""
    t = np.asarray(workload.context if context is None else context, dtype=np.float64)
    b = np.asarray(workload.batch if batch is None else batch, dtype=np.float64)

    def price(sub: ModelSpec) -> tuple[Array, Array, Array]:
        eff = machine.efficiency
        weights, cache = work.decode_bytes(sub, t, b, workload.kv_type, eff.kv_read_factor, eff.kv_chunks)
        return weights, cache, work.decode_flops(sub, t, b)

    shape = np.broadcast(t, b).shape
    device, host, parts = _parts_work(spec, machine, placement, b, shape, price)
    sub = parts.host.spec
    return _placed(machine, spec, placement, _clock(machine, workload, *device, batch=b),
                   host_clock(machine, workload, sub, *host, b + np.zeros(shape), decode=True), b)


def placed_prefill(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement, *,
                   prompt: ArrayLike | None = None, context: ArrayLike | None = None,
                   batch: ArrayLike | None = None) -> PlacedPass:
    """A prefill of b prompts of n tokens after ``context``: each part prices
    ``work.prefill_weight_and_cache_bytes`` and ``work.prefill_flops`` of its sub-model."""
    n = np.asarray(workload.prompt if prompt is None else prompt, dtype=np.float64)
    t = np.asarray(workload.context if context is None else context, dtype=np.float64)
    b = np.asarray(workload.batch if batch is None else batch, dtype=np.float64)

    def price(sub: ModelSpec) -> tuple[Array, Array, Array]:
        weights, cache = work.prefill_weight_and_cache_bytes(sub, n, t, workload.kv_type, b)
        return weights, cache, work.prefill_flops(sub, n, t, b)

    shape = np.broadcast(n, t, b).shape
    device, host, parts = _parts_work(spec, machine, placement, n * b, shape, price)
    sub, on_device = parts.host.spec, parts.device.spec
    attention = b * work.attention_flops(sub, n, t) if sub is not None else 0.0     # over the host's cache
    per_row = 0.0 if on_device is None else work.weight_bytes_read(on_device, 1.0)
    device_attention = 0.0 if on_device is None else b * work.attention_flops(on_device, n, t)
    placed = _placed(machine, spec, placement, _clock(machine, workload, *device, batch=None,
                                                      rows=prefill_rows(workload, n, b),
                                                      row_reads=memory_seconds(machine, n * b * per_row),
                                                      attention=device_attention),
                     host_clock(machine, workload, sub, *host, n * b + np.zeros(shape), decode=False,
                                attention=attention), n * b, passes=np.ceil(n * b / workload.ubatch))
    if not pipelines(spec, placement):
        return placed
    # a layer split holding every layer: llama.cpp pipelines the ubatches across the devices
    share = pipeline_share(n * b, workload.ubatch, placement.devices,
                           kept=1.0 if is_ceiling(machine) else layer_split.pipeline_kept(placement.devices))
    on_devices = dataclasses.replace(placed.device, seconds=placed.device.seconds * share)
    comm = placed.communication * share
    return PlacedPass(device=on_devices, host=placed.host, communication=comm, round_trips=placed.round_trips * share,
                      seconds=on_devices.seconds + placed.host.seconds + comm + machine.efficiency.step_overhead)


def placed_request(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                   placement: Placement) -> RequestEstimate:
    """TTFT, TPOT and the rest of ``request`` for a placed model (``placed_decode``,
    ``placed_prefill``); a model wholly on one device is ``request`` itself."""
    if placement.devices == 1 and not split(spec, placement, embedding_on_host=input_on_host(machine)).on_host:
        return request(spec, machine, workload)

    def step(t: ArrayLike) -> PlacedPass:
        return placed_decode(spec, machine, workload, placement, context=t)

    return request(spec, machine, workload, decode=step,
                   prefill=placed_prefill(spec, machine, workload, placement))


@dataclass(frozen=True, slots=True)
class PlacedSweep:
    """Decode at several batch sizes as placed: ``sweep`` (its ``memory`` the two memories'
    bills together, ``fits`` both of them holding theirs) and each memory's bill apart."""

    sweep: BatchSweep
    device_memory: Array         # bytes the device holds: its weights, KV, buffer and reserve
    host_memory: Array           # the same for host memory (0 when nothing is placed there)


def placed_batch_sweep(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement,
                       batches: ArrayLike, context: ArrayLike | None = None,
                       context_length: ArrayLike | None = None) -> PlacedSweep:
    """``batching.batch_sweep`` for a placed model: each step is ``placed_decode``'s, and memory
    is ``footprint.memory_grid``'s bills for sequences of ``context_length`` tokens (default:
    the step's context). ``context`` may be a column that broadcasts against ``batches``."""
    t = np.asarray(workload.context if context is None else context, dtype=np.float64)
    length = t if context_length is None else np.asarray(context_length, dtype=np.float64)
    b = np.asarray(batches, dtype=np.float64)
    p = placed_decode(spec, machine, workload, placement, context=t, batch=b)
    shape = np.broadcast(p.seconds, length, b).shape
    seconds = np.broadcast_to(p.seconds, shape)
    device_used, host_used, fits_both = memory_grid(spec, machine, workload, placement, length, b)
    device: Array = np.broadcast_to(device_used, shape)
    host: Array = np.broadcast_to(host_used, shape)
    fits = np.broadcast_to(fits_both, shape)
    touched = work.experts_touched_per_layer(spec, b) if spec.is_moe else np.zeros_like(b)
    bb = np.broadcast_to(b, shape)
    sweep = BatchSweep(batch=b, step_seconds=np.array(seconds), per_sequence=1.0 / seconds, total=bb / seconds,
                       bytes_per_step=np.broadcast_to(p.bytes, shape), cache_bytes_per_step=np.broadcast_to(
                           p.cache_bytes, shape), kv_share=np.broadcast_to(p.kv_share, shape),
                       flops_per_step=np.broadcast_to(p.flops, shape),
                       experts_touched=np.array(np.broadcast_to(touched, shape)), memory=np.array(device + host),
                       fits=np.array(fits), compute_bound=np.broadcast_to(p.compute_bound, shape))
    return PlacedSweep(sweep=sweep, device_memory=np.array(device), host_memory=np.array(host))


def placed_batch_crossover(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement,
                           context: float | None = None) -> float:
    """``batching.batch_crossover`` as placed: the first batch where the two parts' compute
    clocks together pass their memory clocks (inf when never below 65,536).

    Unlike one memory's, this excess need not keep its sign once past zero: a host that computes
    its layers crosses at a few sequences, but from 32 on llama.cpp streams those layers to the
    GPU, and the host's caches then read at host bandwidth can make the step memory-bound again.
    So the first crossing is found on a log grid, then refined by bisection inside its bracket."""
    t = workload.context if context is None else context

    def excess(b: Array) -> Array:
        p = placed_decode(spec, machine, workload, placement, context=t, batch=b)
        return p.compute_seconds - p.memory_seconds

    return first_crossing(excess, 1.0, float(MAX_BATCH))


def placed_prefill_crossover(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                             placement: Placement) -> float:
    """n* as placed: the first prompt length where the two parts' compute clocks together pass
    their memory clocks (inf when never below 16M tokens). From 32 tokens on, llama.cpp may
    stream the host's layers to the GPU, which can turn a compute-bound prefill memory-bound
    again: the first crossing is the one (``crossover.first_crossing``)."""

    def excess(n: Array) -> Array:
        p = placed_prefill(spec, machine, workload, placement, prompt=n)
        return p.compute_seconds - p.memory_seconds

    return first_crossing(excess, 1.0, float(MAX_TOKENS))
