"""The links between identical devices, and what one all-reduce costs on each; the link to the host.

Tensor parallel sums every layer's partial results over the devices with an all-reduce. For
the few kilobytes a decode step sends, its time is latency, not bandwidth: NCCL's own cost model
(``src/graph/tuning.cc``, ``ncclTopoTuneModel``) prices a ring all-reduce over N devices at a
base latency plus a latency per ring step, 2 (N - 1) steps, plus the bytes:

    allreduce(m) = base + 2 (N - 1) x step + 2 (N - 1) / N x m / B_link

``LINKS`` names base and step per kind of link, each with where its figures come from. NVLink
takes NCCL's defaults (baseLatencies Ring/LL 6.6 us, hwLatencies NVLINK Ring/LL 0.6 us), which
the public measurements of small all-reduces on NVLink bracket. Over PCIe, measured small
all-reduces on cards without NVLink run well above NCCL's PCI default (1.0 us a step assumes
peer-to-peer writes; consumer cards without it relay through host memory): the step is fitted
to those measurements with NCCL's base kept. A link's kind, when a profile does not state it,
is read from its name (``kind_of``).

Apart from those: ``HostLink``, the PCIe link a discrete device reads host memory over."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from rooflab.core.errors import SpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkLatency:
    """The latency terms of one kind of link: ``base`` seconds per all-reduce whatever the
    device count (launch and synchronisation), ``step`` seconds per ring step (one device
    handing a chunk to the next; also a layer split's hop of the hidden state)."""

    kind: str
    label: str
    base: float          # seconds
    step: float          # seconds
    source: str

    def allreduce_latency(self, devices: int) -> float:
        """Seconds of a small all-reduce over ``devices`` devices: base + 2 (N - 1) x step
        (0 on one device)."""
        return 0.0 if devices <= 1 else self.base + 2 * (devices - 1) * self.step


_NCCL = "NVIDIA/nccl src/graph/tuning.cc (ncclTunerConstantsDefaults)"
LINKS: Mapping[str, LinkLatency] = MappingProxyType({
    "nvlink": LinkLatency(
        kind="nvlink", label="NVLink", base=6.6e-6, step=0.6e-6,
        source=f"{_NCCL}: baseLatencies Ring/LL 6.6 us, hwLatencies NVLINK Ring/LL 0.6 us a step, so 7.8 / 10.2 / "
               "15.0 us at 2 / 4 / 8 GPUs. Measured: ~6 us NVLS all-reduce on 2 H100 (NVIDIA/nccl#1259); vLLM's custom "
               "all-reduce 9-10 us at TP 2-8 on H100 (table in sgl-project/sglang#2904); NCCL ring on one channel "
               "10 / 17 / 34 us at 2 / 4 / 8 A100 SXM (NVIDIA/nccl-tests#123)"),
    "pcie": LinkLatency(
        kind="pcie", label="PCIe", base=6.6e-6, step=2.6e-6,
        source=f"base: {_NCCL} baseLatencies Ring/LL 6.6 us; step fitted (least squares, base held) to nccl-tests "
               "all_reduce_perf at 8 bytes on PCIe-only machines: 4 x RTX A5000 13-16 us (NVIDIA/nccl#757), "
               "8 x RTX 4090 37-43 us (NVIDIA/nccl#1530), 8 x RTX 3090 54 us (NVIDIA/nccl#1439); so 11.8 / 22.2 / "
               "43.0 us at 2 / 4 / 8 GPUs. NCCL's own PCI default (1.0 us a step) assumes peer-to-peer writes"),
    "infinity-fabric": LinkLatency(
        kind="infinity-fabric", label="Infinity Fabric", base=6.6e-6, step=0.6e-6,
        source="assumed as NVLink (a direct GPU-to-GPU fabric; RCCL keeps NCCL's cost model); no measurement here"),
    "network": LinkLatency(
        kind="network", label="network", base=6.6e-6, step=14e-6,
        source=f"{_NCCL}: hwLatencies NET Ring/Simple 14 us a step (an InfiniBand-class network; TCP over Ethernet "
               "or Thunderbolt is slower)"),
})
KINDS: tuple[str, ...] = tuple(LINKS)

# words in a link's name that say its kind, first match wins (a profile that states no kind)
_NAMED = (("nvlink", "nvlink"), ("nvswitch", "nvlink"), ("infinity", "infinity-fabric"), ("xgmi", "infinity-fabric"),
          ("pcie", "pcie"), ("pci express", "pcie"))


def kind_of(name: str) -> str:
    """The kind of a link from its name ("NVLink 4 (NVSwitch)" -> "nvlink", "PCIe 4.0 x16" ->
    "pcie"); anything else (Thunderbolt, Ethernet, ConnectX) is a "network", and no name at all
    (a bandwidth given by hand) "pcie", the link inside one machine."""
    low = name.lower()
    if not low.strip():
        return "pcie"
    return next((kind for word, kind in _NAMED if word in low), "network")


# PCIe bytes/s per lane and direction by generation, as the vendors quote a link (16 GT/s x 16 lanes
# = 64 GB/s both ways for 4.0 x16): GT/s / 8 per lane, the 128b/130b encoding's 1.5 % left out.
PCIE_LANE_BANDWIDTH: Mapping[int, float] = MappingProxyType({3: 1e9, 4: 2e9, 5: 4e9, 6: 8e9})
PCIE_LANES: tuple[int, ...] = (1, 2, 4, 8, 16)


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
