"""The host's part of a placed model: the layers (and routed experts) kept in host memory, run
as llama.cpp runs them, one ubatch at a time.

llama.cpp splits a pass of n tokens into ubatches of u tokens (``-ub``, 512 by default) and
computes each as its own graph. Each ubatch either

- is computed by the host: it reads the host's weights (for a mixture of experts, the experts
  its u tokens route to) at the host memory's rate and does their arithmetic at the host's
  FLOP/s, or
- from 32 tokens on (ggml-backend's ``op_offload``: the CUDA back end takes an op whose batch
  is at least 32), has the host's weight tensors copied to the GPU over the PCIe host link and
  multiplied there: max(W_copied / B_link, F_ubatch / C_gpu). W_copied is every tensor whole
  but the routed experts, of which only those the ubatch's tokens route to cross
  (``offload_terms.streamed_weight_bytes``); an expected figure crosses at
  ``offload_terms.PCIE_STREAM_SHARE`` of the link (pageable, mmap'd host memory). llama.cpp
  copies, then multiplies (an expected figure adds the two; a ceiling lets them overlap), and
  attention over a cache kept in host memory stays on the host: its op has no host weights to
  offload for.

An expected figure streams every ubatch of 32 tokens or more, as llama.cpp does however fast
the host would compute it (``--no-op-offload`` turns that off; not priced): the fit of the
offloaded prompt rows of resources/placed took its leave-one-machine-out median from 73 % to 28 %
when the expected figure stopped taking the faster of the two (2026-12-07). A ceiling takes the
faster for each ubatch, so it stays a ceiling. Copying the tensors once per ubatch is why
prompt speed grows with ``-ub`` when host weights stream:

    t_host = floor(n / u) x t_ubatch(u) + t_ubatch(n mod u)

A ubatch's FLOPs and cache bytes are its share (k / n) of the pass's; its weights are what k
tokens read (``work.weight_bytes_read``; what crosses the link when streamed). The host's
FLOP/s: behind a discrete GPU the profile's ``offload.flops``, else ``DEFAULT_HOST_FLOPS``, the
lessons' 8-core desktop CPU (8 cores x 4 GHz x 2 FMA units x 8 fp32 lanes x 2 FLOP = 1.024
TFLOP/s, roofline lesson example 5); on a CPU or unified machine the second tier is read by the
machine's own processor. Behind a discrete GPU the host part scales by the efficiency's host
factors (the CPU's own shares of its peaks); elsewhere by the machine's.

A decode step's host part behind a GPU reads its routed experts at
``offload_terms.HOST_EXPERT_DECODE_SHARE`` of the CPU's fitted bandwidth factor and multiplies
them at ``offload_terms.HOST_EXPERT_DECODE_COMPUTE`` of its compute factor in an expected figure
(``offload_terms.host_decode_share``, ``host_decode_compute``): the slower of the two bounds it.

Left out: the device part re-reading its own weights per ubatch (a GPU reads them in a few ms
against tens of ms of arithmetic), and any overlap of the copy of one ubatch with the
arithmetic of the last."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.errors import SpecError
from rooflab.core.predict import work
from rooflab.core.predict.clocks import Pass, combined_seconds
from rooflab.core.predict.offload_terms import (
    DEFAULT_HOST_FLOPS,
    host_decode_compute,
    host_decode_share,
    is_ceiling,
    link_share,
    streamed_weight_bytes,
)
from rooflab.core.predict.placement import has_host_tier
from rooflab.core.predict.work import Array
from rooflab.core.values.machine import INT8_PATH, MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

OP_OFFLOAD_MIN_TOKENS = 32         # llama.cpp copies host weights to the GPU for ops this large


def host_flops(machine: MachineProfile, dtype: str | None = None) -> float:
    """Peak FLOP/s the host computes its layers at: behind a discrete GPU the int8 path of the
    CPU ``host_fp32_flops`` states (``INT8_PATH`` x it: its quantized multiplies run on int8 dot
    products, as a CPU's own peak does, and the CPU back end's published factors are of that
    path); the machine's own peak on a CPU or unified machine (efficiency not applied)."""
    if machine.kind != "gpu":
        return machine.flops(dtype)
    return host_fp32_flops(machine) * INT8_PATH


def host_fp32_flops(machine: MachineProfile) -> float:
    """The FP32 FMA peak of the CPU behind a discrete GPU: the profile's ``offload_flops`` when
    stated, else ``DEFAULT_HOST_FLOPS``."""
    return machine.offload_flops if machine.offload_flops > 0 else DEFAULT_HOST_FLOPS


def host_link_bandwidth(machine: MachineProfile) -> float:
    """bytes/s at which host weights reach a discrete GPU: the PCIe host link the profile states
    (``MachineProfile.host_link``), at most the host memory's rate. A profile that states none
    (a saved one from before host links) falls back to an interconnect named PCIe, then to the
    host memory's rate: a device-to-device link (NVLink) never stands in for it."""
    if machine.host_link is not None:
        return min(machine.host_link.bandwidth, machine.offload_bandwidth)
    link = machine.interconnect_bandwidth if "pcie" in machine.interconnect_name.lower() else 0.0
    return min(link, machine.offload_bandwidth) if link > 0 else machine.offload_bandwidth


@dataclass(frozen=True, slots=True)
class HostPass(Pass):
    """The host part's clocks (``Pass``) and, of its seconds, those its weights spend crossing
    the PCIe host link in the ubatches that stream to the GPU (0 where none streams): the
    prompt's streaming term, shown apart by ``step_parts``."""

    link_seconds: Array


