"""Save a report: a PNG of each plot, one composed sheet (all plots and the numbers), a CSV of
every series drawn (predicted, pinned, measured), the summary and the tensor table, and the
Serving chart against concurrency and the request rate with its levels' percentiles (serving.csv).

Plots are rendered from light-themed twins at a fixed size, so a report looks the same from
the window (File > Save report) and from ``rooflab report`` (no window at all)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter, QTextDocument
from PySide6.QtWidgets import QDialog, QFileDialog, QMessageBox, QWidget

from rooflab.core import __version__
from rooflab.core.errors import ReportError
from rooflab.core.predict.ops_clocks import TimedOperation
from rooflab.core.report import curves_csv, header_lines, slug, summary_csv, tensors_csv, write_text
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.charts import CHART_TITLES, ROOFLINE
from rooflab.core.report.expected import expected_csv
from rooflab.core.report.explain import Line
from rooflab.core.report.ops_chart import OPS_PANEL, not_running, ops_roofline_chart
from rooflab.core.report.ops_table import ops_csv, scenario_operations
from rooflab.core.report.serving_chart import AXES, ServingFigures, chart_of
from rooflab.core.report.serving_table import serving_csv
from rooflab.core.report.units import keep_together
from rooflab.gui.plots.base import ChartPlot, DrawnSeries
from rooflab.gui.plots.roofline import MEASURED_OPS, MeasuredLayer, RooflinePlot
from rooflab.gui.plots.serving import ServingPlot
from rooflab.gui.state.recompute import Frame
from rooflab.gui.state.serving import serving_figures_of
from rooflab.gui.widgets.theme import LIGHT

PLOT_SIZE = QSize(1200, 800)
SHEET_COLUMNS = 2
NAME_LIMIT = 160          # characters of a series' key in its CSV's name (a file name takes 255 bytes)
FIT_FILE = "fit.txt"      # the Measure tab's read-out: the fit, its accuracy and the gap explained


@dataclass(frozen=True, slots=True)
class ReportFiles:
    folder: Path
    pngs: tuple[Path, ...]
    csvs: tuple[Path, ...]
    sheet: Path

    @property
    def all(self) -> tuple[Path, ...]:
        return (*self.pngs, self.sheet, *self.csvs)


class ReportFolderDialog(QFileDialog):
    """Pick the report's folder or type a new one: Qt's folder dialog refuses a folder that does
    not exist ("Directory not found"); this one offers to create it. Qt's own dialog, not the
    platform's: only it lets ``accept`` ask first."""

    def __init__(self, parent: QWidget | None, start: str | Path = "") -> None:
        super().__init__(parent, "Save report into folder")
        self.setFileMode(QFileDialog.FileMode.Directory)
        self.setOptions(QFileDialog.Option.ShowDirsOnly | QFileDialog.Option.DontUseNativeDialog)
        self.setLabelText(QFileDialog.DialogLabel.Accept, "Save here")
        target = Path(start).expanduser() if str(start) else Path.home()
        existing = next((p for p in (target, *target.parents) if p.is_dir()), Path.home())
        self.setDirectory(str(existing))
        if target != existing:
            # the last report's folder has gone: offer it again (relative: Qt reads an absolute
            # path to a missing file as relative to the dialog's folder)
            self.selectFile(str(target.relative_to(existing)))

    def chosen(self) -> Path | None:
        files = self.selectedFiles()
        return Path(files[0]).expanduser() if files and files[0] else None

    def accept(self) -> None:
        folder = self.chosen()
        if folder is not None and not folder.exists() and not offer_to_create(self, folder):
            return                              # stay open: the user may pick another
        super().accept()


def offer_to_create(parent: QWidget | None, folder: Path) -> bool:
    """Ask whether to create ``folder``; True once it exists. A refusal or a failure (shown
    to the user) leaves it absent and returns False."""
    answer = QMessageBox.question(parent, "Create folder?", f"{folder} does not exist. Create it?",
                                  QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                                  QMessageBox.StandardButton.Yes)
    if answer != QMessageBox.StandardButton.Yes:
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        QMessageBox.warning(parent, "Cannot create folder", f"{folder}: {exc.strerror or exc}")
        return False
    return True


def choose_report_folder(parent: QWidget | None, start: str | Path = "") -> Path | None:
    """The folder to save a report into, created if the user named a new one; None on Cancel."""
    dialog = ReportFolderDialog(parent, start)
    try:
        return dialog.chosen() if dialog.exec() == QDialog.DialogCode.Accepted else None
    finally:
        dialog.deleteLater()


