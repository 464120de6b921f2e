"""Memory a placed model needs in each memory: weights + KV cache + compute buffer + a runtime
reserve, and whether that fits.

    used = W_placed + b x kv_bytes(layers there, length) + compute buffer + reserve <= capacity

Reserves (bytes kept free besides the model), per llama.cpp back end:

- cuda, rocm, vulkan: 1 GiB per device, llama.cpp's own margin when it fits a model
  (``--fit-target``, default 1024 MiB per device: ggml-org/llama.cpp#16653, #18390). It covers
  the CUDA/HIP context (300-500 MiB, depending on the GPU and driver; lazy module loading since
  CUDA 11.7 keeps it near the low end), cuBLAS workspaces and what a desktop puts on the card.
- metal: a quarter of the unified memory. macOS lets the GPU wire at most
  ``recommendedMaxWorkingSetSize``, about 75 % of the memory on Macs with more than 36 GB
  (llama.cpp prints it at load; ``sysctl iogpu.wired_limit_mb`` raises it).
- cpu, and the host memory behind a GPU: 4 GiB for the operating system, a desktop and
  llama.cpp's host-side buffers (an assumption; ``free -g`` on your machine says better).
- A unified machine with another back end (DGX Spark's CUDA, Strix Halo's Vulkan): the OS
  share plus the device margin, since both live in the one memory.

The compute buffer is llama.cpp's for one ubatch (``compute_buffer_bytes``, erring high); the
machine's second tier holds no reserve unless it is the host memory behind a GPU (an NVMe
read through mmap needs none)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict import work
from rooflab.core.predict.placement import Placement, Split, has_host_tier, input_on_host, split
from rooflab.core.predict.work import Array, Flags
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec, Role
from rooflab.core.values.workload import Workload

MiB = float(1 << 20)
GiB = float(1 << 30)
DEVICE_MARGIN = 1024 * MiB          # llama.cpp --fit-target default, per device
OS_RESERVE = 4 * GiB                # operating system, desktop, host-side buffers (assumption)
METAL_WIRED_SHARE = 0.75            # recommendedMaxWorkingSetSize / memory, Macs over 36 GB
DEFAULT_UBATCH = 512                # llama.cpp's -ub default: the compute buffer is sized for it
CTX_PAD = 256                       # llama.cpp rounds each sequence's context up to this


def backend_of(machine: MachineProfile) -> str:
    """The machine's llama.cpp back end; when not stated: "cuda" for a discrete GPU, "cpu" for
    a CPU, "" (unknown) for unified memory."""
    return machine.backend or {"gpu": "cuda", "cpu": "cpu"}.get(machine.kind, "")


def runtime_reserve(machine: MachineProfile) -> float:
    """Bytes of the device's memory the runtime and the system keep (see the module docstring)."""
    backend = backend_of(machine)
    if backend == "metal":
        return machine.memory * (1.0 - METAL_WIRED_SHARE)
    if backend == "cpu" or machine.kind == "cpu":
        return OS_RESERVE
    if machine.kind == "unified":
        return OS_RESERVE + DEVICE_MARGIN
    return DEVICE_MARGIN


def host_reserve(machine: MachineProfile) -> float:
    """Bytes of the second tier kept free: the OS share when it is the host memory behind a
    discrete GPU, else 0 (a disk read through mmap)."""
    return OS_RESERVE if machine.kind == "gpu" and has_host_tier(machine) else 0.0


def padded(tokens: ArrayLike) -> Array:
    """A sequence's context as llama.cpp allocates it: rounded up to 256 tokens."""
    return np.ceil(np.asarray(tokens, dtype=np.float64) / CTX_PAD) * CTX_PAD