def ubatches(tokens: Array, ubatch: int) -> tuple[Array, Array]:
    """(whole ubatches, tokens of the last, shorter one) that llama.cpp splits ``tokens`` into."""
    n = np.asarray(tokens, dtype=np.float64)
    whole = np.floor(n / ubatch)
    return whole, n - whole * ubatch


def _one(machine: MachineProfile, workload: Workload, sub: ModelSpec | None, cache: Array, flops: Array,
         n: Array, k: Array, *, decode: bool, attention: Array) -> tuple[Array, Array, Array, Array, Array]:
    """(bytes moved, memory seconds, compute seconds, seconds, seconds on the link) of one ubatch of ``k`` of the
    pass's ``n`` tokens, computed by the host or streamed to the GPU (an expected figure streams
    from 32 tokens on, as llama.cpp does; a ceiling takes whichever is faster).
    ``attention``: the pass's attention FLOPs over the host's cache, which stay on the host when
    the rest streams (llama.cpp offloads an op for its host *weights*; the cache is none)."""
    eff = machine.efficiency
    factor = eff.decode_compute_factor if decode else eff.compute
    # the host behind a discrete GPU runs at its own shares of its peaks; on a CPU or unified
    # machine the host is the machine
    host_b, host_c = (eff.host_bandwidth, eff.host_compute) if machine.kind == "gpu" else (eff.bandwidth, factor)
    if decode:      # batch-1 routed-expert GEMVs behind a GPU reach less of both (offload_terms)
        host_b *= host_decode_share(machine, sub)
        host_c = host_decode_compute(machine, sub, host_c)
    share = np.divide(k, n, out=np.zeros_like(n), where=n > 0)
    c, f, att = cache * share, flops * share, attention * share
    w = work.weight_bytes_read(sub, k) if sub is not None else np.zeros_like(k)
    nbytes = w + c
    mem = nbytes / (machine.offload_bandwidth * host_b)
    host_rate = host_flops(machine, workload.compute_dtype) * host_c
    comp = f / host_rate
    seconds = combined_seconds(mem, comp, eff.overlap)
    on_link = np.zeros_like(seconds)
    if machine.kind == "gpu":
        resident = streamed_weight_bytes(machine, sub, k) if sub is not None else np.zeros_like(k)
        link = resident / (host_link_bandwidth(machine) * link_share(machine))
        on_gpu = (f - att) / (machine.flops(workload.compute_dtype) * factor)
        # llama.cpp copies a split's weights, then computes: one after the other (a ceiling
        # lets them overlap), and the host's attention over its own cache after that
        ceiling = is_ceiling(machine)
        gpu_part = np.maximum(link, on_gpu) if ceiling else link + on_gpu
        host_att = combined_seconds(c / (machine.offload_bandwidth * host_b), att / host_rate, eff.overlap)
        streamed_seconds = gpu_part + host_att
        # llama.cpp streams from 32 tokens whatever the host's speed; a ceiling takes the faster
        streamed = (k >= OP_OFFLOAD_MIN_TOKENS) & ((streamed_seconds < seconds) | (not ceiling))
        nbytes = np.where(streamed, resident + c, nbytes)
        mem = np.where(streamed, link + c / (machine.offload_bandwidth * host_b), mem)
        comp = np.where(streamed, on_gpu + att / host_rate, comp)
        seconds = np.where(streamed, streamed_seconds, seconds)
        # of the streamed seconds, the copy's (a ceiling overlaps it with the arithmetic: at most the part)
        on_link = np.where(streamed, np.minimum(link, gpu_part), 0.0)
    used = k > 0
    return tuple(np.where(used, x, 0.0) for x in (nbytes, mem, comp, seconds, on_link))  # type: ignore[return-value]


def host_clock(machine: MachineProfile, workload: Workload, sub: ModelSpec | None, weights: Array, cache: Array,
               flops: Array, tokens: Array, *, decode: bool, attention: ArrayLike = 0.0) -> HostPass:
    """The host part's clocks for a pass over ``tokens`` tokens (all sequences), ubatch by
    ubatch as the module docstring says. ``sub``: the host's sub-model; ``weights``, ``cache``,
    ``flops``: what the whole pass reads and computes there (``weights`` only says whether
    anything is there); ``attention``: the part of ``flops`` that is attention over the host's
    cache (it stays on the host when the weights stream). ``seconds`` leaves out the per-step
    overhead."""
    n = np.asarray(tokens, dtype=np.float64)
    if not bool(np.any(weights + cache + flops > 0)):
        zero = np.zeros(np.broadcast(weights, cache, flops, n).shape)
        return HostPass(zero, zero, zero, zero, zero, zero, zero)
    if not has_host_tier(machine):
        raise SpecError(f"{machine.name}: no host memory is stated, so every layer must be on the device")
    whole, rest = ubatches(n, workload.ubatch)
    att = np.asarray(attention, dtype=np.float64) + 0 * n
    full = _one(machine, workload, sub, cache, flops, n, np.full_like(n, float(workload.ubatch)), decode=decode,
                attention=att)
    last = _one(machine, workload, sub, cache, flops, n, rest, decode=decode, attention=att)
    nbytes, mem, comp, seconds, on_link = (whole * a + b for a, b in zip(full, last, strict=True))
    c, f = np.broadcast_arrays(cache + 0 * n, flops + 0 * n)
    w, c, f, m, k, s, li = np.broadcast_arrays(np.maximum(nbytes - c, 0.0), c, f, mem, comp, seconds, on_link)
    return HostPass(w, c, f, m, k, s, li)
