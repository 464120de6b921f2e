"""A model run's progress weighted by its points' predicted times (issue 20: the bar sat at 42 %
for 90 s while the ETA climbed from 25 s to 114 s). No Qt; the times are given, never read."""

from __future__ import annotations

import pytest

from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan
from rooflab.core.measure.engines.plan_times import PlannedPoint, RunClock, llamacpp_points, planned_points


def test_the_units_weigh_what_rooflab_predicts_for_them(dense_spec, machine):
    plan = LlamaCppPlan(prompts=(128, 4096), depths=(0, 8192), contexts=(512,), batches=(1, 8))
    units = llamacpp_points(dense_spec, machine, plan)
    assert len(units) == len(plan.tests) + 2
    assert [u.kind for u in units][-2:] == ["batch", "batch"]
    prefill = {t.n_prompt: u.seconds for t, u in zip(plan.tests, units, strict=False) if t.kind == "prefill"
               and t.n_depth == 0}
    assert prefill[4096] > 10 * prefill[128]                 # a long prompt costs what its arithmetic does
    assert all(u.seconds > 0 for u in units)
    assert planned_points("llama-bench", dense_spec, machine, plan) == ()     # not priced: the job's own


def test_the_eta_converges_where_a_count_would_not():
    # a short prompt (1 s predicted) then a long generation (9 s): the run goes at half the speed
    clock = RunClock([PlannedPoint("prefill", 1.0), PlannedPoint("decode", 9.0)])
    assert clock.eta_seconds(0.0) is None and clock.fraction(0.0) == 0
    clock.started(0.0)
    clock.measured("prefill", 2.0)
    assert clock.fraction(2.0) == pytest.approx(0.1)        # by count it would read 50 %
    assert clock.eta_seconds(2.0) == pytest.approx(18.0)    # 9 predicted seconds at 2 s each
    # 8 s into the generation: the bar moved and the ETA counted down (it sat at 42 % before)
    assert clock.fraction(10.0) == pytest.approx(0.5)
    assert clock.eta_seconds(10.0) == pytest.approx(10.0)
    clock.measured("decode", 20.0)
    assert clock.fraction(20.0) == 1.0 and clock.eta_seconds(20.0) == 0


def test_a_point_of_an_unplanned_kind_still_counts():
    clock = RunClock([PlannedPoint("prefill", 1.0), PlannedPoint("batch", 1.0)])
    clock.started(0.0)
    clock.measured("decode", 1.0)                           # no decode unit: the next undone one
    clock.measured("decode", 2.0)
    clock.measured("decode", 3.0)                           # past the plan: nothing left to mark
    assert clock.fraction(3.0) == 1.0
