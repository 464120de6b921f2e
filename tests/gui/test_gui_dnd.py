"""Drag and drop with real QDragEnterEvent/QDropEvent, on the window and on child widgets
that take drops themselves; a bad file shows a message and the previous model stays."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from tests.factories.waits import WAIT_MS


def _mime(*paths: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def _drag_and_drop(widget, mime: QMimeData) -> tuple[bool, bool]:
    """Send a drag-enter then a drop to ``widget``; returns whether each was accepted."""
    enter = QDragEnterEvent(QPoint(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, enter)
    drop = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, drop)
    return enter.isAccepted(), drop.isAccepted()


def test_drop_config_on_a_plot_opens_it(qtbot, window, tiny_config):
    target = window.plots["decode"].view.viewport()
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS) as blocker:
        accepted = _drag_and_drop(target, _mime(tiny_config))
    assert accepted == (True, True)
    assert blocker.args[0].name == "tiny-qwen3"
    qtbot.waitUntil(lambda: window.recompute.frame.scenario.model.name == "tiny-qwen3", timeout=WAIT_MS)
    window.flush_plots()
    assert window.plots["memory"].chart is window.recompute.frame.charts["memory"]
    assert str(tiny_config.resolve()) in window.settings.recent
    assert window.model_panel.summary_labels["architecture"].text() == "qwen3"


def test_drop_folder_on_a_text_field_opens_it(qtbot, window, tiny_config):
    spin_editor = window.workload_panel.fields["prompt"].spin.lineEdit()   # takes text drops itself
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS) as blocker:
        _drag_and_drop(spin_editor, _mime(tiny_config.parent))
    assert blocker.args[0].name == "tiny-qwen3"
    assert window.workload_panel.fields["prompt"].spin.value() == window.state.workload.prompt


def test_bad_file_dropped_shows_message_and_keeps_model(qtbot, window, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"NOPE" + bytes(64))
    before = window.state.model
    with qtbot.waitSignal(window.model_failed, timeout=WAIT_MS) as blocker:
        _drag_and_drop(window.numbers, _mime(bad))
    assert "broken.gguf" in blocker.args[0]
    assert window.state.model is before
    assert "broken.gguf" in window.messages.text() and before.name in window.messages.text()
    assert window.messages.level == "error"
    qtbot.waitUntil(lambda: not window.opener.jobs.busy, timeout=WAIT_MS)
    assert window.model_panel.busy.isHidden()


def test_drags_without_files_are_left_alone(window):
    mime = QMimeData()
    mime.setText("just text")
    enter = QDragEnterEvent(QPoint(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    enter.ignore()
    QApplication.sendEvent(window.plots["roofline"].view.viewport(), enter)
    assert not enter.isAccepted()


def test_open_model_does_not_block_and_catalogue_picker_opens(qtbot, window):
    panel = window.model_panel
    index = panel.catalogue.findData("qwen3-0.6b")
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS) as blocker:
        panel.catalogue.activated.emit(index)
    assert blocker.args[0].name.lower().startswith("qwen3-0.6b") or "0.6" in blocker.args[0].name
    assert window.state.model_ref == "qwen3-0.6b"


def test_a_second_open_supersedes_the_first_without_waiting(qtbot, window, tiny_config):
    loaded: list[object] = []
    window.model_loaded.connect(loaded.append)
    window.open_model(str(tiny_config))
    window.open_model("qwen3-0.6b")            # the first is still reading: it is dropped, not waited for
    qtbot.waitUntil(lambda: not window.opener.jobs.busy, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: window.opener.jobs.threads_alive == 0, timeout=WAIT_MS)
    qtbot.wait(50)
    assert [spec.name for spec in loaded] == [window.state.model.name]
    assert window.state.model_ref == "qwen3-0.6b"
    assert window.model_panel.busy.isHidden()
