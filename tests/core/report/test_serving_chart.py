"""The Serving chart and its table: against concurrency or the request rate (the measured rates
among the predicted ones), the expected curves with their band over the calibration's
replicates, the current workload's marker on either axis, and serving.csv's rows (predicted at
the ceiling and expected, measured) read back as the levels they came from."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from rooflab.core.calibration.expectations import expected_on
from rooflab.core.errors import SpecError
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.serving import Lengths, Load, ServingPlan, serve
from rooflab.core.predict.serving_stats import ServingLevel
from rooflab.core.report.chart_types import BAND_HIGH, BAND_LOW, Scenario
from rooflab.core.report.serving_chart import chart_of, serving_figures
from rooflab.core.report.serving_table import SERVING_COLUMNS, serving_csv
from rooflab.core.values.defaults import DEFAULT_WORKLOAD


@pytest.fixture(scope="module")
def setting():
    spec, machine = load_model("qwen3-8b-q4_k_m"), load_machine("rtx-4090")
    expected = expected_on(spec, machine)
    assert expected is not None                     # the back end's published factors
    return Scenario(model=spec, machine=machine, workload=DEFAULT_WORKLOAD), expected


def _measured(sc, mode: str, level: float) -> ServingLevel:
    plan = ServingPlan(prompt=Lengths(mean=sc.workload.prompt), answer=Lengths(mean=sc.workload.answer), slots=4,
                       step_tokens=2048, requests=16)
    return serve(sc.model, sc.machine, sc.workload, plan, (Load(mode=mode, level=level),)).levels[0]


def test_the_rate_axis_holds_the_measured_rates_and_the_marker(setting):
    sc, expected = setting
    rate, conc = _measured(sc, "rate", 0.77), _measured(sc, "concurrency", 3)
    f = serving_figures(sc, expected=expected, measured=[rate, conc], measured_label="a server", axis="rate")
    assert f.measured == (rate,)                                       # the concurrency level is the other axis's
    levels = [lv.level for lv in f.ceiling.levels]
    assert 0.77 in levels and levels == sorted(levels) and len(levels) >= 9
    assert levels[-1] > f.expected.saturation_rate > levels[0]        # up to past saturation
    chart = chart_of(f, sc.workload.batch)
    latency = chart.panel("latency")
    assert latency.x_unit == "requests/s" and latency.log_x
    assert list(latency.curve("measured_ttft_p50").x) == [0.77]
    assert "a server" in latency.curve("measured_tpot_p50").label
    marker = latency.curve("batch")                 # batch 1: the requests/s one client keeps, as expected
    alone = serving_figures(sc, expected=expected).expected.levels[0]
    assert alone.mode == "concurrency" and alone.level == 1 and marker.role == "marker"
    assert marker.x[0] == pytest.approx(alone.requests_per_second) and marker.x_unit == "requests/s"
    # the axis runs a quarter past the expected figures' saturation: they queue there; the ceiling,
    # which saturates later, need not
    ttft = latency.curve("expected_ttft_p50").y
    assert ttft[-1] > 2 * ttft[0]                                      # queueing past saturation
    assert f.ceiling.saturation_rate >= f.expected.saturation_rate


def test_the_expected_curves_carry_their_band(setting):
    sc, expected = setting
    for axis in ("concurrency", "rate"):
        chart = chart_of(serving_figures(sc, expected=expected, axis=axis), sc.workload.batch)
        for panel, key in (("latency", "expected_ttft_p50"), ("latency", "expected_tpot_p50"),
                           ("throughput", "expected_total")):
            c = chart.panel(panel).curve(key)
            assert c.role == "calibrated"
            assert np.all(c.extras[BAND_LOW] <= c.y) and np.all(c.y <= c.extras[BAND_HIGH])
            assert np.any(c.extras[BAND_HIGH] > c.extras[BAND_LOW])
        assert BAND_LOW not in chart.panel("latency").curve("ttft_p50").extras      # the ceiling has none
    with pytest.raises(SpecError, match="axis"):
        serving_figures(sc, axis="requests")


def test_the_csv_holds_every_level_predicted_and_measured(setting):
    sc, expected = setting
    measured = _measured(sc, "concurrency", 2)
    figures = [serving_figures(sc, expected=expected, measured=[measured], measured_label="kept", axis=axis)
               for axis in ("concurrency", "rate")]
    text = serving_csv(figures, ["model: test"])
    assert text.startswith("# model: test\n")
    rows = list(csv.DictReader(io.StringIO("\n".join(line for line in text.splitlines() if not line.startswith("#")))))
    assert list(rows[0]) == list(SERVING_COLUMNS)
    ceiling = [r for r in rows if r["series"] == "ceiling"]
    assert len(ceiling) == sum(len(f.ceiling.levels) for f in figures)
    assert {r["mode"] for r in ceiling} == {"concurrency", "rate"}
    lv = figures[0].ceiling.levels[2]
    row = next(r for r in ceiling if r["mode"] == "concurrency" and float(r["level"]) == lv.level)
    for name in ("ttft", "tpot", "itl", "e2e"):
        for q in ("mean", "p50", "p90", "p99"):
            assert float(row[f"{name}_{q}_seconds"]) == pytest.approx(getattr(getattr(lv, name), q), rel=1e-9)
    assert float(row["requests_per_second"]) == pytest.approx(lv.requests_per_second)
    assert float(row["output_tokens_per_second"]) == pytest.approx(lv.output_tokens_per_second)
    exp = [r for r in rows if r["series"] == "expected"]
    assert len(exp) == len(ceiling) and all(float(r["ttft_p50_low_seconds"]) <= float(r["ttft_p50_seconds"])
                                            <= float(r["ttft_p50_high_seconds"]) for r in exp)
    (mine,) = [r for r in rows if r["series"] == "measured"]
    assert mine["label"] == "kept" and float(mine["ttft_p50_seconds"]) == pytest.approx(measured.ttft.p50)
