"""Saving a report (seconds of drawing, some seventy files) says so at once and waits with the
cursor, then says what it saved: nothing showed until it was done."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from rooflab.gui.shell import main_window


def test_saving_a_report_says_so_while_it_works(qtbot, window, tmp_path, monkeypatch):
    messages: list[str] = []
    window.statusBar().messageChanged.connect(messages.append)
    during: list[object] = []
    real = main_window.write_report

    def spying(*args, **kwargs):
        cursor = QApplication.overrideCursor()
        during.append((cursor.shape() if cursor is not None else None, window.statusBar().currentMessage()))
        return real(*args, **kwargs)

    monkeypatch.setattr(main_window, "write_report", spying)
    files = window.save_report(tmp_path / "report")
    (shape, shown), = during
    assert shape == Qt.CursorShape.WaitCursor and shown.startswith("Saving the report to ")
    assert QApplication.overrideCursor() is None                     # given back
    assert window.statusBar().currentMessage() == f"Saved the report: {len(files.all)} files in {files.folder}"
    assert any(m.startswith("Saving the report") for m in messages)
    # and each step as it starts: the charts drawn one by one, then the files counted as they
    # are written (68 files took 5.5 s with one line that never moved)
    steps = [m for m in messages if m.startswith(f"Saving the report to {tmp_path / 'report'}: ")]
    assert any("drawing Memory" in m for m in steps) and any("drawing the operations" in m for m in steps), steps
    counted = [int(m.split(": ", 1)[1].split(" files written")[0]) for m in steps if " files written, now " in m]
    assert counted == list(range(len(files.all))), counted               # every file, in order
    assert steps[-1].endswith("now sheet.png…")


def test_the_sheet_header_wraps_at_words(qtbot, window):
    """The sheet's "compared with: ..." line was drawn into a box one line high and cut mid-word
    past its width: it wraps at word boundaries, and the plots start below it."""
    from PySide6.QtGui import QFontMetrics

    from rooflab.core.io.presets import load_machine
    from rooflab.gui.export.report import _title_block, _wrapped_height, compose_sheet
    from tests.factories.waits import WAIT_MS

    for machine in ("m4-max", "h100-sxm", "desktop-ddr5", "ryzen-ai-max-395", "rtx-4090"):
        window.state.pin_current()
        window.state.set_machine(load_machine(machine))
    qtbot.waitUntil(lambda: not window.recompute.pending and len(window.recompute.frame.pinned) == 5,
                    timeout=WAIT_MS)
    frame = window.recompute.frame
    font, pinned = _title_block(frame)[-1]
    assert pinned.startswith("compared with: ")
    from PySide6.QtGui import QColor, QImage

    red = QImage(400, 300, QImage.Format.Format_ARGB32)
    red.fill(QColor("#ff0000"))
    image = compose_sheet(frame, {"a": red})
    width = image.width() - 80
    first_red = next(y for y in range(image.height()) if image.pixelColor(60, y).name() == "#ff0000")
    title = sum(_wrapped_height(f, t, width) for f, t in _title_block(frame))
    assert first_red >= 20 + title                                          # the plots start below all of it
    line = QFontMetrics(font).lineSpacing()
    assert QFontMetrics(font).horizontalAdvance(pinned) > width            # longer than the sheet is wide
    assert _wrapped_height(font, pinned, width) >= 2 * line                 # so it takes lines, not a cut
