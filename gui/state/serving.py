"""The Serving tab's chart for a frame: built when the tab is shown (a few hundredths of a
second, too much for every slider step of the other tabs), from the frame's scenario, where its
headline stands, its calibration's expectation (with its band) and the newest server
measurement kept for this model on this machine (``rooflab measure server --predict-model`` or
the Measure tab's Server source), against concurrency or the request rate."""

from __future__ import annotations

import logging

from rooflab.core.app.figures import Figures
from rooflab.core.calibration import store
from rooflab.core.errors import RooflabError
from rooflab.core.measure.loadtest.plan import latest_measured
from rooflab.core.report.chart_types import Chart
from rooflab.core.report.serving_chart import ServingFigures, chart_of, empty_chart, serving_figures
from rooflab.gui.state.recompute import Frame

log = logging.getLogger(__name__)


def serving_figures_of(frame: Frame, axis: str = "concurrency") -> ServingFigures | None:
    """The Serving levels of ``frame`` on ``axis``; None when nothing runs or it cannot be
    simulated (one line logged)."""
    if not frame.summary.runs:
        return None
    sc = frame.scenario
    try:
        found = latest_measured(store.model_key(sc.model), store.machine_key(sc.machine))
        return serving_figures(sc, frame.stands_on, expected=frame.expected_figures,
                               measured=found[1] if found else (), measured_label=found[0] if found else "",
                               axis=axis)
    except RooflabError as exc:
        log.warning("no serving chart: %s", exc)
        return None


def pinned_serving_chart(answer: Figures, axis: str = "concurrency") -> Chart | None:
    """A pinned series' Serving chart (its own simulation; the measured levels and the expected
    curves are the current series' alone, as on every other chart); None when it cannot run."""
    if not answer.summary.runs:
        return None
    try:
        figures = serving_figures(answer.scenario, answer.stands_on, expected=None, axis=axis)
    except RooflabError as exc:
        log.warning("no serving chart for a pinned series: %s", exc)
        return None
    return chart_of(figures, answer.scenario.workload.batch)


def serving_chart_of(frame: Frame, axis: str = "concurrency") -> Chart | None:
    """The Serving chart of ``frame`` on ``axis``; None when it cannot be simulated."""
    if not frame.summary.runs:           # nothing to simulate: say why, as every other chart does
        return empty_chart(next(iter(frame.charts.values())).note, axis)
    figures = serving_figures_of(frame, axis)
    return None if figures is None else chart_of(figures, frame.scenario.workload.batch)
