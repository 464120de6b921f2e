"""What a machine measurement found, as plain values (no torch): bandwidth per kernel, matmul
peaks per dtype, roofline samples, and the MachineProfile they make."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rooflab.core.errors import SpecError
from rooflab.core.io.presets import MEASURED_KEY
from rooflab.core.values.machine import MachineProfile

GB = 1e9



@dataclass(frozen=True, slots=True, kw_only=True)
class BandwidthResult:
    """One streaming kernel: bytes it moves per call and the rates reached (bytes/s)."""

    kernel: str               # "read", "copy", "triad"
    device: str
    buffer_bytes: int
    bytes_per_call: float
    best: float               # bytes/s, fastest repeat
    median: float             # bytes/s
    repeats: int
    threads: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MatmulResult:
    """An n x n x n multiply in one dtype (FLOP/s)."""

    dtype: str
    device: str
    size: int
    best: float
    median: float
    repeats: int
    threads: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineSample:
    """One (m x k)(k x n) multiply: FLOPs, bytes of its three operands, time, and what that
    makes on the roofline (intensity in FLOP/byte, achieved FLOP/s)."""

    dtype: str
    device: str
    m: int
    k: int
    n: int
    seconds: float
    flops: float
    bytes: float
    intensity: float
    achieved: float


@dataclass(frozen=True, slots=True, kw_only=True)
class MachineMeasurement:
    """Everything one ``measure_machine`` run found, with its circumstances."""

    device: str
    device_name: str
    threads: int
    torch_version: str
    date: str                      # ISO 8601, UTC
    memory_total: float            # bytes (0 when unknown)
    bandwidth: tuple[BandwidthResult, ...] = ()
    matmul: tuple[MatmulResult, ...] = ()
    roofline: tuple[RooflineSample, ...] = ()
    default_dtype: str = "fp32"
    seconds: float = 0.0

    def best_bandwidth(self, kernel: str = "read") -> float | None:
        """Best bytes/s of ``kernel``, None when it was not measured."""
        rates = [r.best for r in self.bandwidth if r.kernel == kernel]
        return max(rates) if rates else None

    def peak_flops(self) -> dict[str, float]:
        return {r.dtype: r.best for r in self.matmul}

    def profile(self, fallback: MachineProfile | None = None) -> MachineProfile:
        """"This machine, measured": B = the fastest streaming kernel (read, copy or triad:
        the highest rate this memory was seen to sustain, the measured analogue of a vendor
        figure), C = best matmul per dtype, memory = the device's total. Efficiency is 1: the
        profile is spec-free, so calibration against it measures only the engine's gap.

        Figures not measured in this run come from ``fallback`` (raises SpecError if none)."""
        rates = [r.best for r in self.bandwidth]
        read = max(rates) if rates else None
        flops = self.peak_flops()
        if fallback is not None:
            read = read or fallback.bandwidth
            flops = {**dict(fallback.peak_flops), **flops}
        if not read or not flops:
            raise SpecError("a measured profile needs the bandwidth and at least one matmul peak")
        default = self.default_dtype if self.default_dtype in flops else next(iter(flops))
        sources = {"bandwidth": self._bandwidth_source(), "memory": "operating system total",
                   "date": self.date, "device": self.device_name, "torch": self.torch_version,
                   "threads": str(self.threads)}
        for r in self.matmul:
            sources[f"peak_flops.{r.dtype}"] = (f"best of {r.repeats} {r.size}x{r.size} matmuls, "
                                                f"{r.threads} threads, torch {self.torch_version}")
        kind = "cpu" if self.device == "cpu" else ("unified" if self.device.startswith("mps") else "gpu")
        return MachineProfile(
            name=f"This machine, measured ({self.device_name})", kind=kind, bandwidth=read,
            peak_flops=flops, memory=self.memory_total or (fallback.memory if fallback else 1.0),
            default_dtype=default, sources=sources, key=MEASURED_KEY,
            notes=f"measured {self.date} on {self.device} with {self.threads} threads, torch {self.torch_version}")

    def _bandwidth_source(self) -> str:
        parts = [f"{r.kernel} {r.best / GB:.1f} GB/s (median {r.median / GB:.1f})" for r in self.bandwidth]
        size = self.bandwidth[0].buffer_bytes / (1 << 20) if self.bandwidth else 0
        return (f"fastest streaming kernel over {size:.0f} MiB buffers, {self.threads} threads; "
                + "; ".join(parts)) if parts else "not measured"

    # -- persistence ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MachineMeasurement:
        """Rebuild from ``to_dict``; SpecError names what is wrong."""
        try:
            fields = dict(data)
            fields["bandwidth"] = tuple(BandwidthResult(**r) for r in fields.get("bandwidth", ()))
            fields["matmul"] = tuple(MatmulResult(**r) for r in fields.get("matmul", ()))
            fields["roofline"] = tuple(RooflineSample(**r) for r in fields.get("roofline", ()))
            return cls(**fields)
        except (TypeError, AttributeError, ValueError) as exc:
            raise SpecError(f"machine measurement record is malformed: {exc}") from exc
