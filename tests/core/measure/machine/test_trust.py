"""Disturbed points are flagged as they are measured and kept out of the fit unless included."""

from __future__ import annotations

import pytest

from rooflab.core.calibration.calibrate import calibrate
from rooflab.core.errors import SpecError
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.measure.machine.trust import LOAD_RISE_LIMIT, SPREAD_LIMIT, judge
from rooflab.core.values.measured import MeasuredPoint


def point(context: int, seconds: float, median: float = 0.0) -> MeasuredPoint:
    return MeasuredPoint(kind="decode", prompt=1, context=context, batch=1, seconds=seconds, median=median,
                         repeats=5)


def test_a_wide_spread_or_a_rising_load_marks_a_point():
    calm = point(10, 0.010, 0.0105)
    assert judge(calm, 0.5, 0.6) is calm
    wide = judge(point(10, 0.010, 0.010 * (1 + SPREAD_LIMIT) + 1e-4), 0.5, 0.5)
    assert "spread" in wide.disturbed
    busy = judge(calm, 0.5, 0.5 + LOAD_RISE_LIMIT + 0.1)
    assert "load average rose from 0.50" in busy.disturbed
    assert judge(calm, None, None) is calm                 # no load average on this system: spread only
    assert MeasuredPoint.from_dict(busy.to_dict()) == busy


def test_the_fit_leaves_disturbed_points_out_unless_asked():
    spec, machine = load_model("qwen3-0.6b"), load_machine("reference-cpu")
    clean = [point(c, 0.05 + c * 1e-6) for c in (16, 256, 1024, 4096)]
    outlier = judge(point(2048, 0.5, 0.9), None, None)
    fitted = calibrate(spec, machine, [*clean, outlier])
    assert outlier not in fitted.points and len(fitted.points) == 4
    assert any("1 disturbed point(s) left out" in n for n in fitted.notes)
    assert calibrate(spec, machine, clean).efficiency == fitted.efficiency     # as if it was never there
    everything = calibrate(spec, machine, [*clean, outlier], include_disturbed=True)
    assert outlier in everything.points and everything.efficiency != fitted.efficiency
    with pytest.raises(SpecError, match="all 1 points were disturbed"):
        calibrate(spec, machine, [outlier])
