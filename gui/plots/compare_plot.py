"""The Compare table's columns and its chart: one column's value for each row, a point per row on its own line,
rows named on the left as the charts' legends name them (the value runs along x, so long names
stay readable and a log scale applies to the value), each point in its series' colour, the axis
from 0. ``compare_image`` draws it with its title and workload above the table as text:
``compare.png``, from the window and from ``rooflab compare --out``."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QBuffer, QIODevice, QSize
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter
from PySide6.QtWidgets import QWidget

from rooflab.core.errors import ReportError
from rooflab.core.files.atomic import write_atomic
from rooflab.core.report.compare import DEPTHS, CompareRow, row_depths, row_labels
from rooflab.gui.widgets.theme import LIGHT, Theme

PNG_SIZE = QSize(1400, 900)
HEADROOM = 1.08             # the linear axis runs from 0 to this much past the largest value

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
        ("Expected TTFT", lambda r: r.expected_ttft, lambda r: _ms(r.expected_ttft)),
        ("Expected TPOT", lambda r: r.expected_tpot, lambda r: _ms(r.expected_tpot)),
        ("Expected tok/s per seq", lambda r: r.expected_per_sequence, lambda r: _num(r.expected_per_sequence)),
    ]
    for i, d in enumerate(depths):
        cols.append((f"tok/s @{d:,}", _depth(i), _depth_text(i)))
    cols += [
        ("Max context", lambda r: float(r.largest_context) if r.fits else None,
         lambda r: f"{r.largest_context:,}" if r.fits else ""),
        ("tok/s per seq", lambda r: r.per_sequence, lambda r: _num(r.per_sequence)),
        ("tok/s total", lambda r: r.total, lambda r: _num(r.total)),
        ("Expected tok/s total", lambda r: r.expected_total, lambda r: _num(r.expected_total)),
        ("Placement", lambda r: r.placement, lambda r: r.placement + (f" ({r.flags})" if r.flags else "")),
    ]
    return cols


PLOTTABLE = ("tok/s per seq", "Expected tok/s per seq", "tok/s total", "Expected tok/s total", "TPOT",
             "Expected TPOT", "TTFT", "Expected TTFT", "Max context", "Weights GB")


class CompareRowsPlot(pg.PlotWidget):  # type: ignore[misc]  # pyqtgraph is untyped
    """One value per row against the rows' names; ``shown`` holds what was drawn (names,
    values) for tests and exports."""

    def __init__(self, theme: Theme = LIGHT, parent: QWidget | None = None) -> None:
        super().__init__(parent=parent, background=theme.background)
        self.points = pg.ScatterPlotItem(size=11, pen=None)
        self.addItem(self.points)
        self.getViewBox().invertY(True)
        self.shown: tuple[list[str], list[float]] = ([], [])
        self._last: tuple[Sequence[str], Sequence[float | None], str, bool, Sequence[str] | None] = \
            ([], [], "", False, None)
        self.theme = theme
        self.apply_theme(theme)

    def apply_theme(self, theme: Theme) -> None:
        """Background, axes, grid and points in ``theme``'s colours (the dark theme too)."""
        self.theme = theme
        self.setBackground(theme.background)
        for name in ("left", "bottom"):
            axis = self.getAxis(name)
            axis.setPen(pg.mkPen(theme.foreground))
            axis.setTextPen(pg.mkPen(theme.foreground))
            axis.labelStyle = {"color": theme.foreground}
        self.showGrid(x=True, y=False, alpha=theme.grid_alpha)
        self.show_values(*self._last)

    def show_values(self, labels: Sequence[str], values: Sequence[float | None], title: str, log: bool,
                    colours: Sequence[str] | None = None) -> None:
        """Draw ``values`` (None or, on a log axis, <= 0: left out) against the row labels, each
        in its colour of ``colours`` (the theme's current colour without); a linear axis starts at 0."""
        self._last = (list(labels), list(values), title, log, None if colours is None else list(colours))
        keep = [(i, float(v)) for i, v in enumerate(values)
                if v is not None and math.isfinite(v) and (v > 0 or not log)]
        self.setLogMode(x=log, y=False)
        brushes = [pg.mkBrush(colours[i] if colours is not None else self.theme.current["main"]) for i, _ in keep]
        xs = [math.log10(v) if log else v for _, v in keep]
        self.points.setData(x=xs, y=[i for i, _ in keep], brush=brushes)
        axis = self.getAxis("left")
        axis.setTicks([[(i, label) for i, label in enumerate(labels)]])
        # pyqtgraph widens a y axis for numbers, not for names: make room for the longest
        metrics = QFontMetrics(axis.style.get("tickFont") or self.font())
        axis.setWidth(max((metrics.horizontalAdvance(label) for label in labels), default=30) + 16)
        self.setLabel("bottom", title, color=self.theme.foreground)
        self.setYRange(-0.5, max(len(labels) - 0.5, 0.5), padding=0)
        if log or not keep:
            self.enableAutoRange(x=True)
        else:                                   # from 0: a bar's length, not a zoom on the differences
            self.setXRange(0.0, max(v for _, v in keep) * HEADROOM or 1.0, padding=0)
        self.shown = ([labels[i] for i, _ in keep], [v for _, v in keep])


