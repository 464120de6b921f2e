"""A machine's peak capabilities, in SI units, and the efficiency it reaches in practice."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rooflab.core.errors import SpecError

DTYPES: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")

# Physically sane ranges (SI units), far wider than any real machine, narrow enough that no
# prediction over- or underflows: 1 MB/s to 10 PB/s, 1 MFLOP/s to 10 ZFLOP/s, 1 MB to 1 EB.
BANDWIDTH_RANGE = (1e6, 1e16)            # bytes/s
FLOPS_RANGE = (1e6, 1e22)                # FLOP/s
MEMORY_RANGE = (1e6, 1e18)               # bytes
FACTOR_RANGE = (1e-4, 100.0)             # efficiency factors (a fit clamps to 1e-4)


def _positive(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def in_range(value: object, bounds: tuple[float, float]) -> bool:
    """Whether ``value`` is a finite number in [low, high] (NaN and booleans are not)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and bounds[0] <= value <= bounds[1])


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
            if not in_range(value, FACTOR_RANGE):
                raise SpecError(f"efficiency.{name} must be in [{FACTOR_RANGE[0]:g}, {FACTOR_RANGE[1]:g}], "
                                f"got {value!r}")
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
        for name, bounds, unit in (("bandwidth", BANDWIDTH_RANGE, "bytes/s"), ("memory", MEMORY_RANGE, "bytes")):
            value = getattr(self, name)
            if not _positive(value):
                raise SpecError(f"{self.name}: {name} must be > 0, got {value!r}")
            if not in_range(value, bounds):
                raise SpecError(f"{self.name}: {name} must be between {bounds[0]:g} and {bounds[1]:g} {unit}, "
                                f"got {value!r}")
        if not self.peak_flops:
            raise SpecError(f"{self.name}: peak_flops needs at least one dtype")
        for dtype, value in self.peak_flops.items():
            if not in_range(value, FLOPS_RANGE):
                raise SpecError(f"{self.name}: peak_flops[{dtype}] must be between {FLOPS_RANGE[0]:g} and "
                                f"{FLOPS_RANGE[1]:g} FLOP/s, got {value!r}")
        if self.default_dtype not in self.peak_flops:
            raise SpecError(f"{self.name}: default_dtype {self.default_dtype!r} has no peak_flops entry")
        for name, bounds in (("offload_bandwidth", BANDWIDTH_RANGE), ("offload_memory", MEMORY_RANGE)):
            value = getattr(self, name)
            if value != 0 and not in_range(value, bounds):
                raise SpecError(f"{self.name}: {name} must be 0 (none) or between {bounds[0]:g} and "
                                f"{bounds[1]:g}, got {value!r}")
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
        offload, eff = _section(data, "offload"), _section(data, "efficiency")
        flops = data.get("peak_flops")
        if not isinstance(flops, Mapping):
            raise SpecError("machine profile field 'peak_flops' must be an object of dtype: FLOP/s"
                            if flops is not None else "machine profile is missing field 'peak_flops'")
        sources = data.get("sources") or {}
        if not isinstance(sources, Mapping):
            raise SpecError("machine profile field 'sources' must be an object")
        return cls(
            name=_text(data, "name", None),
            kind=_text(data, "kind", "gpu"),
            bandwidth=_number(data, "bandwidth", None),
            peak_flops={str(k): _number(flops, k, None, f"peak_flops.{k}") for k in flops},
            default_dtype=_text(data, "default_dtype", "fp16"),
            memory=_number(data, "memory", None),
            offload_name=_text(offload, "name", "", "offload.name"),
            offload_bandwidth=_number(offload, "bandwidth", 0.0, "offload.bandwidth"),
            offload_memory=_number(offload, "memory", 0.0, "offload.memory"),
            efficiency=Efficiency(
                bandwidth=_number(eff, "bandwidth", 1.0, "efficiency.bandwidth"),
                compute=_number(eff, "compute", 1.0, "efficiency.compute"),
                step_overhead=_number(eff, "step_overhead", 0.0, "efficiency.step_overhead"),
                kv_read_factor=_number(eff, "kv_read_factor", 1.0, "efficiency.kv_read_factor"),
            ),
            sources={str(k): str(v) for k, v in sources.items()},
            notes=_text(data, "notes", ""),
            key=key,
        )


def _section(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = data.get(name) or {}
    if not isinstance(value, Mapping):
        raise SpecError(f"machine profile field {name!r} must be an object")
    return value


def _number(data: Mapping[str, Any], name: str, default: float | None, label: str = "") -> float:
    """A number field (an int or float, not a bool or text), ``default`` when absent."""
    value = data.get(name)
    if value is None:
        if default is None:
            raise SpecError(f"machine profile is missing field {label or name!r}")
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"machine profile field {label or name!r} must be a number, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise SpecError(f"machine profile field {label or name!r} is out of range") from None


def _text(data: Mapping[str, Any], name: str, default: str | None, label: str = "") -> str:
    value = data.get(name)
    if value is None:
        if default is None:
            raise SpecError(f"machine profile is missing field {label or name!r}")
        return default
    return str(value)
