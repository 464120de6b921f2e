"""What is typed into a number box is taken whole or refused aloud (issue 39): "1e9" in the
bandwidth box became 19 GB/s (the "e" dropped as typed), and 0 GB/s or an answer of 0 tokens
went back to the old value without a word. Both directions: typed -> state, and the message."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from rooflab.gui.widgets.typed import typed_number


def _type(box, text: str) -> None:
    box.setFocus()
    box.lineEdit().selectAll()
    QTest.keyClicks(box.lineEdit(), text)
    QTest.keyClick(box.lineEdit(), Qt.Key.Key_Return)


@pytest.mark.parametrize(("text", "value"), [("1e9", 1e9), ("1,008 GB/s", 1008.0), ("2.5e3", 2500.0),
                                             ("-5", -5.0), ("abc", None), ("", None), ("1e9e", None)])
def test_typed_numbers(text, value):
    assert typed_number(text, suffix=" GB/s") == value


def test_the_bandwidth_box_takes_a_number_whole_or_says_why_not(qtbot, window):
    panel, state = window.machine_panel, window.state
    window.show()
    window.left_tabs.setCurrentIndex(0)
    qtbot.waitExposed(window)
    before = state.machine.bandwidth
    _type(panel.bandwidth, "1e9")                       # past the box's 1,000,000 GB/s: refused, not 19
    assert state.machine.bandwidth == before
    assert not panel.error.isHidden() and panel.error.text().startswith("'1e9' is not a number from ")
    assert "the field keeps 1,008.0 GB/s" in panel.error.text()
    _type(panel.bandwidth, "0")                         # below the box's least: refused aloud
    assert state.machine.bandwidth == before and panel.error.text().startswith("'0' is not")
    _type(panel.bandwidth, "2e3")                       # an exponent is a number too
    assert state.machine.bandwidth == pytest.approx(2e12) and panel.error.isHidden()


def test_an_answer_of_no_tokens_is_refused_aloud(qtbot, window):
    panel, state = window.workload_panel, window.state
    window.show()
    qtbot.waitExposed(window)
    answer = panel.fields["answer"].spin
    _type(answer, "0")
    assert state.workload.answer == 256
    assert not panel.error.isHidden() and panel.error.text() == \
        "'0' is not a whole number from 1 to 16,777,216: the field keeps 256."
    _type(answer, "1e3")
    assert state.workload.answer == 1000
