"""N identical devices joined by a link: layer split (llama.cpp's default, ``-sm layer``) and
tensor parallel (vLLM's ``--tensor-parallel-size``), with the link's time a term of its own.

Tensor parallel: every layer is cut N ways, so each device reads 1/N of the weights and the
cache and does 1/N of the arithmetic, then the devices sum their partial results: two
all-reduces per layer (after attention's output projection and after the feed-forward down
projection, Megatron-style; a mixture of experts shards each expert the same way), each of
hidden x tokens x 2 bytes (fp16/bf16 activations). A ring all-reduce of m bytes takes
2 (N - 1) steps, each sending m / N bytes; its latency is the link's (``values.links``: NCCL's
base per all-reduce plus a latency per step, by kind of link):

    allreduce(m) = base + 2 (N - 1) x step + 2 (N - 1) / N x m / B_link

    t_step = max(W / N / B, F / N / C) + 2 L x allreduce(hidden x b x 2) + overhead

The all-reduces wait on the layer before them and the layer after waits on them, so nothing
hides them: a decode step of a mixture of experts, whose layers read little each, pays tens of
microseconds a layer over PCIe against a few of arithmetic. With fewer KV heads than devices
each device keeps whole heads, so the cache is copied N / kv_heads times (vLLM replicates KV
heads). This is how vLLM runs a model (``--tensor-parallel-size``): its expected figure is
not llama.cpp's (``engine_of``).

Layer split: the devices hold consecutive layers and a token passes through them in turn, so
one decode step is the one-device step (each reads its share, one after the other) plus
N - 1 hops of the hidden state (hidden x tokens x 2 bytes / B_link + the link's step latency
each): no speed-up for one sequence, only room. A prompt of several ubatches is pipelined
across the devices as llama.cpp does it (``layer_split.pipeline_share``). Replicated norms and
embeddings are left out.

The link between N devices is the preset's interconnect when it joins that many (an NVLink
bridge joins 2), else the host's PCIe link; ``--interconnect`` sets the bandwidth, per
direction (NVLink 4: 900 GB/s total, 450 GB/s each way; PCIe 4.0 x16: ~32 GB/s each way)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.errors import SpecError
from rooflab.core.predict import work
from rooflab.core.predict.autofit import first_true
from rooflab.core.predict.batching import cache_resident
from rooflab.core.predict.clocks import Pass, combined_seconds, memory_seconds, pass_compute, prefill_rows
from rooflab.core.predict.footprint import (
    MemoryUse,
    compute_buffer_bytes,
    padded,
    runtime_reserve,
)
from rooflab.core.predict.layer_split import pipeline_share
from rooflab.core.predict.placement import MAX_DEVICES
from rooflab.core.predict.request import RequestEstimate, request
from rooflab.core.predict.work import Array
from rooflab.core.values.fields import in_range
from rooflab.core.values.links import LINKS, LinkLatency
from rooflab.core.values.machine import BANDWIDTH_RANGE, MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS, Workload

MODES: tuple[str, ...] = ("layer", "tensor")


def mode_text(mode: str) -> str:
    """A parallel mode as the window's Placement group names it: "layer split" (llama.cpp's
    default, devices in sequence) or "tensor parallel" (vLLM's, every layer split)."""
    return "layer split" if mode == "layer" else f"{mode} parallel"


ENGINES: dict[str, str] = {"layer": "llama.cpp", "tensor": "vllm"}    # who runs each mode


def engine_of(mode: str | None) -> str:
    """The engine that runs a parallel mode, whose calibration its expected figure needs:
    "llama.cpp" for a layer split (and one device), "vllm" for tensor parallel."""
    return ENGINES.get(mode or "layer", "llama.cpp")


ALLREDUCES_PER_LAYER = 2          # attention output and feed-forward down projection
ACTIVATION_BYTES = 2.0            # fp16/bf16 hidden states on the link
DEFAULT_LINK = LINKS["pcie"]      # a link of unstated kind: PCIe, the slowest inside one machine
VLLM_MEMORY_UTILIZATION = 0.9     # vLLM's --gpu-memory-utilization default: the share of each GPU it takes
DEVICE_COUNTS: tuple[int, ...] = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True, kw_only=True)
class Parallel:
    """How N devices share a model: ``mode`` "layer" or "tensor", the link's bandwidth per
    direction (bytes/s), its name and its kind's latency terms (``values.links``)."""

    devices: int
    mode: str = "tensor"
    link_bandwidth: float = 0.0
    link_name: str = ""
    link: LinkLatency = field(default=DEFAULT_LINK)

    def __post_init__(self) -> None:
        if not isinstance(self.devices, int) or isinstance(self.devices, bool) or \
                not 1 <= self.devices <= MAX_DEVICES:
            raise SpecError(f"devices must be an integer in [1, {MAX_DEVICES}], got {self.devices!r}")
        if self.mode not in MODES:
            raise SpecError(f"parallel mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.devices > 1 and not in_range(self.link_bandwidth, BANDWIDTH_RANGE):
            raise SpecError(f"{self.devices} devices need an interconnect bandwidth between "
                            f"{BANDWIDTH_RANGE[0] / 1e9:g} and {BANDWIDTH_RANGE[1] / 1e9:g} GB/s, got "
                            f"{self.link_bandwidth / 1e9:g} GB/s (give --interconnect)")
        if not isinstance(self.link, LinkLatency):
            raise SpecError(f"link must be a LinkLatency, got {type(self.link).__name__}")

    @property
    def link_latency(self) -> float:
        """Seconds of one ring step or hop on the link (its kind's ``step``)."""
        return self.link.step

    @classmethod
    def on(cls, machine: MachineProfile, devices: int, mode: str = "tensor",
           link_bandwidth: float | None = None) -> Parallel:
        """``devices`` copies of ``machine`` over the link that joins that many
        (``device_link``), its bandwidth ``link_bandwidth`` when given."""
        bandwidth, name, link = device_link(machine, devices)
        if link_bandwidth is not None:
            bandwidth, name = link_bandwidth, f"{link_bandwidth / 1e9:g} GB/s link ({link.label})"
        if devices > 1 and not bandwidth:
            raise SpecError(f"{machine.name} states no interconnect between devices: give --interconnect GB/s")
        return cls(devices=devices, mode=mode, link_bandwidth=bandwidth, link_name=name, link=link)


def device_link(machine: MachineProfile, devices: int) -> tuple[float, str, LinkLatency]:
    """(bytes/s per direction, name, latency terms) of the link between ``devices`` copies of
    ``machine``: its interconnect when that joins so many (``interconnect_devices``, 0: any),
    else the host's PCIe link, through which devices without a common link talk; else the
    interconnect as stated."""
    joins = machine.interconnect_devices
    if machine.interconnect_bandwidth and (not joins or devices <= joins) or machine.host_link is None:
        return machine.interconnect_bandwidth, machine.interconnect_name, machine.interconnect_latency
    host = machine.host_link
    beyond = f" (the {machine.interconnect_name} joins {joins})" if machine.interconnect_bandwidth else ""
    return host.bandwidth, host.name + beyond, LINKS["pcie"]


def allreduce_seconds(p: Parallel, nbytes: ArrayLike) -> Array:
    """One ring all-reduce of ``nbytes`` over N devices: base + 2 (N - 1) x step (the link's
    latency, ``LinkLatency.allreduce_latency``) + 2 (N - 1) / N x bytes / B (0 on one device)."""
    m = np.asarray(nbytes, dtype=np.float64)
    if p.devices == 1:
        return np.zeros_like(m)
    n = p.devices
    return p.link.allreduce_latency(n) + 2.0 * (n - 1) * m / n / p.link_bandwidth


def hop_seconds(p: Parallel, nbytes: ArrayLike) -> Array:
    """One device handing ``nbytes`` to the next: bytes / B + the link's step latency."""
    return np.asarray(nbytes, dtype=np.float64) / p.link_bandwidth + p.link.step


def communication_seconds(spec: ModelSpec, p: Parallel, tokens: ArrayLike) -> Array:
    """Link time of one pass over ``tokens`` tokens (all sequences): tensor parallel
    2 x L x allreduce(hidden x tokens x 2 bytes); layer split (N - 1) x hop(same bytes)."""
    message = spec.hidden * np.asarray(tokens, dtype=np.float64) * ACTIVATION_BYTES
    if p.devices == 1:
        return np.zeros_like(message)
    if p.mode == "tensor":
        return ALLREDUCES_PER_LAYER * spec.layers * allreduce_seconds(p, message)
    return (p.devices - 1) * hop_seconds(p, message)


def kv_copies(spec: ModelSpec, p: Parallel) -> float:
    """Times the cache is held over all devices: N / kv_heads when tensor parallel cuts fewer KV
    heads than devices (each keeps a whole head), else 1."""
    heads = [h for h in spec.attention.kv_heads if h > 0]
    if p.mode != "tensor" or not heads or spec.attention.kv_lora_rank:
        return 1.0
    return max(1.0, p.devices / min(heads))


@dataclass(frozen=True, slots=True)
class ParallelPass:
    """One pass on N devices: ``device`` is one device's clocks (its share of the bytes and
    FLOPs; for a layer split, the sum over the devices in turn), ``communication`` the link's
    seconds, ``seconds`` = device + communication + overhead."""

    device: Pass
    communication: Array
    seconds: Array

    @property
    def kv_share(self) -> Array:
        return self.device.kv_share

    def bound(self) -> str | list[str]:
        return self.device.bound()


def _pass(spec: ModelSpec, machine: MachineProfile, workload: Workload, p: Parallel, weights: Array,
          cache: Array, flops: Array, tokens: Array, *, decode: bool, attention: ArrayLike = 0.0) -> ParallelPass:
    """One pass on ``p``'s devices; a layer split's prefill pipelined over its ubatches
    (``layer_split.pipeline_share``: the devices' turns and the hops alike)."""
    share = 1.0 / p.devices
    eff = machine.efficiency
    w, c, f = weights * share, cache * share * kv_copies(spec, p), flops * share
    mem = memory_seconds(machine, w + c)
    comp, added = pass_compute(machine, workload, f, batch=tokens if decode else None,
                               attention=np.asarray(attention) * share,
                               rows=None if decode else prefill_rows(workload, tokens, 1.0))
    turns: float | Array = p.devices if p.mode == "layer" else 1       # layer split: the devices in turn
    comm = communication_seconds(spec, p, tokens)
    if p.mode == "layer" and not decode:
        pipelined = pipeline_share(tokens, workload.ubatch, p.devices)
        turns, comm = turns * pipelined, comm * pipelined
    w, c, f, mem, comp, added, comm = np.broadcast_arrays(w, c, f, mem, comp, added, comm)
    device = Pass(w, c, f, mem, comp + added, (combined_seconds(mem, comp, eff.overlap) + added) * turns)
    return ParallelPass(device=device, communication=comm, seconds=device.seconds + comm + eff.step_overhead)


def parallel_decode(spec: ModelSpec, machine: MachineProfile, workload: Workload, p: Parallel, *,
                    context: ArrayLike | None = None, batch: ArrayLike | None = None) -> ParallelPass:
    """One decode step of b sequences at ``context`` on N devices: ``work.decode_bytes`` and
    ``work.decode_flops`` shared N ways, plus the link's time for b tokens."""
    t = workload.context if context is None else context
    b = np.asarray(workload.batch if batch is None else batch, dtype=np.float64)
    weights, cache = work.decode_bytes(spec, t, b, workload.kv_type, machine.efficiency.kv_read_factor)
    return _pass(spec, machine, workload, p, weights, cache, work.decode_flops(spec, t, b), b, decode=True)


def parallel_prefill(spec: ModelSpec, machine: MachineProfile, workload: Workload, p: Parallel, *,
                     prompt: ArrayLike | None = None, batch: ArrayLike | None = None,
                     context: ArrayLike | None = None) -> ParallelPass:
    """A prefill of b prompts after ``context`` cached tokens (the workload's by default) on N
    devices, the link carrying n x b tokens' hidden states."""
    n = np.asarray(workload.prompt if prompt is None else prompt, dtype=np.float64)
    b = np.asarray(workload.batch if batch is None else batch, dtype=np.float64)
    t = workload.context if context is None else context
    weights, cache = work.prefill_weight_and_cache_bytes(spec, n, t, workload.kv_type, b)
    flops = work.prefill_flops(spec, n, t, b)
    attention = b * work.attention_flops(spec, n, t)
    return _pass(spec, machine, workload, p, weights, cache, flops, n * b, decode=False, attention=attention)


def device_memory(spec: ModelSpec, machine: MachineProfile, workload: Workload, p: Parallel, *,
                  length: int | None = None, batch: int | None = None) -> MemoryUse:
    """One device's bill: W / N + copies x b x kv_bytes(length) / N + a compute buffer + the
    runtime reserve (``footprint``; under tensor parallel, vLLM's, the 10 % its
    ``--gpu-memory-utilization`` 0.9 leaves), ``batch`` sequences of ``length`` tokens (default: the
    workload's batch, context + prompt + answer)."""
    length = workload.context + workload.prompt + workload.answer if length is None else length
    b = workload.batch if batch is None else batch
    kv = float(cache_resident(spec, length, b, workload.kv_type, workload.ubatch)) * kv_copies(spec, p)
    buffer = compute_buffer_bytes(spec, workload.ubatch, b * padded(length), attention_scores=False)
    reserve = runtime_reserve(machine)
    if p.mode == "tensor":      # vLLM's: it takes --gpu-memory-utilization (0.9) of each device, no more
        reserve = max(reserve, (1.0 - VLLM_MEMORY_UTILIZATION) * machine.memory)
    return MemoryUse(name=machine.name, capacity=machine.memory, weights=spec.weight_bytes / p.devices,
                     kv=kv / p.devices, compute_buffer=float(buffer), reserve=reserve)


def parallel_largest_batch(spec: ModelSpec, machine: MachineProfile, workload: Workload, p: Parallel) -> int:
    """Most sequences of context + prompt + answer tokens each device's bill holds (0: none)."""

    def fits(b: int) -> bool:
        return device_memory(spec, machine, workload, p, batch=b).fits

    if not fits(1):
        return 0
    return first_true(MAX_BATCH, lambda b: not fits(b + 1))


def parallel_largest_context(spec: ModelSpec, machine: MachineProfile, workload: Workload, p: Parallel) -> int:
    """Most tokens per sequence (context + prompt + answer) each device's bill holds at the
    workload's batch, up to the trained context (16M when unknown); 0 when none fits."""
    cap = spec.context_length or MAX_TOKENS

    def fits(length: int) -> bool:
        return device_memory(spec, machine, workload, p, length=length).fits

    if not fits(1):
        return 0
    return first_true(cap, lambda n: not fits(n + 1))


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelEstimate:
    """A request on N devices (seconds, tokens/s). ``communication_seconds_per_step``: the
    link's share of one decode step at context + prompt; ``..._per_token``: that per token the
    step yields (per step / batch); ``prefill_communication_seconds``: the link's share of TTFT."""

    parallel: Parallel
    ttft: float
    tpot: float
    decode_rate: float                 # tokens/s per sequence
    total_rate: float                  # tokens/s over the batch
    communication_seconds_per_step: float
    communication_seconds_per_token: float
    prefill_communication_seconds: float
    memory: MemoryUse                  # one device's

    @property
    def devices(self) -> int:
        return self.parallel.devices

    @property
    def fits(self) -> bool:
        return self.memory.fits


def parallel_request(spec: ModelSpec, machine: MachineProfile, workload: Workload, p: Parallel) -> ParallelEstimate:
    """TTFT and TPOT as ``request`` computes them, from ``parallel_prefill`` and
    ``parallel_decode`` (each with its link time); everything on the devices (no host offload)."""
    est = parallel_estimate(spec, machine, workload, p)
    first = parallel_decode(spec, machine, workload, p, context=workload.context + workload.prompt)
    comm = float(first.communication)
    return ParallelEstimate(parallel=p, ttft=est.ttft, tpot=est.tpot, decode_rate=est.decode_rate,
                            total_rate=est.total_rate, communication_seconds_per_step=comm,
                            communication_seconds_per_token=comm / workload.batch,
                            prefill_communication_seconds=float(parallel_prefill(spec, machine, workload,
                                                                                 p).communication),
                            memory=device_memory(spec, machine, workload, p))


def parallel_estimate(spec: ModelSpec, machine: MachineProfile, workload: Workload, p: Parallel) -> RequestEstimate:
    """``request``'s figures (TTFT, TPOT, rates, bounds) on N devices."""

    def step(t: ArrayLike) -> ParallelPass:
        return parallel_decode(spec, machine, workload, p, context=t)

    return request(spec, machine, workload, decode=step, prefill=parallel_prefill(spec, machine, workload, p))


@dataclass(frozen=True, slots=True, kw_only=True)
class Scaling:
    """Estimates for several device counts, the count with the lowest TPOT (over 1..64) and the
    crossover: the fewest devices whose link time per step reaches their compute time, past
    which adding devices buys little or loses (None: not within 64)."""

    estimates: tuple[ParallelEstimate, ...]
    best_devices: int
    crossover_devices: int | None


def scaling(spec: ModelSpec, machine: MachineProfile, workload: Workload, mode: str = "tensor",
            counts: tuple[int, ...] = DEVICE_COUNTS, link_bandwidth: float | None = None) -> Scaling:
    """``parallel_request`` for each device count, and where communication eats the gain. Each
    count gets the link that joins so many (``device_link``; ``link_bandwidth``: that
    bandwidth on the same kind of link)."""
    def at(n: int) -> Parallel:
        return dataclasses.replace(Parallel.on(machine, max(n, 2), mode, link_bandwidth), devices=n)

    estimates = tuple(parallel_request(spec, machine, workload, at(n)) for n in counts)
    powers = [1 << k for k in range(7)]                 # 1..64
    start = workload.context + workload.prompt
    steps = {n: parallel_decode(spec, machine, workload, at(n), context=start) for n in powers}
    best = min(powers, key=lambda n: (float(steps[n].seconds), n))
    crossover = next((n for n in powers[1:]
                      if float(steps[n].communication) >= float(steps[n].device.seconds)), None)
    return Scaling(estimates=estimates, best_devices=best, crossover_devices=crossover)
