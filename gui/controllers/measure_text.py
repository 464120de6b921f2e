"""The Measure tab's read-outs: the calibration and gaps, as the HTML its results label shows,
and what a llama.cpp run will need, shown before it starts."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rooflab.core.calibration.calibrate import Calibration
from rooflab.core.measure.engines.budget import MemoryEstimate
from rooflab.core.report.text import count
from rooflab.core.report.units import fmt
from rooflab.core.values.calibration import Accuracy, EngineCalibration
from rooflab.core.values.machine import MachineProfile


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def results_html(cal: Calibration, gaps: Iterable[Any], notes: Iterable[str], engine: str = "",
                 accuracy: Mapping[str, Accuracy] | None = None, by: EngineCalibration | None = None) -> str:
    """``engine``: the full settings text of the series the fit was made from ("" when unknown).
    ``accuracy``: the machine's engine calibration ``by`` scored on these points, which it never
    saw: the only figures called accuracy here (this model's own fit is fit quality)."""
    eff = cal.efficiency
    of = f" of {html.escape(engine)}" if engine else ""
    rows = [f"<b>Calibration</b>{of} ({html.escape(', '.join(cal.fitted) or 'nothing fitted')})",
            f"bandwidth {fmt(cal.effective_bandwidth, 'B/s')} of {fmt(cal.bandwidth, 'B/s')} (× {eff.bandwidth:.2f}); "
            f"compute {fmt(cal.effective_flops, 'FLOP/s')} of {fmt(cal.peak_flops, 'FLOP/s')} (× {eff.compute:.2f}); "
            f"overhead {fmt(eff.step_overhead, 's')} per pass; cache bytes × {eff.kv_read_factor:.2f}"]
    if accuracy:
        rows.append(f"<b>Accuracy</b> of {html.escape(by.describe() if by else 'the machine calibration')}, "
                    "which never saw this model:")
        rows += [f"{title}: median |error| {_pct(accuracy[kind].median)} (worst {_pct(accuracy[kind].worst)}, "
                 f"{count(accuracy[kind].count, 'point')})"
                 for kind, title in (("prefill", "TTFT"), ("decode", "TPOT"), ("batch", "batched step"))
                 if kind in accuracy]
    elif by is None:
        rows.append("<i>No calibration of this machine for these settings yet: Calibrate for every model "
                    "to see how well it predicts a model it never saw.</i>")
    rows.append("<b>Fit quality</b> of this model's own fit (in sample, not accuracy): |error| against the "
                "ceiling → after the fit")
    for kind, title in (("prefill", "TTFT"), ("decode", "TPOT"), ("batch", "batched step"), ("all", "all")):
        if kind in cal.before:
            b, a = cal.before[kind], cal.after[kind]
            rows.append(f"{title}: median {_pct(b.median)} → {_pct(a.median)} "
                        f"(worst {_pct(b.worst)} → {_pct(a.worst)}, {count(a.count, 'point')})")
    rows.append("<b>Between the ceiling and the measurement</b>")
    for g in gaps:
        mark = "●" if g.applies else "○"
        share = f" — {g.share_text}" if g.share_text else ""
        rows.append(f"{mark} <i>{html.escape(g.contributor)}</i>{share}. {html.escape(g.evidence)}")
    rows += [f"<small>{html.escape(n)}</small>" for n in [*notes, *cal.notes]]
    return "<br>".join(rows)


def machine_done_text(profile: MachineProfile, saved: Path, spread: str = "") -> str:
    """What a machine measurement found and where it went: "Measured 52.3 GB/s bandwidth,
    peaks 1.23 TFLOP/s fp32 and 2.1 TFLOP/s bf16. Medians of 5 runs each; runs differ by ...
    Saved in PATH; the Machine tab lists it as 'NAME'." (``spread``: the run's ``spread_text``)."""
    # a CPU's int8 path is its measured fp32 figure times the path's ratio, not a measurement
    path = profile.kind == "cpu" and "int8" in profile.peak_flops and "fp32" in profile.peak_flops
    peaks = [f"{fmt(flops, 'FLOP/s')} {dtype}" for dtype, flops in profile.peak_flops.items()
             if not (path and dtype == "int8")]
    listed = ", ".join(peaks[:-1]) + f" and {peaks[-1]}" if len(peaks) > 1 else "".join(peaks)
    int8 = (f" (quantized multiplies take its int8 path, "
            f"{profile.peak_flops['int8'] / profile.peak_flops['fp32']:g} × fp32: "
            f"{fmt(profile.peak_flops['int8'], 'OP/s')})") if path else ""
    return (f"Measured {fmt(profile.bandwidth, 'B/s')} bandwidth, {'peaks' if len(peaks) > 1 else 'peak'} "
            f"{listed}{int8}. {f'{spread}. ' if spread else ''}Saved in {saved}; the Machine tab lists it as "
            f"'{profile.name}'.")


def points_done_text(points: int, engine: str, *, imported: bool = False) -> str:
    """"Measured 14 points with llama.cpp, 2 threads; the fit is below."."""
    did = "Imported" if imported else "Measured"
    return f"{did} {count(points, 'point')} {'from' if imported else 'with'} {engine}; the fit is below."


def duration_text(seconds: float, device: str = "cpu") -> str:
    """"Takes about 45 s (a rough guess for a CPU; the progress line corrects it)."."""
    if seconds >= 90:
        about = f"{seconds / 60:.0f} min"
    else:
        about = f"{max(5, 5 * round(seconds / 5)):.0f} s"
    where = "a CPU" if device == "cpu" else device
    return f"Takes about {about} (a rough guess for {where}; the progress line corrects it as the run goes)."


def estimate_text(estimate: MemoryEstimate, available: float | None, gguf_bytes: float | None = None) -> str:
    """"Needs about 0.3 GB of memory (weights ..., cache ...); 5.2 GB free", and, when the
    model is not a GGUF file of the user's (``gguf_bytes``), the random-weight GGUF written
    first."""
    parts = [f"Needs about {fmt(estimate.total, 'B')} of memory (weights {fmt(estimate.weights, 'B')}, "
             f"cache {fmt(estimate.cache, 'B')}, compute {fmt(estimate.activations, 'B')}, "
             f"runtime {fmt(estimate.runtime, 'B')})"]
    if available is not None:
        parts[0] += f"; {fmt(available, 'B')} free"
    if gguf_bytes is not None:
        parts.append(f"Writes a random-weight GGUF of this model first ({fmt(gguf_bytes, 'B')} on disk, kept for "
                     "the next run)")
    return ". ".join(parts) + "."


def calibration_html(cal: EngineCalibration) -> str:
    """The Measure tab's account of a calibration: what ran, the fitted terms with their band,
    and its accuracy on points the fit did not see (the in-sample fit labelled as such)."""
    from html import escape

    def value(v: float, unit: str) -> str:
        return fmt(v, unit) if unit else f"{v:.2f}"

    rows = "".join(f"<tr><td>{escape(name)}</td><td align='right'>{value(c, unit)}</td>"
                   f"<td>{value(lo, unit)} to {value(hi, unit)}</td></tr>" for name, unit, c, lo, hi in cal.bands())
    acc = []
    for protocol, label in (("leave_one_model_out", "models left out"), ("extrapolation", "extrapolated"),
                            ("in_sample", "fit quality (in sample, not accuracy)")):
        table = cal.accuracy.get(protocol, {})
        cells = ", ".join(f"{phase} {a.median:.0%} (worst {a.worst:.0%})" for phase, a in table.items())
        if cells:
            acc.append(f"<li><b>{label}</b>: {cells}</li>")
    return (f"<p><b>{escape(cal.describe())}</b><br>{escape(', '.join(cal.models))}: {cal.points} points.</p>"
            f"<p>Error |predicted − measured| / measured, median:</p><ul>{''.join(acc)}</ul>"
            f"<table><tr><th align='left'>term</th><th>value</th><th>band (16th–84th percentile)</th></tr>{rows}"
            "</table>" + "".join(f"<p>{escape(n)}</p>" for n in cal.notes))
