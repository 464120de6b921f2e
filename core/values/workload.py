"""What the user asks the model to do: prompt, answer, context, batch, cache type, and the
options that change how a step runs (speculative drafts, offload)."""

from __future__ import annotations

from dataclasses import dataclass

from rooflab.core.errors import SpecError
from rooflab.core.values.quant import KV_TYPES

MAX_TOKENS = 1 << 24      # 16M tokens: beyond any real context, small enough to stay exact
MAX_BATCH = 1 << 16


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """One request shape. Token counts are integers; ``context`` is what the cache already
    holds before the prompt (a cached prefix or an earlier conversation)."""

    prompt: int = 512
    answer: int = 256
    context: int = 0
    batch: int = 1
    kv_type: str = "f16"
    compute_dtype: str | None = None       # None: the machine's default dtype
    draft_tokens: int = 0                  # speculative decoding: drafts verified per step
    acceptance: float = 0.7                # probability each draft token is accepted
    draft_cost: float = 0.0                # one draft step's time / one target step's time
    offload_fraction: float = 0.0          # share of weights (and their layers' cache) on the slow tier

    def __post_init__(self) -> None:
        for name, low, high in (("prompt", 1, MAX_TOKENS), ("answer", 1, MAX_TOKENS),
                                ("context", 0, MAX_TOKENS), ("batch", 1, MAX_BATCH),
                                ("draft_tokens", 0, 64)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise SpecError(f"workload.{name} must be an integer in [{low}, {high}], got {value!r}")
        if self.kv_type.lower() not in KV_TYPES:
            raise SpecError(f"workload.kv_type must be one of {', '.join(KV_TYPES)}, got {self.kv_type!r}")
        for name, limit in (("acceptance", 1.0), ("offload_fraction", 1.0), ("draft_cost", 10.0)):
            fraction = getattr(self, name)
            if not (isinstance(fraction, (int, float)) and 0.0 <= fraction <= limit):
                raise SpecError(f"workload.{name} must be in [0, {limit}], got {fraction!r}")