def _scenario_for(series: DrawnSeries, frame: Frame) -> Scenario:
    for pinned, _charts in frame.pinned:
        if series.layer.key == f"pin:{pinned.pin_id}":
            return pinned.scenario
    return frame.scenario


def _csv_name(series: DrawnSeries) -> str:
    """"<chart>-<panel>-<layer>.csv": the layer's key, then its label unless the label already
    opens with the key ("expected, llama.cpp (published)" on the "expected" layer is named
    once: "decode-step-expected-llama.cpp-published.csv")."""
    layer = series.layer
    key, label = slug(layer.key, NAME_LIMIT), slug(layer.label, NAME_LIMIT)
    if layer.label in ("", layer.key) or layer.kind == "current" or layer.kind == "measured":
        # a measured series' key is its engine and settings in full ("measured:llama.cpp cuda t8
        # ngl99 fa kv-f16"): the name, whole (cut at 60 it lost its cache type: "...-fa-k.csv")
        who = key
    elif label == key or label.startswith(f"{key}-"):
        who = label
    else:
        who = slug(f"{layer.key}-{layer.label}", NAME_LIMIT)
    return f"{series.chart}-{series.panel}-{who}.csv"


Progressed = Callable[[str], None]          # told what a report is doing now ("drawing Memory")


def _quiet(_step: str) -> None:
    """A report written with nobody to tell (``rooflab report``)."""


def render_plots(plots: Sequence[ChartPlot], size: QSize = PLOT_SIZE,
                 progressed: Progressed = _quiet) -> dict[str, QImage]:
    """Each plot drawn afresh by a light-themed twin at ``size``."""
    images = {}
    for plot in plots:
        progressed(f"drawing {CHART_TITLES.get(plot.chart_key, plot.chart_key)}")
        twin = type(plot)(theme=LIGHT)
        try:
            twin.resize(size)
            plot.replay_on(twin)
            images[plot.chart_key] = twin.render_image(size)
        finally:
            twin.deleteLater()
    return images


def render_serving(figures: Sequence[ServingFigures], frame: Frame, size: QSize = PLOT_SIZE) -> dict[str, QImage]:
    """The Serving chart on each axis of ``figures``, drawn by a light-themed plot at ``size``:
    "serving" (against concurrency) and "serving-rate"."""
    images = {}
    for f in figures:
        plot = ServingPlot(theme=LIGHT)
        try:
            plot.resize(size)
            plot.set_charts(chart_of(f, frame.scenario.workload.batch), current_label=frame.scenario.label)
            images["serving" if f.axis == "concurrency" else "serving-rate"] = plot.render_image(size)
        finally:
            plot.deleteLater()
    return images


def render_operations(frame: Frame, operations: Sequence[TimedOperation], size: QSize = PLOT_SIZE,
                      measured: MeasuredLayer | None = None) -> dict[str, QImage]:
    """The roofline of the operations (``report.ops_chart``), drawn by a light-themed Roofline
    plot at ``size``, with the operations a run timed (``measured``: the window's, if any):
    "roofline-ops"."""
    plot = RooflinePlot(theme=LIGHT)
    try:
        plot.resize(size)
        chart = ops_roofline_chart(frame.scenario, operations)
        if not frame.summary.runs:               # nothing drawn as if it ran
            chart = not_running(chart, frame.charts[ROOFLINE].note)
        if measured is not None and frame.summary.runs:
            plot.set_measured(OPS_PANEL, measured[1], label=measured[0], key=MEASURED_OPS)
        plot.set_charts(chart, current_label=frame.scenario.label)
        return {"roofline-ops": plot.render_image(size)}
    finally:
        plot.deleteLater()


def plain_text(html: str) -> str:
    """Rich text as the plain text it shows."""
    doc = QTextDocument()
    doc.setHtml(html)
    return doc.toPlainText().strip() + "\n"


def same_mode(reference: Path, *paths: Path) -> None:
    """Give ``paths`` the mode ``reference`` has (files written atomically came out 0600 beside
    the report's 0644: one file mode for the whole report)."""
    mode = stat.S_IMODE(reference.stat().st_mode)
    for path in paths:
        os.chmod(path, mode)


