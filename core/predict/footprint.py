"""Memory a placed model needs in each memory: weights + KV cache + compute buffer + a runtime
reserve, and whether that runs.

    used = W_placed + b x kv_bytes_held(layers there, length) + compute buffer + reserve

A device runs the placement when ``used <= capacity``. The host memory behind a GPU runs it when
its cache, compute buffer and reserve fit: llama.cpp maps the weights file (``--mmap``, its
default), so host-resident weights are page cache the kernel may drop and read again from disk;
weights past what the host holds are ``MemoryUse.paged`` (reported, not refused; the clocks
leave that disk traffic out).

Reserves (bytes gone besides the model), per llama.cpp back end:

- cuda, rocm, vulkan: the back end's context (``BACKEND_CONTEXT``, 0.45 GiB: a CUDA/HIP context
  and its cuBLAS workspace take 0.3-0.6 GiB of the total before llama.cpp asks what is free).
  The bill shows 0.45 GiB; whether a placement runs is judged at the least a context takes
  (``BACKEND_CONTEXT_LEAST``, 0.3 GiB: ``MemoryUse.slack``), so no set-up llama.cpp runs on a
  card with a light context is refused (Gemma-3-12B Q4_K_M wholly on an 8 GiB card bills 43 MB
  over it at 0.45 GiB, and ran).
- metal: a quarter of the unified memory. macOS lets the GPU wire at most
  ``recommendedMaxWorkingSetSize``, about 75 % of the memory on Macs with more than 36 GB
  (llama.cpp reports that as the device's memory; ``sysctl iogpu.wired_limit_mb`` raises it).
- cpu, and the host memory behind a GPU: 4 GiB for the operating system, a desktop and
  llama.cpp's host-side buffers (an assumption; ``free -g`` on your machine says better).
- A unified machine with another back end (DGX Spark's CUDA, Strix Halo's Vulkan): the OS
  share plus the device's context, since both live in the one memory.

llama.cpp's fit (``autofit``) keeps a further margin free on each GPU (``--fit-target``, 1 GiB:
``fit_margin``): a target of its search, not memory a placement given by hand needs, so the
bill leaves it out and only the search asks for it.

The KV cache is held as llama.cpp allocates it (``work.kv_bytes_held``: cells padded to 256,
sliding-window layers their window plus a ubatch), the rule ``batching.cache_resident`` uses
too. The compute buffer is llama.cpp's for one ubatch of the workload's ``-ub``
(``compute_buffer_bytes``: the peak of its graph allocator, logits only where the output
layer is); the machine's second tier holds no reserve unless it is the host memory behind a
GPU (an NVMe read through mmap needs none)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict import work
from rooflab.core.predict.layer_split import device_parts
from rooflab.core.predict.placement import Part, Placement, Split, has_host_tier, input_on_host, split
from rooflab.core.predict.work import CTX_PAD, Array, Flags, padded
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import DEFAULT_UBATCH, Workload

MiB = float(1 << 20)
GiB = float(1 << 30)
DEVICE_MARGIN = 1024 * MiB          # llama.cpp --fit-target default, per device (the fit's target only)
BACKEND_CONTEXT = 0.45 * GiB        # CUDA/HIP/Vulkan context: gone before llama.cpp reads free memory
BACKEND_CONTEXT_LEAST = 0.3 * GiB   # the least such a context takes: what a "runs here" verdict allows
OS_RESERVE = 4 * GiB                # operating system, desktop, host-side buffers (assumption)
METAL_WIRED_SHARE = 0.75            # recommendedMaxWorkingSetSize / memory, Macs over 36 GB

__all__ = ["BACKEND_CONTEXT", "BACKEND_CONTEXT_LEAST", "CTX_PAD", "DEFAULT_UBATCH", "DEVICE_MARGIN", "GiB",
           "METAL_WIRED_SHARE", "MiB", "MemoryPlan", "MemoryUse", "OS_RESERVE", "backend_of", "compute_buffer_bytes",
           "fit_margin", "host_reserve", "memory_grid", "padded", "plan_memory", "reserve_slack", "runtime_reserve"]


def backend_of(machine: MachineProfile) -> str:
    """The machine's llama.cpp back end; when not stated: "cuda" for a discrete GPU, "cpu" for
    a CPU, "" (unknown) for unified memory."""
    return machine.backend or {"gpu": "cuda", "cpu": "cpu"}.get(machine.kind, "")


def runtime_reserve(machine: MachineProfile) -> float:
    """Bytes of the device's memory the runtime and the system keep (see the module docstring;
    the fit's margin is apart: ``fit_margin``)."""
    backend = backend_of(machine)
    if backend == "metal":
        return machine.memory * (1.0 - METAL_WIRED_SHARE)
    if backend == "cpu" or machine.kind == "cpu":
        return OS_RESERVE
    if machine.kind == "unified":
        return OS_RESERVE + BACKEND_CONTEXT
    return BACKEND_CONTEXT


