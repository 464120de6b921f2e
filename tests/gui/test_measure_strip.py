"""The Measure tab at 1280x720: the progress bar, Cancel and the status line stay in sight under
the scrolled controls (they sat below the fold, under the buttons that start a run), and a run
that ran to its end but could not be fitted says it finished, on a full bar ("0 % · Stopped" read
as a cancel)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QScrollArea

from tests.factories.waits import WAIT_MS


def _on_screen(window, widget) -> bool:
    """Whether ``widget`` shows whole inside the window and inside every scroll area above it."""
    if not widget.isVisible():
        return False
    top_left = widget.mapTo(window, QPoint(0, 0))
    rect = QRect(top_left, widget.size())
    if not window.rect().contains(rect):
        return False
    parent = widget.parentWidget()
    while parent is not None and parent is not window:
        if parent.objectName() == "qt_scrollarea_viewport":
            port = QRect(parent.mapTo(window, QPoint(0, 0)), parent.size())
            if not port.contains(rect):
                return False
        parent = parent.parentWidget()
    return True


def test_progress_and_cancel_in_sight_at_720p(qtbot, window):
    window.resize(1280, 720)
    window.show()
    qtbot.waitExposed(window)
    window.left_tabs.setCurrentIndex(window.left_tabs.count() - 1)
    panel = window.measure_panel
    tab = window.left_tabs.currentWidget()
    scroll = tab if isinstance(tab, QScrollArea) else tab.findChild(QScrollArea)
    for scrolled in (0, scroll.verticalScrollBar().maximum()):     # at the top, and down at the model's button
        scroll.verticalScrollBar().setValue(scrolled)
        qtbot.wait(20)
        for widget in (panel.progress, panel.cancel_button, panel.step):
            assert _on_screen(window, widget), (widget, scrolled)
    assert scroll.verticalScrollBar().maximum() > 0                 # the controls do scroll at 720p
    assert _on_screen(window, panel.model_button)                   # scrolled down: the button and the bar
    assert not window.grab().isNull()


def test_a_run_that_finished_unfitted_says_finished(qtbot, window, tiny_config: Path, tmp_path, monkeypatch):
    from rooflab.core.io import load_model

    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path / "data"))     # no machine measured: not fitted
    window.state.set_model(load_model(tiny_config, weights="fp32"), str(tiny_config))
    panel, ctl = window.measure_panel, window.measure
    panel.threads.setValue(1)
    panel.prompts.setText("1")
    panel.contexts.setText("4")
    panel.batches.setText("1")
    with qtbot.waitSignal(ctl.jobs.finished, timeout=60_000):
        panel.model_button.click()
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=WAIT_MS)
    assert "not fitted" in panel.error.text()
    assert panel.step.text().startswith("Finished") and "Stopped" not in panel.step.text()
    assert panel.progress.value() == panel.progress.maximum()
    window.measure.shutdown()
