"""The Compare view: model x machine x weight-format rows (``report.compare``) at the workload on
screen, in a table sortable by any column, and one column drawn per row on a plot with a
log-scale option. Rows come from what is on screen ("Add current": placed as the Workload tab
places it, by hand or on several devices) or the current model on another preset ("Add on
machine": auto-fit); "Save…" writes compare.csv and compare.png.

The ``CompareController`` (``compare_controller``) owns the rows and recomputes them; the
panel and the plot only show what they are handed."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QBuffer, QIODevice, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QHideEvent,
    QImage,
    QPainter,
    QShowEvent,
    QStandardItem,
    QStandardItemModel,
)
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
from rooflab.core.report.compare import DEPTHS, CompareRow, compare_csv, distinguishing_labels, row_depths
from rooflab.core.values.machine import MachineProfile
from rooflab.gui.state.app_state import AppState
from rooflab.gui.state.compare_rows import CompareController
from rooflab.gui.widgets.theme import LIGHT, Theme

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
PNG_SIZE = QSize(1400, 900)

# (title, the row's value for sorting and plotting, its text); None: the row has no figure
Column = tuple[str, Callable[[CompareRow], float | str | None], Callable[[CompareRow], str]]


def _ms(x: float | None) -> str:
    if x is None:
        return ""
    return f"{x * 1e3:,.1f} ms" if x < 1 else f"{x:,.2f} s"


def _num(x: float | None, digits: int = 1) -> str:
    return "" if x is None else f"{x:,.{digits}f}"


def _depth(i: int) -> Callable[[CompareRow], float | None]:
    return lambda r: r.decode_rates[i][1] if i < len(r.decode_rates) else None


def _depth_text(i: int) -> Callable[[CompareRow], str]:
    get = _depth(i)
    return lambda r: _num(get(r))


def columns(depths: Sequence[int] = DEPTHS) -> list[Column]:
    """The table's columns, in order (GB = 10^9 bytes)."""
    cols: list[Column] = [
        ("Model", lambda r: r.model, lambda r: r.model),
        ("Machine", lambda r: r.machine, lambda r: r.machine),
        ("Weights", lambda r: r.weights, lambda r: r.weights),
        ("Weights GB", lambda r: r.weight_bytes, lambda r: _num(r.weight_bytes / 1e9)),
        ("KV GB", lambda r: r.kv_bytes, lambda r: _num(r.kv_bytes / 1e9, 2)),
        ("Fits", lambda r: "yes" if r.fits else "no", lambda r: "yes" if r.fits else "NO"),
        ("TTFT", lambda r: r.ttft, lambda r: _ms(r.ttft)),
        ("TPOT", lambda r: r.tpot, lambda r: _ms(r.tpot)),
        ("Expected TPOT", lambda r: r.expected_tpot, lambda r: _ms(r.expected_tpot)),
    ]
    for i, d in enumerate(depths):
        cols.append((f"tok/s @{d:,}", _depth(i), _depth_text(i)))
    cols += [
        ("Max context", lambda r: float(r.largest_context) if r.fits else None,
         lambda r: f"{r.largest_context:,}" if r.fits else ""),
        ("tok/s per seq", lambda r: r.per_sequence, lambda r: _num(r.per_sequence)),
        ("tok/s total", lambda r: r.total, lambda r: _num(r.total)),
        ("Placement", lambda r: r.placement, lambda r: r.placement + (f" ({r.flags})" if r.flags else "")),
    ]
    return cols


PLOTTABLE = ("tok/s per seq", "tok/s total", "TPOT", "TTFT", "Max context", "Weights GB")


