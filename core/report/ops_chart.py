"""The roofline of the operations: every operation of the prefill and the decode step as a point
at its intensity (``predict.ops``), at the FLOP/s its time implies, under the machine's roof.
Drawn by the Roofline tab's operation view and written as roofline-ops.png by a report."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from rooflab.core.predict.ops_clocks import TimedOperation
from rooflab.core.predict.roofline import attainable, balance
from rooflab.core.report.chart_parts import ROOFLINE, axes, pts, x_marker
from rooflab.core.report.chart_types import Chart, Curve, CurveRole, Panel, Scenario

OPS_PANEL = "operations"
SECONDS, SHARE = "seconds", "share of the pass"


def _plotted(t: TimedOperation) -> bool:
    """Points a log-log chart can hold: FLOPs done and bytes moved (a lookup does no FLOPs, a
    fused softmax moves no bytes)."""
    return t.op.flops > 0 and math.isfinite(t.op.intensity)


def _point(key: str, label: str, t: TimedOperation, seconds: float, role: CurveRole) -> Curve:
    ax = axes("intensity", "FLOP/byte", "attained", "FLOP/s")
    return Curve(key=key, label=label, x=pts(t.op.intensity), y=pts(t.op.flops / seconds), kind="points",
                 role=role, extras={SECONDS: pts(seconds), SHARE: pts(t.share)}, **ax)


def op_label(t: TimedOperation) -> str:
    """"decode · dense × 36 · q_proj": which operation a point is, for its hover read-out."""
    o = t.op
    where = f"{o.layer_kind} × {o.layers}" if o.layers > 1 else o.layer_kind
    return f"{o.phase} · {where} · {o.name}"


def ops_roofline_chart(sc: Scenario, timed: Sequence[TimedOperation], *, pinned: bool = False) -> Chart:
    """The roof min(C, I x B) and each operation of both phases as a point coloured by the clock
    that bounds it (memory or compute), at the FLOP/s its expected time implies where a
    calibration gives one, else at its ceiling (on the roof); operations a run timed are drawn
    over it as their own layer (``measured_op_curves``). One curve per operation, so a hover
    names it. ``pinned``: a pinned series' chart, its points "marker"s (a pinned series draws no
    clock components: its colour is its own)."""
    m, w = sc.machine, sc.workload
    peak = m.flops(w.compute_dtype)
    rows = [t for t in timed if _plotted(t)]
    intensities = [t.op.intensity for t in rows] or [1.0]
    knee = balance(m, w.compute_dtype)
    low, high = min(0.1, min(intensities) / 3), max(1e4, max(intensities) * 3, knee * 30)
    x = np.logspace(math.log10(low), math.log10(high), 256)
    curves = [Curve(key="roof", label="roof: min(C, I × B)", x=x, y=attainable(x, peak, m.bandwidth), role="main",
                    **axes("intensity", "FLOP/byte", "attainable", "FLOP/s")),
              x_marker("balance", "balance C / B", knee, "intensity", "FLOP/byte", "crossover")]
    for t in rows:
        key = f"{t.op.phase}:{t.op.layer_kind}:{t.op.name}"
        how = "at the ceiling" if t.seconds_expected is None else "as expected"
        seconds = t.seconds_ceiling if t.seconds_expected is None else t.seconds_expected
        role: CurveRole = "marker" if pinned else "compute" if t.bound == "compute" else "memory"
        curves.append(_point(key, f"{op_label(t)}, {how}", t, seconds, role))
    panel = Panel(key=OPS_PANEL, title="Roofline per operation", x_label="Arithmetic intensity", x_unit="FLOP/byte",
                  y_label="Attained compute", y_unit="FLOP/s", curves=tuple(curves), log_x=True, log_y=True)
    return Chart(key=ROOFLINE, title="Roofline per operation", panels=(panel,), description=(
        "Each operation of a prefill and a decode step at its own intensity, coloured by the clock that "
        "bounds it: weight multiplies, attention (scores, softmax, weighted sum) and the small ops (norms, "
        "RoPE, the activation, sampling). A point on the roof runs at its ceiling; below it, as expected or "
        "measured; hover over a point to name it. Lookups (no FLOPs) and a fused "
        "softmax (no bytes) have no place on a log-log roofline and are left out."))


def measured_op_curves(rows: Sequence[Mapping[str, Any]]) -> tuple[Curve, ...]:
    """The operations a run timed (``measure.engines.op_times.compared_rows``: each beside its
    prediction for the workload it ran) as measured points: at the intensity that prediction
    gives, at the FLOP/s its measured time implies (predicted FLOPs / measured seconds), named
    with the share of its bound it reached ("decode · dense · attn_scores, measured (prompt
    8,192), 14% of its bound"). Rows no prediction has (residual adds, a fused
    attention) or that do no FLOPs have no place on the roofline."""
    ax = axes("intensity", "FLOP/byte", "attained", "FLOP/s")
    out = []
    for r in rows:
        seconds, flops, intensity = r.get("seconds_measured"), r.get("flops"), r.get("intensity")
        if not seconds or seconds <= 0 or not flops or flops <= 0 or intensity is None or intensity <= 0:
            continue
        prompt = int(r.get("prompt") or 0)
        where = f"{r['phase']} · {r['layer_kind']} · {r['name']}"
        share = r.get("share_of_bound")
        reached = f", {float(share):.0%} of its bound" if share is not None else ""
        out.append(Curve(key=f"{r['phase']}:{r['layer_kind']}:{r['name']}:measured:{prompt}",
                         label=f"{where}, measured (prompt {prompt:,}){reached}", x=pts(float(intensity)),
                         y=pts(float(flops) / float(seconds)), kind="points", role="measured",
                         extras={SECONDS: pts(float(seconds)),
                                 "of its bound": pts(float(share) if share is not None else math.nan)}, **ax))
    return tuple(out)


def not_running(chart: Chart, note: str) -> Chart:
    """``chart`` with no points, ``note`` over it: a model that does not fit draws nothing as
    if it ran (``charts.not_running_charts``), operations included."""
    panels = tuple(replace(p, curves=()) for p in chart.panels)
    return replace(chart, panels=panels, note=note)
