"""What the user asks the model to do: prompt, answer, context, batch, cache type, and the
options that change how a step runs (speculative drafts, llama.cpp's ubatch, flash attention and
threads, offload)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rooflab.core.errors import SpecError
from rooflab.core.values.quant import KV_TYPES

MAX_TOKENS = 1 << 24      # 16M tokens: beyond any real context, small enough to stay exact
MAX_BATCH = 1 << 16
DTYPE_NAME = re.compile(r"[A-Za-z0-9_]{1,16}")   # "fp16", "bf16", "fp8", ...: a name, never free text
MAX_THREADS = 1024
DEFAULT_UBATCH = 512      # llama.cpp's -ub default (common.h n_ubatch): tokens one graph computes at once


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """One request shape. Token counts are integers; ``context`` is what the cache already
    holds before the prompt (a cached prefix or an earlier conversation). ``offload_fraction``
    asks for that share of the weight bytes on the slower memory: it becomes llama.cpp's whole
    layers (a placement, ``predict.placed``), never a share of the one-memory clocks. ``ubatch``
    is llama.cpp's -ub: a prompt runs in passes of that many tokens (host-resident weights
    stream to the GPU once a pass, and each multiply of a pass has that many rows, fewer per
    routed expert), and it sizes the compute buffer and the sliding-window cache.
    ``flash_attention`` picks the attention kernel whose fitted rate prices a prefill's n² term;
    ``threads`` is the share of a CPU's cores llama.cpp computes on."""

    prompt: int = 512
    answer: int = 256
    context: int = 0
    batch: int = 1
    kv_type: str = "f16"
    compute_dtype: str | None = None       # None: the machine's default dtype
    draft_tokens: int = 0                  # speculative decoding: drafts verified per step
    acceptance: float = 0.7                # probability each draft token is accepted
    draft_cost: float = 0.0                # one draft step's time / one target step's time
    offload_fraction: float = 0.0          # share of the weight bytes to put on the slow tier, as whole layers
    ubatch: int = DEFAULT_UBATCH           # llama.cpp's -ub: a prompt runs in passes of this many tokens
    flash_attention: bool = True           # llama.cpp's -fa (its default "auto" turns it on where it runs)
    threads: int | None = None             # llama.cpp's -t on a CPU; None: its default, the physical cores

    def __post_init__(self) -> None:
        for name, low, high in (("prompt", 1, MAX_TOKENS), ("answer", 1, MAX_TOKENS),
                                ("context", 0, MAX_TOKENS), ("batch", 1, MAX_BATCH),
                                ("draft_tokens", 0, 64), ("ubatch", 1, MAX_BATCH)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise SpecError(f"workload.{name} must be an integer in [{low}, {high}], got {value!r}")
        if not isinstance(self.flash_attention, bool):
            raise SpecError(f"workload.flash_attention must be true or false, got {self.flash_attention!r:.40}")
        t = self.threads
        if t is not None and (not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= MAX_THREADS):
            raise SpecError(f"workload.threads must be an integer in [1, {MAX_THREADS}] (or none), got {t!r:.40}")
        # a stored setting or a hand-edited file can hold any JSON type: check it before using it
        if not isinstance(self.kv_type, str) or self.kv_type.lower() not in KV_TYPES:
            raise SpecError(f"workload.kv_type must be one of {', '.join(KV_TYPES)}, got {self.kv_type!r:.40}")
        dtype = self.compute_dtype
        if dtype is not None and not (isinstance(dtype, str) and DTYPE_NAME.fullmatch(dtype)):
            raise SpecError(f"workload.compute_dtype must be a dtype name such as fp16 or bf16 (or none), "
                            f"got {dtype!r:.40}")
        for name, limit in (("acceptance", 1.0), ("offload_fraction", 1.0), ("draft_cost", 10.0)):
            fraction = getattr(self, name)
            if not (isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
                    and 0.0 <= fraction <= limit):
                raise SpecError(f"workload.{name} must be in [0, {limit}], got {fraction!r:.40}")


#: cache types a V cache holds unquantized: llama.cpp runs them with or without flash attention
UNQUANTIZED_KV = ("f32", "f16", "bf16")


def needs_flash_attention(kv_type: str) -> bool:
    """Whether llama.cpp runs a ``kv_type`` cache only with flash attention: a quantized V cache
    (``kv_type`` is K's and V's alike)."""
    return kv_type.lower() not in UNQUANTIZED_KV


def runnable(workload: Workload) -> Workload:
    """``workload`` when llama.cpp would run its settings, else SpecError saying why: a quantized
    V cache needs flash attention (llama.cpp's context creation refuses ``-ctv q8_0 -fa off``:
    "quantized V cache requires flash_attn"; a quantized K cache alone runs, but ``kv_type`` is
    both). The front ends call it on what the user asks for; records of runs that did run are
    not second-guessed."""
    if not workload.flash_attention and needs_flash_attention(workload.kv_type):
        raise SpecError(f"a {workload.kv_type.lower()} KV cache needs flash attention: llama.cpp refuses a "
                        f"quantized V cache with -fa off (turn flash attention on, or use an f16 cache)")
    return workload
