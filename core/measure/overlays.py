"""Measured points and calibrated predictions as ``Curve``s for the plots' measured-series API,
keyed by (chart, panel). Pure functions of value objects, so the window only hands them on.

Each measured curve carries, per point, its ratio to the prediction for the same pass (same
prompt, context and batch) on the machine given, shown on hover as "measured / predicted"."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rooflab.core.measure.calibrate import predict_points
from rooflab.core.measure.machine_result import RooflineSample
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.report.chart_types import Curve, Scenario
from rooflab.core.report.charts import BATCHING, DECODE, PREFILL, ROOFLINE, build_charts
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

Overlay = dict[tuple[str, str], list[Curve]]
RATIO = "measured / predicted"


def _points_curve(key: str, label: str, x: Sequence[float], y: Sequence[float], ratio: Sequence[float], *,
                  x_name: str, x_unit: str, y_name: str, y_unit: str) -> Curve:
    return Curve(key=key, label=label, x=np.asarray(x, dtype=float), y=np.asarray(y, dtype=float), x_name=x_name,
                 x_unit=x_unit, y_name=y_name, y_unit=y_unit, kind="points", role="measured",
                 extras={RATIO: np.asarray(ratio, dtype=float)})


def measured_curves(points: Sequence[MeasuredPoint], spec: ModelSpec, machine: MachineProfile,
                    workload: Workload, *, kv_type: str | None = None,
                    dtype: str | None = None) -> Overlay:
    """Prefill points on Prefill/TTFT (time and rate), decode steps at the workload's batch on
    Decode vs context (time and rate), batched steps on Batching (per sequence and total, one
    series per context), and every pass on the Roofline at the intensity the engine counts."""
    out: Overlay = {}
    if not points:
        return out
    kv = kv_type or workload.kv_type
    predicted = predict_points(spec, machine, points, kv_type=kv, dtype=dtype or workload.compute_dtype)
    ratio = [p.seconds / q for p, q in zip(points, predicted, strict=True)]
    pre = [(p, r) for p, r in zip(points, ratio, strict=True) if p.kind == "prefill" and p.batch == 1]
    if pre:
        x = [p.prompt for p, _ in pre]
        r = [q for _, q in pre]
        out[(PREFILL, "ttft")] = [_points_curve("measured_ttft", "TTFT", x, [p.seconds for p, _ in pre], r,
                                                x_name="prompt", x_unit="tokens", y_name="TTFT", y_unit="s")]
        out[(PREFILL, "rate")] = [_points_curve("measured_rate", "prompt tokens/s", x,
                                                [p.rate for p, _ in pre], r, x_name="prompt", x_unit="tokens",
                                                y_name="prompt rate", y_unit="tokens/s")]
    dec = [(p, r) for p, r in zip(points, ratio, strict=True) if p.is_decode and p.batch == workload.batch]
    if dec:
        x = [p.context for p, _ in dec]
        r = [q for _, q in dec]
        out[(DECODE, "step")] = [_points_curve("measured_step", "time per token", x,
                                               [p.seconds for p, _ in dec], r, x_name="context", x_unit="tokens",
                                               y_name="time per token", y_unit="s")]
        out[(DECODE, "rate")] = [_points_curve("measured_rate", "tokens/s", x,
                                               [1.0 / p.seconds for p, _ in dec], r, x_name="context",
                                               x_unit="tokens", y_name="decode rate", y_unit="tokens/s")]
    batch = [(p, r) for p, r in zip(points, ratio, strict=True) if p.kind == "batch"]
    curves = []
    for context in sorted({p.context for p, _ in batch}):
        group = [(p, r) for p, r in batch if p.context == context]
        x = [p.batch for p, _ in group]
        r = [q for _, q in group]
        curves += [_points_curve(f"measured_per_sequence_{context}", f"per sequence, context {context}", x,
                                 [1.0 / p.seconds for p, _ in group], r, x_name="batch", x_unit="sequences",
                                 y_name="decode rate", y_unit="tokens/s"),
                   _points_curve(f"measured_total_{context}", f"total, context {context}", x,
                                 [p.batch / p.seconds for p, _ in group], r, x_name="batch", x_unit="sequences",
                                 y_name="decode rate", y_unit="tokens/s")]
    if curves:
        out[(BATCHING, "rate")] = curves
    out[(ROOFLINE, "roofline")] = [_roofline_of(points, spec, machine, workload, ratio, kv)]
    return out


def _roofline_of(points: Sequence[MeasuredPoint], spec: ModelSpec, machine: MachineProfile, workload: Workload,
                 ratio: Sequence[float], kv_type: str) -> Curve:
    """Each pass at intensity = FLOPs / bytes (as the engine counts them), achieved = FLOPs / s."""
    wl = dataclasses.replace(workload, kv_type=kv_type)
    plain = dataclasses.replace(machine, efficiency=dataclasses.replace(machine.efficiency, kv_read_factor=1.0))
    x, y = [], []
    for p in points:
        if p.kind == "prefill":
            work = prefill_pass(spec, plain, wl, prompt=p.prompt, context=p.context, batch=p.batch)
        else:
            work = decode_pass(spec, plain, wl, context=p.context, batch=p.batch)
        x.append(float(work.intensity))
        y.append(float(work.flops) / p.seconds)
    return _points_curve("measured_passes", "forward passes", x, y, ratio, x_name="intensity", x_unit="FLOP/byte",
                         y_name="achieved", y_unit="FLOP/s")


def roofline_samples_curve(samples: Sequence[RooflineSample], label: str = "multiplies") -> Overlay:
    """The machine measurement's (m x k)(k x n) multiplies on the Roofline: intensity and the
    FLOP/s each achieved; hover shows m."""
    if not samples:
        return {}
    curve = Curve(key="measured_multiplies", label=f"{label} ({samples[0].dtype}, k = n = {samples[0].k})",
                  x=np.array([s.intensity for s in samples]), y=np.array([s.achieved for s in samples]),
                  x_name="intensity",
                  x_unit="FLOP/byte", y_name="achieved", y_unit="FLOP/s", kind="points", role="measured",
                  extras={"rows m": np.array([s.m for s in samples], dtype=float)})
    return {(ROOFLINE, "roofline"): [curve]}


# chart, panel, curve keys of the predictions redrawn with a calibrated machine
_CALIBRATED = ((PREFILL, "ttft", ("ttft",)), (PREFILL, "rate", ("prompt_rate",)), (DECODE, "step", ("step",)),
               (DECODE, "rate", ("ceiling",)), (BATCHING, "rate", ("per_sequence", "total")),
               (ROOFLINE, "roofline", ("effective_roof",)))


def calibrated_curves(spec: ModelSpec, calibrated: MachineProfile, workload: Workload) -> Overlay:
    """The main predicted curves of each chart, redrawn with the calibrated machine."""
    charts = build_charts(Scenario(model=spec, machine=calibrated, workload=workload))
    out: Overlay = {}
    for chart, panel, keys in _CALIBRATED:
        found = [c for c in charts[chart].panel(panel).curves if c.key in keys]
        if found:
            out[(chart, panel)] = [dataclasses.replace(c, key=f"calibrated_{c.key}", label=c.label,
                                                       role="calibrated") for c in found]
    return out
