"""Measured points and calibrated predictions as ``Curve``s for the plots' measured-series API,
keyed by (chart, panel). Pure functions of value objects, so the window only hands them on.

Points of different engines or settings are never mixed: ``series_by_engine`` makes one
``MeasuredSeries`` per ``EngineSettings.key`` (the newest run that holds the key), each drawn as
its own layer with a short legend text (``series_label``). Each measured curve carries, per
point, its ratio to the prediction for the same pass (same prompt, context and batch) on the
machine given, shown on hover as "measured / predicted", and the spread of its repeats."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rooflab.core.calibration.calibrate import predict_points
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.expected import Expected, spread_out
from rooflab.core.predict.passes import On
from rooflab.core.report.chart_types import BAND_HIGH, BAND_LOW, Curve, Scenario
from rooflab.core.report.charts import (
    BATCHING,
    DECODE,
    PREFILL,
    ROOFLINE,
    batching_chart,
    decode_chart,
    n_star_on,
    prefill_chart,
    roofline_chart,
)
from rooflab.core.values.calibration import band
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.machine_run import RooflineSample
from rooflab.core.values.measured import EngineSettings, MeasuredPoint
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

Overlay = dict[tuple[str, str], list[Curve]]
RATIO = "measured / predicted"
SPREAD = "spread %"             # (median - best) / best of the point's repeats, in per cent
DISTURBED = "disturbed"         # 1: the measuring code distrusts the point (``MeasuredPoint.disturbed``), else 0
UNNAMED = "measured"            # the label of points that recorded no engine settings


# --- series: one per engine and its settings ---------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredSeries:
    """The points of one engine with one set of settings, from the newest run that measured
    with them. ``key``: ``EngineSettings.key`` ("" for points that recorded none); ``label``:
    the legend text (``series_label``)."""

    key: str
    label: str
    points: tuple[MeasuredPoint, ...]

    @property
    def settings(self) -> EngineSettings | None:
        return next((p.settings for p in self.points if p.settings is not None), None)

    @property
    def engine(self) -> str:
        """The engine's name ("llama.cpp", "torch", ...), "" when the points recorded none."""
        settings = self.settings
        return settings.engine if settings is not None else ""

    @property
    def kv_type(self) -> str | None:
        """The cache type the passes ran with (K's, when K and V differ); None when unknown."""
        settings = self.settings
        return settings.kv_type.split("/")[0] if settings is not None else None

    @property
    def dtype(self) -> str | None:
        """The compute dtype of an engine that converts the weights (torch); None otherwise."""
        settings = self.settings
        return settings.dtype or None if settings is not None else None


def series_label(settings: EngineSettings | None) -> str:
    """A legend text short enough for a plot's legend: "llama.cpp, 2 threads, FA, kv f16",
    "torch, 1 thread, kv f32, fp32", "llama-bench, cuda, FA, kv q8_0". No version, no device
    when it is the CPU, and neither threads nor layers when every layer ran on the GPU (the
    full ``EngineSettings.label`` is shown with the results). Every other setting the ``key``
    holds is named, so series differ in label as they differ in key."""
    return UNNAMED if settings is None else settings.legend


def series_by_engine(runs: Sequence[Sequence[MeasuredPoint]]) -> list[MeasuredSeries]:
    """One series per engine key, from ``runs`` (oldest first, as the store keeps them): each
    key's points come from the newest run that holds it, never merged across runs. Newest
    first: the newest run's keys (in the order its points name them), then older ones."""
    found: dict[str, MeasuredSeries] = {}
    for run in reversed(runs):
        for key in dict.fromkeys(p.engine_key for p in run):
            if key not in found:
                points = tuple(p for p in run if p.engine_key == key)
                found[key] = MeasuredSeries(key=key, label=series_label(points[0].settings), points=points)
    return list(found.values())


# --- measured curves -----------------------------------------------------------------------------

def _points_curve(key: str, label: str, points: Sequence[MeasuredPoint], x: Sequence[float], y: Sequence[float],
                  ratio: Sequence[float], *, x_name: str, x_unit: str, y_name: str, y_unit: str) -> Curve:
    spread = [100.0 * p.spread for p in points]
    disturbed = [1.0 if p.disturbed else 0.0 for p in points]
    return Curve(key=key, label=label, x=np.asarray(x, dtype=float), y=np.asarray(y, dtype=float), x_name=x_name,
                 x_unit=x_unit, y_name=y_name, y_unit=y_unit, kind="points", role="measured",
                 extras={RATIO: np.asarray(ratio, dtype=float), SPREAD: np.asarray(spread, dtype=float),
                         DISTURBED: np.asarray(disturbed, dtype=float)})


