"""What a machine measurement found, as plain values (no torch): bandwidth per kernel, matmul
peaks per dtype, roofline samples, and the MachineProfile they make.

Each bandwidth and peak figure is the median of several runs spread over the whole measurement
(``runs``, in the order they ran); ``best`` is kept beside it, and ``spread`` says how far the
runs disagree. Where they disagree by more than ``STEADY_SPREAD`` (a shared machine whose
neighbours come and go), the figure is the median of the faster half of the runs: a timing cannot
beat the hardware, so the fastest consistent runs are the nearest to the ceiling (``unsteady``
says so). A run that fails a plausibility check (``measure.machine.checks``) says why in
``disturbed`` and is never made the measured machine."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rooflab.core.errors import SpecError
from rooflab.core.values.machine import INT8_PATH, MEASURED_KEY, MachineProfile

GB = 1e9
#: (fastest - slowest) / median of one figure's runs up to which the median of all runs is taken.
STEADY_SPREAD = 0.25


def run_spread(runs: tuple[float, ...], best: float, median: float) -> float:
    """(fastest - slowest) / median of the rates of ``runs`` (best / median - 1 when the runs
    were not kept): how far repeats of one figure disagree, 0 for a single run."""
    if len(runs) >= 2 and median > 0:
        return (max(runs) - min(runs)) / median
    return max(0.0, best / median - 1.0) if median > 0 else 0.0


def settled(runs: tuple[float, ...], median: float, spread: float) -> float:
    """The figure a profile takes of one measured rate: the ``median`` of its runs while they
    agree (``spread`` up to ``STEADY_SPREAD``), else the median of the faster half of ``runs``."""
    if spread <= STEADY_SPREAD or len(runs) < 2:
        return median
    faster = sorted(runs)[len(runs) // 2:]
    middle = len(faster) // 2
    return faster[middle] if len(faster) % 2 else (faster[middle - 1] + faster[middle]) / 2


@dataclass(frozen=True, slots=True, kw_only=True)
class RepeatedRate:
    """A rate timed several times over one measurement (bytes/s or FLOP/s)."""

    device: str
    best: float               # the fastest run
    median: float             # of all runs (the profile takes ``figure``)
    repeats: int
    threads: int
    runs: tuple[float, ...] = ()     # each run's rate, in the order they ran

    @property
    def spread(self) -> float:
        return run_spread(self.runs, self.best, self.median)

    @property
    def figure(self) -> float:
        """The rate a profile takes (``settled``)."""
        return settled(self.runs, self.median, self.spread)


@dataclass(frozen=True, slots=True, kw_only=True)
class BandwidthResult(RepeatedRate):
    """One streaming kernel: bytes it moves per call and the rates reached (bytes/s)."""

    kernel: str               # "read", "copy", "triad"
    buffer_bytes: int
    bytes_per_call: float


@dataclass(frozen=True, slots=True, kw_only=True)
class MatmulResult(RepeatedRate):
    """An n x n x n multiply in one dtype (FLOP/s)."""

    dtype: str
    size: int


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
    # the 1-minute load average when the run began and ended (None where the system has none)
    load_start: float | None = None
    load_end: float | None = None
    disturbed: str = ""            # why a plausibility check failed; "" for a run that passed them
    unsteady: str = ""             # what moved while it ran (runs far apart, the load rising): kept, said
    fp32_bound: float | None = None   # FLOP/s the CPU's cores, clock and vectors allow (None: not known)
    int8_path: float = INT8_PATH      # a CPU's int8 dot-product rate over its FP32 one (``sysinfo.cpu_int8_path``)

    def best_bandwidth(self, kernel: str = "read") -> float | None:
        """Best bytes/s of ``kernel``, None when it was not measured."""
        rates = [r.best for r in self.bandwidth if r.kernel == kernel]
        return max(rates) if rates else None

    def peak_flops(self) -> dict[str, float]:
        """FLOP/s per dtype: each dtype's ``figure`` (the median of its runs, or of the faster
        half where they disagree)."""
        return {r.dtype: r.figure for r in self.matmul}

    def spread_text(self) -> str:
        """"Medians of 5 runs each; runs differ by read 4%, copy 3%, triad 5%, fp32 2%": how far
        each figure's runs disagree, for the window and the command line ("" with no figures)."""
        figures = [*((r.kernel, r.spread, r.repeats) for r in self.bandwidth),
                   *((m.dtype, m.spread, m.repeats) for m in self.matmul)]
        if not figures:
            return ""
        runs = max(n for _, _, n in figures)
        text = (f"Medians of {runs} runs each; runs differ by "
                + ", ".join(f"{name} {spread:.0%}" for name, spread, _ in figures))
        wide = [name for name, spread, _ in figures if spread > STEADY_SPREAD]
        if wide:
            text += (f"; {', '.join(wide)}: the faster half's median (runs more than {STEADY_SPREAD:.0%} apart, "
                     "as on a shared machine)")
        return text

    def profile(self, fallback: MachineProfile | None = None) -> MachineProfile:
        """"This machine, measured": B = the fastest streaming kernel's median (read, copy or
        triad: the highest rate this memory sustained run after run, the measured analogue of a
        vendor figure), C = the median matmul per dtype, memory = the device's total. Efficiency
        is 1: the profile is spec-free, so calibration against it measures only the engine's gap.

        Figures not measured in this run come from ``fallback`` (raises SpecError if none)."""
        rates = [r.figure for r in self.bandwidth]
        read = max(rates) if rates else None
        flops = self.peak_flops()
        if fallback is not None:
            read = read or fallback.bandwidth
            flops = {**dict(fallback.peak_flops), **flops}
        if not read or not flops:
            raise SpecError("a measured profile needs the bandwidth and at least one matmul peak")
        kind = "cpu" if self.device == "cpu" else ("unified" if self.device.startswith("mps") else "gpu")
        if kind == "cpu" and "fp32" in flops and not any(r.dtype == "int8" for r in self.matmul):
            # the quantized multiplies' unit: the measured FP32 rate x the int8 path's ratio
            flops["int8"] = flops["fp32"] * self.int8_path
        default = "int8" if kind == "cpu" and "int8" in flops else (
            self.default_dtype if self.default_dtype in flops else next(iter(flops)))
        sources = {"bandwidth": self._bandwidth_source(), "memory": "operating system total",
                   "date": self.date, "device": self.device_name, "torch": self.torch_version,
                   "threads": str(self.threads)}
        for r in self.matmul:
            which = "median" if r.figure == r.median else "the faster half's median"
            sources[f"peak_flops.{r.dtype}"] = (f"{which} of {r.repeats} runs of {r.size}x{r.size} matmuls "
                                                f"(spread {r.spread:.0%}), {r.threads} threads, "
                                                f"torch {self.torch_version}")
        if kind == "cpu" and "fp32" in flops and not any(r.dtype == "int8" for r in self.matmul):
            sources["peak_flops.int8"] = (f"the measured fp32 figure x {self.int8_path:g}: the int8 dot-product path "
                                          "llama.cpp's quantized multiplies run on (values.machine.INT8_PATH)")
        return MachineProfile(
            name=f"This machine, measured ({self.device_name})", kind=kind, bandwidth=read,
            peak_flops=flops, memory=self.memory_total or (fallback.memory if fallback else 1.0),
            default_dtype=default, sources=sources, key=MEASURED_KEY,
            cores=self.threads if kind == "cpu" and isinstance(self.threads, int) and 0 < self.threads <= 4096 else 0,
            notes=f"measured {self.date} on {self.device} with {self.threads} threads, torch {self.torch_version}")

    def _bandwidth_source(self) -> str:
        parts = [f"{r.kernel} {'median' if r.figure == r.median else 'faster half'} {r.figure / GB:.1f} GB/s "
                 f"(best {r.best / GB:.1f}, spread {r.spread:.0%})" for r in self.bandwidth]
        size = self.bandwidth[0].buffer_bytes / (1 << 20) if self.bandwidth else 0
        return (f"fastest streaming kernel's median over {size:.0f} MiB buffers, {self.threads} threads; "
                + "; ".join(parts)) if parts else "not measured"

    # -- persistence ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MachineMeasurement:
        """Rebuild from ``to_dict``; SpecError names what is wrong."""
        try:
            fields = dict(data)
            fields["bandwidth"] = tuple(BandwidthResult(**{**r, "runs": tuple(r.get("runs", ()))})
                                        for r in fields.get("bandwidth", ()))
            fields["matmul"] = tuple(MatmulResult(**{**r, "runs": tuple(r.get("runs", ()))})
                                     for r in fields.get("matmul", ()))
            fields["roofline"] = tuple(RooflineSample(**r) for r in fields.get("roofline", ()))
            return cls(**fields)
        except (TypeError, AttributeError, ValueError) as exc:
            raise SpecError(f"machine measurement record is malformed: {exc}") from exc
