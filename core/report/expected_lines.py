"""The expected figures of a calibrated machine as numbers-panel rows (``explain``'s ``Line``): TTFT, TPOT and the
rate per sequence (and the batch's total) the calibrated engine is expected to reach, with their band and where the
calibration comes from (its out-of-sample accuracy, never its in-sample fit)."""

from __future__ import annotations

from rooflab.core.predict.expected import Expected
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.expected import StandsOn, accuracy_phrase, expected_request, published_origin
from rooflab.core.report.explain import Line, per_sequence
from rooflab.core.report.units import fmt, fmt_range


def _origin(ex: Expected) -> str:
    cal = ex.calibration
    if cal.source == "public" and cal.engine_key == "vllm-published":
        return published_origin(cal)
    if cal.source == "public":
        return f"the {cal.engine_label} back end's published llama-bench results"
    if cal.source == "none":                 # nothing calibrated this engine: the ceiling (its note says so)
        return f"the ceiling (no {cal.engine_label} calibration of this machine)"
    models = len(cal.models)
    return f"{cal.engine_label}, calibrated on this machine on {cal.date[:10]} with {models} model" + \
        ("s" if models != 1 else "")


def _serial(ex: Expected, threads: int | None) -> str:
    """On a CPU whose calibration has a serial share: what its threads reach of their cores'
    arithmetic (``MachineProfile.compute_share``), as a sentence; else nothing."""
    m = ex.machine
    reach = m.serial_factor(threads)
    if reach >= 1.0:
        return ""
    used = m.cores_used(threads)
    return (f". Its {used:,} cores reach {reach:.0%} of {used:,} cores' arithmetic: "
            f"{m.efficiency.serial_share:.1%} of each pass is serial across threads (Amdahl's law, fitted to the "
            "published CPU rows)")


def expected_lines(sc: Scenario, ex: Expected, placement: StandsOn = None) -> list[Line]:
    """Rows for the expected TTFT, TPOT and rate per sequence, after the ceiling's rows (on
    ``placement`` when the headline is a placement's)."""
    r = expected_request(sc.model, ex, sc.workload, placement)
    origin = _origin(ex)
    tooltip = f"Expected: {origin}. The band is the 16th-84th percentile over the calibration's resampled fits."
    notes = " ".join(n[0].upper() + n[1:] + "." for n in ex.notes)
    rows = []
    for key, label, name, phase in (("expected_ttft", "Expected TTFT", "ttft_seconds", "prefill"),
                                    ("expected_tpot", "Expected TPOT", "tpot_seconds", "decode")):
        value, low, high = r[f"expected_{name}"], r[f"expected_{name}_low"], r[f"expected_{name}_high"]
        accuracy = accuracy_phrase(ex.calibration, phase)
        band = f"{fmt_range(low, high, 's')}; " if fmt(low, "s") != fmt(high, "s") else ""
        sentence = band + (accuracy or origin) + (f". {notes}" if notes else "")
        if phase == "prefill":
            sentence += _serial(ex, sc.workload.threads)
        sentence = sentence[0].upper() + sentence[1:]
        rows.append(Line(key=key, label=label, value=fmt(value, "s"), bound="", sentence=sentence, tooltip=tooltip))
    # per sequence, as the decode ceiling it sits under (a total beside a per-sequence ceiling
    # read as a rate above the ceiling); the batch's total goes in the sentence
    batch = sc.workload.batch
    rate, low, high = (1.0 / r[f"expected_tpot_seconds{s}"] for s in ("", "_high", "_low"))
    total = f"; {fmt(batch * rate, 'tokens/s')} in total over the batch of {batch:,}" if batch > 1 else ""
    rows.append(Line(key="expected_rate", label="Expected rate", value=per_sequence(fmt(rate, "tokens/s"), batch),
                     bound="", sentence=(f"{fmt_range(low, high, 'tokens/s')} per sequence"
                                         if fmt(low, "tokens/s") != fmt(high, "tokens/s") else "Per sequence")
                     + f"{total}; from {origin}",
                     tooltip=tooltip))
    return rows


_AFTER = {"expected_ttft": "ttft", "expected_tpot": "tpot", "expected_rate": "ceiling"}


def merged(lines: list[Line], expected: list[Line]) -> list[Line]:
    """``lines`` with each expected row right under the ceiling row it is the twin of."""
    out = list(lines)
    for row in expected:
        at = next((i for i, line in enumerate(out) if line.key == _AFTER.get(row.key)), len(out) - 1)
        out.insert(at + 1, row)
    return out

