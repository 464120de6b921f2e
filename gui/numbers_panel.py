"""The numbers panel: TTFT, TPOT, end to end, decode ceiling and the rest, each with the
clock that bounds it and one sentence saying why."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QSizePolicy, QWidget

from rooflab.gui.expected_lines import expected_lines, merged
from rooflab.gui.explain import Line, explain
from rooflab.gui.recompute import Frame

_BOUND_STYLE = {
    "memory": "background:#e07b00;color:white;border-radius:3px;padding:0 4px;",
    "compute": "background:#1a9a50;color:white;border-radius:3px;padding:0 4px;",
}


class NumbersPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(8, 6, 8, 6)
        self._grid.setHorizontalSpacing(10)
        self._grid.setVerticalSpacing(4)
        self._grid.setColumnStretch(3, 1)
        self._rows: dict[str, tuple[QLabel, QLabel, QLabel, QLabel]] = {}
        self.lines: list[Line] = []

    def show_frame(self, frame: Frame) -> None:
        self.lines = explain(frame.scenario, frame.summary)
        if frame.expected_figures is not None:
            self.lines = merged(self.lines, expected_lines(frame.scenario, frame.expected_figures, frame.stands_on))
        wanted = [line.key for line in self.lines]
        for key in [k for k in self._rows if k not in wanted]:
            for label in self._rows.pop(key):
                self._grid.removeWidget(label)
                label.deleteLater()
        for row, line in enumerate(self.lines):
            labels = self._rows.get(line.key)
            if labels is None:
                labels = self._rows[line.key] = self._make_row()
            for column, label in enumerate(labels):
                # re-placing keeps the order right when rows come and go
                self._grid.addWidget(label, row, column, Qt.AlignmentFlag.AlignVCenter)
            name, value, bound, sentence = labels
            name.setText(line.label)
            value.setText(f"<b>{line.value}</b>")
            bound.setText(line.bound)
            bound.setStyleSheet(_BOUND_STYLE.get(line.bound, ""))
            bound.setToolTip(f"The {line.bound} clock is the slower one." if line.bound else "")
            bound.setVisible(bool(line.bound))
            sentence.setText(line.sentence)
            for label in (name, value, sentence):
                label.setToolTip(line.tooltip)

    def value_text(self, key: str) -> str:
        """The value shown for ``key`` (plain text), for tests and the report sheet."""
        for line in self.lines:
            if line.key == key:
                return line.value
        raise KeyError(key)

    def _make_row(self) -> tuple[QLabel, QLabel, QLabel, QLabel]:
        name, value, bound, sentence = QLabel(), QLabel(), QLabel(), QLabel()
        bound.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        value.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        sentence.setWordWrap(True)
        sentence.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return name, value, bound, sentence
