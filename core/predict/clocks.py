"""The two clocks of a forward pass and the one that sets its time.

time = max(bytes / B_eff, FLOPs / C_eff) + overhead. With efficiency 1.0 and no overhead this
is the lessons' ceiling; a calibrated machine turns it into an estimate (its efficiency may
also say how far the two clocks overlap, and how a decode step's few-row multiplies compare
with a prefill's: ``Efficiency.overlap``, ``Efficiency.decode_compute``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.errors import SpecError
from rooflab.core.predict import work
from rooflab.core.predict.work import Array, Flags
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload


class Clocked:
    """What follows from a pass's bytes, FLOPs and two clocks, whichever way they were priced:
    one pass on one memory (``Pass``) or a pass placed across GPU and host
    (``offload.PlacedPass``, whose figures sum its parts)."""

    __slots__ = ()

    if TYPE_CHECKING:      # provided by the subclass, as fields or as sums of its parts
        @property
        def weight_bytes(self) -> Array: ...
        @property
        def cache_bytes(self) -> Array: ...
        @property
        def flops(self) -> Array: ...
        @property
        def memory_seconds(self) -> Array: ...
        @property
        def compute_seconds(self) -> Array: ...
        @property
        def seconds(self) -> Array: ...

    @property
    def bytes(self) -> Array:
        return self.weight_bytes + self.cache_bytes

    @property
    def compute_bound(self) -> Flags:
        return self.compute_seconds > self.memory_seconds

    @property
    def kv_share(self) -> Array:
        """Share of the bytes read that is KV cache."""
        total = self.bytes
        return np.divide(self.cache_bytes, total, out=np.zeros_like(total), where=total > 0)

    @property
    def intensity(self) -> Array:
        """Arithmetic intensity, FLOP per byte moved."""
        return self.flops / self.bytes

    def bound(self) -> str | list[str]:
        """"compute" or "memory" (a list for a sweep)."""
        flags = np.asarray(self.compute_bound)
        if flags.ndim == 0:
            return "compute" if bool(flags) else "memory"
        return ["compute" if f else "memory" for f in flags.ravel()]


@dataclass(frozen=True, slots=True)
class Pass(Clocked):
    """One forward pass (or a sweep of them): what it moves, what it computes, how long it takes.

    All fields are arrays of one shape (0-d for a single point). Seconds include the machine's
    per-step overhead; memory_seconds and compute_seconds do not."""

    weight_bytes: Array
    cache_bytes: Array
    flops: Array
    memory_seconds: Array
    compute_seconds: Array
    seconds: Array


def memory_seconds(machine: MachineProfile, nbytes: ArrayLike, offload_fraction: float = 0.0) -> Array:
    """Seconds to move ``nbytes`` when a share f = ``offload_fraction`` of them sits on the
    machine's second, slower memory: each part is read at its own memory's rate, so the time is
    a sum, W_fast / B_fast + W_slow / B_slow = bytes x ((1 - f) / B_fast + f / B_slow).

    Against keeping every byte on the fast memory that is the lessons' slowdown (1 - f) + f x r
    for a memory r times slower. Both rates are scaled by the machine's bandwidth efficiency.
    The two reads are taken one after the other (no overlap); a link's latency is left out."""
    b = np.asarray(nbytes, dtype=np.float64)
    fast = machine.effective_bandwidth
    if offload_fraction <= 0:
        return b / fast
    if not machine.has_offload:
        raise SpecError(f"{machine.name}: has no second memory tier to offload to")
    slow = machine.offload_bandwidth * machine.efficiency.bandwidth
    return b * ((1.0 - offload_fraction) / fast + offload_fraction / slow)


