"""A machine's peak capabilities, in SI units, and the efficiency it reaches in practice."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rooflab.core.errors import SpecError
from rooflab.core.values.links import KINDS, LINKS, LinkLatency, kind_of

DTYPES: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")
# llama.cpp back ends a device runs ("" = not stated; a "cpu" machine gets "cpu")
BACKENDS: tuple[str, ...] = ("cuda", "metal", "rocm", "vulkan", "cpu")

# Physically sane ranges (SI units), far wider than any real machine, narrow enough that no
# prediction over- or underflows: 1 MB/s to 10 PB/s, 1 MFLOP/s to 10 ZFLOP/s, 1 MB to 1 EB.
BANDWIDTH_RANGE = (1e6, 1e16)            # bytes/s
FLOPS_RANGE = (1e6, 1e22)                # FLOP/s
MEMORY_RANGE = (1e6, 1e18)               # bytes
FACTOR_RANGE = (1e-4, 100.0)             # efficiency factors (a fit clamps to 1e-4)

# PCIe bytes/s per lane and direction by generation, as the vendors quote a link (16 GT/s x 16 lanes
# = 64 GB/s both ways for 4.0 x16): GT/s / 8 per lane, the 128b/130b encoding's 1.5 % left out.
PCIE_LANE_BANDWIDTH: Mapping[int, float] = MappingProxyType({3: 1e9, 4: 2e9, 5: 4e9, 6: 8e9})
PCIE_LANES: tuple[int, ...] = (1, 2, 4, 8, 16)


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
    per byte attention must read (2.0 for an engine that copies its cache each step; a CPU
    whose attention kernels run slower than memory shows as more). decode_compute: the factor
    applied to C for a decode step's few-row multiplies (None: ``compute``, as a big prefill
    multiply reaches). overlap: the share of the shorter clock (memory or compute) hidden under
    the longer: 1 is the roofline's max(memory, compute), 0 their sum (an engine that streams
    weights and computes one after the other). host_bandwidth, host_compute: the factors of the
    host tier behind a discrete GPU (its CPU streams and computes the layers kept there at its
    own share of its peaks, not the GPU's). attention_compute: the factor of a prefill's
    attention arithmetic (None: ``compute``; an engine without a fused attention kernel gets
    through the n² term slower than through its weight multiplies); flash_attention_compute:
    the same with flash attention (None: ``attention_compute``). rows_half: r0, the rows per
    multiply at which a prefill's multiplies reach half their rate (0: every size alike): a
    multiply of r rows runs at r / (r + r0) of it, so a pass of few tokens runs below a long
    prompt's rate, and routed experts, which get r x expert_spread rows each (used / count, at
    least one), further below; expert_share: the routed experts' share of a prefill's compute
    time at many rows.
    """

    bandwidth: float = 1.0
    compute: float = 1.0
    step_overhead: float = 0.0      # seconds
    kv_read_factor: float = 1.0
    decode_compute: float | None = None
    overlap: float = 1.0
    host_bandwidth: float = 1.0
    host_compute: float = 1.0
    attention_compute: float | None = None
    flash_attention_compute: float | None = None
    rows_half: float = 0.0
    expert_share: float = 0.0
    expert_spread: float = 1.0

    def __post_init__(self) -> None:
        for name in ("bandwidth", "compute", "kv_read_factor", "decode_compute", "host_bandwidth", "host_compute",
                     "attention_compute", "flash_attention_compute"):
            value = getattr(self, name)
            optional = name in ("decode_compute", "attention_compute", "flash_attention_compute")
            if not (value is None and optional) and not in_range(value, FACTOR_RANGE):
                raise SpecError(f"efficiency.{name} must be in [{FACTOR_RANGE[0]:g}, {FACTOR_RANGE[1]:g}], "
                                f"got {value!r}")
        if not (math.isfinite(self.step_overhead) and 0 <= self.step_overhead < 60):
            raise SpecError(f"efficiency.step_overhead must be in [0, 60) s, got {self.step_overhead!r}")
        if not in_range(self.overlap, (0.0, 1.0)):
            raise SpecError(f"efficiency.overlap must be in [0, 1], got {self.overlap!r}")
        if not in_range(self.rows_half, (0.0, 1e6)):
            raise SpecError(f"efficiency.rows_half must be in [0, 1e6] rows, got {self.rows_half!r}")
        for name in ("expert_share", "expert_spread"):
            if not in_range(getattr(self, name), (0.0, 1.0)):
                raise SpecError(f"efficiency.{name} must be in [0, 1], got {getattr(self, name)!r}")

    @property
    def is_identity(self) -> bool:
        return (self.bandwidth, self.compute, self.step_overhead, self.kv_read_factor, self.overlap,
                self.host_bandwidth, self.host_compute) == (1, 1, 0, 1, 1, 1, 1) and self.decode_compute in (None, 1) \
            and self.attention_compute in (None, 1) and self.flash_attention_compute in (None, 1) \
            and self.rows_half == 0

    @property
    def decode_compute_factor(self) -> float:
        """The compute factor of a decode step."""
        return self.compute if self.decode_compute is None else self.decode_compute

    @property
    def attention_compute_factor(self) -> float:
        """The compute factor of a prefill's attention arithmetic (its n² term)."""
        return self.compute if self.attention_compute is None else self.attention_compute

    def attention_factor(self, flash_attention: bool) -> float:
        """The compute factor of a prefill's attention arithmetic with or without flash attention."""
        if flash_attention and self.flash_attention_compute is not None:
            return self.flash_attention_compute
        return self.attention_compute_factor

    def rows_factor(self, rows: ArrayLike) -> NDArray[np.float64]:
        """The share of the compute factor a pass whose dense multiplies get ``rows`` rows
        reaches: 1 / (1 + r0 x ((1 - e) / r + e / max(1, r x spread))), each class's time at
        many rows stretched by 1 + r0 / its rows (e: the experts' share of that time)."""
        r = np.maximum(np.asarray(rows, dtype=np.float64), 1.0)
        e = self.expert_share
        return 1.0 / (1.0 + self.rows_half * ((1.0 - e) / r + e / np.maximum(1.0, r * self.expert_spread)))

    def to_dict(self) -> dict[str, Any]:
        """The preset file's "efficiency" object (fields at their defaults left out)."""
        out: dict[str, Any] = {"bandwidth": self.bandwidth, "compute": self.compute,
                               "step_overhead": self.step_overhead, "kv_read_factor": self.kv_read_factor}
        if self.decode_compute is not None:
            out["decode_compute"] = self.decode_compute
        for name in ("attention_compute", "flash_attention_compute"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.rows_half:
            out |= {"rows_half": self.rows_half, "expert_share": self.expert_share,
                    "expert_spread": self.expert_spread}
        if self.overlap != 1.0:
            out["overlap"] = self.overlap
        for name in ("host_bandwidth", "host_compute"):
            if getattr(self, name) != 1.0:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_dict(cls, eff: Mapping[str, Any]) -> Efficiency:
        """From the preset file's "efficiency" object; SpecError naming the bad field."""
        decode = eff.get("decode_compute")
        return cls(bandwidth=_number(eff, "bandwidth", 1.0, "efficiency.bandwidth"),
                   compute=_number(eff, "compute", 1.0, "efficiency.compute"),
                   step_overhead=_number(eff, "step_overhead", 0.0, "efficiency.step_overhead"),
                   kv_read_factor=_number(eff, "kv_read_factor", 1.0, "efficiency.kv_read_factor"),
                   decode_compute=None if decode is None else _number(eff, "decode_compute", 1.0,
                                                                      "efficiency.decode_compute"),
                   overlap=_number(eff, "overlap", 1.0, "efficiency.overlap"),
                   host_bandwidth=_number(eff, "host_bandwidth", 1.0, "efficiency.host_bandwidth"),
                   host_compute=_number(eff, "host_compute", 1.0, "efficiency.host_compute"),
                   attention_compute=None if eff.get("attention_compute") is None else _number(
                       eff, "attention_compute", 1.0, "efficiency.attention_compute"),
                   flash_attention_compute=None if eff.get("flash_attention_compute") is None else _number(
                       eff, "flash_attention_compute", 1.0, "efficiency.flash_attention_compute"),
                   rows_half=_number(eff, "rows_half", 0.0, "efficiency.rows_half"),
                   expert_share=_number(eff, "expert_share", 0.0, "efficiency.expert_share"),
                   expert_spread=_number(eff, "expert_spread", 1.0, "efficiency.expert_spread"))


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLink:
    """The link a discrete device reads host memory over: PCIe ``generation`` and ``lanes``
    (the card's own width: an RTX 4060 Ti has 8). Apart from the device-to-device link (NVLink,
    say): llama.cpp streams host-resident weights to the GPU over this one."""

    generation: int
    lanes: int

    def __post_init__(self) -> None:
        if self.generation not in PCIE_LANE_BANDWIDTH or isinstance(self.generation, bool):
            raise SpecError(f"host_link.pcie_generation must be one of {', '.join(map(str, PCIE_LANE_BANDWIDTH))}, "
                            f"got {self.generation!r}")
        if self.lanes not in PCIE_LANES or isinstance(self.lanes, bool):
            raise SpecError(f"host_link.lanes must be one of {', '.join(map(str, PCIE_LANES))}, got {self.lanes!r}")

    @property
    def bandwidth(self) -> float:
        """bytes/s per direction: lanes x the generation's rate per lane."""
        return self.lanes * PCIE_LANE_BANDWIDTH[self.generation]

    @property
    def name(self) -> str:
        return f"PCIe {self.generation}.0 x{self.lanes}"

    def to_dict(self) -> dict[str, Any]:
        return {"pcie_generation": self.generation, "lanes": self.lanes}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostLink:
        """From the preset's "host_link" object; SpecError naming the bad field."""
        values = []
        for name in ("pcie_generation", "lanes"):
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise SpecError(f"machine profile field 'host_link.{name}' must be a whole number, got {value!r}")
            values.append(value)
        return cls(generation=values[0], lanes=values[1])


@dataclass(frozen=True, slots=True, kw_only=True)
class MachineProfile:
    """Peak capabilities of one device.

    bandwidth: bytes/s of the memory that holds the weights. peak_flops: FLOP/s per dtype
    ("fp32", "fp16", "bf16", ...), dense (no sparsity). memory: bytes usable for the model.
    offload_*: a second, slower memory (system RAM behind a GPU, say) for partial offload;
    offload_flops: the FLOP/s of the processor that computes the layers kept there (the host
    CPU behind a GPU), 0 when not stated (``offload.host_flops`` then assumes a desktop CPU).
    backend: the llama.cpp back end that runs on the device (one of ``BACKENDS``; empty means
    not stated, and a "cpu" machine gets "cpu"). interconnect_bandwidth: bytes/s per direction
    between two identical devices (NVLink, PCIe x16, ...), 0 = not stated; interconnect_name
    says which link, interconnect_kind its kind (one of ``links.KINDS``; empty: read from the
    name) and interconnect_devices how many devices it joins (an NVLink bridge: 2; 0: any
    number). host_link: the PCIe link a discrete device reads host memory over (None:
    there is none, the device being the host or sharing its memory, or it is not stated).
    """

    name: str
    bandwidth: float                          # bytes/s
    peak_flops: Mapping[str, float]           # FLOP/s per dtype
    memory: float                             # bytes
    default_dtype: str = "fp16"
    offload_bandwidth: float = 0.0            # bytes/s, 0 = no second tier
    offload_memory: float = 0.0               # bytes
    offload_name: str = ""
    offload_flops: float = 0.0               # FLOP/s of the host that computes there, 0 = not stated
    kind: str = "gpu"                         # "gpu", "cpu", "unified"
    backend: str = ""                         # llama.cpp back end, one of BACKENDS
    interconnect_bandwidth: float = 0.0       # bytes/s per direction, device to device
    interconnect_name: str = ""
    interconnect_kind: str = ""               # one of links.KINDS, "" = from the name
    interconnect_devices: int = 0             # devices the link joins, 0 = any number
    host_link: HostLink | None = None
    efficiency: Efficiency = field(default_factory=Efficiency)
    sources: Mapping[str, str] = field(default_factory=dict)
    notes: str = ""
    key: str = ""                             # preset or profile id
    published_twin: str = ""                  # the same machine among the published benchmarks' keys
    cores: int = 0                            # a CPU's physical cores (llama.cpp's default threads); 0: not stated

    def __post_init__(self) -> None:
        for text in ("name", "kind", "default_dtype", "offload_name", "notes", "key", "published_twin"):
            if not isinstance(getattr(self, text), str):      # a hand-edited file can hold any JSON type
                raise SpecError(f"machine: {text} must be text, got {type(getattr(self, text)).__name__}")
        if not self.name:
            raise SpecError("machine: name must not be empty")
        if isinstance(self.cores, bool) or not isinstance(self.cores, int) or not 0 <= self.cores <= 4096:
            raise SpecError(f"{self.name}: cores must be a whole number in [0, 4096], got {self.cores!r:.40}")
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
        for name, bounds in (("offload_bandwidth", BANDWIDTH_RANGE), ("offload_memory", MEMORY_RANGE),
                             ("offload_flops", FLOPS_RANGE)):
            value = getattr(self, name)
            if value != 0 and not in_range(value, bounds):
                raise SpecError(f"{self.name}: {name} must be 0 (none) or between {bounds[0]:g} and "
                                f"{bounds[1]:g}, got {value!r}")
        self._check_backend_and_link()
        if self.host_link is not None and not isinstance(self.host_link, HostLink):
            raise SpecError(f"{self.name}: host_link must be a HostLink or None")
        object.__setattr__(self, "peak_flops", MappingProxyType(dict(self.peak_flops)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    def _check_backend_and_link(self) -> None:
        """Validate ``backend`` (stored lower-case; "cpu" when empty on a "cpu" machine) and
        the interconnect."""
        if not isinstance(self.backend, str):
            raise SpecError(f"{self.name}: backend must be text, got {type(self.backend).__name__}")
        backend = self.backend.strip().lower() or ("cpu" if self.kind == "cpu" else "")
        if backend and backend not in BACKENDS:
            raise SpecError(f"{self.name}: backend must be one of {', '.join(BACKENDS)} (or empty), "
                            f"got {self.backend[:40]!r}")
        object.__setattr__(self, "backend", backend)
        value = self.interconnect_bandwidth
        if value != 0 and not in_range(value, BANDWIDTH_RANGE):
            raise SpecError(f"{self.name}: interconnect_bandwidth must be 0 (not stated) or between "
                            f"{BANDWIDTH_RANGE[0]:g} and {BANDWIDTH_RANGE[1]:g} bytes/s, got {value!r}")
        name = self.interconnect_name
        # values cannot reach the readers' printable(): refuse what a terminal would act on
        if not isinstance(name, str) or len(name) > 200 or any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in name):
            raise SpecError(f"{self.name}: interconnect_name must be one line of printable text "
                            "(200 characters at most)")
        if self.interconnect_kind not in ("", *KINDS):
            raise SpecError(f"{self.name}: interconnect.kind must be one of {', '.join(KINDS)} (or empty), "
                            f"got {str(self.interconnect_kind)[:40]!r}")
        joins = self.interconnect_devices
        if isinstance(joins, bool) or not isinstance(joins, int) or not 0 <= joins <= 1 << 16:
            raise SpecError(f"{self.name}: interconnect.devices must be a whole number >= 0 (0: any), got {joins!r}")

    def thread_share(self, threads: int | None) -> float:
        """The share of a CPU's peak ``threads`` compute threads reach: min(threads, cores) /
        cores (llama.cpp's matrix kernels scale with physical cores; a second hardware thread
        on a core adds no FMA unit). 1 for a GPU, for threads None (llama.cpp's default, the
        physical cores) and where the cores are not stated."""
        if self.kind != "cpu" or threads is None or self.cores <= 0:
            return 1.0
        return min(threads, self.cores) / self.cores

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

    @property
    def has_interconnect(self) -> bool:
        return self.interconnect_bandwidth > 0

    @property
    def interconnect_latency(self) -> LinkLatency:
        """The latency terms of the device-to-device link (``links.LINKS``): its stated kind, else
        the kind its name says."""
        return LINKS[self.interconnect_kind or kind_of(self.interconnect_name)]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict in the preset file format (SI units)."""
        eff = self.efficiency
        return {
            "name": self.name,
            "kind": self.kind,
            "backend": self.backend,
            "bandwidth": self.bandwidth,
            "peak_flops": dict(self.peak_flops),
            "default_dtype": self.default_dtype,
            "memory": self.memory,
            "offload": {"name": self.offload_name, "bandwidth": self.offload_bandwidth,
                        "memory": self.offload_memory, "flops": self.offload_flops},
            "interconnect": {"name": self.interconnect_name, "bandwidth": self.interconnect_bandwidth,
                             **({"kind": self.interconnect_kind} if self.interconnect_kind else {}),
                             **({"devices": self.interconnect_devices} if self.interconnect_devices else {})},
            "host_link": None if self.host_link is None else self.host_link.to_dict(),
            "efficiency": eff.to_dict(),
            "sources": dict(self.sources),
            "notes": self.notes,
            **({"published_twin": self.published_twin} if self.published_twin else {}),
            **({"cores": self.cores} if self.cores else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, key: str = "") -> MachineProfile:
        """Build from the preset file format; raises SpecError naming the bad field."""
        offload, eff = _section(data, "offload"), _section(data, "efficiency")
        link = _section(data, "interconnect")
        host_link = data.get("host_link")
        if host_link is not None and not isinstance(host_link, Mapping):
            raise SpecError("machine profile field 'host_link' must be an object or null")
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
            backend=_text(data, "backend", ""),
            bandwidth=_number(data, "bandwidth", None),
            peak_flops={str(k): _number(flops, k, None, f"peak_flops.{k}") for k in flops},
            default_dtype=_text(data, "default_dtype", "fp16"),
            memory=_number(data, "memory", None),
            offload_name=_text(offload, "name", "", "offload.name"),
            offload_bandwidth=_number(offload, "bandwidth", 0.0, "offload.bandwidth"),
            offload_memory=_number(offload, "memory", 0.0, "offload.memory"),
            offload_flops=_number(offload, "flops", 0.0, "offload.flops"),
            interconnect_name=_text(link, "name", "", "interconnect.name"),
            interconnect_bandwidth=_number(link, "bandwidth", 0.0, "interconnect.bandwidth"),
            interconnect_kind=_text(link, "kind", "", "interconnect.kind"),
            interconnect_devices=_whole(link, "devices", "interconnect.devices"),
            host_link=None if host_link is None else HostLink.from_dict(host_link),
            efficiency=Efficiency.from_dict(eff),
            sources={str(k): str(v) for k, v in sources.items()},
            notes=_text(data, "notes", ""),
            key=key,
            published_twin=_text(data, "published_twin", ""),
            cores=_whole(data, "cores", "cores"),
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


def _whole(data: Mapping[str, Any], name: str, label: str) -> int:
    """A whole-number field, 0 when absent; SpecError naming ``label`` otherwise."""
    value = data.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"machine profile field {label!r} must be a whole number, got {value!r}")
    return value


def _text(data: Mapping[str, Any], name: str, default: str | None, label: str = "") -> str:
    value = data.get(name)
    if value is None:
        if default is None:
            raise SpecError(f"machine profile is missing field {label or name!r}")
        return default
    return str(value)
