"""Where a model's weights and cache sit, in llama.cpp's terms, and the part of the model each
memory holds.

A ``Placement`` is what llama.cpp's flags say: ``-ngl`` (layers on the accelerator),
``--n-cpu-moe`` (the routed experts of the first N layers kept in host memory) and
``--no-kv-offload`` (the cache in host memory). ``split`` turns it into two ``Part``s, the
device's and the host's, each holding a sub-``ModelSpec`` (the tensors and attention layers
placed there), so the one set of formulas in ``work`` prices each part: nothing here counts a
byte or a FLOP by itself.

llama.cpp's rules, followed here (llama-model.cpp, ``load_tensors``):

- ``-ngl N`` counts the repeating layers and the output layer: the device takes the last
  N - 1 repeating layers (from layer L + 1 - N on) and, for N >= 1, the output head and its
  norm. N = L + 1 puts everything on the device.
- The input embedding always stays in host memory. A tied head is a copy of the embedding
  matrix on the output's device. The lookup reads one row per token, a few KB: it is priced
  with the device, as ``work`` prices it, so a model wholly on the device has exactly the
  one-memory clocks. A per-layer embedding (Gemma 3n's ``per_layer_token_embd``, an input
  layer to llama.cpp) sits and is priced the same way: one row a token.
- ``--n-cpu-moe K`` keeps the routed-expert tensors of layers 0..K-1 (``blk.i.ffn_*_exps``)
  in host memory, computed by the host; attention, router and shared experts stay on the
  layer's device.
- Each layer's cache sits with the layer, or all of it in host memory with
  ``--no-kv-offload`` (attention over it then runs on the host).
- ``partial`` is what llama.cpp's fit adds to fill the last of the device (common/fit.cpp,
  "try to fit at least part of one more layer"): of the last layer whose experts are on the
  host (layer K - 1 of --n-cpu-moe K), the feed-forward tensors its overflow pattern names go
  to the host and the rest stay on the device: "up" keeps attention and the up projections
  there (LAYER_FRACTION_UP moves ``ffn_(gate|gate_up|down).*``, the router among them), "gate"
  attention, up and gate (LAYER_FRACTION_GATE moves ``ffn_down.*``), "attn" attention alone
  (LAYER_FRACTION_ATTN moves every ``ffn_(gate|up|gate_up|down).*``, router and shared experts
  included). llama.cpp spells it as a tensor override (``-ot``).

On a "cpu" or "unified" machine the device is the main memory and the host tier the
machine's second memory (``offload_*``: an NVMe read through mmap, say); the input embedding
then sits in the main memory with everything else."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import lru_cache

from rooflab.core.errors import SpecError
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import AttentionLayout, ModelSpec, Role, Tensor

MAX_LAYERS = 1 << 16
MAX_DEVICES = 64
# llama.cpp's overflow patterns for a partial layer (common/fit.cpp, get_overflow_pattern): the
# feed-forward tensors of layer {il} that go to the host. llama.cpp searches a tensor's name for the
# pattern, so fit.cpp's "ffn_(gate|gate_up|down).*" and "ffn_(gate|down)" pick the same tensors;
# these are the shortest spellings, which a shell and a CSV cell take as they are where they can.
PARTIAL_PATTERNS: dict[str, str] = {
    "attn": "blk.{il}.ffn_(gate|up|down)",       # LAYER_FRACTION_ATTN: the whole feed-forward block
    "up": "blk.{il}.ffn_(gate|down)",            # LAYER_FRACTION_UP: attention and up stay
    "gate": "blk.{il}.ffn_down",                 # LAYER_FRACTION_GATE: attention, up and gate stay
}
PARTIALS: tuple[str, ...] = ("", *PARTIAL_PATTERNS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """llama.cpp's placement flags: ``gpu_layers`` [-ngl] (clamped to the model's layers + 1,
    the output layer), ``cpu_moe`` [--n-cpu-moe], ``kv_on_device`` (False: --no-kv-offload),
    ``partial``: what of layer cpu_moe - 1 llama.cpp's fit keeps on the device besides its
    attention ("", "up", "gate", "attn"; see the module docstring)."""

    gpu_layers: int
    cpu_moe: int = 0
    kv_on_device: bool = True
    partial: str = ""
    devices: int = 1                          # identical devices sharing the device's layers (-sm layer)
    tensor_split: tuple[int, ...] = ()        # layers per device, in order (-ts); (): llama.cpp's even split

    def __post_init__(self) -> None:
        for name in ("gpu_layers", "cpu_moe"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_LAYERS:
                raise SpecError(f"placement.{name} must be an integer in [0, {MAX_LAYERS:,}], got {value!r}")
        if not isinstance(self.kv_on_device, bool):
            raise SpecError(f"placement.kv_on_device must be true or false, got {self.kv_on_device!r}")
        if self.partial not in PARTIALS:
            raise SpecError(f"placement.partial must be one of {', '.join(map(repr, PARTIALS))}, got {self.partial!r}")
        if self.partial and not self.cpu_moe:
            raise SpecError("placement.partial splits layer cpu_moe - 1: it needs cpu_moe >= 1")
        if isinstance(self.devices, bool) or not isinstance(self.devices, int) or not 1 <= self.devices <= MAX_DEVICES:
            raise SpecError(f"placement.devices must be an integer in [1, {MAX_DEVICES}], got {self.devices!r}")
        split = self.tensor_split
        if not isinstance(split, tuple) or (split and (len(split) != self.devices or not all(
                isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_LAYERS for n in split)
                or not sum(split))):
            raise SpecError(f"placement.tensor_split must be () or {self.devices} whole numbers of layers, "
                            f"not all 0, got {split!r}")

    @classmethod
    def all_on_device(cls, spec: ModelSpec) -> Placement:
        """Every layer and the output on the device (llama.cpp's -ngl 999)."""
        return cls(gpu_layers=spec.layers + 1)

    def clamp(self, spec: ModelSpec) -> Placement:
        """The same flags as llama.cpp applies them to ``spec``: -ngl at most layers + 1,
        --n-cpu-moe at most layers (0 for a dense model, which has no routed experts)."""
        gpu_layers = min(self.gpu_layers, spec.layers + 1)
        cpu_moe = min(self.cpu_moe, spec.layers) if spec.is_moe else 0
        # a partial layer counts only when that layer is on the device
        on_device = cpu_moe >= 1 and cpu_moe - 1 >= spec.layers + 1 - gpu_layers
        partial = self.partial if on_device else ""
        if (gpu_layers, cpu_moe, partial) == (self.gpu_layers, self.cpu_moe, self.partial):
            return self         # as it was: no copy (every memory bill clamps, issue 15)
        return dataclasses.replace(self, gpu_layers=gpu_layers, cpu_moe=cpu_moe, partial=partial)

    def flags(self) -> str:
        """The llama.cpp command-line flags that make this placement (a partial layer as the
        tensor override llama.cpp's fit sets for it)."""
        text = f"-ngl {self.gpu_layers}"
        moe = self.cpu_moe - 1 if self.partial else self.cpu_moe
        if moe:
            text += f" --n-cpu-moe {moe}"
        if self.partial:
            override = f"{partial_pattern(self.partial, self.cpu_moe - 1)}=CPU"
            # quoted only where a shell would act on it, and with single quotes, which a CSV cell keeps as they are
            text += f" -ot {override}" if "(" not in override else f" -ot '{override}'"
        if not self.kv_on_device:
            text += " --no-kv-offload"
        if self.devices > 1 and self.tensor_split:
            text += " -ts " + ",".join(map(str, self.tensor_split))
        return text


def brief_flags(placement: Placement) -> str:
    """The flags in a narrow column: a partial layer's tensor override as "-ot …" (the full
    spelling is ``Placement.flags``)."""
    full = placement.flags()
    if not placement.partial:
        return full
    head, _, tail = full.partition(" -ot ")
    rest = tail.split(" ", 1)[1] if " " in tail and not tail.startswith("'") else tail.partition("' ")[2]
    return f"{head} -ot …" + (f" {rest}" if rest else "")


def partial_pattern(partial: str, layer: int) -> str:
    """llama.cpp's overflow pattern of ``partial`` for ``layer`` (a regular expression)."""
    return PARTIAL_PATTERNS[partial].replace("{il}", str(layer))


@dataclass(frozen=True, slots=True, kw_only=True)
class Part:
    """What one memory holds and computes. ``spec``: its tensors and the attention layers whose
    cache it holds, as a sub-model (None when it holds no tensor); ``embedding_rows``: the
    per-token embedding lookups are priced here (the device's part); ``embedding_bytes``: the
    input embedding matrix resident here (0 when elsewhere or when it is the tied head in
    ``spec``)."""

    spec: ModelSpec | None
    embedding_rows: bool
    embedding_bytes: float
    layers: int                 # repeating layers computed here
    expert_layers: int          # layers whose routed experts are computed here
    output: bool                # the output head is computed here

    @property
    def weight_bytes(self) -> float:
        """Weight bytes resident in this memory."""
        return (float(self.spec.weight_bytes) if self.spec is not None else 0.0) + self.embedding_bytes

    @property
    def computes(self) -> bool:
        """Whether any layer, expert or the output runs here (the input lookup does not count)."""
        return bool(self.layers or self.expert_layers or self.output or
                    (self.spec is not None and self.spec.attention.layers))


@dataclass(frozen=True, slots=True, kw_only=True)
class Split:
    """A placement applied to a model: the device's part and the host's."""

    placement: Placement          # clamped to the model
    device: Part
    host: Part

    @property
    def on_host(self) -> bool:
        """Whether anything but the input lookup runs on the host."""
        return self.host.computes

    @property
    def device_layers(self) -> int:
        return self.device.layers


def has_host_tier(machine: MachineProfile) -> bool:
    """Whether ``machine`` has a second memory that can hold layers (``offload_*``)."""
    return machine.has_offload and machine.offload_memory > 0


def input_on_host(machine: MachineProfile) -> bool:
    """llama.cpp keeps the input embedding in host memory: on a discrete GPU with a host tier
    that is the host; otherwise (CPU, unified memory, no host stated) the main memory."""
    return machine.kind == "gpu" and has_host_tier(machine)


def device_layer_start(spec: ModelSpec, placement: Placement) -> int:
    """First repeating layer on the device: L + 1 - ngl (llama.cpp's ``i_gpu_start``), >= 0."""
    return max(spec.layers + 1 - placement.gpu_layers, 0)


def split(spec: ModelSpec, placement: Placement, *, embedding_on_host: bool = True) -> Split:
    """The device's and the host's parts of ``spec`` under ``placement`` (see the module
    docstring for llama.cpp's rules). ``embedding_on_host``: the input embedding sits in host
    memory (``input_on_host(machine)``), else with the device. Cached per (spec, placement)."""
    return _split(spec, placement.clamp(spec), embedding_on_host)


@lru_cache(maxsize=256)
def _split(spec: ModelSpec, placement: Placement, embedding_on_host: bool) -> Split:
    start = device_layer_start(spec, placement)
    output_on_device = placement.gpu_layers >= 1
    n = spec.layers
    partial = re.compile(partial_pattern(placement.partial, placement.cpu_moe - 1)) if placement.partial else None
    device: list[Tensor] = []
    host: list[Tensor] = []
    for t in spec.tensors:
        if t.role is Role.EMBEDDING:
            if spec.tied_embeddings:        # the head's copy goes with the output layer
                (device if output_on_device else host).append(t)
            continue
        if t.role is Role.PER_LAYER_EMBEDDING:     # an input layer: it sits with the input embedding
            continue
        if t.layer is None or not 0 <= t.layer < n:     # head, output norm, extra (MTP) layers
            (device if output_on_device else host).append(t)
        elif partial is not None and t.layer == placement.cpu_moe - 1 and t.layer >= start:
            (host if _overflows(t, partial) else device).append(t)
        elif t.role is Role.EXPERTS and t.layer < placement.cpu_moe:
            host.append(t)
        else:
            (device if t.layer >= start else host).append(t)
    kv_layers = [i >= start and placement.kv_on_device for i in range(n)]
    embedding = float(sum(t.nbytes for t in spec.tensors if t.role is Role.EMBEDDING))
    # a tied matrix the output's part already holds is not held twice in one memory
    head_copy_elsewhere = spec.tied_embeddings and output_on_device == embedding_on_host
    input_bytes = embedding if (not spec.tied_embeddings or head_copy_elsewhere) else 0.0
    input_bytes += sum(t.nbytes for t in spec.tensors if t.role is Role.PER_LAYER_EMBEDDING)
    device_moe = n - start - experts_kept_on_host(spec, placement) if spec.is_moe else 0
    moe_layers = n if spec.is_moe else 0
    parts = {
        True: Part(spec=sub_spec(spec, device, [i for i in range(n) if kv_layers[i]]),
                   embedding_rows=True, embedding_bytes=0.0 if embedding_on_host else input_bytes,
                   layers=n - start, expert_layers=device_moe, output=output_on_device),
        False: Part(spec=sub_spec(spec, host, [i for i in range(n) if not kv_layers[i]]),
                    embedding_rows=False, embedding_bytes=input_bytes if embedding_on_host else 0.0,
                    layers=start, expert_layers=moe_layers - device_moe, output=not output_on_device),
    }
    return Split(placement=placement, device=parts[True], host=parts[False])


def _overflows(t: Tensor, pattern: re.Pattern[str]) -> bool:
    """Whether the partial layer's tensor ``t`` goes to the host: its name matches llama.cpp's
    overflow pattern (searched, as llama.cpp searches a tensor override); a tensor not named in
    llama.cpp's way goes by the --n-cpu-moe rule (routed experts to the host)."""
    if t.name.startswith("blk."):
        return pattern.search(t.name) is not None
    return t.role is Role.EXPERTS


def sub_spec(spec: ModelSpec, tensors: list[Tensor], layers: list[int]) -> ModelSpec | None:
    """``spec`` cut down to ``tensors`` and the attention (cache) of ``layers``: a model the
    ``work`` formulas price as they price a whole one. None when it has no tensor."""
    if not tensors and not layers:
        return None
    a = spec.attention
    attention = AttentionLayout(
        heads=tuple(a.heads[i] for i in layers), kv_heads=tuple(a.kv_heads[i] for i in layers),
        head_dim_k=a.head_dim_k, head_dim_v=a.head_dim_v,
        sliding=tuple(a.sliding[i] for i in layers) if a.sliding else (),
        sliding_window=a.sliding_window if any(a.is_sliding(i) for i in layers) else 0,
        kv_lora_rank=a.kv_lora_rank, rope_dim=a.rope_dim,
        read_kv_heads=tuple(a.read_kv_heads[i] for i in layers) if a.read_kv_heads else ())
    if not tensors:     # the cache alone (--no-kv-offload): a zero-byte placeholder tensor
        tensors = [Tensor(name="(cache only)", shape=(1,), type_name="F32", nbytes=0, role=Role.OTHER)]
    return dataclasses.replace(spec, tensors=tuple(tensors), attention=attention, warnings=(), metadata=())


def experts_kept_on_host(spec: ModelSpec, placement: Placement) -> int:
    """Layers on the device whose routed experts stay in host memory: layers
    max(start, 0)..min(cpu_moe, L) - 1, start = ``device_layer_start``."""
    if not spec.is_moe:
        return 0
    return max(0, min(placement.cpu_moe, spec.layers) - device_layer_start(spec, placement))


_PARTIAL_WORDS = {"": "", "up": " (one of them keeps its up projections {device})",
                  "gate": " (one of them keeps its up and gate projections {device})",
                  "attn": " (one of them with its whole feed-forward block)"}


def memory_words(machine: MachineProfile | None) -> tuple[str, str]:
    """How the two memories read in a sentence: ("on the GPU", "on the CPU") behind a discrete
    GPU (or when no machine is named), ("in memory", "on <second tier>") elsewhere."""
    if machine is None or machine.kind == "gpu":
        return "on the GPU", "on the CPU"
    return "in memory", f"on {machine.offload_name or 'the second memory'}"


def describe(spec: ModelSpec, placement: Placement, machine: MachineProfile | None = None) -> str:
    """The placement in words: "all 37 layers on the GPU", "all 37 layers on the GPU, the
    experts of 24 of them on the CPU", "20 of 37 layers on the GPU", "all 37 layers on 2 GPUs"."""
    p = placement.clamp(spec)
    device, host = memory_words(machine)
    if p.devices > 1:
        device = f"on {p.devices} {'GPUs' if machine is None or machine.kind == 'gpu' else 'devices'}"
    total = spec.layers + 1
    moe_host = experts_kept_on_host(spec, p)
    head = f"all {total} layers" if p.gpu_layers >= total else f"{p.gpu_layers} of {total} layers"
    text = f"{head} {device}"
    if moe_host > 0:
        text += f", the experts of {moe_host} of them {host}" + _PARTIAL_WORDS[p.partial].format(device=device)
    if not p.kv_on_device:
        text += ", the KV cache in host memory"
    return text
