""""What fits": every catalogue model and weight format ranked on the machine on screen, at the
workload on screen: how it fits (all on the GPU, experts on the CPU, part on the CPU, not at
all) and how fast it runs, in a table sortable by any column. The rows are ``rooflab fit``'s
(``report.fit_table``), each ``rooflab compare``'s row for that model; the columns are the
Compare table's. Double-click a row to open that model.

The ``FitController`` (``state.fit_rows``) ranks the rows on a worker thread; the panel only
shows what it is handed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QColor, QHideEvent, QShowEvent, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from rooflab.core.report.compare import CompareRow
from rooflab.core.report.fit_table import FitRow, fit_words
from rooflab.core.report.text import capacity_text
from rooflab.core.report.units import fmt
from rooflab.gui.panels.compare_table import SORT_ROLE
from rooflab.gui.plots.compare_plot import columns
from rooflab.gui.state.app_state import AppState
from rooflab.gui.state.fit_rows import FitController

#: the Compare table's columns this view leaves out: one machine, named above the table; "Fits", which
#: the Fit column says in words
DROPPED = frozenset({"Machine", "Fits"})
#: the Compare table's columns this view shows first, in this order: what a ranking is read by
FIRST = ("Model", "Weights", "Expected tok/s per seq", "tok/s per seq", "Expected TPOT", "TPOT", "TTFT",
         "Max context")
T = TypeVar("T")
FitColumn = tuple[str, Callable[[FitRow], float | str | None], Callable[[FitRow], str]]


class FitPanel(QWidget):
    """What can I run here? The ranked table; ``open_requested(key, weights)`` on a double-click
    (weights "" = the model's own format)."""

    open_requested = Signal(str, str)

    def __init__(self, state: AppState, parent: QWidget | None = None,
                 controller: FitController | None = None) -> None:
        super().__init__(parent)
        if controller is None:
            from rooflab.core.app.resolve import expected_machine

            controller = FitController(state, self, expected=expected_machine)
        self._state = state
        self.controller = controller
        self._columns = fit_columns(self._machine_words)
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.min_tps = QDoubleSpinBox()
        self.min_tps.setRange(0.0, 100_000.0)
        self.min_tps.setDecimals(1)
        self.min_tps.setSuffix(" tokens/s")
        self.min_tps.setSpecialValueText("no floor")
        self.min_tps.setToolTip("Usable speed: models slower than this (expected per sequence, else the ceiling) "
                                "rank after those that reach it; as rooflab fit --min-tps.")
        self.min_tps.setValue(controller.min_tps)
        self.message = QLabel()
        self.model = QStandardItemModel(0, len(self._columns), self)
        self.model.setHorizontalHeaderLabels([c[0] for c in self._columns])
        self.model.setSortRole(SORT_ROLE)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QTableView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setToolTip("Double-click a row to open that model.")
        self.table.verticalHeader().setVisible(False)          # the Rank column numbers the rows
        self._placeholder = False                             # the table holds the 'ranking' line, no rows
        self._build()
        self.min_tps.valueChanged.connect(self._on_min_tps_changed)
        self.table.doubleClicked.connect(self._on_table_double_clicked)
        self.controller.rows_ranked.connect(self._on_controller_rows_ranked)
        self.controller.progressed.connect(self._on_controller_progressed)
        self.controller.failed.connect(self._on_controller_failed)
        state.machine_changed.connect(self._on_state_changed)
        state.workload_changed.connect(self._on_state_changed)
        self._show_title()

    def _build(self) -> None:
        floor = QHBoxLayout()
        floor.addWidget(QLabel("At least"))
        floor.addWidget(self.min_tps)
        floor.addStretch(1)
        floor.addWidget(self.message)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.title)
        layout.addLayout(floor)
        layout.addWidget(self.table, 1)

    def _machine_words(self, row: FitRow) -> str:
        return fit_words(row, self._state.machine, self.controller.min_tps)

    # -- showing ----------------------------------------------------------------------------
    def _show_title(self) -> None:
        m, w = self._state.machine, self._state.workload
        second = f"; {m.offload_name or 'second memory'}: {capacity_text(m.offload_memory)} at " \
                 f"{fmt(m.offload_bandwidth, 'B/s')}" if m.has_offload else ""
        self.title.setText(
            f"<b>What can I run on {m.name}?</b> {capacity_text(m.memory)} at {fmt(m.bandwidth, 'B/s')}{second}. "
            f"Every catalogue model at prompt {w.prompt:,}, answer {w.answer:,}, context {w.context:,}, "
            f"batch {w.batch:,}, placed by auto-fit: the most capable (most parameters) that fit at the speed "
            f"below or faster first, then slower ones, then those paged from disk or that do not fit. The same "
            f"rows as <tt>rooflab fit</tt>.")

    def show_rows(self, rows: Sequence[FitRow]) -> None:
        """Fill the table with ``rows`` (ranked), keeping the sort the user chose."""
        header = self.table.horizontalHeader()
        sorting = header.sortIndicatorSection(), header.sortIndicatorOrder()
        self.table.setSortingEnabled(False)
        self.table.clearSpans()
        self._placeholder = False
        self.model.removeRows(0, self.model.rowCount())
        for index, row in enumerate(rows):
            items = []
            for title, value, text in self._columns:
                item = QStandardItem(text(row))
                v = value(row)
                item.setData(float("-inf") if v is None else v, SORT_ROLE)
                item.setData(index, Qt.ItemDataRole.UserRole)
                if title == "Fit" and not row.row.fits:
                    item.setForeground(QColor("#c62828"))
                if row.entry.named:                # the model on screen, not a catalogue entry
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                    item.setToolTip(f"The model on screen ({row.entry.key}), ranked among the catalogue's")
                items.append(item)
            self.model.appendRow(items)
        self.table.setSortingEnabled(True)
        if sorting[0] > 0:
            self.table.sortByColumn(*sorting)
        else:
            self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)     # by rank
        self.message.setText(f"{len(rows):,} rows")

    def row_at(self, view_row: int) -> FitRow | None:
        """The ranked row shown at ``view_row`` (whatever the sort)."""
        item = self.model.item(view_row, 0)
        if item is None or self._placeholder:
            return None
        index = int(item.data(Qt.ItemDataRole.UserRole))
        rows = self.controller.rows
        return rows[index] if 0 <= index < len(rows) else None

    # -- slots ------------------------------------------------------------------------------
    def _on_controller_rows_ranked(self, rows: list[FitRow]) -> None:
        self._show_title()
        self.show_rows(rows)

    def _on_controller_progressed(self, message: str) -> None:
        self.message.setText(f"Ranking… {message}")
        if self.model.rowCount() == 0 or self._placeholder:
            self._show_placeholder(f"Ranking the catalogue on {self._state.machine.name}… {message}")

    def _show_placeholder(self, text: str) -> None:
        """One line across the table while the first ranking runs (nothing ranked to keep yet),
        so the tab never stands blank; the ranked rows replace it."""
        self.table.setSortingEnabled(False)
        self.model.removeRows(0, self.model.rowCount())
        item = QStandardItem(text)
        item.setForeground(QColor("#777777"))
        self.model.appendRow([item])
        self.table.setSpan(0, 0, 1, self.model.columnCount())
        self._placeholder = True

    def _on_controller_failed(self, message: str) -> None:
        self.message.setText(f"Cannot rank: {message}")

    def _on_state_changed(self, _value: object) -> None:
        self._show_title()

    def _on_min_tps_changed(self, value: float) -> None:
        self.controller.set_min_tps(value)

    def _on_table_double_clicked(self, index: QModelIndex) -> None:
        row = self.row_at(index.row())
        if row is not None:
            self.open_requested.emit(row.entry.key, row.entry.weights or "")

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        self.controller.set_active(True)

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802 - Qt API
        super().hideEvent(event)
        self.controller.set_active(False)


def fit_columns(words: Callable[[FitRow], str]) -> list[FitColumn]:
    """Rank and how it fits (``words`` of a row), then the Compare table's columns (those a
    ranking is read by first; not the machine or "Fits"), each reading the row's
    ``report.compare`` row."""
    out: list[FitColumn] = [("Rank", lambda f: float(f.rank), lambda f: str(f.rank)),
                            ("Fit", lambda f: float(f.rank), words)]
    compare = columns()
    order = sorted((c for c in compare if c[0] not in DROPPED),
                   key=lambda c: FIRST.index(c[0]) if c[0] in FIRST else len(FIRST) + compare.index(c))
    for title, value, text in order:
        out.append((title, _of_row(value), _of_row(text)))
    return out


def _of_row(get: Callable[[CompareRow], T]) -> Callable[[FitRow], T]:
    return lambda f: get(f.row)
