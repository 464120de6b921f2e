"""A calibration of this machine's host half of an offload: the rate llama.cpp's CPU back end
reads routed experts at, one token at a time, as the host runs them behind a GPU (``--n-cpu-moe``).

``rooflab measure host-experts`` times a decode step of real-size random-weight mixtures of
experts (Qwen3-MoE's and gpt-oss's layouts, few layers) twice, once with the layout's experts
per token and once with one: the head, attention, norms and fixed costs are the same in both,
so the difference is the extra experts alone,

    rate = (W_k - W_1) / (t_k - t_1)      (bytes each token reads, ``work.weight_bytes_read_per_token``)

and its share of this machine's measured bandwidth B (the ceiling) is the host's routed-expert
decode factor. Where one is kept, an expected figure's host part reads its experts at that
factor of the host's bandwidth (``Efficiency.host_expert_bandwidth``) instead of the CPU back
end's published factor times ``offload_terms.HOST_EXPERT_DECODE_SHARE``.

It is this machine's own measurement: it applies to the expected figures of a GPU with host
memory predicted here (the host part then runs on this machine's CPU back end), and a note says
so. Left out: the stated bandwidth of the host a preset names against the bandwidth measured
here (the factor is a share of what this memory streamed), threads that also drive a GPU."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rooflab.core.errors import SpecError
from rooflab.core.files.paths import data_dir
from rooflab.core.files.records import load_record, write_record
from rooflab.core.predict.expected import Expected
from rooflab.core.values.calibration import format_class
from rooflab.core.values.machine import MEASURED_KEY, MachineProfile
from rooflab.core.values.model import ModelSpec, Role

MAX_ROUNDS = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutRate:
    """One layout's rounds: the bytes a token reads beyond the one-expert twin's and, per round,
    the seconds those bytes added to a step."""

    layout: str                   # "qwen3-moe", "gpt-oss"
    format_class: str             # its experts' weight format class ("k-quant", "mxfp4")
    extra_bytes: float            # W_k - W_1, bytes a token reads
    extra_seconds: tuple[float, ...]      # t_k - t_1 of each round (a round at or below 0 is noise)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.extra_bytes) and self.extra_bytes > 0):
            raise SpecError(f"host experts {self.layout}: extra_bytes must be > 0, got {self.extra_bytes!r}")
        if not 1 <= len(self.extra_seconds) <= MAX_ROUNDS or not all(math.isfinite(s) for s in self.extra_seconds):
            raise SpecError(f"host experts {self.layout}: 1 to {MAX_ROUNDS} finite round seconds, got "
                            f"{self.extra_seconds!r}"[:200])

    @property
    def rates(self) -> tuple[float, ...]:
        """bytes/s of each round whose extra experts took any time."""
        return tuple(self.extra_bytes / s for s in self.extra_seconds if s > 0)

    @property
    def rate(self) -> float:
        """The median round's rate, bytes/s (0 when no round took any time)."""
        rates = self.rates
        return statistics.median(rates) if rates else 0.0

    @property
    def spread(self) -> float:
        """(fastest - slowest) / median of the rounds' rates (0 for one round)."""
        rates = self.rates
        return (max(rates) - min(rates)) / self.rate if len(rates) > 1 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"layout": self.layout, "format_class": self.format_class, "extra_bytes": self.extra_bytes,
                "extra_seconds": list(self.extra_seconds)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LayoutRate:
        return cls(layout=str(data["layout"])[:40], format_class=str(data["format_class"])[:40],
                   extra_bytes=float(data["extra_bytes"]),
                   extra_seconds=tuple(float(s) for s in data["extra_seconds"]))


