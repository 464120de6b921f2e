"""The Measure tab's Server source against a local fake OpenAI-compatible server: the form's
plan is measured on the tab's worker, kept for the model and machine on screen (the key in no
record) and drawn on the Serving tab; Cancel keeps the levels measured."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("aiohttp", reason="aiohttp is not installed")

from rooflab.core.calibration import store  # noqa: E402
from rooflab.core.measure.loadtest.plan import ServerMeasurement  # noqa: E402
from rooflab.core.report.serving_chart import SERVING  # noqa: E402
from tests.factories.fake_openai import FakeServer  # noqa: E402
from tests.factories.waits import WAIT_MS

SECRET = "sk-window-0123456789"


@pytest.fixture(scope="module")
def fake():
    with FakeServer(api_key=SECRET) as server:
        yield server


def _fill(window, fake, model: str, concurrency: str, rates: str = "") -> None:
    box = window.measure_panel.server
    box.url.setText(fake.url + "/v1")
    box.model_name.setText(model)
    box.api_key.setText(SECRET)
    box.concurrency.setText(concurrency)
    box.rates.setText(rates)
    box.requests.setValue(4)
    window.state.update_workload(prompt=40, answer=8)


def test_a_server_is_measured_kept_and_drawn(qtbot, window, fake):
    _fill(window, fake, "ok", "1, 2", "40")
    server = window.measure.server
    levels = []
    server.level_measured.connect(levels.append)
    with qtbot.waitSignal(server.server_measured, timeout=30_000) as done:
        window.measure_panel.server.run_button.click()
        assert not window.measure_panel.model_button.isEnabled()          # one job at a time
    result: ServerMeasurement = done.args[0]
    assert [lv.load.level for lv in result.levels] == [1, 2, 40] and levels == list(result.levels)
    assert all(lv.stats.completed == 4 for lv in result.levels)
    assert fake.headers[-1]["Authorization"] == f"Bearer {SECRET}"
    sc = window.state.scenario
    runs = store.server_runs_on(store.machine_key(sc.machine))
    assert runs[-1]["model_key"] == store.model_key(sc.model) and runs[-1]["plan"]["authenticated"]
    assert SECRET not in json.dumps(runs) and SECRET not in server.kept.read_text()
    qtbot.waitUntil(lambda: window.measure_panel.model_button.isEnabled(), timeout=WAIT_MS)
    assert "c=2" in window.measure_panel.server.result.text()
    panel = window.plot_panel
    panel.tabs.setCurrentWidget(panel.serving)                              # model -> view: the points land
    qtbot.waitUntil(lambda: panel.serving.chart is not None and panel.serving.chart.key == SERVING, timeout=WAIT_MS)
    assert list(panel.serving.curve("latency", "measured_ttft_p50").x) == [1.0, 2.0]
    panel.serving.set_axis("rate")                                          # and on the rate axis, the rate
    qtbot.waitUntil(lambda: panel.serving.chart.panel("latency").x_unit == "requests/s", timeout=WAIT_MS)
    assert list(panel.serving.curve("latency", "measured_ttft_p50").x) == [40.0]


def test_cancel_keeps_what_was_measured(qtbot, window, fake):
    _fill(window, fake, "slow", "1, 1, 1")
    window.measure_panel.server.requests.setValue(3)
    window.state.update_workload(answer=30)                 # 30 x 50 ms: 1.5 s a request, 4.5 s a level
    server = window.measure.server
    with qtbot.waitSignal(server.level_measured, timeout=20_000):
        window.measure_panel.server.run_button.click()
    with qtbot.waitSignal(server.server_measured, timeout=WAIT_MS) as done:
        asked = time.perf_counter()
        window.measure_panel.cancel_button.click()
    assert time.perf_counter() - asked < 1.5
    result = done.args[0]
    assert result.cancelled and len(result.levels) in (1, 2) and result.levels[0].stats.completed == 3
    assert "Cancelled" in window.measure_panel.step.text()


def test_a_bad_field_is_one_line(qtbot, window, fake):
    _fill(window, fake, "ok", "")
    window.measure_panel.server.run_button.click()
    assert "concurrency levels or request rates" in window.measure_panel.error.text()
    assert not window.measure.server.jobs.busy
