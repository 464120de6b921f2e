"""What a placed model pays for crossing between the GPU and the host, beside each part's own
clocks: the three terms of issue 35, each one named function, each 0 (or the hardware's own
bound) in a ceiling and an engine's share in an expected figure.

A ceiling is told apart by its machine's efficiency: ``Efficiency.is_identity`` (every factor 1,
no overhead) is the ceiling; any engine's efficiency (a calibration, a stated share) is an
expected figure. The constants are fitted by ``benchmarks/accuracy/bench_offload_accuracy.py --fit`` on
resources/placed/llamacpp-offload-public.json and scored there leaving one source out."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict.placement import Placement, device_layer_start
from rooflab.core.predict.work import Array
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec, Role

# Seconds one crossing of a graph split costs llama.cpp beyond its bytes: the asynchronous copy of
# a few KB of activations, the stream synchronisation that waits for it, and the other side's
# kernel launches or thread-pool wake-up. Bounded, not fitted: PCIe's own latency is ~1-2 us a
# copy and a CUDA stream synchronisation ~5-10 us; a ggml CPU graph of a layer's expert ops wakes
# its threads and meets at a barrier per op (~3-5 us each, 4-6 ops). No row of the public set
# varies the number of crossings alone, so the value sits inside that bound, not on a fit.
CROSSING_SECONDS = 25e-6
# Share of the host's fitted CPU bandwidth factor that batch-1 routed-expert GEMVs reach behind a
# GPU: small matrices, one per expert used, on threads that also drive the GPU. Fitted (median
# error) on the 60 generation rows of resources/placed (2026-12-06): 0.66; one share does not fit
# every host: a Ryzen-7950X's rows would take about 0.7, a Threadripper 5975WX's run 30 % below any.
HOST_EXPERT_DECODE_SHARE = 0.66
# Share of the PCIe link a prompt's host weights cross at: llama.cpp copies them from mmap'd,
# pageable host memory, which CUDA stages through a pinned buffer. Fitted (median error) on the
# 21 prompt rows of resources/placed whose engine copies as priced (2026-12-06): 0.76.
PCIE_STREAM_SHARE = 0.76
# A ceiling's least share of a layer's experts that a ubatch's tokens route to (routing is not
# uniform: GPT-OSS leaves experts idle, so a large ubatch copies as little as 0.6 of them; ik_llama.cpp
# #698). The ceiling's union assumes tokens spread over this share of the experts only.
LIVE_EXPERT_FLOOR = 0.4


def is_ceiling(machine: MachineProfile) -> bool:
    """Whether ``machine`` prices a ceiling (its efficiency is the identity) rather than an
    engine's expected figure."""
    return bool(machine.efficiency.is_identity)


def crossings(spec: ModelSpec, placement: Placement) -> int:
    """Graph-split crossings between GPU and host in one pass (each way counts one): walking the
    layers in order, a layer's attention runs where the layer is and its routed experts where
    they are kept (``--n-cpu-moe``, a partial layer's overflow), the output where -ngl puts it;
    every change of side is a crossing. The input lookup's copy to the GPU is left out: a model
    wholly on the GPU pays it too (its one-device efficiency holds it)."""
    p = placement.clamp(spec)
    start = device_layer_start(spec, p)
    sides: list[bool] = []          # True: the GPU
    for il in range(spec.layers):
        on_device = il >= start
        sides.append(on_device)
        if spec.is_moe:
            sides.append(on_device and il >= p.cpu_moe)
    sides.append(p.gpu_layers >= 1)
    return sum(a != b for a, b in zip(sides, sides[1:], strict=False))


def crossing_seconds(machine: MachineProfile, spec: ModelSpec, placement: Placement, passes: ArrayLike) -> Array:
    """Seconds the crossings of ``passes`` graph passes (a decode step: 1; a prompt: its
    ubatches) add: passes x crossings x ``CROSSING_SECONDS``; 0 in a ceiling, on one memory,
    and on a CPU or unified machine (no device boundary). Left out: the bytes copied (hidden x
    tokens x 4, microseconds over PCIe) and any overlap of one side's work with the other's."""
    n = np.asarray(passes, dtype=np.float64)
    if is_ceiling(machine) or machine.kind != "gpu":
        return np.zeros_like(n)
    return n * crossings(spec, placement) * CROSSING_SECONDS


def host_decode_share(machine: MachineProfile, sub: ModelSpec | None) -> float:
    """The share of the host's bandwidth factor its decode reaches: when the host part holds
    routed experts behind a GPU (an expected figure), this machine's own measurement where one
    is kept (``Efficiency.host_expert_bandwidth``, a factor of the host's bandwidth: the share
    that makes the host read at it), else ``HOST_EXPERT_DECODE_SHARE``; 1 otherwise. Left out:
    how the fitted share moves with threads, CPU generation and weight format."""
    if is_ceiling(machine) or machine.kind != "gpu" or sub is None:
        return 1.0
    if not any(t.role is Role.EXPERTS for t in sub.tensors):
        return 1.0
    eff = machine.efficiency
    if eff.host_expert_bandwidth is not None:
        return eff.host_expert_bandwidth / eff.host_bandwidth
    return HOST_EXPERT_DECODE_SHARE


def link_share(machine: MachineProfile) -> float:
    """The share of the PCIe host link a prompt's streamed host weights reach: 1 in a ceiling,
    ``PCIE_STREAM_SHARE`` in an expected figure. Left out: pinned host buffers (--no-mmap),
    which copy faster."""
    return 1.0 if is_ceiling(machine) else PCIE_STREAM_SHARE


def streamed_weight_bytes(machine: MachineProfile, sub: ModelSpec, tokens: Array) -> Array:
    """Host weight bytes one ubatch of ``tokens`` tokens copies to the GPU: every tensor but the
    routed experts whole, and of those only the experts its tokens route to, as llama.cpp copies
    them since ggml-org/llama.cpp#15346. The union is uniform routing's, ``1 - (1 - u/E)^k`` of
    the experts; a ceiling assumes the tokens spread over ``LIVE_EXPERT_FLOOR`` of them only,
    ``L (1 - (1 - u/(L E))^k)``, so no skewed router's run beats it. Left out: the input
    embedding's rows (read, not copied)."""
    k = np.asarray(tokens, dtype=np.float64)
    experts = float(sum(t.nbytes for t in sub.tensors if t.role is Role.EXPERTS))
    rest = float(sub.weight_bytes) - experts
    if not experts or not sub.is_moe:
        return rest + experts + np.zeros_like(k)
    live = LIVE_EXPERT_FLOOR if is_ceiling(machine) else 1.0
    share = live * (1.0 - (1.0 - min(1.0, sub.expert_fraction / live)) ** k)
    return rest + experts * share