def write_report(folder: str | Path, plots: Sequence[ChartPlot], frame: Frame,
                 size: QSize = PLOT_SIZE, *, fit: str = "", progressed: Progressed = _quiet) -> ReportFiles:
    """Write every report file into ``folder`` (created if needed); returns their paths. ``fit``:
    the Measure tab's read-out (rich text: the fit of the points on screen, its accuracy, the gap
    between them and the ceiling explained, whether it is an earlier run's), kept as ``fit.txt``.
    ``progressed`` is told each step as it starts ("drawing Memory", "12 files written, now
    decode.png"): seconds of drawing and some seventy files. Raises ReportError (one line naming
    the folder) when it cannot be written."""
    out = Path(folder).expanduser()
    try:
        return _write_files(out, plots, frame, size, fit, progressed)
    except OSError as exc:
        raise ReportError(f"{out}: cannot write the report there ({exc.strerror or exc})") from exc


def _write_files(out: Path, plots: Sequence[ChartPlot], frame: Frame, size: QSize, fit: str,
                 progressed: Progressed = _quiet) -> ReportFiles:
    out.mkdir(parents=True, exist_ok=True)
    images = render_plots(plots, size, progressed)
    serving = [f for f in (serving_figures_of(frame, axis) for axis in AXES) if f is not None]
    progressed("simulating and drawing Serving")
    images |= render_serving(serving, frame, size)
    progressed("drawing the operations")
    operations = scenario_operations(frame.scenario, frame.expected)
    roofline = next((p for p in plots if isinstance(p, RooflinePlot)), None)
    images |= render_operations(frame, operations, size, roofline.measured_operations() if roofline else None)
    written = 0

    def next_file(name: str) -> None:
        nonlocal written
        progressed(f"{written} files written, now {name}")
        written += 1

    pngs = []
    for key, image in images.items():
        path = out / f"{key}.png"
        next_file(path.name)
        if not image.save(str(path)):
            raise OSError(f"could not write {path.name}")
        pngs.append(path)
    csvs: list[Path] = []

    def keep(name: str, text: str) -> None:
        next_file(name)
        csvs.append(write_text(out / name, text))

    for plot in plots:
        for series in plot.drawn():
            sc = _scenario_for(series, frame)
            header = header_lines(sc, chart=plot.chart.title if plot.chart else series.chart, panel=series.panel,
                                  series=series.layer.label, series_kind=series.layer.kind)
            keep(_csv_name(series), curves_csv(series.curves, header))
    keep("summary.csv", summary_csv(frame.summary, header_lines(frame.scenario)))
    keep("tensors.csv", tensors_csv(frame.scenario.model, header_lines(frame.scenario)))
    keep("ops.csv", ops_csv(operations, header_lines(frame.scenario, chart="operations")))
    if serving:
        keep("serving.csv", serving_csv(serving, header_lines(frame.scenario, chart="Serving")))
    if frame.expected_figures is not None:
        sc = frame.scenario
        keep("expected.csv", expected_csv(sc.model, frame.expected_figures, sc.workload, header_lines(sc),
                                          frame.stands_on))
    if fit:
        keep(FIT_FILE, plain_text(fit))
    sheet = out / "sheet.png"
    next_file(sheet.name)
    if not compose_sheet(frame, images).save(str(sheet)):
        raise OSError(f"could not write {sheet.name}")
    return ReportFiles(folder=out, pngs=tuple(pngs), csvs=tuple(csvs), sheet=sheet)


def _title_block(frame: Frame) -> list[tuple[QFont, str]]:
    """The sheet's title lines and their fonts: the scenario, the request, the pins compared."""
    sc, w = frame.scenario, frame.scenario.workload
    big, small = QFont(), QFont()
    big.setPixelSize(34)
    big.setBold(True)
    small.setPixelSize(20)
    lines = [(big, sc.label), (small, f"prompt {w.prompt:,} · answer {w.answer:,} · context {w.context:,} · batch "
                                      f"{w.batch} · {w.kv_type} cache · rooflab {__version__} prediction (ceilings "
                                      "at the machine's efficiency)")]
    if frame.pinned:
        lines.append((small, "compared with: " + "; ".join(p.label for p, _ in frame.pinned)))
    return lines


def _wrapped_height(font: QFont, text: str, width: int) -> int:
    """Pixels ``text`` takes wrapped at word boundaries to ``width`` (a line drawn into a fixed
    box was cut mid-word)."""
    flags = int(Qt.AlignmentFlag.AlignLeft) | int(Qt.TextFlag.TextWordWrap)
    return QFontMetrics(font).boundingRect(QRect(0, 0, width, 100_000), flags, text).height()


