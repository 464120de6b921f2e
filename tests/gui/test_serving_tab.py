"""The Serving tab: shown, it is handed the serving chart of the current scenario (the state's
change reaches it), a measured server run kept for this model and machine lands on it as
points, and it renders."""

from __future__ import annotations

from PySide6.QtGui import QImage

from rooflab.core.calibration import store
from rooflab.core.report.chart_types import BAND_HIGH, BAND_LOW
from rooflab.core.report.serving_chart import SERVING
from rooflab.core.values.defaults import DEFAULT_WORKLOAD
from tests.factories.waits import WAIT_MS


def _show_serving(qtbot, window):
    panel = window.plot_panel
    panel.tabs.setCurrentWidget(panel.serving)
    qtbot.waitUntil(lambda: panel.serving.chart is not None and panel.serving.chart.key == SERVING, timeout=WAIT_MS)
    return panel.serving


def test_the_tab_draws_the_scenario_and_follows_it(qtbot, window):
    plot = _show_serving(qtbot, window)
    assert plot.panel_keys() == ["latency", "throughput"]
    ttft = plot.curve("latency", "ttft_p50")
    assert ttft.x[0] == 1 and ttft.y[-1] > ttft.y[0]                  # queueing past the slots
    total = plot.curve("throughput", "total")
    assert total.y.max() > total.y[0]
    first = plot.chart
    window.state.update_workload(prompt=DEFAULT_WORKLOAD.prompt // 2)
    qtbot.waitUntil(lambda: plot.chart is not first, timeout=WAIT_MS)      # state -> tab
    assert plot.curve("latency", "ttft_p50").y[0] < ttft.y[0]
    assert not plot.grab().isNull()


def test_a_measured_server_lands_on_it(qtbot, window):
    frame = window.recompute.frame
    spec, machine = frame.scenario.model, frame.scenario.machine
    stats = {"mode": "concurrency", "level": 2.0, "completed": 8, "duration": 4.0, "requests_per_second": 2.0,
             "output_tokens_per_second": 400.0, "tokens_per_second_per_sequence": 120.0, "mean_prompt_tokens": 2048,
             "mean_answer_tokens": 256, "sustained_requests_per_second": 2.0, "goodput": None,
             "goodput_share": None, **{k: {"mean": 0.3, "p50": 0.3, "p90": 0.4, "p99": 0.5}
                                       for k in ("ttft", "tpot", "itl", "e2e")}}
    store.save_server_run("http://127.0.0.1:8080", "served", store.machine_key(machine),
                          {"model_key": store.model_key(spec), "plan": {"url": "http://127.0.0.1:8080"},
                           "started": "2026-12-01T10:00:00", "levels": [{"stats": stats}]})
    window.state.update_workload(answer=DEFAULT_WORKLOAD.answer + 1)       # a fresh frame reads the store
    qtbot.waitUntil(lambda: window.recompute.frame is not frame, timeout=WAIT_MS)
    plot = _show_serving(qtbot, window)
    measured = plot.curve("latency", "measured_ttft_p50")
    assert list(measured.x) == [2.0] and list(measured.y) == [0.3] and measured.role == "measured"
    assert "http://127.0.0.1:8080" in measured.label


def test_the_axis_toggle_and_the_band(qtbot, window):
    plot = _show_serving(qtbot, window)
    first = plot.chart
    plot.set_axis("rate")                                                # view -> chart
    qtbot.waitUntil(lambda: plot.chart is not first, timeout=WAIT_MS)
    latency = plot.chart.panel("latency")
    assert latency.x_label == "Request rate" and latency.x_unit == "requests/s"
    assert window.recompute.frame.expected_figures is not None          # rtx-4090: published factors
    expected = plot.curve("latency", "expected_ttft_p50")
    assert (expected.extras[BAND_LOW] <= expected.y).all() and (expected.y <= expected.extras[BAND_HIGH]).all()
    assert not plot.grab().isNull()


def test_a_report_holds_the_serving_charts_and_their_table(qtbot, window, tmp_path):
    files = window.save_report(tmp_path / "report")
    names = {p.name for p in files.all}
    assert {"serving.png", "serving-rate.png", "serving.csv"} <= names
    assert not QImage(str(tmp_path / "report" / "serving.png")).isNull()
    text = (tmp_path / "report" / "serving.csv").read_text()
    assert "ceiling,ceiling,concurrency,1," in text and ",rate," in text and "ttft_p99_seconds" in text


def test_every_pin_is_on_the_serving_tab_too(qtbot, window):
    # the Compare tab promises every pin on every chart; the Serving tab drew the current series alone
    from rooflab.core.io.presets import load_machine

    window.state.pin_current()                                             # Qwen3-8B on the RTX 4090
    window.state.set_machine(load_machine("m4-max"))
    frame = window.recompute.frame
    qtbot.waitUntil(lambda: window.recompute.frame is not frame and len(window.recompute.frame.pinned) == 1,
                    timeout=WAIT_MS)
    plot = _show_serving(qtbot, window)
    (pinned,) = plot._pinned_charts
    assert pinned.chart.key == SERVING and "RTX 4090" in pinned.label
    # the pin's own simulation: the 4090 serves the same request faster than the M4 Max
    ttft_pin = next(c for c in pinned.chart.panels[0].curves if c.key == "ttft_p50")
    assert ttft_pin.y[0] < plot.curve("latency", "ttft_p50").y[0]
    # a pin does not change while pinned: a new frame of the current series draws its chart again
    frame = window.recompute.frame
    window.state.update_workload(answer=300)
    qtbot.waitUntil(lambda: window.recompute.frame is not frame, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: SERVING not in window.plot_panel._stale, timeout=WAIT_MS)   # drawn again
    assert plot._pinned_charts[0].chart is pinned.chart
    window.state.unpin(pinned.pin_id)
    frame = window.recompute.frame
    qtbot.waitUntil(lambda: window.recompute.frame is not frame, timeout=WAIT_MS)
    plot = _show_serving(qtbot, window)
    qtbot.waitUntil(lambda: plot._pinned_charts == (), timeout=WAIT_MS)  # a pin removed leaves the tab