def combined_seconds(memory: ArrayLike, compute: ArrayLike, overlap: float = 1.0) -> Array:
    """The time of a pass whose two clocks overlap by ``overlap`` (0..1) of the shorter one:
    max(m, c) + (1 - overlap) x min(m, c). overlap 1 is the roofline's max (the ceiling);
    0 the sum, an engine that streams and then computes."""
    m, c = np.asarray(memory, dtype=np.float64), np.asarray(compute, dtype=np.float64)
    if overlap >= 1.0:
        return np.maximum(m, c)
    return np.maximum(m, c) + (1.0 - overlap) * np.minimum(m, c)


def compute_clock(machine: MachineProfile, workload: Workload, flops: ArrayLike, *, decode: bool = False,
                  attention: ArrayLike = 0.0, rows: ArrayLike | None = None,
                  row_reads: ArrayLike | None = None) -> Array:
    """Seconds of ``flops`` at the machine's peak for the workload's dtype times its compute
    factor (a decode step's own where it has one); ``attention``, the part of ``flops`` that is
    a prefill's n² arithmetic, at its own factor where one is fitted (with or without flash
    attention, as the workload says); ``rows``: a prefill's rows per multiply, which scale the
    weight multiplies' factor by r / (r + R) (``Efficiency.rows_factor``). On a CPU the peak is
    the share of it the workload's threads reach (``MachineProfile.compute_share``). Every
    pass's compute clock, on one device, several or a placement's device part.

    ``row_reads``: seconds reading the weights once for every row takes. The rows' stretch then
    stops there: a multiply over r rows is never slower than r one-row multiplies, which read
    their weights once each (llama.cpp's vector kernels). An r0 fitted on prompts of 128 tokens
    or more had priced a one-token prompt at 20 times a decode step on a CPU."""
    eff = machine.efficiency
    factor: float | Array = eff.decode_compute_factor if decode else eff.compute
    peak = _peak(machine, workload)
    att = np.asarray(attention, dtype=np.float64)
    weights = (np.asarray(flops, dtype=np.float64) - att) / (peak * factor)
    if rows is not None and not decode and eff.rows_half > 0:
        stretched = weights / eff.rows_factor(rows)
        weights = stretched if row_reads is None else np.minimum(stretched, np.maximum(weights, row_reads))
    return weights + att / (peak * eff.attention_factor(workload.flash_attention))


def decode_clock(machine: MachineProfile, workload: Workload, flops: ArrayLike,
                 batch: ArrayLike) -> tuple[Array, Array]:
    """(seconds that overlap the memory clock, seconds added after it) of a decode step's
    ``flops`` for ``batch`` sequences: with a fitted ``Efficiency.batch_compute``, the first
    sequence's arithmetic F / b at the decode factor and each further one's, (b - 1) x F / b,
    at its own factor, outside the overlap; without one, all of it in the compute clock (the
    roofline) and nothing added."""
    eff = machine.efficiency
    f = np.asarray(flops, dtype=np.float64)
    if eff.batch_compute is None:
        return compute_clock(machine, workload, f, decode=True), np.zeros_like(f)
    first = f / np.maximum(np.asarray(batch, dtype=np.float64), 1.0)
    return compute_clock(machine, workload, first, decode=True), (f - first) / (_peak(machine, workload)
                                                                                 * eff.batch_compute)


def pass_compute(machine: MachineProfile, workload: Workload, flops: ArrayLike, *, batch: ArrayLike | None,
                 attention: ArrayLike = 0.0, rows: ArrayLike | None = None,
                 row_reads: ArrayLike | None = None) -> tuple[Array, Array]:
    """(compute clock, seconds added after the overlap) of a pass's ``flops``: a prefill's
    (``batch`` None; ``attention`` and ``rows`` as ``compute_clock`` takes them) adds nothing;
    a decode step of ``batch`` sequences is split by ``decode_clock``. The one place every pass
    (one device, a placement's device part, several devices) prices its arithmetic."""
    if batch is None:
        comp = compute_clock(machine, workload, flops, attention=attention, rows=rows, row_reads=row_reads)
        return comp, np.zeros_like(comp)
    return decode_clock(machine, workload, flops, batch)