def compose_sheet(frame: Frame, images: dict[str, QImage]) -> QImage:
    """One page: a title block with the scenario and the numbers, then every plot in a grid."""
    cell = next(iter(images.values())).size() if images else PLOT_SIZE
    rows = (len(images) + 1 + SHEET_COLUMNS - 1) // SHEET_COLUMNS      # +1: the numbers cell
    margin = 40
    width = SHEET_COLUMNS * cell.width() + (SHEET_COLUMNS + 1) * margin
    title = [(font, text, _wrapped_height(font, text, width - 2 * margin)) for font, text in _title_block(frame)]
    title_h = max(150, 20 + sum(h + 6 for _, _, h in title) + 24)
    height = title_h + rows * (cell.height() + margin) + margin
    # the numbers cell is the grid's last: it may run below its row, never drop a line
    numbers_top = title_h + (len(images) // SHEET_COLUMNS) * (cell.height() + margin)
    height = max(height, numbers_top + _numbers_height(_numbers_lines(frame), cell.width()) + margin)
    sheet = QImage(width, height, QImage.Format.Format_ARGB32)
    sheet.fill(QColor(LIGHT.background))
    painter = QPainter(sheet)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        painter.setPen(QColor(LIGHT.foreground))
        top = 20
        for font, text, h in title:
            painter.setFont(font)
            painter.drawText(QRect(margin, top, width - 2 * margin, h),
                             int(Qt.AlignmentFlag.AlignLeft) | int(Qt.TextFlag.TextWordWrap), text)
            top += h + 6
        cells = list(images.values())
        for i, image in enumerate(cells):
            x = margin + (i % SHEET_COLUMNS) * (cell.width() + margin)
            y = title_h + (i // SHEET_COLUMNS) * (cell.height() + margin)
            painter.drawImage(x, y, image)
        i = len(cells)
        x = margin + (i % SHEET_COLUMNS) * (cell.width() + margin)
        y = title_h + (i // SHEET_COLUMNS) * (cell.height() + margin)
        _draw_numbers(painter, frame, QRect(x, y, cell.width(), cell.height()))
    finally:
        painter.end()
    return sheet


NUMBERS_PX, NUMBERS_LINE, NUMBERS_GAP = 20, 26, 12     # the sheet's numbers: font, title line, gap


def _numbers_lines(frame: Frame) -> list[Line]:
    return frame.lines          # the numbers panel's rows, read from the same answer (``Figures.lines``)


def _sentence_rect(line: Line, left: int, top: int, width: int) -> tuple[str, QRect]:
    """A line's sentence (kept from breaking inside a figure: not "165 TFLOP/" then "s") and
    the rectangle it wraps into below its title."""
    font = QFont()
    font.setPixelSize(NUMBERS_PX)
    sentence = keep_together(line.sentence)
    rect = QFontMetrics(font).boundingRect(QRect(left + 16, top, width - 16, 100_000), Qt.TextFlag.TextWordWrap,
                                           sentence)
    return sentence, rect


def _numbers_height(lines: Sequence[Line], width: int) -> int:
    """Pixels the numbers take in a cell ``width`` wide: every line, none dropped."""
    y = 10
    for line in lines:
        y += NUMBERS_LINE
        y += _sentence_rect(line, 0, y, width)[1].height() + NUMBERS_GAP
    return y


def _draw_numbers(painter: QPainter, frame: Frame, box: QRect) -> None:
    """Every numbers-panel line, its title bold, its sentence wrapped under it (the sheet is
    made tall enough for them all: ``compose_sheet``)."""
    font = QFont()
    font.setPixelSize(NUMBERS_PX)
    y = box.top() + 10
    for line in _numbers_lines(frame):
        font.setBold(True)
        painter.setFont(font)
        bound = f"  [{line.bound}-bound]" if line.bound else ""
        painter.drawText(QRect(box.left(), y, box.width(), NUMBERS_LINE), Qt.AlignmentFlag.AlignLeft,
                         f"{line.label}: {line.value}{bound}")
        y += NUMBERS_LINE
        font.setBold(False)
        painter.setFont(font)
        sentence, rect = _sentence_rect(line, box.left(), y, box.width())
        # wrapped as measured, with a line to spare should the painter's metrics round otherwise
        painter.drawText(QRect(rect.left(), rect.top(), box.width() - 16, rect.height() + NUMBERS_LINE),
                         Qt.TextFlag.TextWordWrap, sentence)
        y += rect.height() + NUMBERS_GAP