def fit_margin(machine: MachineProfile) -> float:
    """Bytes llama.cpp's fit leaves free on each device besides the reserve (``--fit-target``,
    1 GiB per GPU; 0 on the CPU back end, which has no device to fit): what auto-fit asks of a
    device's ``MemoryUse.free``, never what a placement needs to run."""
    return 0.0 if backend_of(machine) == "cpu" or machine.kind == "cpu" else DEVICE_MARGIN


def host_reserve(machine: MachineProfile) -> float:
    """Bytes of the second tier kept free: the OS share when it is the host memory behind a
    discrete GPU, else 0 (a disk read through mmap)."""
    return OS_RESERVE if machine.kind == "gpu" and has_host_tier(machine) else 0.0


ATTENTION_HIDDEN_SLOTS = 7        # hidden-wide fp32 tensors live beside a pass's attention scores


def compute_buffer_bytes(spec: ModelSpec, ubatch: int, context_tokens: ArrayLike, *,
                         attention_scores: bool, output: bool = True) -> Array:
    """llama.cpp's compute buffer for one ubatch (bytes): the peak of ggml's graph allocator,
    which reuses a tensor's memory once nothing reads it, so the largest live set counts, not
    every intermediate together:

        ubatch x 4 x max(vocab + 2 hidden, 4 hidden + 3 ffn x max(1, experts_used), scores) + mask

    fp32 per token: at the output the logits (llama.cpp reserves its worst case, an output row
    per ubatch token) beside the normed hidden state; inside a layer the residual, the normed
    input, attention's output and the feed-forward intermediates (gate, up, their product, times
    the experts a token uses); without flash attention the scores, context x heads, beside
    ``ATTENTION_HIDDEN_SLOTS`` hidden-wide tensors. With flash attention only its f16 mask,
    2 x context a token, is added. ``context_tokens``: cache cells of all sequences (padded).
    ``output`` False: a memory that computes layers but not the output layer (the host behind
    a GPU, a layer split's first devices) holds no logits.

    Checked against llama.cpp's own log line ("CPU compute buffer size") on real-size
    random-weight GGUFs (``benchmarks/accuracy/bench_compute_buffer.py``): Llama-2-7B Q4_0 at -ub 512 and
    1,024 cells 97.5 MiB here and logged with flash attention, 120.0 against 122.0 without;
    Qwen3-0.6B 301.8 against 309.8 and 300.8 against 300.8. Left out: the input embeddings' and
    positions' small buffers, graph splits' copies of a tensor between back ends."""
    ffn = spec.widest_feed_forward or 4 * spec.hidden      # read once per model, not per bill (issue 15)
    heads = max(spec.attention.heads, default=1)
    cells = np.asarray(context_tokens, dtype=np.float64)
    layer = 4 * spec.hidden + 3 * ffn * max(1, spec.experts_used)
    live = np.maximum(float(max(spec.vocab + 2 * spec.hidden, layer) if output else layer),
                      cells * heads + ATTENTION_HIDDEN_SLOTS * spec.hidden if attention_scores else 0.0)
    mask = 0.0 if attention_scores else 2.0 * cells
    return float(ubatch) * (4.0 * live + mask)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryUse:
    """One memory's bill, bytes."""

    name: str
    capacity: float
    weights: float
    kv: float
    compute_buffer: float
    reserve: float
    mapped: bool = False        # the weights are mmap'd page cache (host memory): they need not all stay
    slack: float = 0.0          # of the reserve, what a lighter back-end context leaves free (``reserve_slack``)

    @property
    def used(self) -> float:
        return self.weights + self.kv + self.compute_buffer + self.reserve

    @property
    def free(self) -> float:
        return self.capacity - self.used

    @property
    def paged(self) -> float:
        """Bytes of mmap'd weights past what this memory holds: dropped and read again from
        disk as they are needed (0 unless ``mapped``)."""
        return max(self.used - self.capacity, 0.0) if self.mapped else 0.0

    @property
    def short(self) -> float:
        """Bytes the bill, as billed, is over this memory (<= 0 when it is not): mmap'd weights
        need not all stay (``_short``)."""
        return float(_short(self.used, self.weights, self.capacity, self.mapped))

    @property
    def fits(self) -> bool:
        """Whether the placement runs here: everything fits, or (mmap'd weights) all but the
        weights do, with a back-end context as light as ``slack`` allows."""
        return self.short <= self.slack


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPlan:
    """The device's and the host's bills for one placement, sequences of ``length`` tokens.
    On several devices (``Placement.devices``) ``devices`` holds each one's bill and ``device``
    is the one with the least room left, so ``device.fits`` says whether all of them fit."""

    split: Split
    device: MemoryUse
    host: MemoryUse
    length: int
    batch: int
    devices: tuple[MemoryUse, ...] = ()

    @property
    def placement(self) -> Placement:
        return self.split.placement

    @property
    def fits(self) -> bool:
        return self.device.fits and self.host.fits

    @property
    def device_bills(self) -> tuple[MemoryUse, ...]:
        """Each device's bill, in order (the one device's alone)."""
        return self.devices or (self.device,)

    @property
    def kv_location(self) -> str:
        """"device", "host" or "split" (each layer's cache with its layer)."""
        if self.host.kv <= 0:
            return "device"
        return "host" if self.device.kv <= 0 else "split"


