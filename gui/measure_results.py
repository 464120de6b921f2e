"""The Measure tab's read-outs: the calibration and gaps, as the HTML its results label shows,
and what a llama.cpp run will need, shown before it starts."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from rooflab.core.measure.budget import MemoryEstimate
from rooflab.core.measure.calibrate import Calibration
from rooflab.gui.units import fmt


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def results_html(cal: Calibration, gaps: Iterable[Any], notes: Iterable[str], engine: str = "") -> str:
    """``engine``: the full settings text of the series the fit was made from ("" when unknown)."""
    eff = cal.efficiency
    of = f" of {html.escape(engine)}" if engine else ""
    rows = [f"<b>Calibration</b>{of} ({html.escape(', '.join(cal.fitted) or 'nothing fitted')})",
            f"bandwidth {fmt(cal.effective_bandwidth, 'B/s')} of {fmt(cal.bandwidth, 'B/s')} (× {eff.bandwidth:.2f}); "
            f"compute {fmt(cal.effective_flops, 'FLOP/s')} of {fmt(cal.peak_flops, 'FLOP/s')} (× {eff.compute:.2f}); "
            f"overhead {fmt(eff.step_overhead, 's')} per pass; cache bytes × {eff.kv_read_factor:.2f}"]
    for kind, title in (("prefill", "TTFT"), ("decode", "TPOT"), ("batch", "batched step"), ("all", "all")):
        if kind in cal.before:
            b, a = cal.before[kind], cal.after[kind]
            rows.append(f"{title}: median |error| {_pct(b.median)} → {_pct(a.median)} "
                        f"(worst {_pct(b.worst)} → {_pct(a.worst)}, {a.count} points)")
    rows.append("<b>Between the ceiling and the measurement</b>")
    for g in gaps:
        mark = "●" if g.applies else "○"
        share = f" — {g.share:.0%} of the reference step's gap" if g.seconds and g.share else ""
        rows.append(f"{mark} <i>{html.escape(g.contributor)}</i>{share}: {html.escape(g.evidence)}")
    rows += [f"<small>{html.escape(n)}</small>" for n in [*notes, *cal.notes]]
    return "<br>".join(rows)


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
