"""The Compare view: the pinned series as a table, one ``report.compare`` row each, at the
workload and placement each was pinned with (what its curves on every chart show), sortable by
any column, and one column drawn per row on a chart with a log-scale option. Pins and rows are
one set: "Pin current" (Ctrl+P), the Compare panel's list and this table all pin and unpin the
same series; "Pin on machine" pins the current model on a preset placed by auto-fit. "Save…"
writes compare.csv and compare.png (its title and workload above the chart).

The ``CompareController`` (``state.compare_rows``) owns the rows; the panel and the chart only
show what they are handed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QHideEvent, QIcon, QPixmap, QShowEvent, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from rooflab.core.errors import ReportError
from rooflab.core.files.atomic import write_atomic
from rooflab.core.report.compare import compare_csv
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload
from rooflab.gui.plots.compare_plot import PLOTTABLE, CompareRowsPlot, columns, write_compare_png
from rooflab.gui.state.app_state import AppState
from rooflab.gui.state.compare_rows import CompareController
from rooflab.gui.widgets.theme import LIGHT, Theme

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
SERIES = "Series"           # the first column: the series as the charts' legends name it
SERIES_WIDTH = 300          # px: the Series column at most; its names wrap, one part a line
EMPTY = ("Nothing pinned yet. Pin current (Ctrl+P) pins what is on screen; Pin on machine pins the current "
         "model on another machine. Every pinned series is drawn on every chart and listed here.")


def workload_text(w: Workload) -> str:
    """"prompt 2,048, answer 256, context 0, batch 1, f16 cache": a row's workload in a heading."""
    return f"prompt {w.prompt:,}, answer {w.answer:,}, context {w.context:,}, batch {w.batch:,}, {w.kv_type} cache"


def _swatch(colour: str) -> QIcon:
    pixmap = QPixmap(12, 12)
    pixmap.fill(QColor(colour))
    return QIcon(pixmap)