Bill = dict[str, Array]       # weights, kv, compute_buffer, reserve, capacity, slack


def reserve_slack(machine: MachineProfile) -> float:
    """Of ``runtime_reserve``, the bytes a back-end context lighter than ``BACKEND_CONTEXT``
    leaves free (down to ``BACKEND_CONTEXT_LEAST``): 0 where the reserve holds no such context."""
    backend = backend_of(machine)
    if backend == "metal" or backend == "cpu" or machine.kind == "cpu":
        return 0.0
    return BACKEND_CONTEXT - BACKEND_CONTEXT_LEAST


def _bill(spec: ModelSpec, part: Part, workload: Workload, t: Array, b: Array, flash_attention: bool,
          reserve: float, capacity: float, slack: float = 0.0) -> Bill:
    """One memory's bill: ``part``'s weights and cache, and when it computes a layer a compute
    buffer of the whole model's widths (erring high), with logits where the output layer is."""
    zero = np.zeros(np.broadcast(t, b).shape)
    kv = b * work.kv_bytes_held(part.spec, t, workload.kv_type, workload.ubatch) + zero \
        if part.spec is not None else zero
    buffer = compute_buffer_bytes(spec, workload.ubatch, b * padded(t), attention_scores=not flash_attention,
                                  output=part.output) + zero if part.computes else zero
    return {"weights": part.weight_bytes + zero, "kv": kv, "compute_buffer": buffer,
            "reserve": reserve + zero, "capacity": capacity + zero, "slack": slack + zero}


def _bills(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement, length: ArrayLike,
           batch: ArrayLike, flash_attention: bool) -> tuple[list[Bill], Bill]:
    """(each device's bill, the host's) as arrays over ``length`` x ``batch`` (broadcast)."""
    t = np.asarray(length, dtype=np.float64)
    b = np.asarray(batch, dtype=np.float64)
    on_host = input_on_host(machine)
    host_part = split(spec, placement, embedding_on_host=on_host).host
    devices = [_bill(spec, part, workload, t, b, flash_attention, runtime_reserve(machine), machine.memory,
                     reserve_slack(machine))
               for part in device_parts(spec, placement, embedding_on_host=on_host)]
    host = _bill(spec, host_part, workload, t, b, flash_attention,
                 host_reserve(machine) if (host_part.weight_bytes > 0 or host_part.computes) else 0.0,
                 machine.offload_memory if has_host_tier(machine) else 0.0)
    return devices, host


