"""A machine's peak capabilities, in SI units; the efficiency it reaches in practice is
``values.efficiency``, the links it has ``values.links``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rooflab.core.errors import SpecError
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.fields import in_range, read_number, read_section, read_text, whole_field
from rooflab.core.values.links import KINDS, LINKS, HostLink, LinkLatency, kind_of

MEASURED_KEY = "measured"      # the key of this machine's measured profile, beside the presets' keys

DTYPES: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")
# llama.cpp back ends a device runs ("" = not stated; a "cpu" machine gets "cpu")
BACKENDS: tuple[str, ...] = ("cuda", "metal", "rocm", "vulkan", "cpu")

# Physically sane ranges (SI units), far wider than any real machine, narrow enough that no
# prediction over- or underflows: 1 MB/s to 10 PB/s, 1 MFLOP/s to 10 ZFLOP/s, 1 MB to 1 EB.
BANDWIDTH_RANGE = (1e6, 1e16)            # bytes/s
FLOPS_RANGE = (1e6, 1e22)                # FLOP/s
MEMORY_RANGE = (1e6, 1e18)               # bytes

# A CPU's quantized multiplies run on its int8 dot-product instructions, not its FP32 FMAs:
# llama.cpp quantizes the activations to 8 bits and multiplies them with the weights' 8-bit
# (or unpacked 4-6-bit) values. AVX2's vpmaddubsw, AVX-512 and AVX-VNNI's vpdpbusd and Arm's
# SDOT each retire four times the multiply-adds of an FP32 FMA of the same width, at the same
# issue rate; Arm's SMMLA (i8mm) eight times where the core issues it as fast as SDOT (Neoverse
# V1 and V2; Apple's cores issue it at half SDOT's rate, so no faster there). The int8 peak is
# the ceiling of a CPU prompt: the published Graviton3, Grace and M2 Max prompts ran up to 1.8x
# the FP32 peak, and the fit, priced on FP32, wanted factors above 1.
INT8_PATH = 4.0
INT8_MATRIX_PATH = 8.0


def _positive(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


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
        if self.kind == "cpu" and "int8" not in self.peak_flops:
            # a CPU profile that states no int8 path (one saved before it, written by hand, or a
            # copy given new peaks): INT8_PATH x its FP32 peak (else its default's), its default
            base = self.peak_flops.get("fp32") or self.peak_flops.get(self.default_dtype) \
                or max(self.peak_flops.values())
            object.__setattr__(self, "peak_flops", {**self.peak_flops, "int8": base * INT8_PATH})
            object.__setattr__(self, "default_dtype", "int8")
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
        return self.cores_used(threads) / self.cores

    def cores_used(self, threads: int | None) -> int:
        """The cores ``threads`` compute threads run on: min(threads, cores), all of them for
        None (llama.cpp's default); 0 where the cores are not stated."""
        return self.cores if threads is None else min(threads, self.cores)

    def serial_factor(self, threads: int | None) -> float:
        """The share of n cores' rate n cores reach when each beyond the first is slowed by the
        efficiency's serial share s (Amdahl: 1 / (1 + s x (n - 1)), n = ``cores_used``). 1 for a
        GPU, a CPU whose cores are not stated, and the ceiling's identity efficiency (s = 0)."""
        s = self.efficiency.serial_share
        if self.kind != "cpu" or s <= 0 or self.cores <= 0:
            return 1.0
        return 1.0 / (1.0 + s * (self.cores_used(threads) - 1))

    def compute_share(self, threads: int | None) -> float:
        """The share of the peak a CPU's arithmetic reaches on ``threads`` threads: the cores
        they use (``thread_share``) times ``serial_factor``, so it only ever lowers an expected
        figure below its ceiling. 1 for a GPU."""
        return self.thread_share(threads) * self.serial_factor(threads)

    def float_share(self, dtype: str | None = None) -> float:
        """The share of the peak at ``dtype`` (``applied_dtype``) a CPU's float multiplies reach at
        most where that peak is its int8 path: its FP32 FMA rate over it (F16, BF16 and F32
        weights, and attention over an F16 cache, multiply-add in FP32). 1 for a GPU, or a peak
        that is not the int8 path."""
        if self.kind != "cpu" or self.applied_dtype(dtype) != "int8" or "fp32" not in self.peak_flops:
            return 1.0
        return min(1.0, self.peak_flops["fp32"] / self.peak_flops["int8"])

    def peaks_with(self, dtype: str, value: float) -> dict[str, float]:
        """``peak_flops`` with ``dtype``'s peak set to ``value``. A CPU's int8 path moves with its
        FP32 peak (it is a ratio of the same FMA units: ``INT8_PATH``, or the ratio it states),
        so a new FP32 figure does not leave the int8 one, which prices its quantized multiplies,
        where it was."""
        peaks = {**self.peak_flops, dtype: value}
        old = self.peak_flops.get("fp32", 0.0)
        if self.kind == "cpu" and dtype == "fp32" and old > 0 and "int8" in self.peak_flops:
            peaks["int8"] = self.peak_flops["int8"] * value / old
        return peaks

    def applied_dtype(self, dtype: str | None = None) -> str:
        """The dtype whose peak applies when ``dtype`` is asked: ``dtype`` where listed, else the
        default (what ``flops`` prices, and what a peak's label and a CPU's float share read)."""
        return dtype if dtype and dtype in self.peak_flops else self.default_dtype

    def flops(self, dtype: str | None = None) -> float:
        """Peak FLOP/s for ``dtype`` (the default dtype when None or not listed)."""
        return self.peak_flops[self.applied_dtype(dtype)]

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
        offload, eff = read_section(data, "offload"), read_section(data, "efficiency")
        link = read_section(data, "interconnect")
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
        efficiency = Efficiency.from_dict(eff)
        if read_text(data, "kind", "gpu") == "cpu" and "int8" not in flops:
            # a saved profile from before the int8 path: its compute factors were of the FP32
            # (default) peak it is now given INT8_PATH times of (``__post_init__``)
            efficiency = efficiency.compute_scaled(1.0 / INT8_PATH)
        return cls(
            name=read_text(data, "name", None),
            kind=read_text(data, "kind", "gpu"),
            backend=read_text(data, "backend", ""),
            bandwidth=read_number(data, "bandwidth", None),
            peak_flops={str(k): read_number(flops, k, None, f"peak_flops.{k}") for k in flops},
            default_dtype=read_text(data, "default_dtype", "fp16"),
            memory=read_number(data, "memory", None),
            offload_name=read_text(offload, "name", "", "offload.name"),
            offload_bandwidth=read_number(offload, "bandwidth", 0.0, "offload.bandwidth"),
            offload_memory=read_number(offload, "memory", 0.0, "offload.memory"),
            offload_flops=read_number(offload, "flops", 0.0, "offload.flops"),
            interconnect_name=read_text(link, "name", "", "interconnect.name"),
            interconnect_bandwidth=read_number(link, "bandwidth", 0.0, "interconnect.bandwidth"),
            interconnect_kind=read_text(link, "kind", "", "interconnect.kind"),
            interconnect_devices=whole_field(link, "devices", "interconnect.devices"),
            host_link=None if host_link is None else HostLink.from_dict(host_link),
            efficiency=efficiency,
            sources={str(k): str(v) for k, v in sources.items()},
            notes=read_text(data, "notes", ""),
            key=key,
            published_twin=read_text(data, "published_twin", ""),
            cores=whole_field(data, "cores", "cores"),
        )