def _first_setting(points: Sequence[MeasuredPoint], name: str) -> str:
    """A setting of the first point that recorded settings ("" when none did)."""
    settings = next((p.settings for p in points if p.settings is not None), None)
    return str(getattr(settings, name)) if settings is not None else ""


def measured_curves(points: Sequence[MeasuredPoint], spec: ModelSpec, machine: MachineProfile,
                    workload: Workload, *, kv_type: str | None = None, dtype: str | None = None,
                    label: str = "") -> Overlay:
    """Prefill points on Prefill/TTFT (time and rate), decode steps at the workload's batch on
    Decode vs context (time and rate), batched steps on Batching (per sequence and total, one
    series per context), and every pass on the Roofline at the intensity the engine counts.

    kv_type, dtype: as the passes ran, for the "measured / predicted" ratio (None: the points'
    own settings, else the workload's). label: the series' legend text; a curve that is the
    series' only one on its panel is labelled with it (a plot's legend then names it once),
    the others ("per seq.", "total" on Batching) are labelled by what sets them apart."""
    out: Overlay = {}
    if not points:
        return out
    kv = kv_type or _first_setting(points, "kv_type").split("/")[0] or workload.kv_type
    compute = dtype or _first_setting(points, "dtype") or workload.compute_dtype
    predicted = predict_points(spec, machine, points, kv_type=kv, dtype=compute)
    ratio = [p.seconds / q for p, q in zip(points, predicted, strict=True)]
    pre = [(p, r) for p, r in zip(points, ratio, strict=True) if p.kind == "prefill" and p.batch == 1]
    if pre:
        pts, r = [p for p, _ in pre], [q for _, q in pre]
        x = [p.prompt for p in pts]
        out[(PREFILL, "ttft")] = [_points_curve("measured_ttft", label or "TTFT", pts, x, [p.seconds for p in pts], r,
                                                x_name="prompt", x_unit="tokens", y_name="TTFT", y_unit="s")]
        out[(PREFILL, "rate")] = [_points_curve("measured_rate", label or "tokens/s", pts, x, [p.rate for p in pts], r,
                                                x_name="prompt", x_unit="tokens", y_name="prompt rate",
                                                y_unit="tokens/s")]
    dec = [(p, r) for p, r in zip(points, ratio, strict=True) if p.is_decode and p.batch == workload.batch]
    if dec:
        pts, r = [p for p, _ in dec], [q for _, q in dec]
        x = [p.context for p in pts]
        out[(DECODE, "step")] = [_points_curve("measured_step", label or "TPOT", pts, x, [p.seconds for p in pts], r,
                                               x_name="context", x_unit="tokens", y_name="time per token",
                                               y_unit="s")]
        out[(DECODE, "rate")] = [_points_curve("measured_rate", label or "tokens/s", pts, x,
                                               [1.0 / p.seconds for p in pts],
                                               r, x_name="context", x_unit="tokens", y_name="decode rate",
                                               y_unit="tokens/s")]
    batch = [(p, r) for p, r in zip(points, ratio, strict=True) if p.kind == "batch"]
    contexts = sorted({p.context for p, _ in batch})
    curves = []
    for context in contexts:
        group = [(p, r) for p, r in batch if p.context == context]
        pts, r = [p for p, _ in group], [q for _, q in group]
        x = [p.batch for p in pts]
        at = f" @{context}" if len(contexts) > 1 else ""
        curves += [_points_curve(f"measured_per_sequence_{context}", f"per seq.{at}", pts, x,
                                 [1.0 / p.seconds for p in pts], r, x_name="batch", x_unit="sequences",
                                 y_name="decode rate", y_unit="tokens/s"),
                   _points_curve(f"measured_total_{context}", f"total{at}", pts, x, [p.batch / p.seconds for p in pts],
                                 r, x_name="batch", x_unit="sequences", y_name="decode rate", y_unit="tokens/s")]
    if curves:
        out[(BATCHING, "rate")] = curves
    out[(ROOFLINE, "roofline")] = [_roofline_of(points, spec, machine, workload, ratio, kv, label or "passes")]
    return out