class CompareTablePanel(QWidget):
    """The Compare tab: buttons, the sortable table of pinned series, the chart of one column."""

    def __init__(self, state: AppState, theme: Theme = LIGHT, parent: QWidget | None = None,
                 controller: CompareController | None = None,
                 machines: Sequence[MachineProfile] | None = None) -> None:
        super().__init__(parent)
        from rooflab.core.app.resolve import expected_machine
        from rooflab.core.io.presets import list_presets

        self._state = state
        self._theme = theme
        self.controller = controller or CompareController(state, self, expected=expected_machine)
        self.controller.set_active(False)          # until shown: a row prices a placement search
        machines = list_presets() if machines is None else machines
        self._columns = columns()
        self.add_button = QPushButton("Pin current")
        self.add_button.setToolTip("Pin the model, machine, workload and placement on screen (Ctrl+P): a row here "
                                   "and a series on every chart.")
        self.machine_picker = QComboBox()
        for m in machines:
            self.machine_picker.addItem(m.name, m)
        self.add_machine_button = QPushButton("Pin on machine")
        self.add_machine_button.setToolTip("Pin the current model on the machine picked beside, at the workload on "
                                           "screen, placed by auto-fit.")
        self.remove_button = QPushButton("Unpin")
        self.clear_button = QPushButton("Clear")
        self.column_picker = QComboBox()
        self.column_picker.addItems(list(PLOTTABLE))
        self.log_check = QCheckBox("Log scale")
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.model = QStandardItemModel(0, len(self._columns) + 1, self)
        self.model.setHorizontalHeaderLabels([SERIES, *(c[0] for c in self._columns)])
        self.model.setSortRole(SORT_ROLE)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)     # pin order until sorted
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QTableView.EditTrigger.NoEditTriggers)
        # sized to the names and figures (``_fit_columns``), then the user's to widen: left to
        # ResizeToContents, rows filled while the tab was hidden kept the headers' widths, and
        # the names read "Qwe… Q4_…", "NVIDIA GeForce …"
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.table.verticalHeader().setVisible(False)          # the Series column names the rows
        self.plot = CompareRowsPlot(theme)
        self._build()
        self.add_button.clicked.connect(self._on_add_button_clicked)
        self.add_machine_button.clicked.connect(self._on_add_machine_button_clicked)
        self.remove_button.clicked.connect(self._on_remove_button_clicked)
        self.clear_button.clicked.connect(self._on_clear_button_clicked)
        self.column_picker.currentIndexChanged.connect(self._on_column_picker_changed)
        self.log_check.toggled.connect(self._on_log_check_toggled)
        self.controller.rows_computed.connect(self._on_controller_rows_computed)
        self.controller.failed.connect(self._on_controller_failed)
        self._show_rows()

    def _build(self) -> None:
        # two rows, and pickers that shrink to a few words: the tab must fit a 1280-pixel window
        for picker in (self.machine_picker, self.column_picker):
            picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            picker.setMinimumContentsLength(14)
        rows = QVBoxLayout()
        buttons, plotting = QHBoxLayout(), QHBoxLayout()
        for w in (self.add_button, self.machine_picker, self.add_machine_button):
            buttons.addWidget(w)
        buttons.addStretch(1)
        for w in (self.remove_button, self.clear_button):
            plotting.addWidget(w)
        plotting.addStretch(1)
        plotting.addWidget(QLabel("Plot"))
        plotting.addWidget(self.column_picker)
        plotting.addWidget(self.log_check)
        rows.addLayout(buttons)
        rows.addLayout(plotting)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.plot)
        split.setSizes([300, 260])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(rows)
        layout.addWidget(self.message)
        layout.addWidget(split, 1)

    def apply_theme(self, theme: Theme) -> None:
        """The chart and the series' swatches in ``theme``'s colours (the table follows the palette)."""
        self._theme = theme
        self.plot.apply_theme(theme)
        self._show_rows()

    # -- showing ----------------------------------------------------------------------------
    def colours(self, theme: Theme | None = None) -> list[str]:
        """Each row's series colour in ``theme`` (the window's), as the charts draw that pinned series."""
        series = (theme or self._theme).series
        return [series[p.pin_id % len(series)] for p in self.controller.pins]

    def heading(self) -> list[str]:
        """What the rows were worked out at: one workload for all, or each row's."""
        c = self.controller
        workloads = [p.scenario.workload for p in c.pins]
        if workloads and all(w == workloads[0] for w in workloads):
            return [f"{len(workloads):,} pinned series at {workload_text(workloads[0])}; SI figures, GB = 10^9 bytes"]
        return [f"{len(workloads):,} pinned series, each at its own workload:",
                *(f"  {label}: {workload_text(w)}" for label, w in zip(c.labels, workloads, strict=True))]

    def _show_rows(self) -> None:
        rows, labels, colours = self.controller.rows, self.controller.labels, self.colours()
        header = self.table.horizontalHeader()
        sorting = header.sortIndicatorSection(), header.sortIndicatorOrder()
        self.table.setSortingEnabled(False)         # fill in insertion order, then sort again
        self.model.removeRows(0, self.model.rowCount())
        for index, row in enumerate(rows):
            series = QStandardItem(_swatch(colours[index]), labels[index])
            series.setData(labels[index], SORT_ROLE)
            items = [series]
            for title, value, text in self._columns:
                item = QStandardItem(text(row))
                v = value(row)
                item.setData(float("-inf") if v is None else v, SORT_ROLE)
                if title == "Fits" and not row.fits:
                    item.setForeground(QColor(self._theme.current["limit"]))
                items.append(item)
            for item in items:
                item.setData(index, Qt.ItemDataRole.UserRole)      # the row's place in the controller
            self.model.appendRow(items)
        self.table.setSortingEnabled(True)
        if sorting[0] >= 0:
            self.table.sortByColumn(*sorting)
        self._fit_columns()
        self.message.setText(" ".join(self.heading()) if rows else EMPTY)
        self._plot()
        self.remove_button.setEnabled(bool(rows))
        self.clear_button.setEnabled(bool(rows))

    def _fit_columns(self) -> None:
        """Every column as wide as its widest cell, the Series column at most ``SERIES_WIDTH``
        (its names wrap at their " · " parts), each row as tall as its cells' lines."""
        self.table.resizeColumnsToContents()
        if self.table.columnWidth(0) > SERIES_WIDTH:
            self.table.setColumnWidth(0, SERIES_WIDTH)
        self.table.resizeRowsToContents()

    def _plot(self) -> None:
        c = self.controller
        title = self.column_picker.currentText()
        getter = next(col[1] for col in self._columns if col[0] == title)
        values = [getter(r) for r in c.rows]
        self.plot.show_values(c.labels, [v if isinstance(v, float) else None for v in values], title,
                              self.log_check.isChecked(), self.colours())

    # -- slots ------------------------------------------------------------------------------
    def _on_add_button_clicked(self) -> None:
        self.controller.add_current()

    def _on_add_machine_button_clicked(self) -> None:
        machine = self.machine_picker.currentData()
        if isinstance(machine, MachineProfile):
            self.controller.add(self._state.model, machine)

    def _on_remove_button_clicked(self) -> None:
        index = self.table.currentIndex()
        if not index.isValid():
            index = self.model.index(self.model.rowCount() - 1, 0)
        row = self.model.item(index.row(), 0)
        if row is not None:
            self.controller.remove(int(row.data(Qt.ItemDataRole.UserRole)))

    def _on_clear_button_clicked(self) -> None:
        self.controller.clear()

    def _on_column_picker_changed(self, _index: int) -> None:
        self._plot()

    def _on_log_check_toggled(self, _checked: bool) -> None:
        self._plot()

    def _on_controller_rows_computed(self, _rows: object) -> None:
        self._show_rows()

    def _on_controller_failed(self, message: str) -> None:
        self.message.setText(f"Cannot compare: {message}")

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        self.controller.set_active(True)
        self._fit_columns()                 # a hidden table's cells may not have been measured

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802 - Qt API
        super().hideEvent(event)
        self.controller.set_active(False)

    def save(self, folder: str | Path) -> tuple[Path, Path]:
        """Write compare.csv and compare.png (the chart as shown, with its title and workload)."""
        self.controller.set_active(True)            # series pinned while hidden: work them out first
        self.controller.set_active(self.isVisible())
        out = Path(folder).expanduser()
        csv_path = out / "compare.csv"
        c = self.controller
        header = ["rooflab Compare table: the pinned series, each placed and at the workload it was pinned with",
                  *self.heading()]
        try:
            write_atomic(csv_path, compare_csv(c.rows, header))
        except OSError as exc:
            raise ReportError(f"{out}: cannot write the comparison there ({exc.strerror or exc})") from exc
        png_path = write_compare_png(out / "compare.png", c.rows, self.heading(),
                                     column=self.column_picker.currentText(), log=self.log_check.isChecked(),
                                     labels=c.labels, colours=self.colours(LIGHT))     # the image is light
        return csv_path, png_path
