"""The numbers panel and the stopwatch as a user reads them at common screen sizes: a wide value
("-ngl 37 --n-cpu-moe 23", "11.8 GB of 25.8 GB (24 GiB) per device") squeezed the sentences to
one word a line at 1280x720; the stopwatch's last lines sat under the bottom of a 1080-pixel
window; "FLOP/s" and "tokens/s" broke at their slash."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QFont, QTextLayout, QTextOption

from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.report.units import keep_together
from tests.gui.conftest import open_placed

CASES = {"auto-fit": ("gpt-oss-120b-mxfp4", AUTO),
         "tensor parallel": ("qwen3-32b-q4_k_m", PlacementChoice(devices=2, parallel="tensor"))}


def _show(qtbot, window, size, model, choice, mode="light"):
    window.set_theme(mode)
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    open_placed(qtbot, window, model, choice)
    qtbot.wait(20)                        # let the layouts settle


@pytest.mark.parametrize("mode", ["light", "dark"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_sentences_keep_most_of_the_numbers_panel(qtbot, window, size, case, mode):
    _show(qtbot, window, size, *CASES[case], mode=mode)
    panel = window.numbers
    line_height = panel.fontMetrics().lineSpacing()
    for key, (_name, value, _bound, sentence) in panel._rows.items():
        assert value.width() <= panel.value_width(), key
        assert value.height() <= 2 * line_height + 4, (key, panel.value_text(key))   # at most two lines
        assert sentence.width() >= 0.5 * panel.width(), (key, sentence.width(), panel.width())
        assert sentence.height() <= 4 * line_height + 8, key                      # not a word a line
        assert sentence.height() >= sentence.heightForWidth(sentence.width()), key  # every line shown
    wide = {"auto-fit": "placement", "tensor parallel": "memory"}[case]
    assert panel.value_text(wide) in ("-ngl 37 --n-cpu-moe 23 -ot …",
                                      "13.1 GB of 25.8 GB (24 GiB) per device")
    assert panel.stacked == (size[0] == 1280)             # a narrow panel puts each sentence under its row


def test_the_stopwatch_is_whole_at_1920x1080(qtbot, window):
    for pins in range(5):
        _show(qtbot, window, (1920, 1080), "qwen3-8b-q4_k_m", AUTO)
        side = window.stopwatch.parentWidget()
        area = side.parentWidget().parentWidget()
        result = window.stopwatch.result
        bottom = result.mapTo(area.viewport(), result.rect().bottomLeft()).y()
        assert bottom <= area.viewport().height(), (pins, bottom, area.viewport().height())
        window.state.update_workload(prompt=1000 + pins)
        window.state.pin_current()


def _lines(text: str, width: int) -> list[str]:
    """``text`` broken into lines ``width`` px wide, as a word-wrapping QLabel or painter breaks it."""
    font = QFont()
    font.setPixelSize(20)
    layout = QTextLayout(text, font)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WordWrap)
    layout.setTextOption(option)
    layout.beginLayout()
    out = []
    while (line := layout.createLine()).isValid():
        line.setLineWidth(width)
        out.append(text[line.textStart():line.textStart() + line.textLength()])
    layout.endLayout()
    return out


def test_a_figure_never_breaks_across_lines(qapp):
    """The report sheet broke "165 TFLOP/s" after its slash, the stopwatch "62.3 tokens/s"."""
    text = ("Prefill is compute-bound. The 2,048-token prompt needs 132 TFLOP: 800 ms at 165 TFLOP/s. "
            "Reading 19.9 GB at 1.01 TB/s would take 19.7 ms (62.3 tokens/s); -ngl 37 --n-cpu-moe 23.")
    kept = keep_together(text)
    assert kept.replace("\u00a0", " ").replace("\u2060", "") == text       # it reads (and copies) the same
    for width in range(120, 900, 7):
        lines = [line.strip() for line in _lines(kept, width)]
        for i, line in enumerate(lines):
            assert not line.endswith("/\u2060") and not line.endswith("-\u2060"), (width, lines)
            assert not line.startswith(("s.", "s)", "TB/", "TFLOP", "ms", "GB", "23")) or i == 0, (width, lines)
    assert any(line.endswith("TFLOP/") for w in range(120, 900, 7) for line in _lines(text, w))  # Qt's own breaks