def compute_buffer_bytes(spec: ModelSpec, ubatch: int, context_tokens: ArrayLike, *,
                         attention_scores: bool) -> Array:
    """llama.cpp's compute buffer for one ubatch, erring high (bytes):

        ubatch x (4 x (vocab + 8 x hidden + 3 x ffn x max(1, experts_used)) + scores)

    fp32 logits, hidden states and the feed-forward intermediate (times the experts a token
    uses) per token; ``scores`` = 4 x context x heads for the attention scores a pass without
    flash attention holds, else 2 x context for flash attention's f16 mask. ``context_tokens``:
    cache cells of all sequences (padded)."""
    ffn = max((max(t.shape[:2]) for t in spec.tensors
               if t.role in (Role.FEED_FORWARD, Role.EXPERTS, Role.SHARED_EXPERTS) and len(t.shape) > 1),
              default=4 * spec.hidden)
    heads = max(spec.attention.heads, default=1)
    per_token = spec.vocab + 8 * spec.hidden + 3 * ffn * max(1, spec.experts_used)
    cells = np.asarray(context_tokens, dtype=np.float64)
    scores = 4.0 * cells * heads if attention_scores else 2.0 * cells
    return float(ubatch) * (4.0 * per_token + scores)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryUse:
    """One memory's bill, bytes."""

    name: str
    capacity: float
    weights: float
    kv: float
    compute_buffer: float
    reserve: float

    @property
    def used(self) -> float:
        return self.weights + self.kv + self.compute_buffer + self.reserve

    @property
    def free(self) -> float:
        return self.capacity - self.used

    @property
    def fits(self) -> bool:
        return self.used <= self.capacity


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPlan:
    """The device's and the host's bills for one placement, sequences of ``length`` tokens."""

    split: Split
    device: MemoryUse
    host: MemoryUse
    length: int
    batch: int

    @property
    def placement(self) -> Placement:
        return self.split.placement

    @property
    def fits(self) -> bool:
        return self.device.fits and self.host.fits

    @property
    def kv_location(self) -> str:
        """"device", "host" or "split" (each layer's cache with its layer)."""
        if self.host.kv <= 0:
            return "device"
        return "host" if self.device.kv <= 0 else "split"


def _bills(spec: ModelSpec, machine: MachineProfile, workload: Workload, s: Split, length: ArrayLike,
           batch: ArrayLike, flash_attention: bool) -> tuple[dict[str, Array], dict[str, Array]]:
    """(device, host) bills as arrays over ``length`` x ``batch`` (broadcast): weights, kv,
    compute_buffer, reserve, capacity."""
    t = np.asarray(length, dtype=np.float64)
    b = np.asarray(batch, dtype=np.float64)
    zero = np.zeros(np.broadcast(t, b).shape)
    buffer = compute_buffer_bytes(spec, DEFAULT_UBATCH, b * padded(t), attention_scores=not flash_attention) + zero
    bills = []
    for part, reserve, capacity in (
            (s.device, runtime_reserve(machine), machine.memory),
            (s.host, host_reserve(machine) if (s.host.weight_bytes > 0 or s.host.computes) else 0.0,
             machine.offload_memory if has_host_tier(machine) else 0.0)):
        kv = b * work.kv_bytes(part.spec, t, workload.kv_type) + zero if part.spec is not None else zero
        bills.append({"weights": part.weight_bytes + zero, "kv": kv,
                      "compute_buffer": buffer if part.computes else zero,
                      "reserve": reserve + zero, "capacity": capacity + zero})
    return bills[0], bills[1]


def plan_memory(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement, *,
                context_length: int | None = None, batch: int | None = None,
                flash_attention: bool = True) -> MemoryPlan:
    """Each memory's bill for ``placement`` with ``batch`` sequences of ``context_length`` tokens
    (default: the workload's context + prompt + answer, and its batch). The compute buffer is
    llama.cpp's at its default ubatch of 512 (flash attention on), on each memory that computes
    a layer; the KV cache of each layer where its layer's cache sits."""
    length = workload.context + workload.prompt + workload.answer if context_length is None else context_length
    b = workload.batch if batch is None else batch
    s = split(spec, placement, embedding_on_host=input_on_host(machine))
    device, host = _bills(spec, machine, workload, s, length, b, flash_attention)
    uses = [MemoryUse(name=name, **{k: float(v) for k, v in bill.items()})
            for name, bill in ((machine.name, device), (machine.offload_name or "host memory", host))]
    return MemoryPlan(split=s, device=uses[0], host=uses[1], length=int(length), batch=int(b))


def memory_grid(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement,
                lengths: ArrayLike, batches: ArrayLike) -> tuple[Array, Array, Flags]:
    """(device bytes used, host bytes used, fits) for every (length, batch), broadcast: the
    bills of ``plan_memory`` over a grid in one call."""
    s = split(spec, placement, embedding_on_host=input_on_host(machine))
    device, host = _bills(spec, machine, workload, s, lengths, batches, True)
    used = [bill["weights"] + bill["kv"] + bill["compute_buffer"] + bill["reserve"] for bill in (device, host)]
    fits = (used[0] <= device["capacity"]) & (used[1] <= host["capacity"])
    return used[0], used[1], fits