class CompareRowsPlot(pg.PlotWidget):
    """One column's value for each row: a point per row on its own line, rows top to bottom,
    each named on the left by what tells it apart from the others (the value runs along x, so
    long names stay readable and a log scale applies to the value)."""

    def __init__(self, theme: Theme = LIGHT, parent: QWidget | None = None) -> None:
        super().__init__(parent=parent, background=theme.background)
        self._theme = theme
        self.showGrid(x=True, y=False, alpha=theme.grid_alpha)
        self.points = pg.PlotDataItem([], [], pen=None, symbol="o", symbolSize=11,
                                      symbolBrush=theme.current["main"], symbolPen=None)
        self.addItem(self.points)
        self.getViewBox().invertY(True)
        self.shown: tuple[list[str], list[float]] = ([], [])

    def show_values(self, labels: Sequence[str], values: Sequence[float | None], title: str, log: bool) -> None:
        """Draw ``values`` (None or, on a log axis, <= 0: left out) against the row labels."""
        keep = [(i, float(v)) for i, v in enumerate(values)
                if v is not None and math.isfinite(v) and (v > 0 or not log)]
        self.setLogMode(x=log, y=False)
        self.points.setData([v for _, v in keep], [i for i, _ in keep])
        axis = self.getAxis("left")
        axis.setTicks([[(i, label) for i, label in enumerate(labels)]])
        # pyqtgraph widens a y axis for numbers, not for names: make room for the longest
        metrics = QFontMetrics(axis.style.get("tickFont") or self.font())
        axis.setWidth(max((metrics.horizontalAdvance(label) for label in labels), default=30) + 16)
        self.setLabel("bottom", title)
        self.setYRange(-0.5, max(len(labels) - 0.5, 0.5), padding=0)
        self.shown = ([labels[i] for i, _ in keep], [v for _, v in keep])


class CompareTablePanel(QWidget):
    """The Compare tab: buttons, the sortable table, the plot of one column."""

    def __init__(self, state: AppState, theme: Theme = LIGHT, parent: QWidget | None = None,
                 controller: CompareController | None = None,
                 machines: Sequence[MachineProfile] | None = None) -> None:
        super().__init__(parent)
        from rooflab.core.cli.compare import expected_machine
        from rooflab.core.io.presets import list_presets

        self._state = state
        self.controller = controller or CompareController(state, self, expected=expected_machine)
        self.controller.set_active(False)          # until shown: a row prices a placement search
        machines = list_presets() if machines is None else machines
        self._columns = columns()
        self.add_button = QPushButton("Add current")
        self.add_button.setToolTip("Add the model, machine, weights and placement on screen as a row.")
        self.machine_picker = QComboBox()
        for m in machines:
            self.machine_picker.addItem(m.name, m)
        self.add_machine_button = QPushButton("Add on machine")
        self.add_machine_button.setToolTip("Add the current model on the machine picked beside, placed by "
                                           "auto-fit.")
        self.remove_button = QPushButton("Remove")
        self.clear_button = QPushButton("Clear")
        self.column_picker = QComboBox()
        self.column_picker.addItems(list(PLOTTABLE))
        self.log_check = QCheckBox("Log scale")
        self.message = QLabel()
        self.model = QStandardItemModel(0, len(self._columns), self)
        self.model.setHorizontalHeaderLabels([c[0] for c in self._columns])
        self.model.setSortRole(SORT_ROLE)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
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
        self._show_rows(self.controller.rows)

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

    # -- showing ----------------------------------------------------------------------------
    def _show_rows(self, rows: Sequence[CompareRow]) -> None:
        sorting = self.table.horizontalHeader().sortIndicatorSection(), \
            self.table.horizontalHeader().sortIndicatorOrder()
        self.table.setSortingEnabled(False)         # fill in insertion order, then sort again
        self.model.removeRows(0, self.model.rowCount())
        for index, row in enumerate(rows):
            items = []
            for title, value, text in self._columns:
                item = QStandardItem(text(row))
                v = value(row)
                item.setData(float("-inf") if v is None else v, SORT_ROLE)
                item.setData(index, Qt.ItemDataRole.UserRole)      # the row's place in the controller
                item.setEditable(False)
                if title == "Fits" and not row.fits:
                    item.setForeground(QColor("#c62828"))
                items.append(item)
            self.model.appendRow(items)
        self.table.setSortingEnabled(True)
        if sorting[0] >= 0:
            self.table.sortByColumn(*sorting)
        self.message.setText("" if rows else "No rows yet: Add current, or add the current model on another "
                                             "machine.")
        self._plot()
        self.remove_button.setEnabled(bool(rows))
        self.clear_button.setEnabled(bool(rows))

    def _plot(self) -> None:
        rows = self.controller.rows
        title = self.column_picker.currentText()
        getter = next(c[1] for c in self._columns if c[0] == title)
        values = [getter(r) for r in rows]
        numbers = [v if isinstance(v, float) else None for v in values]
        self.plot.show_values(distinguishing_labels(rows) if rows else [], numbers, title, self.log_check.isChecked())

    # -- slots ------------------------------------------------------------------------------
    def _on_add_button_clicked(self) -> None:
        self.controller.add_current()

    def _on_add_machine_button_clicked(self) -> None:
        machine = self.machine_picker.currentData()
        if isinstance(machine, MachineProfile):
            self.controller.add(self._state.model, machine, self._state.model_weights)

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

    def _on_controller_rows_computed(self, rows: list[CompareRow]) -> None:
        self._show_rows(rows)

    def _on_controller_failed(self, message: str) -> None:
        self.message.setText(f"Cannot compare: {message}")

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        self.controller.set_active(True)

    def hideEvent(self, event: QHideEvent) -> None:  # noqa: N802 - Qt API
        super().hideEvent(event)
        self.controller.set_active(False)

    def save(self, folder: str | Path) -> tuple[Path, Path]:
        """Write compare.csv and compare.png (the plot as shown) into ``folder``."""
        out = Path(folder).expanduser()
        csv_path = out / "compare.csv"
        try:
            write_atomic(csv_path, compare_csv(self.controller.rows))
        except OSError as exc:
            raise ReportError(f"{out}: cannot write the comparison there ({exc.strerror or exc})") from exc
        png_path = write_compare_png(out / "compare.png", self.controller.rows,
                                     column=self.column_picker.currentText(), log=self.log_check.isChecked())
        return csv_path, png_path


