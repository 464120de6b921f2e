"""What a placed model pays for crossing between the GPU and the host, beside each part's own
clocks: the three terms of issue 35, each one named function, each 0 (or the hardware's own
bound) in a ceiling and an engine's share in an expected figure.

A ceiling is told apart by its machine's efficiency: ``Efficiency.is_identity`` (every factor 1,
no overhead) is the ceiling; any engine's efficiency (a calibration, a stated share) is an
expected figure. The constants are fitted by ``benchmarks/accuracy/bench_offload_accuracy.py --fit`` on
resources/placed/llamacpp-offload-public.json and scored there leaving one source out."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict.placement import Placement, device_layer_start, has_host_tier
from rooflab.core.predict.work import Array
from rooflab.core.values.efficiency import Efficiency
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
# GPU: small matrices, one per expert used, on threads that also drive the GPU. Fitted on the 88
# generation rows of resources/placed (seven hosts) with the compute share below, each machine
# weighing one (benchmarks/accuracy/bench_offload_accuracy.py, 2026-12-07): 0.74. Alone (before
# the compute bound) no share fitted every host: a Ryzen-7950X's rows took about 0.7, a
# Threadripper 5975WX's 0.3. Refitted after the published fit took its fourth file of rows and the
# MoE layer cost (2026-12-07, later): 0.74 again; 0.78 with the compute share below refitted once
# unified GPUs' prompts were kept apart (2026-12-07, last); 0.76 with the first CUDA MoE generation
# rows (llamacpp-public-moe.json, the same day); 0.74 once CPUs were priced on their int8 path and
# their float multiplies on its FP32 share (2026-12-07, second session).
HOST_EXPERT_DECODE_SHARE = 0.74
# Share of the CPU back end's fitted compute factor (of the host's int8 path: INT8_PATH x its fp32
# FMA peak of cores x clock x FLOP a cycle, the profile's offload flops, else ``DEFAULT_HOST_FLOPS``
# below) that the same
# GEMVs reach: each weight is unpacked from its block format and multiplied once per token, so a
# host with wide memory and few or slow cores is bound by its arithmetic, not its DRAM (a
# Threadripper 5975WX's eight channels read experts no faster than a Ryzen 7950X's two). Fitted
# with the share above; both are the fit of every row of resources/placed (2026-12-07): 0.18, then
# 0.08 once the CPU back end's compute factor was refitted on the published CPU rows added that day
# (the product, what the host reaches, moved far less than the share); 0.20 once unified GPUs'
# prompts were kept out of their back ends' fits (2026-12-07, last): the routed experts' prompt
# ratio the CPU back end borrows from the GPU back ends (``public.expert_ratio``) fell from 0.83
# to 0.27, and the host's expert arithmetic is a share of that rate (0.066 of the CPU's peak
# before, 0.054 then; 0.20-0.22 by fold, inside the grid's 0.02-0.60); 0.24 (0.24-0.26 by fold) with
# the first CUDA MoE generation rows, whose fit moved the ratio to 0.20; 0.20 (0.18-0.20 by fold)
# once CPUs were priced on their int8 path (2026-12-07, second session).
HOST_EXPERT_DECODE_COMPUTE = 0.20
# Share of the PCIe link a prompt's host weights cross at: llama.cpp copies them from mmap'd,
# pageable host memory, which CUDA stages through a pinned buffer. Fitted on the 22 prompt rows of
# resources/placed whose engine copies as priced, each machine weighing one (2026-12-07): 0.54
# (0.76 when every row weighed one: most rows are one Ryzen-7950X's); 0.70 after the published
# fit's refit of the same day (the GPU's own prompt rate moved, and with it what the link must carry);
# 0.54 again once an expected figure streams every ubatch of 32 tokens or more as llama.cpp does
# (it had taken the host's arithmetic where that was faster, and the share had made up for it);
# 0.58 once the device part priced its attention at the attention's own factor (2026-12-07, second
# session); 0.56 once GeForce presets took their FP16-accumulate peak (2026-12-08).
PCIE_STREAM_SHARE = 0.56
# Measured / expected of the offloaded generation rows of resources/placed, each priced with the
# shares fitted without its machine (16th and 84th percentiles, each machine weighing one;
# bench_offload_accuracy.py, 2026-12-07): how far a host nobody fitted strays from the fit. An
# expected figure's replicates take it on their host factors (``spread_host``), so its band
# widens by the share of the time spent on the host, not by the calibration's spread alone.
# (0.74, 1.27) before the published fit's refit of 2026-12-07; (0.78, 1.25) after it; (0.74, 1.23)
# once unified GPUs' prompts were kept apart and the host's shares refitted (2026-12-07, last);
# (0.77, 1.27) with the first CUDA MoE generation rows; (0.79, 1.23) once CPUs were priced on their
# int8 path (2026-12-07, second session).
HOST_SPREAD = (0.79, 1.23)
# The same for the offloaded prompt rows (bench_offload_accuracy.py, 2026-12-07): an expected
# figure's replicates take it on the link's share (``spread_host``). Before it, the band of an
# offloaded prompt, whose time is mostly the host weights' copy, was the GPU's spread alone and
# held 3 of the 22 rows. (0.63, 1.34) once CPUs were priced on their int8 path (0.76 before) and a
# placement's device part its attention at the attention's own factor.
LINK_SPREAD = (0.63, 1.34)
DEFAULT_HOST_FLOPS = 1.024e12      # FLOP/s: the lessons' 8-core desktop CPU, fp32 FMA peak
# A profile that states no host CPU is priced at the lessons' 8-core desktop (1.02 TFLOP/s); the
# hosts behind the published runs reach up to a 16-core Ryzen 7950X's 2.92 (16 x 5.7 GHz x 32),
# 2.85 times that. The band of such a figure reaches that far up on the host's arithmetic.
UNSTATED_CPU_SPAN = 2.85
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


def _experts_behind_gpu(machine: MachineProfile, sub: ModelSpec | None) -> bool:
    """Whether ``sub`` (the host's part) holds routed experts behind a GPU in an expected figure:
    where the host-expert shares apply."""
    return (not is_ceiling(machine) and machine.kind == "gpu" and sub is not None
            and any(t.role is Role.EXPERTS for t in sub.tensors))


def host_decode_share(machine: MachineProfile, sub: ModelSpec | None) -> float:
    """The share of the host's bandwidth factor its decode reaches: when the host part holds
    routed experts behind a GPU (an expected figure), this machine's own measurement where one
    is kept (``Efficiency.host_expert_bandwidth``, a factor of the host's bandwidth: the share
    that makes the host read at it), else ``HOST_EXPERT_DECODE_SHARE``; 1 otherwise. Left out:
    how the fitted share moves with threads, CPU generation and weight format."""
    if not _experts_behind_gpu(machine, sub):
        return 1.0
    eff = machine.efficiency
    if eff.host_expert_bandwidth is not None:
        return eff.host_expert_bandwidth / eff.host_bandwidth
    return HOST_EXPERT_DECODE_SHARE


def host_decode_compute(machine: MachineProfile, sub: ModelSpec | None, host_c: float) -> float:
    """The factor of the host's compute peak its decode multiplies at, given the host's compute
    factor ``host_c``: behind a GPU in an expected figure, routed experts on the host are
    multiplied at ``Efficiency.host_expert_compute`` where a band's replicate sets it, else at
    ``HOST_EXPERT_DECODE_COMPUTE`` of ``host_c``; ``host_c`` itself where the host's own factor
    applies (a ceiling, no routed experts on the host, not behind a GPU, or this machine's own
    host-expert measurement kept, whose rate already holds its arithmetic)."""
    if not _experts_behind_gpu(machine, sub) or machine.efficiency.host_expert_bandwidth is not None:
        return host_c
    return _expert_compute(machine.efficiency, host_c)


def _expert_compute(eff: Efficiency, host_c: float) -> float:
    """The factor of the host's peak routed experts behind a GPU are multiplied at: a band
    replicate's own (``Efficiency.host_expert_compute``), else ``HOST_EXPERT_DECODE_COMPUTE`` of
    the host's compute factor ``host_c``."""
    return host_c * HOST_EXPERT_DECODE_COMPUTE if eff.host_expert_compute is None else eff.host_expert_compute


def link_share(machine: MachineProfile) -> float:
    """The share of the PCIe host link a prompt's streamed host weights reach: 1 in a ceiling,
    ``PCIE_STREAM_SHARE`` in an expected figure (a band replicate's own, ``spread_host``). Left
    out: pinned host buffers (--no-mmap), which copy faster."""
    if is_ceiling(machine):
        return 1.0
    own = machine.efficiency.host_link_share
    return PCIE_STREAM_SHARE if own is None else min(1.0, own)


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


def spread_host(machines: Sequence[MachineProfile]) -> tuple[MachineProfile, ...]:
    """An expected figure's replicates with ``HOST_SPREAD`` on their host factors: the first
    half's host bandwidth and compute factors times its low end, the rest's times its high end;
    where the profile states no host CPU, the high half's arithmetic also times
    ``UNSTATED_CPU_SPAN`` (the CPU could be a 16-core). The routed experts' arithmetic behind a
    GPU (``Efficiency.host_expert_compute``, ``HOST_EXPERT_DECODE_COMPUTE`` of the compute factor)
    takes the same spread. No factor passes 1: the ceiling is priced at the stated or assumed
    CPU's peak, and no band beats it. Unchanged where there is no host tier behind a GPU. A kept
    host-expert measurement of this machine sets its experts' rate itself (``host_decode_share``
    divides the host factor out), so the spread leaves that rate alone. The link a prompt streams
    host weights over takes ``LINK_SPREAD`` on ``PCIE_STREAM_SHARE`` alike (at most the whole
    link)."""
    if not machines or machines[0].kind != "gpu" or not has_host_tier(machines[0]):
        return tuple(machines)
    low, high = HOST_SPREAD
    out = []
    for i, m in enumerate(machines):
        fast = i >= len(machines) / 2
        s = high if fast else low
        link = PCIE_STREAM_SHARE * LINK_SPREAD[1 if fast else 0]
        c = s * UNSTATED_CPU_SPAN if fast and m.offload_flops <= 0 else s
        eff = m.efficiency
        out.append(dataclasses.replace(m, efficiency=dataclasses.replace(
            eff, host_bandwidth=min(1.0, eff.host_bandwidth * s), host_compute=min(1.0, eff.host_compute * c),
            host_expert_compute=min(1.0, _expert_compute(eff, eff.host_compute) * c),
            host_link_share=min(1.0, link))))
    return tuple(out)
