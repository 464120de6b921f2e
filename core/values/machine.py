"""A machine's peak capabilities, in SI units, and the efficiency it reaches in practice."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rooflab.core.errors import SpecError

DTYPES: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")


def _positive(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """How far below its peaks a machine runs a real engine (1.0 = the ceiling).

    bandwidth, compute: factors applied to B and C. step_overhead: fixed seconds added to
    every forward pass (launches, synchronisation, Python). kv_read_factor: cache bytes moved
    per byte attention must read (2.0 for an engine that copies its cache each step).
    """

    bandwidth: float = 1.0
    compute: float = 1.0
    step_overhead: float = 0.0      # seconds
    kv_read_factor: float = 1.0

    def __post_init__(self) -> None:
        for name in ("bandwidth", "compute", "kv_read_factor"):
            value = getattr(self, name)
            if not _positive(value) or value > 100:
                raise SpecError(f"efficiency.{name} must be in (0, 100], got {value!r}")
        if not (math.isfinite(self.step_overhead) and 0 <= self.step_overhead < 60):
            raise SpecError(f"efficiency.step_overhead must be in [0, 60) s, got {self.step_overhead!r}")

    @property
    def is_identity(self) -> bool:
        return (self.bandwidth, self.compute, self.step_overhead, self.kv_read_factor) == (1, 1, 0, 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class MachineProfile:
    """Peak capabilities of one device.

    bandwidth: bytes/s of the memory that holds the weights. peak_flops: FLOP/s per dtype
    ("fp32", "fp16", "bf16", ...), dense (no sparsity). memory: bytes usable for the model.
    offload_*: a second, slower memory (system RAM behind a GPU, say) for partial offload.
    """

    name: str
    bandwidth: float                          # bytes/s
    peak_flops: Mapping[str, float]           # FLOP/s per dtype
    memory: float                             # bytes
    default_dtype: str = "fp16"
    offload_bandwidth: float = 0.0            # bytes/s, 0 = no second tier
    offload_memory: float = 0.0               # bytes
    offload_name: str = ""
    kind: str = "gpu"                         # "gpu", "cpu", "unified"
    efficiency: Efficiency = field(default_factory=Efficiency)
    sources: Mapping[str, str] = field(default_factory=dict)
    notes: str = ""
    key: str = ""                             # preset or profile id

    def __post_init__(self) -> None:
        if not self.name:
            raise SpecError("machine: name must not be empty")
        for name in ("bandwidth", "memory"):
            if not _positive(getattr(self, name)):
                raise SpecError(f"{self.name}: {name} must be > 0, got {getattr(self, name)!r}")
        if not self.peak_flops:
            raise SpecError(f"{self.name}: peak_flops needs at least one dtype")
        for dtype, value in self.peak_flops.items():
            if not _positive(value):
                raise SpecError(f"{self.name}: peak_flops[{dtype}] must be > 0, got {value!r}")
        if self.default_dtype not in self.peak_flops:
            raise SpecError(f"{self.name}: default_dtype {self.default_dtype!r} has no peak_flops entry")
        for name in ("offload_bandwidth", "offload_memory"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise SpecError(f"{self.name}: {name} must be >= 0, got {value!r}")
        object.__setattr__(self, "peak_flops", MappingProxyType(dict(self.peak_flops)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    def flops(self, dtype: str | None = None) -> float:
        """Peak FLOP/s for ``dtype`` (the default dtype when None or not listed)."""
        if dtype and dtype in self.peak_flops:
            return self.peak_flops[dtype]
        return self.peak_flops[self.default_dtype]

    @property
    def effective_bandwidth(self) -> float:
        return self.bandwidth * self.efficiency.bandwidth

    def effective_flops(self, dtype: str | None = None) -> float:
        return self.flops(dtype) * self.efficiency.compute

    @property
    def has_offload(self) -> bool:
        return self.offload_bandwidth > 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict in the preset file format (SI units)."""
        eff = self.efficiency
        return {
            "name": self.name,
            "kind": self.kind,
            "bandwidth": self.bandwidth,
            "peak_flops": dict(self.peak_flops),
            "default_dtype": self.default_dtype,
            "memory": self.memory,
            "offload": {"name": self.offload_name, "bandwidth": self.offload_bandwidth,
                        "memory": self.offload_memory},
            "efficiency": {"bandwidth": eff.bandwidth, "compute": eff.compute,
                           "step_overhead": eff.step_overhead, "kv_read_factor": eff.kv_read_factor},
            "sources": dict(self.sources),
            "notes": self.notes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, key: str = "") -> MachineProfile:
        """Build from the preset file format; raises SpecError naming the bad field."""
        try:
            offload = data.get("offload") or {}
            eff = data.get("efficiency") or {}
            return cls(
                name=str(data["name"]),
                kind=str(data.get("kind", "gpu")),
                bandwidth=float(data["bandwidth"]),
                peak_flops={str(k): float(v) for k, v in dict(data["peak_flops"]).items()},
                default_dtype=str(data.get("default_dtype", "fp16")),
                memory=float(data["memory"]),
                offload_name=str(offload.get("name", "")),
                offload_bandwidth=float(offload.get("bandwidth", 0.0)),
                offload_memory=float(offload.get("memory", 0.0)),
                efficiency=Efficiency(
                    bandwidth=float(eff.get("bandwidth", 1.0)),
                    compute=float(eff.get("compute", 1.0)),
                    step_overhead=float(eff.get("step_overhead", 0.0)),
                    kv_read_factor=float(eff.get("kv_read_factor", 1.0)),
                ),
                sources={str(k): str(v) for k, v in dict(data.get("sources") or {}).items()},
                notes=str(data.get("notes", "")),
                key=key,
            )
        except KeyError as exc:
            raise SpecError(f"machine profile is missing field {exc.args[0]!r}") from exc
        except (TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, SpecError):
                raise
            raise SpecError(f"machine profile has a bad value: {exc}") from exc
