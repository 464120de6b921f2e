"""Passes timed operation by operation, whichever engine timed them (torch's profiler,
``torch/ops.py``; llama.cpp's graph node by node, ``llamacpp/ops.py``), and each operation
beside the one ``predict.ops`` gives the run's workload: what ``rooflab measure model --ops``
prints and the Roofline tab's operation view draws as measured points."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rooflab.core.predict.ops_clocks import TimedOperation, timed_operations
from rooflab.core.report.chart_types import Curve
from rooflab.core.report.ops_chart import measured_op_curves
from rooflab.core.report.ops_table import OP_KEYS, op_record
from rooflab.core.values.machine import MEASURED_KEY, MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredOperation:
    """One operation of one timed pass, summed over its layers: seconds, the FLOPs the engine
    counted (torch's profiler: its matrix products; llama.cpp: none), calls (graph nodes or
    ranges), the shapes of its first call."""

    name: str
    layer_kind: str
    phase: str
    prompt: int
    seconds: float
    flops: float
    calls: int
    shapes: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PassTiming:
    """A pass timed the usual way (``seconds``, best of the plain runs) and by its operations
    (``seconds_ops``: the sum of the kept per-operation run's rows, the timing's cost included)."""

    phase: str
    prompt: int
    seconds: float
    seconds_ops: float

    @property
    def overhead(self) -> float:
        """How much longer the pass timed by operation took than the plain one: the per-op
        timing's cost (and the spread between runs)."""
        return self.seconds_ops / self.seconds - 1.0 if self.seconds > 0 else 0.0


@dataclass(frozen=True, kw_only=True)
class OpsMeasurement:
    """One run timed by operation: its rows, its passes, and the workload it ran (the cache
    type, the bytes of an activation, the attention kernel) that its prediction takes."""

    label: str
    spec: ModelSpec
    dtype: str
    device: str
    threads: int
    attention: str
    operations: tuple[MeasuredOperation, ...]
    passes: tuple[PassTiming, ...]
    notes: tuple[str, ...] = field(default=())
    engine: str = "torch"
    kv_type: str = "f16"
    activation_bytes: float = 4.0
    flash_attention: bool = False
    compute_dtype: str | None = None
    #: measured rows that time several predicted ones together (a fused attention: its scores,
    #: softmax and weighted sum)
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def predicted_for(m: OpsMeasurement, machine: MachineProfile, prompt: int) -> tuple[TimedOperation, ...]:
    """The operations ``predict.ops`` gives the model as it ran, for one of its prompts: a
    prefill of ``prompt`` tokens and the decode step after it, in its cache type, activation
    size and attention kernel (eager: scores apart, as without flash attention)."""
    workload = Workload(prompt=prompt, context=0, batch=1, kv_type=m.kv_type, compute_dtype=m.compute_dtype,
                        flash_attention=m.flash_attention)
    expected = machine if not machine.efficiency.is_identity else None
    return timed_operations(m.spec, machine, workload, expected=expected, activation_bytes=m.activation_bytes)


def compared_rows(m: OpsMeasurement, machine: MachineProfile) -> list[dict[str, Any]]:
    """Every predicted operation with ``seconds_measured`` beside it (None where the run had no
    such operation), then the measured rows no prediction has (residual adds, a fused
    attention, the cache writes, "other"), their predicted keys None. Each row has ``prompt``."""
    out: list[dict[str, Any]] = []
    for n in dict.fromkeys(o.prompt for o in m.operations):
        measured = {(o.phase, o.layer_kind, o.name): o for o in m.operations if o.prompt == n}
        used: set[tuple[str, str, str]] = set()
        for t in predicted_for(m, machine, n):
            key = (t.op.phase, t.op.layer_kind, t.op.name)
            found = measured.get(key)
            used.add(key)
            out.append({**op_record(t), "prompt": n, **_measured(found, t.seconds_ceiling)})
        for key, o in measured.items():
            if key not in used:
                row: dict[str, Any] = dict.fromkeys(OP_KEYS)
                row.update(name=o.name, layer_kind=o.layer_kind, phase=o.phase, covers=list(m.groups.get(o.name, ())))
                out.append({**row, "prompt": n, **_measured(o, None)})
    return out


BEATEN_TOLERANCE = 1.05        # a timing's own jitter: 5 % past a bound is not read as beating it


def beaten_ceiling(rows: list[dict[str, Any]], machine: MachineProfile) -> str:
    """The sentence for ``compared_rows`` whose operations ran faster than their ceiling allows, ""
    when none did. A timing cannot beat the hardware: the ceiling is wrong, its machine profile (a
    peak or a bandwidth measured low, on a busy machine) or the operation's count, and the run says
    so rather than reporting a share of its bound over 100 %."""
    beaten = [r for r in rows if r["share_of_bound"] is not None and r["share_of_bound"] > BEATEN_TOLERANCE]
    if not beaten:
        return ""
    worst = max(beaten, key=lambda r: r["share_of_bound"])
    timed = sum(r["share_of_bound"] is not None for r in rows)
    profile = f"{machine.bandwidth / 1e9:.1f} GB/s, {machine.peak_flops.get('fp32', 0.0) / 1e9:.1f} GFLOP/s fp32"
    fix = ("measured low, on a busy machine? measure it again when it is quiet: rooflab measure machine --replace"
           if machine.key == MEASURED_KEY else "another machine's: price the run on this one's, --machine measured")
    return (f"{len(beaten)} of {timed} operations ran faster than their ceiling on {machine.name} (up to "
            f"{worst['share_of_bound']:.0%} of it: {worst['phase']} {worst['name']}): the ceiling is wrong, not the "
            f"timing: the machine profile ({profile}: {fix}) or the operation's count")


def _measured(o: MeasuredOperation | None, ceiling: float | None) -> dict[str, Any]:
    if o is None:
        return {"seconds_measured": None, "flops_measured": None, "calls": None, "shapes": None,
                "share_of_bound": None}
    share = ceiling / o.seconds if ceiling is not None and o.seconds > 0 else None
    return {"seconds_measured": o.seconds, "flops_measured": o.flops, "calls": o.calls, "shapes": o.shapes,
            "share_of_bound": share}


def measured_points(m: OpsMeasurement, machine: MachineProfile) -> tuple[Curve, ...]:
    """``m``'s operations as measured points on the operation roofline (``report.ops_chart.
    measured_op_curves`` of ``compared_rows``): what the Roofline tab's operation view draws
    beside the predicted operations."""
    return measured_op_curves(compared_rows(m, machine))


def measured_label(m: OpsMeasurement) -> str:
    """The legend's name of a run timed by operation: "measured by operation, torch cpu fp32"."""
    how = f"{m.engine} {m.device} {m.dtype}".strip()
    return f"measured by operation, {how} ({m.label})"
