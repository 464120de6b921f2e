"""A measured forward pass: the value every measurement produces and every fit consumes."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rooflab.core.errors import SpecError

KINDS: tuple[str, ...] = ("prefill", "decode", "batch")


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredPoint:
    """One timed pass. ``prompt``: tokens each sequence feeds the pass (1 for decode);
    ``context``: tokens already cached; ``seconds``: the best repeat; ``median``: the median
    repeat (0 when unknown); ``source``: who measured it ("torch 2.13 cpu fp32", "llama-bench")."""

    kind: str
    prompt: int
    context: int
    batch: int
    seconds: float
    median: float = 0.0
    repeats: int = 1
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SpecError(f"point.kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        for name in ("prompt", "batch"):
            if getattr(self, name) < 1:
                raise SpecError(f"point.{name} must be >= 1, got {getattr(self, name)!r}")
        if self.context < 0:
            raise SpecError(f"point.context must be >= 0, got {self.context!r}")
        if not (math.isfinite(self.seconds) and self.seconds > 0):
            raise SpecError(f"point.seconds must be > 0, got {self.seconds!r}")

    @property
    def is_decode(self) -> bool:
        return self.kind != "prefill"

    @property
    def rate(self) -> float:
        """Tokens/s the pass delivers, all sequences together."""
        return self.batch * self.prompt / self.seconds

    @property
    def spread(self) -> float:
        """(median - best) / best: run-to-run variation, 0 when unknown."""
        return max(0.0, self.median / self.seconds - 1.0) if self.median else 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MeasuredPoint:
        try:
            return cls(kind=str(data["kind"]), prompt=int(data["prompt"]), context=int(data["context"]),
                       batch=int(data["batch"]), seconds=float(data["seconds"]),
                       median=float(data.get("median", 0.0)), repeats=int(data.get("repeats", 1)),
                       source=str(data.get("source", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"measured point is malformed: {exc!r}") from exc
