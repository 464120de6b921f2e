"""The expected figures of a calibrated machine as numbers-panel rows: TTFT, TPOT and the
batch's total rate the calibrated engine is expected to reach, with their band and where the
calibration comes from (its out-of-sample accuracy, never its in-sample fit)."""

from __future__ import annotations

from rooflab.core.predict.expected import Expected
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.expected import accuracy_phrase, expected_request
from rooflab.gui.explain import Line
from rooflab.gui.units import fmt


def _origin(ex: Expected) -> str:
    cal = ex.calibration
    if cal.source == "public":
        return f"the {cal.engine_label} back end's published llama-bench results"
    models = len(cal.models)
    return f"{cal.engine_label}, calibrated on this machine on {cal.date[:10]} with {models} model" + \
        ("s" if models != 1 else "")


def expected_lines(sc: Scenario, ex: Expected) -> list[Line]:
    """Rows for the expected TTFT, TPOT and total rate, after the ceiling's rows."""
    r = expected_request(sc.model, ex, sc.workload)
    origin = _origin(ex)
    tooltip = f"Expected: {origin}. The band is the 16th-84th percentile over the calibration's resampled fits."
    notes = " ".join(ex.notes)
    rows = []
    for key, label, name, phase in (("expected_ttft", "Expected TTFT", "ttft_seconds", "prefill"),
                                    ("expected_tpot", "Expected TPOT", "tpot_seconds", "decode")):
        value, low, high = r[f"expected_{name}"], r[f"expected_{name}_low"], r[f"expected_{name}_high"]
        accuracy = accuracy_phrase(ex.calibration, phase)
        sentence = f"{fmt(low, 's')} to {fmt(high, 's')}; " + (accuracy or origin) + (f". {notes}" if notes else "")
        rows.append(Line(key=key, label=label, value=fmt(value, "s"), bound="", sentence=sentence, tooltip=tooltip))
    batch = sc.workload.batch
    rate, low, high = (batch / r[f"expected_tpot_seconds{s}"] for s in ("", "_high", "_low"))
    rows.append(Line(key="expected_rate", label="Expected rate", value=fmt(rate, "tokens/s"), bound="",
                     sentence=f"{fmt(low, 'tokens/s')} to {fmt(high, 'tokens/s')} for the batch of {batch}; "
                              f"from {origin}",
                     tooltip=tooltip))
    return rows
