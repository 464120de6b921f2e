"""The Measure tab's bar and status line while a model run goes (issue 20): the bar and the ETA
are weighted by the points' predicted times, the status stays on one line, Cancel empties the
bar, and the read-out of the run before is marked as old while the new one goes."""

from __future__ import annotations

import time

from rooflab.core.jobs import Progress, check_cancel
from rooflab.core.measure.engines.plan_times import PlannedPoint
from rooflab.core.values.measured import MeasuredPoint
from rooflab.gui.panels.measure_panel import OLD_RESULTS


def _job(cancel):
    yield Progress(step="load", message="loading the model", fraction=0.0)
    point = MeasuredPoint(kind="prefill", prompt=8, context=0, batch=1, seconds=0.01)
    # the job's own figure weighs its points alike: half done after one of two
    yield Progress(step="prefill", message="prompt of 8 tokens: measured " + "and more words " * 20,
                   fraction=0.5, eta_seconds=1.0, sample=point)
    while not cancel.is_set():
        time.sleep(0.005)
    check_cancel(cancel)


def test_a_run_is_weighted_by_predicted_times_and_cancel_empties_the_bar(qtbot, window, monkeypatch):
    ctl, panel = window.measure, window.measure_panel
    panel.show_results("<b>Gap</b>: the run before's explanation", can_apply=True)
    monkeypatch.setattr(ctl, "_model_job", lambda engine: _job)
    monkeypatch.setattr(ctl, "_planned", lambda engine: (PlannedPoint("prefill", 1.0), PlannedPoint("decode", 9.0)))
    with qtbot.waitSignal(ctl.jobs.yielded, timeout=10_000, check_params_cb=lambda p: p.sample is not None):
        panel.model_button.click()
    # the read-out on screen is the run before's, and says so; it cannot be applied meanwhile
    assert OLD_RESULTS in panel.results.text() and "the run before's explanation" in panel.results.text()
    assert not panel.apply_button.isEnabled()
    # 10 % done by predicted time (the short prompt), not the job's 50 %; the seconds left on the bar
    assert 100 <= panel.progress.value() < 200
    assert panel.progress.format().endswith(" left")
    # the status line is one line however long the message, the whole of it in the tooltip
    assert panel.step.text().startswith("prefill: prompt of 8 tokens") and panel.step.toolTip() == panel.step.text()
    assert panel.step.sizeHint().height() <= panel.step.fontMetrics().height() + 4
    with qtbot.waitSignal(ctl.jobs.finished, timeout=10_000):
        panel.cancel_button.click()
    assert panel.step.text() == "Cancelled"
    assert panel.progress.value() == 0 and panel.progress.format() == "%p%"       # not left at 42 %
    assert OLD_RESULTS in panel.results.text()                                   # still the run before's
    ctl.shutdown()