def weights_mapped(machine: MachineProfile) -> bool:
    """Whether the second memory's weights are llama.cpp's mmap'd page cache: the host memory
    behind a discrete GPU (on a CPU or unified machine the second tier is itself a mapped disk)."""
    return machine.kind == "gpu" and has_host_tier(machine)


def _short(used: ArrayLike, weights: ArrayLike, capacity: ArrayLike, mapped: bool) -> Array:
    """Bytes ``used`` is over ``capacity``, mmap'd weights (``mapped``) not counted: they are page
    cache the kernel may drop. One rule for a bill (``MemoryUse.short``) and a grid of them."""
    need = np.asarray(used, dtype=np.float64) - (np.asarray(weights, dtype=np.float64) if mapped else 0.0)
    return need - np.asarray(capacity, dtype=np.float64)


def _used(bill: Bill) -> Array:
    return bill["weights"] + bill["kv"] + bill["compute_buffer"] + bill["reserve"]


def _host_runs(bill: Bill, mapped: bool) -> Flags:
    """The host bill runs: all of it fits, or with mmap'd weights all but the weights."""
    return np.asarray(_short(_used(bill), bill["weights"], bill["capacity"], mapped) <= bill["slack"])


def plan_memory(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement, *,
                context_length: int | None = None, batch: int | None = None,
                flash_attention: bool | None = None) -> MemoryPlan:
    """Each memory's bill for ``placement`` with ``batch`` sequences of ``context_length`` tokens
    (default: the workload's context + prompt + answer, and its batch). The compute buffer is
    llama.cpp's for the workload's ubatch (and its flash attention, unless ``flash_attention``
    says otherwise: without it the buffer holds the attention scores), on each memory that computes
    a layer; the KV cache of each layer where its layer's cache sits, held as llama.cpp
    allocates it (``work.kv_bytes_held``); on several devices, each device's layers
    (``layer_split``)."""
    length = workload.context + workload.prompt + workload.answer if context_length is None else context_length
    b = workload.batch if batch is None else batch
    s = split(spec, placement, embedding_on_host=input_on_host(machine))
    flash = workload.flash_attention if flash_attention is None else flash_attention
    devices, host = _bills(spec, machine, workload, s.placement, length, b, flash)

    def use(name: str, bill: Bill, mapped: bool = False) -> MemoryUse:
        return MemoryUse(name=name, weights=float(bill["weights"]), kv=float(bill["kv"]),
                         compute_buffer=float(bill["compute_buffer"]), reserve=float(bill["reserve"]),
                         capacity=float(bill["capacity"]), mapped=mapped, slack=float(bill["slack"]))

    uses = tuple(use(machine.name, bill) for bill in devices)
    tightest = min(uses, key=lambda u: u.free)
    host_use = use(machine.offload_name or "host memory", host, weights_mapped(machine))
    return MemoryPlan(split=s, device=tightest, host=host_use,
                      length=int(length), batch=int(b), devices=uses if len(uses) > 1 else ())


def memory_grid(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement,
                lengths: ArrayLike, batches: ArrayLike) -> tuple[Array, Array, Flags]:
    """(device bytes used, host bytes used, fits) for every (length, batch), broadcast: the
    bills of ``plan_memory`` over a grid in one call (on several devices, the fullest device's
    bytes, and whether every device fits)."""
    devices, host = _bills(spec, machine, workload, placement.clamp(spec), lengths, batches,
                           workload.flash_attention)
    used = [_used(bill) for bill in devices]
    fits = np.logical_and.reduce([_short(u, bill["weights"], bill["capacity"], False) <= bill["slack"]
                                  for u, bill in zip(used, devices, strict=True)])
    return np.maximum.reduce(used), _used(host), fits & _host_runs(host, weights_mapped(machine))