def compare_image(rows: Sequence[CompareRow], *, column: str = PLOTTABLE[0], log: bool = False,
                  size: QSize = PNG_SIZE) -> QImage:
    """The comparison as one light-themed image: the plot of ``column`` above the table as text
    (the image widens to the table)."""
    from rooflab.core.cli.compare import compare_text

    lines = compare_text(rows, row_depths(rows)).splitlines()      # the depths the rows have (issue 15)
    font = QFont("monospace")
    font.setStyleHint(QFont.StyleHint.Monospace)
    font.setPixelSize(13)
    metrics = QFontMetrics(font)
    width = max(size.width(), max((metrics.horizontalAdvance(line) for line in lines), default=0) + 32)
    plot_height = max(size.height() // 2, 60 + 28 * len(rows))
    plot = CompareRowsPlot(LIGHT)
    try:
        getter = next(c[1] for c in columns(row_depths(rows)) if c[0] == column)
        values = [getter(r) for r in rows]
        plot.show_values(distinguishing_labels(rows) if rows else [],
                         [v if isinstance(v, float) else None for v in values], column, log)
        plot.resize(QSize(width, plot_height))
        plot.grab()                                  # let the axes learn their widths, then keep
        chart = plot.grab().toImage()
    finally:
        plot.deleteLater()
    line_h = metrics.height() + 4
    image = QImage(QSize(width, chart.height() + 40 + line_h * len(lines)), QImage.Format.Format_ARGB32)
    image.fill(QColor(LIGHT.background))
    painter = QPainter(image)
    try:
        painter.drawImage(0, 0, chart)
        painter.setFont(font)
        painter.setPen(QColor(LIGHT.foreground))
        y = chart.height() + 24
        for line in lines:
            painter.drawText(16, y, line)
            y += line_h
    finally:
        painter.end()
    return image


def write_compare_png(path: str | Path, rows: Sequence[CompareRow], *, column: str = PLOTTABLE[0],
                      log: bool = False) -> Path:
    """``compare_image`` saved atomically as a PNG; ReportError (one line) when it cannot be."""
    target = Path(path).expanduser()
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not compare_image(rows, column=column, log=log).save(buffer, "PNG"):
        raise ReportError(f"{target}: could not encode the comparison as PNG")
    try:
        return write_atomic(target, bytes(buffer.data().data()))
    except OSError as exc:
        raise ReportError(f"{target}: cannot write the comparison ({exc.strerror or exc})") from exc
