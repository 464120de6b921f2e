"""The links between identical devices, and what one all-reduce costs on each.

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
is read from its name (``kind_of``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


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
