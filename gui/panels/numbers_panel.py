"""The numbers panel: TTFT, TPOT, end to end, decode ceiling and the rest, each with the
clock that bounds it and one sentence saying why.

The sentence is what a reader reads, so it keeps most of the width: the value column is capped
(a long value, "11.8 GB of 25.8 GB (24 GiB) per device", wraps onto a second line), and where
the panel is too narrow for the sentence to keep a readable measure beside the name and the
value (a 1280-pixel window), each sentence goes under its row, across the whole panel."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics, QResizeEvent
from PySide6.QtWidgets import QGridLayout, QLabel, QSizePolicy, QWidget

from rooflab.core.report.explain import Line
from rooflab.core.report.units import keep_together
from rooflab.gui.state.recompute import Frame

_BOUND_STYLE = {
    "memory": "background:#e07b00;color:white;border-radius:3px;padding:0 4px;",
    "compute": "background:#1a9a50;color:white;border-radius:3px;padding:0 4px;",
}
#: the value column's widest, in characters of its (bold) font: "(24 GiB) per device" on one line
VALUE_CHARS = 20
#: below this share of the panel's width beside the name and the value, sentences go under their
#: row; back beside them above ``SIDE_BY_SIDE`` (the gap keeps a scroll bar's coming and going
#: from flipping the layout to and fro)
STACK_BELOW, SIDE_BY_SIDE = 0.45, 0.5


class NumbersPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(8, 6, 8, 6)
        self._grid.setHorizontalSpacing(10)
        self._grid.setVerticalSpacing(4)
        self._grid.setColumnStretch(3, 1)
        self._grid.setAlignment(Qt.AlignmentFlag.AlignTop)     # a few rows stay together at the top
        self._rows: dict[str, tuple[QLabel, QLabel, QLabel, QLabel]] = {}
        self.lines: list[Line] = []
        self.stacked = False             # sentences under their rows (a narrow panel)

    def show_frame(self, frame: Frame) -> None:
        self.lines = frame.lines           # the one answer's rows (``app.figures.Figures.lines``)
        wanted = [line.key for line in self.lines]
        for key in [k for k in self._rows if k not in wanted]:
            for label in self._rows.pop(key):
                self._grid.removeWidget(label)
                label.hide()             # at once: deleted later, it stayed painted over the rows after it
                label.deleteLater()
        for line in self.lines:
            labels = self._rows.get(line.key)
            if labels is None:
                labels = self._rows[line.key] = self._make_row()
            name, value, bound, sentence = labels
            name.setText(line.label)
            value.setText(f"<b>{keep_together(line.value)}</b>")
            # as wide as the value on one line, up to the cap (a wrapping label's own hint is narrower)
            value.setMinimumWidth(min(self.value_width(), self._bold_metrics().horizontalAdvance(line.value) + 2))
            bound.setText(line.bound)
            bound.setStyleSheet(_BOUND_STYLE.get(line.bound, ""))
            bound.setToolTip(f"The {line.bound} clock is the slower one." if line.bound else "")
            bound.setVisible(bool(line.bound))
            sentence.setText(keep_together(line.sentence))
            for label in (name, value, sentence):
                label.setToolTip(line.tooltip)
            for label in labels:
                label.setProperty("guide_topic", line.key)       # F1 over the row opens its part of the guide
        self._arrange(self._wants_stacked(self.width()))

    def value_text(self, key: str) -> str:
        """The value shown for ``key`` (plain text), for tests and the report sheet."""
        for line in self.lines:
            if line.key == key:
                return line.value
        raise KeyError(key)

    def value_width(self) -> int:
        """The value column's widest, px (``VALUE_CHARS`` of the bold font)."""
        return self._bold_metrics().horizontalAdvance("x" * VALUE_CHARS)

    def _bold_metrics(self) -> QFontMetrics:
        font = QFont(self.font())
        font.setBold(True)
        return QFontMetrics(font)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        stacked = self._wants_stacked(event.size().width())
        if stacked != self.stacked:
            self._arrange(stacked)

    def _wants_stacked(self, width: int) -> bool:
        """Whether, at ``width`` px, the sentences would keep too little of it beside the name,
        the value and the bound (see ``STACK_BELOW``)."""
        if not self._rows or width <= 0:
            return self.stacked
        name = max(row[0].sizeHint().width() for row in self._rows.values())
        value = min(self.value_width(), max(row[1].sizeHint().width() for row in self._rows.values()))
        bound = max((row[2].sizeHint().width() for row in self._rows.values() if not row[2].isHidden()), default=0)
        margins = self._grid.contentsMargins()
        beside = width - margins.left() - margins.right() - name - value - bound - 3 * self._grid.horizontalSpacing()
        share = beside / width
        return share < (SIDE_BY_SIDE if self.stacked else STACK_BELOW)

    def _arrange(self, stacked: bool) -> None:
        """Place every row's labels in the grid: side by side, or each sentence under its row."""
        self.stacked = stacked
        for index, line in enumerate(self.lines):
            name, value, bound, sentence = self._rows[line.key]
            row = 2 * index if stacked else index
            # re-placing keeps the order right when rows come and go
            for column, label in enumerate((name, value, bound)):
                self._grid.addWidget(label, row, column, Qt.AlignmentFlag.AlignVCenter)
            if stacked:
                self._grid.addWidget(sentence, row + 1, 0, 1, 4)
                sentence.setContentsMargins(16, 0, 0, 6)
            else:
                self._grid.addWidget(sentence, row, 3, Qt.AlignmentFlag.AlignVCenter)
                sentence.setContentsMargins(0, 0, 0, 0)

    def _make_row(self) -> tuple[QLabel, QLabel, QLabel, QLabel]:
        name, value, bound, sentence = QLabel(), QLabel(), QLabel(), QLabel()
        bound.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        value.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        value.setWordWrap(True)                  # a long value takes two lines, not the sentence's room
        value.setMaximumWidth(self.value_width())
        sentence.setWordWrap(True)
        sentence.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return name, value, bound, sentence
