"""The Serving tab's chart for a frame: built when the tab is shown (a few hundredths of a
second, too much for every slider step of the other tabs), from the frame's scenario, where its
headline stands, its calibrated profile and the newest server measurement kept for this model
on this machine (``rooflab measure server --predict-model``)."""

from __future__ import annotations

import logging

from rooflab.core.errors import RooflabError
from rooflab.core.measure import store
from rooflab.core.measure.server_plan import latest_measured
from rooflab.core.report.chart_types import Chart, Panel
from rooflab.core.report.serving_chart import SERVING, SERVING_TITLE, serving_chart
from rooflab.gui.state.recompute import Frame

log = logging.getLogger(__name__)


def serving_chart_of(frame: Frame) -> Chart | None:
    """The Serving chart of ``frame``; None when it cannot be simulated (one line logged)."""
    sc = frame.scenario
    expected = frame.expected_figures
    if not frame.summary.runs:           # nothing to simulate: say why, as every other chart does
        note = next(iter(frame.charts.values())).note
        return Chart(key=SERVING, title=SERVING_TITLE, description="", note=note, panels=(
            Panel(key="latency", title="Latency under load", x_label="Concurrent requests", x_unit="requests",
                  y_label="Seconds", y_unit="s", curves=(), log_x=True, log_y=True),
            Panel(key="throughput", title="Output tokens per second", x_label="Concurrent requests",
                  x_unit="requests", y_label="Output rate", y_unit="tokens/s", curves=(), log_x=True, log_y=True)))
    try:
        found = latest_measured(store.model_key(sc.model), store.machine_key(sc.machine))
        return serving_chart(sc, frame.stands_on, expected=expected.machine if expected is not None else None,
                             measured=found[1] if found else (), measured_label=found[0] if found else "")
    except RooflabError as exc:
        log.warning("no serving chart: %s", exc)
        return None