@dataclass(frozen=True, slots=True, kw_only=True)
class HostExpertCalibration:
    """This machine's routed-expert decode rates (``LayoutRate`` per layout) against its
    measured bandwidth ``bandwidth`` (bytes/s, the ceiling), with who ran them."""

    machine_key: str
    machine_name: str
    date: str
    engine: str                   # "llama.cpp 0.3.36 cpu, 2 threads"
    bandwidth: float
    layouts: tuple[LayoutRate, ...]

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise SpecError(f"host experts: bandwidth must be > 0, got {self.bandwidth!r}")
        if not self.layouts or not any(r.rates for r in self.layouts):
            raise SpecError("host experts: no layout's extra experts took any time")

    def factor(self, layout: LayoutRate) -> float:
        """``layout``'s rate as a share of the measured bandwidth, at most 1 (no expected
        figure above its ceiling)."""
        return min(1.0, layout.rate / self.bandwidth)

    def factor_for(self, spec: ModelSpec) -> tuple[float, str]:
        """(the factor for ``spec``'s routed experts, what it rests on): the layouts of their
        format class, else every layout measured."""
        klass = experts_class(spec)
        timed = [r for r in self.layouts if r.rates]
        same = [r for r in timed if r.format_class == klass] or timed
        factor = statistics.median(self.factor(r) for r in same)
        names = ", ".join(r.layout for r in same)
        return factor, names if any(r.format_class == klass for r in same) else f"{names}, not {klass}"

    def to_dict(self) -> dict[str, Any]:
        return {"machine_key": self.machine_key, "machine_name": self.machine_name, "date": self.date,
                "engine": self.engine, "bandwidth": self.bandwidth, "layouts": [r.to_dict() for r in self.layouts]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostExpertCalibration:
        layouts = data["layouts"]
        if not isinstance(layouts, list) or len(layouts) > 16:
            raise TypeError("layouts must be a list of at most 16")
        return cls(machine_key=str(data["machine_key"])[:80], machine_name=str(data["machine_name"])[:200],
                   date=str(data["date"])[:40], engine=str(data["engine"])[:200], bandwidth=float(data["bandwidth"]),
                   layouts=tuple(LayoutRate.from_dict(r) for r in layouts))


def experts_class(spec: ModelSpec) -> str:
    """The format class most of ``spec``'s routed-expert bytes are in ("" for a dense model)."""
    bytes_by: dict[str, float] = {}
    for t in spec.tensors:
        if t.role is Role.EXPERTS:
            bytes_by[format_class(t.type_name)] = bytes_by.get(format_class(t.type_name), 0.0) + t.nbytes
    return max(bytes_by, key=lambda k: bytes_by[k]) if bytes_by else ""





def _path(machine_key: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in machine_key.lower()).strip("-.") or "unnamed"
    return data_dir() / "host-experts" / f"{safe}.json"


def save_host_experts(calibration: HostExpertCalibration) -> Path:
    """Keep ``calibration`` as this machine's (replacing the last)."""
    return write_record(_path(calibration.machine_key), calibration.to_dict())


def load_host_experts(machine_key: str = MEASURED_KEY) -> HostExpertCalibration | None:
    """The host-expert calibration kept for ``machine_key``, None when there is none (a record
    of the wrong shape is set aside)."""
    return load_record(_path(machine_key), HostExpertCalibration.from_dict)


def with_host_experts(spec: ModelSpec, machine: MachineProfile, expected: Expected,
                      calibration: HostExpertCalibration | None) -> Expected:
    """``expected`` with its host reading ``spec``'s routed experts at ``calibration``'s factor
    (central and every replicate alike: the band is the engine's), and a note saying so; as it
    is when there is no calibration, no host behind a GPU, or no routed expert."""
    if calibration is None or machine.kind != "gpu" or machine.offload_bandwidth <= 0 or not spec.is_moe:
        return expected
    factor, rests_on = calibration.factor_for(spec)

    def local(m: MachineProfile) -> MachineProfile:
        return dataclasses.replace(m, efficiency=dataclasses.replace(m.efficiency, host_expert_bandwidth=factor))

    note = (f"the host reads routed experts at {factor:.2f} of its bandwidth, as this machine's CPU back end did "
            f"on {calibration.date[:10]} (rooflab measure host-experts: {rests_on})")
    return dataclasses.replace(expected, machine=local(expected.machine), replicas=tuple(map(local, expected.replicas)),
                               notes=(*expected.notes, note))


def describe_host_experts(calibration: HostExpertCalibration) -> Sequence[str]:
    """Lines for a person: each layout's rate, its spread, its share of the ceiling."""
    out = [f"{calibration.machine_name}: {calibration.engine}, measured bandwidth "
           f"{calibration.bandwidth / 1e9:.1f} GB/s (the ceiling), {calibration.date[:16]}"]
    for r in calibration.layouts:
        rates = ", ".join(f"{x / 1e9:.1f}" for x in r.rates) or "none"
        noise = len(r.extra_seconds) - len(r.rates)
        left = f"; {noise} of {len(r.extra_seconds)} rounds took no extra time, left out" if noise else ""
        out.append(f"  {r.layout:<10} {r.format_class:<8} {r.extra_bytes / 1e6:7.1f} MB more a token: "
                   f"{r.rate / 1e9:5.1f} GB/s median (rounds {rates} GB/s, spread {r.spread:.0%}{left}), "
                   f"{calibration.factor(r):.2f} of the ceiling")
    return out