def compare_image(rows: Sequence[CompareRow], *, column: str, log: bool = False, heading: Sequence[str] = (),
                  labels: Sequence[str] | None = None, colours: Sequence[str] | None = None,
                  size: QSize = PNG_SIZE) -> QImage:
    """The comparison as one light image: its title (``column``) and ``heading`` lines (the
    workload), the plot of ``column``, then the table as text (the image widens to the table).
    ``labels``: the rows' names (default: ``report.compare.row_labels``)."""
    from rooflab.core.app.compare import compare_text

    lines = compare_text(rows, row_depths(rows)).splitlines()      # the depths the rows have (issue 15)
    font = QFont("monospace")
    font.setStyleHint(QFont.StyleHint.Monospace)
    font.setPixelSize(13)
    bold = QFont(font)
    bold.setPixelSize(17)
    bold.setBold(True)
    metrics = QFontMetrics(font)
    width = max(size.width(), max((metrics.horizontalAdvance(line) for line in [*lines, *heading]), default=0) + 32)
    plot_height = max(size.height() // 2, 60 + 28 * len(rows))
    plot = CompareRowsPlot(LIGHT)
    try:
        getter = next(c[1] for c in columns(row_depths(rows)) if c[0] == column)
        values = [getter(r) for r in rows]
        names = list(labels) if labels is not None else row_labels(rows)
        plot.show_values(names, [v if isinstance(v, float) else None for v in values], column, log, colours)
        plot.resize(QSize(width, plot_height))
        plot.grab()                                  # let the axes learn their widths, then keep
        chart = plot.grab().toImage()
    finally:
        plot.deleteLater()
    line_h = metrics.height() + 4
    top = 16 + QFontMetrics(bold).height() + line_h * len(heading) + 8
    image = QImage(QSize(width, top + chart.height() + 40 + line_h * len(lines)), QImage.Format.Format_ARGB32)
    image.fill(QColor(LIGHT.background))
    painter = QPainter(image)
    try:
        painter.setPen(QColor(LIGHT.foreground))
        painter.setFont(bold)
        painter.drawText(16, 16 + QFontMetrics(bold).ascent(), f"Compare: {column}")
        painter.setFont(font)
        y = 16 + QFontMetrics(bold).height() + metrics.ascent() + 4
        for line in heading:
            painter.drawText(16, y, line)
            y += line_h
        painter.drawImage(0, top, chart)
        y = top + chart.height() + 24
        for line in lines:
            painter.drawText(16, y, line)
            y += line_h
    finally:
        painter.end()
    return image


def write_compare_png(path: str | Path, rows: Sequence[CompareRow], heading: Sequence[str] = (), *,
                      column: str = PLOTTABLE[0], log: bool = False, labels: Sequence[str] | None = None,
                      colours: Sequence[str] | None = None) -> Path:
    """``compare_image`` saved atomically as a PNG; ReportError (one line) when it cannot be."""
    target = Path(path).expanduser()
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image = compare_image(rows, column=column, log=log, heading=heading, labels=labels, colours=colours)
    if not image.save(buffer, "PNG"):  # type: ignore[call-overload]  # the stubs say bytes; PySide6 takes str
        raise ReportError(f"{target}: could not encode the comparison as PNG")
    try:
        return write_atomic(target, bytes(buffer.data().data()))
    except OSError as exc:
        raise ReportError(f"{target}: cannot write the comparison ({exc.strerror or exc})") from exc