def _peak(machine: MachineProfile, workload: Workload) -> float:
    """FLOP/s of the machine's peak for the workload's dtype, at the share of it the workload's
    threads reach on a CPU (``MachineProfile.compute_share``: the cores they use, less the
    serial share a calibration found)."""
    return machine.flops(workload.compute_dtype) * machine.compute_share(workload.threads)


def prefill_rows(workload: Workload, prompt: ArrayLike, batch: ArrayLike) -> Array:
    """Rows per multiply of a prefill of ``batch`` prompts of ``prompt`` tokens: the tokens one
    ubatch computes at once, min(b x n, -ub)."""
    return np.minimum(np.asarray(batch, dtype=np.float64) * np.asarray(prompt, dtype=np.float64),
                      float(workload.ubatch))


def _clock(machine: MachineProfile, workload: Workload, weight_bytes: Array, cache_bytes: Array,
           flops: Array, *, batch: ArrayLike | None = None, attention: ArrayLike = 0.0,
           rows: ArrayLike | None = None, row_reads: ArrayLike | None = None) -> Pass:
    # every byte on the one memory: the workload's offload share is a placement (``predict.placed``
    # turns it into llama.cpp's layers, priced by ``offload``), never a share of these clocks.
    # ``batch``: a decode step's sequences (None: a prefill)
    eff = machine.efficiency
    mem = memory_seconds(machine, weight_bytes + cache_bytes)
    comp, added = pass_compute(machine, workload, flops, batch=batch, attention=attention, rows=rows,
                               row_reads=row_reads)
    seconds = combined_seconds(mem, comp, eff.overlap) + added + eff.step_overhead
    w, c, f, m, k, s = np.broadcast_arrays(weight_bytes, cache_bytes, flops, mem, comp + added, seconds)
    return Pass(w, c, f, m, k, s)


def decode_pass(spec: ModelSpec, machine: MachineProfile, workload: Workload, *,
                context: ArrayLike | None = None, batch: ArrayLike | None = None) -> Pass:
    """One decode step: b sequences each with ``context`` tokens cached (workload's by default).

    seconds = max((W + b x k x t) / B, b x 2 x N / C): the lessons' decode formula, with the
    experts' union for a batch and attention arithmetic in the FLOPs (a calibrated engine may
    add each further sequence's arithmetic after the overlap: ``decode_clock``)."""
    t = workload.context if context is None else context
    b = workload.batch if batch is None else batch
    eff = machine.efficiency
    weights, cache = work.decode_bytes(spec, t, b, workload.kv_type, eff.kv_read_factor, eff.kv_chunks)
    return _clock(machine, workload, weights, cache, work.decode_flops(spec, t, b), batch=b)


def prefill_pass(spec: ModelSpec, machine: MachineProfile, workload: Workload, *,
                 prompt: ArrayLike | None = None, context: ArrayLike | None = None,
                 batch: ArrayLike | None = None) -> Pass:
    """A prefill: max(2 x N x n / C + attention's n² term / C, W / B) for each of b prompts.

    The attention FLOPs sit inside the compute clock, so past n* the n² term shows directly."""
    n = workload.prompt if prompt is None else prompt
    t = workload.context if context is None else context
    b = workload.batch if batch is None else batch
    weights, cache = work.prefill_weight_and_cache_bytes(spec, n, t, workload.kv_type, b)
    attention = np.asarray(b, dtype=np.float64) * work.attention_flops(spec, n, t)
    tokens = np.asarray(n, dtype=np.float64) * np.asarray(b, dtype=np.float64)
    return _clock(machine, workload, weights, cache, work.prefill_flops(spec, n, t, b), attention=attention,
                  rows=prefill_rows(workload, n, b),
                  row_reads=memory_seconds(machine, tokens * work.weight_bytes_read(spec, 1.0)))
