"""The efficiency a machine reaches in practice: how far below its peaks a real engine runs
(``MachineProfile.efficiency``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rooflab.core.errors import SpecError
from rooflab.core.values.fields import in_range, read_number, whole_field

FACTOR_RANGE = (1e-4, 100.0)             # efficiency factors (a fit clamps to 1e-4)
# factors that may be None (another factor stands in), in the order a preset file writes them
OPTIONAL_FACTORS = ("decode_compute", "attention_compute", "flash_attention_compute", "batch_compute",
                    "host_expert_bandwidth", "host_expert_compute", "host_link_share")


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
    time at many rows. batch_compute: the factor applied to C for the arithmetic each sequence
    beyond the first adds to a decode step, added after the overlap, t = combined(W / B, F_1 /
    C_d) + (b - 1) x F_1 / (C x batch_compute) (None: all b sequences' arithmetic in the compute
    clock, the roofline's max(W / B, b x F_1 / C_d)). kv_chunks: the threads an engine splits one
    query's cache over, charging a single sequence's step for whole chunks
    (``work.split_context``; 0: the cells filled, as every engine but llama.cpp's CPU flash
    attention reads them). host_expert_bandwidth: the factor of the host memory's bandwidth that a
    decode step's routed experts kept on the host behind a GPU are read at, as this machine's own
    measurement found it (``calibration.host_experts``; None: ``host_bandwidth`` times the fitted
    ``offload_terms.HOST_EXPERT_DECODE_SHARE``). host_expert_compute: the factor of the host CPU's
    peak those experts are multiplied at (None: ``host_compute`` times the fitted
    ``offload_terms.HOST_EXPERT_DECODE_COMPUTE``; an expected figure's replicates set it to spread
    the host's arithmetic, ``offload_terms.spread_host``). expert_overhead: the part of step_overhead a
    model's routed-expert layers add (router, gather, the experts' kernels), shown apart in a
    pass's parts (at most step_overhead there). serial_share: on a CPU, the share of a pass's
    arithmetic that does not spread over its threads (llama.cpp's barriers between ops and the
    work one thread does alone): n threads reach n / (1 + s x (n - 1)) of one thread's rate
    (Amdahl's law), so a many-core chip reaches less of its peak than a four-core one (0: every
    thread adds a core's worth; ``MachineProfile.compute_share``). host_link_share: the share of
    the PCIe host link a prompt's host weights, streamed to the GPU each ubatch, cross at (None:
    ``offload_terms.PCIE_STREAM_SHARE`` in an expected figure; an expected figure's replicates set it
    to spread the link, ``offload_terms.spread_host``).
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
    batch_compute: float | None = None
    kv_chunks: int = 0
    host_expert_bandwidth: float | None = None
    host_expert_compute: float | None = None
    expert_overhead: float = 0.0    # seconds, part of step_overhead
    serial_share: float = 0.0       # a CPU pass's arithmetic that its threads do not share (Amdahl)
    host_link_share: float | None = None   # the PCIe link's share a prompt's streamed host weights reach

    def __post_init__(self) -> None:
        for name in ("bandwidth", "compute", "kv_read_factor", "host_bandwidth", "host_compute", *OPTIONAL_FACTORS):
            value = getattr(self, name)
            if not (value is None and name in OPTIONAL_FACTORS) and not in_range(value, FACTOR_RANGE):
                raise SpecError(f"efficiency.{name} must be in [{FACTOR_RANGE[0]:g}, {FACTOR_RANGE[1]:g}], "
                                f"got {value!r}")
        if not (math.isfinite(self.step_overhead) and 0 <= self.step_overhead < 60):
            raise SpecError(f"efficiency.step_overhead must be in [0, 60) s, got {self.step_overhead!r}")
        if not (math.isfinite(self.expert_overhead) and 0 <= self.expert_overhead < 60):
            raise SpecError(f"efficiency.expert_overhead must be in [0, 60) s, got {self.expert_overhead!r}")
        if not in_range(self.overlap, (0.0, 1.0)):
            raise SpecError(f"efficiency.overlap must be in [0, 1], got {self.overlap!r}")
        if not in_range(self.serial_share, (0.0, 1.0)):
            raise SpecError(f"efficiency.serial_share must be in [0, 1], got {self.serial_share!r}")
        if not in_range(self.rows_half, (0.0, 1e6)):
            raise SpecError(f"efficiency.rows_half must be in [0, 1e6] rows, got {self.rows_half!r}")
        for name in ("expert_share", "expert_spread"):
            if not in_range(getattr(self, name), (0.0, 1.0)):
                raise SpecError(f"efficiency.{name} must be in [0, 1], got {getattr(self, name)!r}")
        if not isinstance(self.kv_chunks, int) or isinstance(self.kv_chunks, bool) or not 0 <= self.kv_chunks <= 4096:
            raise SpecError(f"efficiency.kv_chunks must be a whole number of threads in [0, 4096], "
                            f"got {self.kv_chunks!r}")

    def compute_scaled(self, factor: float) -> Efficiency:
        """The same efficiency with its factors of the compute peak times ``factor``: what keeps
        every rate it prices where it was on a peak 1 / ``factor`` times as high (a CPU given its
        int8 path, 4x the FP32 peak its factors were fitted on). The identity stays as it is."""
        if self.is_identity or factor == 1.0:
            return self
        return dataclasses.replace(self, **{name: getattr(self, name) * factor for name in (
            "compute", "decode_compute", "attention_compute", "flash_attention_compute", "batch_compute")
            if getattr(self, name) is not None})

    @property
    def is_identity(self) -> bool:
        return (self.bandwidth, self.compute, self.step_overhead, self.kv_read_factor, self.overlap,
                self.host_bandwidth, self.host_compute) == (1, 1, 0, 1, 1, 1, 1) and self.decode_compute in (None, 1) \
            and self.attention_compute in (None, 1) and self.flash_attention_compute in (None, 1) \
            and self.rows_half == 0 and self.batch_compute is None and self.kv_chunks == 0 \
            and self.host_expert_bandwidth is None and self.host_expert_compute is None and self.serial_share == 0 \
            and self.host_link_share is None

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
        for name in OPTIONAL_FACTORS:
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
        if self.kv_chunks:
            out["kv_chunks"] = self.kv_chunks
        if self.serial_share:
            out["serial_share"] = self.serial_share
        return out

    @classmethod
    def from_dict(cls, eff: Mapping[str, Any]) -> Efficiency:
        """From the preset file's "efficiency" object; SpecError naming the bad field."""
        decode = eff.get("decode_compute")
        return cls(bandwidth=read_number(eff, "bandwidth", 1.0, "efficiency.bandwidth"),
                   compute=read_number(eff, "compute", 1.0, "efficiency.compute"),
                   step_overhead=read_number(eff, "step_overhead", 0.0, "efficiency.step_overhead"),
                   kv_read_factor=read_number(eff, "kv_read_factor", 1.0, "efficiency.kv_read_factor"),
                   decode_compute=None if decode is None else read_number(eff, "decode_compute", 1.0,
                                                                      "efficiency.decode_compute"),
                   overlap=read_number(eff, "overlap", 1.0, "efficiency.overlap"),
                   host_bandwidth=read_number(eff, "host_bandwidth", 1.0, "efficiency.host_bandwidth"),
                   host_compute=read_number(eff, "host_compute", 1.0, "efficiency.host_compute"),
                   attention_compute=None if eff.get("attention_compute") is None else read_number(
                       eff, "attention_compute", 1.0, "efficiency.attention_compute"),
                   flash_attention_compute=None if eff.get("flash_attention_compute") is None else read_number(
                       eff, "flash_attention_compute", 1.0, "efficiency.flash_attention_compute"),
                   rows_half=read_number(eff, "rows_half", 0.0, "efficiency.rows_half"),
                   expert_share=read_number(eff, "expert_share", 0.0, "efficiency.expert_share"),
                   expert_spread=read_number(eff, "expert_spread", 1.0, "efficiency.expert_spread"),
                   batch_compute=None if eff.get("batch_compute") is None else read_number(
                       eff, "batch_compute", 1.0, "efficiency.batch_compute"),
                   kv_chunks=whole_field(eff, "kv_chunks", "efficiency.kv_chunks"),
                   serial_share=read_number(eff, "serial_share", 0.0, "efficiency.serial_share"),
                   host_expert_bandwidth=None if eff.get("host_expert_bandwidth") is None else read_number(
                       eff, "host_expert_bandwidth", 1.0, "efficiency.host_expert_bandwidth"),
                   host_expert_compute=None if eff.get("host_expert_compute") is None else read_number(
                       eff, "host_expert_compute", 1.0, "efficiency.host_expert_compute"),
                   host_link_share=None if eff.get("host_link_share") is None else read_number(
                       eff, "host_link_share", 1.0, "efficiency.host_link_share"))
