"""The Curves each plot draws: built from the prediction functions, frozen, SI, and their
markers sit on their curves (no Qt here)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.errors import SpecError
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.crossover import prefill_crossover
from rooflab.core.predict.request import request
from rooflab.core.report.chart_types import Curve, Scenario
from rooflab.core.report.charts import CHART_KEYS, build_charts
from rooflab.core.values.workload import Workload


@pytest.fixture
def scenario(dense_spec, machine):
    return Scenario(model=dense_spec, machine=machine, workload=Workload(prompt=1024, answer=128))


def test_every_chart_is_built_with_frozen_si_curves(scenario):
    charts = build_charts(scenario)
    assert list(charts) == list(CHART_KEYS)
    for chart in charts.values():
        assert chart.description and chart.panels
        for panel in chart.panels:
            for curve in panel.curves:
                assert not curve.x.flags.writeable and not curve.y.flags.writeable
                if curve.kind in ("line", "points"):
                    assert curve.x.size == curve.y.size > 0
                    assert np.all(np.isfinite(curve.y))
                    assert curve.x_unit == panel.x_unit and curve.y_unit == panel.y_unit


def test_curve_rejects_mismatched_lengths():
    with pytest.raises(SpecError, match="x has 2 values"):
        Curve(key="k", label="l", x=[1, 2], y=[1], x_name="a", x_unit="", y_name="b", y_unit="")


def test_curve_copies_its_input(scenario):
    x = np.array([1.0, 2.0])
    curve = Curve(key="k", label="l", x=x, y=x, x_name="a", x_unit="", y_name="b", y_unit="")
    x[0] = 99
    assert curve.x[0] == 1.0


def test_prefill_curve_is_the_prefill_pass_and_marks_n_star(scenario):
    sc = scenario
    panel = build_charts(sc)["prefill"].panel("ttft")
    ttft = panel.curve("ttft")
    expected = prefill_pass(sc.model, sc.machine, sc.workload, prompt=ttft.x).seconds
    np.testing.assert_allclose(ttft.y, expected, rtol=1e-12)
    # with batch 1 and no cached context the marker is the lessons' n*
    assert panel.curve("n_star").x[0] == pytest.approx(prefill_crossover(sc.model, sc.machine, sc.workload))
    current = panel.curve("current")
    assert current.x.tolist() == [1024] and current.y[0] == pytest.approx(request(sc.model, sc.machine,
                                                                                   sc.workload).ttft)


def test_prefill_crossover_at_the_workload_is_where_the_clocks_cross(dense_spec, machine):
    sc = Scenario(model=dense_spec, machine=machine, workload=Workload(batch=4, context=2000))
    n = prefill_crossover(sc.model, sc.machine, sc.workload)
    below = prefill_pass(sc.model, sc.machine, sc.workload, prompt=n * 0.99)
    above = prefill_pass(sc.model, sc.machine, sc.workload, prompt=n * 1.01)
    assert below.compute_seconds < below.memory_seconds and above.compute_seconds > above.memory_seconds


def test_decode_ceiling_is_one_over_the_step(scenario):
    sc = scenario
    chart = build_charts(sc)["decode"]
    ceiling = chart.panel("rate").curve("ceiling")
    step = decode_pass(sc.model, sc.machine, sc.workload, context=ceiling.x).seconds
    np.testing.assert_allclose(ceiling.y, 1.0 / step, rtol=1e-12)
    assert np.all(np.diff(ceiling.y) <= 0)                       # more cache, slower decode
    share = chart.panel("kv_share").curve("kv_share")
    assert share.y[0] == 0 and np.all((share.y >= 0) & (share.y < 1))


def test_sliding_window_model_marks_its_cap(sliding_spec, machine):
    chart = build_charts(Scenario(model=sliding_spec, machine=machine, workload=Workload()))["decode"]
    assert chart.panel("rate").curve("window").x.tolist() == [512]


def test_batching_total_grows_and_memory_has_the_machine_limit(scenario):
    chart = build_charts(scenario)["batching"]
    rate = chart.panel("rate")
    assert np.all(np.diff(rate.curve("total").y) > 0)
    assert np.all(np.diff(rate.curve("per_sequence").y) <= 0)
    assert chart.panel("memory").curve("capacity").y.tolist() == [scenario.machine.memory]
    assert [p.key for p in chart.panels] == ["rate", "memory"]          # dense: no experts panel


def test_moe_batching_counts_experts_touched(moe_spec, machine):
    chart = build_charts(Scenario(model=moe_spec, machine=machine, workload=Workload()))["batching"]
    touched = chart.panel("experts").curve("touched")
    assert touched.y[0] == pytest.approx(2) and touched.y[-1] <= 8 and np.all(np.diff(touched.y) >= 0)


def test_memory_breakdown_stacks_to_capacity(scenario):
    bar = build_charts(scenario)["memory"].panel("breakdown").curve("breakdown")
    weights, kv, free = bar.y
    assert bar.categories == ("weights", "KV cache", "free")
    assert weights == scenario.model.file_bytes
    assert weights + kv + free == pytest.approx(scenario.machine.memory)
    assert bar.extras["base"].tolist() == [0, weights, weights + kv]


def test_memory_breakdown_over_capacity(dense_spec, machine):
    tiny = dataclasses.replace(machine, memory=1e6)
    bar = build_charts(Scenario(model=dense_spec, machine=tiny, workload=Workload()))["memory"] \
        .panel("breakdown").curve("breakdown")
    assert bar.categories[2] == "over capacity"
    assert bar.extras["base"][2] == tiny.memory
    assert bar.y[0] + bar.y[1] - bar.y[2] == pytest.approx(tiny.memory)


def test_label_names_the_request_settings_that_differ_from_the_default(dense_spec, machine):
    from rooflab.core.values.defaults import DEFAULT_WORKLOAD

    def label(**changes: object) -> str:
        wl = dataclasses.replace(DEFAULT_WORKLOAD, **changes)
        return Scenario(model=dense_spec, machine=machine, workload=wl).label

    assert label() == "tiny-dense · Test GPU · f16 cache"
    assert label(batch=7) == "tiny-dense · Test GPU · f16 cache, batch 7"
    # two pins of one model and machine that differ in prompt or context used to share a label
    assert label(prompt=8192, context=4096) == "tiny-dense · Test GPU · f16 cache, prompt 8,192, context 4,096"
    assert label(offload_fraction=0.5, draft_tokens=4, acceptance=0.8).endswith("50% offloaded, 4 drafts at 80%")
    assert len({label(), label(prompt=4096), label(answer=512), label(context=1)}) == 4