def _roofline_of(points: Sequence[MeasuredPoint], spec: ModelSpec, machine: MachineProfile, workload: Workload,
                 ratio: Sequence[float], kv_type: str, label: str) -> Curve:
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
    return _points_curve("measured_passes", label, points, x, y, ratio, x_name="intensity",
                         x_unit="FLOP/byte", y_name="achieved", y_unit="FLOP/s")


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


def calibrated_label(series: MeasuredSeries | None) -> str:
    """The legend text of the prediction calibrated to ``series``' fit: "llama.cpp fit"
    ("calibrated" for points that recorded no engine)."""
    engine = series.engine if series is not None else ""
    return f"{engine} fit" if engine else "calibrated"


_ASIDE = re.compile(r"\s*\([^)]*\)$")      # " (slower clock)": the prediction's own legend says it
_SHORT = {"effective_roof": "roof"}         # "roof at the machine's efficiency": the fit is that efficiency


def _calibrated_label(curve: Curve) -> str:
    return _SHORT.get(curve.key, _ASIDE.sub("", curve.label))


def calibrated_curves(spec: ModelSpec, calibrated: MachineProfile, workload: Workload, *,
                      n_star: float | None = None, placement: On = None) -> Overlay:
    """The main predicted curves of each chart, redrawn with the calibrated machine. ``n_star``:
    the ceiling's n*, which sets the prefill sweep's reach (given, the curves share the
    ceiling's x and no bisection runs)."""
    sc = Scenario(model=spec, machine=calibrated, workload=workload)
    charts = {PREFILL: prefill_chart(sc, n_star, placement), DECODE: decode_chart(sc, placement),
              BATCHING: batching_chart(sc, placement),
              ROOFLINE: roofline_chart(sc)}
    out: Overlay = {}
    for chart, panel, keys in _CALIBRATED:
        found = [c for c in charts[chart].panel(panel).curves if c.key in keys]
        if found:
            out[(chart, panel)] = [dataclasses.replace(c, key=f"calibrated_{c.key}", label=_calibrated_label(c),
                                                       role="calibrated") for c in found]
    return out


BAND_REPLICAS = 4            # replicas priced per redraw for the window's band (each costs a chart set)


def expected_label(expected: Expected) -> str:
    """The legend text of the expected curves: "expected, llama.cpp" (the engine calibrated)."""
    engine = expected.calibration.engine_label.split(",")[0].split(" ")[0]
    return f"expected, {engine}" if expected.calibration.source != "public" else f"expected, {engine} (published)"


def expected_curves(spec: ModelSpec, expected: Expected, workload: Workload, *,
                    replicas: int = BAND_REPLICAS, n_star: float | None = None,
                    placement: On = None) -> Overlay:
    """The main predicted curves as the calibrated engine is expected to run them, each with its
    band (the 16th-84th percentile over up to ``replicas`` of the calibration's replicates) in
    its extras ``BAND_LOW`` / ``BAND_HIGH``, point by point."""
    if n_star is None:
        ceiling = dataclasses.replace(expected.machine, efficiency=Efficiency())
        n_star = n_star_on(Scenario(model=spec, machine=ceiling, workload=workload), placement)
    central = calibrated_curves(spec, expected.machine, workload, n_star=n_star, placement=placement)
    reps = spread_out(expected.replicas, replicas)
    spread = [calibrated_curves(spec, m, workload, n_star=n_star, placement=placement) for m in reps]
    out: Overlay = {}
    for where, curves in central.items():
        banded = []
        for i, curve in enumerate(curves):
            label = curve.label
            ys = [s[where][i].y for s in spread
                  if where in s and len(s[where]) > i and s[where][i].y.shape == curve.y.shape]
            extras = dict(curve.extras)
            if ys and curve.kind == "line":
                low, high = band(curve.y, ys)
                extras |= {BAND_LOW: low, BAND_HIGH: high}
            banded.append(dataclasses.replace(curve, key=curve.key.replace("calibrated_", "expected_"), label=label,
                                              extras=extras))
        out[where] = banded
    return out
