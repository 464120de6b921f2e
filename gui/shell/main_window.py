"""The main window: Machine / Model / Workload / Measure tabs on the left, the plot tabs on the
right, the numbers, Compare and the stopwatch below them, a message bar on top.

It wires the parts together: opening a model runs on the OpenModelController, measuring on the
MeasureController (each a job off the GUI thread); a recompute (on the GUI thread, debounced)
hands the plot tabs their Frame."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from PySide6.QtCore import QByteArray, QEventLoop, Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QApplication,
    QInputDialog,
    QMainWindow,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from rooflab.core.errors import ReportError, RooflabError
from rooflab.core.report.units import fmt
from rooflab.core.values.workload import Workload
from rooflab.gui.controllers.guide_controller import name_topics
from rooflab.gui.controllers.measure_controller import MeasureController
from rooflab.gui.controllers.open_controller import Opened, OpenModelController
from rooflab.gui.export.report import ReportFiles, same_mode, write_report
from rooflab.gui.panels.compare_panel import ComparePanel
from rooflab.gui.panels.compare_table import CompareTablePanel
from rooflab.gui.panels.fit_panel import FitPanel
from rooflab.gui.panels.machine_panel import MachinePanel
from rooflab.gui.panels.measure_panel import MeasurePanel
from rooflab.gui.panels.model_panel import ModelPanel
from rooflab.gui.panels.numbers_panel import NumbersPanel
from rooflab.gui.panels.stopwatch_panel import StopwatchPanel
from rooflab.gui.panels.workload_panel import WorkloadPanel
from rooflab.gui.plots import ChartPlot
from rooflab.gui.plots.plot_tabs import PlotTabsPanel
from rooflab.gui.shell.dnd import DropController, folder_ggufs
from rooflab.gui.shell.geometry import PREFERRED, fit_to_screen
from rooflab.gui.shell.menus import MenuController
from rooflab.gui.state.app_state import AppState
from rooflab.gui.state.recompute import Frame, RecomputeController
from rooflab.gui.state.settings import Settings, save_settings
from rooflab.gui.widgets.controls import MessageBar
from rooflab.gui.widgets.theme import apply_theme

log = logging.getLogger(__name__)


def window_title(model: str, machine: str) -> str:
    """"<model> on <machine> — rooflab". Qt appends the application's display name to a
    title that does not already end with it (X11, Wayland, Windows): ending with it, the name
    shows once everywhere."""
    return f"{model} on {machine} — rooflab"


def _with_strip(area: QScrollArea, strip: QWidget) -> QWidget:
    """``area`` with ``strip`` pinned under it, in sight wherever the area is scrolled (the
    Measure tab's progress and Cancel were below the fold at 720p)."""
    tab = QWidget()
    layout = QVBoxLayout(tab)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(4)
    layout.addWidget(area, 1)
    layout.addWidget(strip)                 # taken from the panel's own layout
    strip.setContentsMargins(6, 0, 6, 6)
    return tab


def _scrolled(widget: QWidget) -> QScrollArea:
    area = QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)     # panes fit their width
    area.setFrameShape(QScrollArea.Shape.NoFrame)
    return area


class MainWindow(QMainWindow):
    model_loaded = Signal(object)        # ModelSpec
    model_failed = Signal(str)           # the reason, one line
    redrawn = Signal(object)             # Frame: the plot on screen and the numbers show it
    report_saved = Signal(object)        # ReportFiles

    def __init__(self, state: AppState, settings: Settings | None = None, *, persist: bool = True,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("rooflab")
        self.state = state
        self.settings = settings or Settings()
        self._persist = persist
        self._report_folder = Path()          # the report being saved, for its progress line
        self.theme = apply_theme(self.settings.theme)
        self.recompute = RecomputeController(state, self)
        self.messages = MessageBar()
        self.machine_panel = MachinePanel(state)
        self.model_panel = ModelPanel(state)
        self.workload_panel = WorkloadPanel(state)
        self.numbers = NumbersPanel()
        self.compare = ComparePanel(state, self.theme)
        self.stopwatch = StopwatchPanel()
        self.plot_panel = PlotTabsPanel(self.theme)
        self.plots: dict[str, ChartPlot] = self.plot_panel.plots
        self.plot_tabs = self.plot_panel.tabs
        self.scenario_label = self.plot_panel.scenario_label
        self.compare_view = CompareTablePanel(state, self.theme)     # models x machines, sortable
        self.plot_tabs.addTab(self.compare_view, "Compare table")
        self.fit_view = FitPanel(state)             # what can I run here? (rooflab fit)
        self.plot_tabs.addTab(self.fit_view, "What fits")
        self.measure_panel = MeasurePanel()
        self.measure = MeasureController(state, self.plots, self.measure_panel, self, settings=self.settings)
        self.opener = OpenModelController(state, self.settings, self.model_panel, self)
        self.left_tabs = QTabWidget()
        self._build_layout()
        self.menus = MenuController(self, self, self.plots.values())     # File, Compare, View, Help
        self.guide = self.menus.guide
        self.open_action, self.save_action = self.menus.open_action, self.menus.save_action
        self.quit_action, self.pin_action = self.menus.quit_action, self.menus.pin_action
        name_topics([(self.fit_view, "fit"), (self.machine_panel.balance, "balance"),
                     (self.machine_panel.kv_read_factor, "kv_read_factor")])
        self.drops = DropController(self)
        self._connect()
        self.model_panel.set_recent(self.settings.recent)
        self.resize(PREFERRED)
        if self.settings.geometry:
            self.restoreGeometry(QByteArray.fromBase64(self.settings.geometry.encode()))
        fit_to_screen(self)                 # a size kept from a larger screen, or the preferred one
        self.recompute.recompute_now()

    # -- building ---------------------------------------------------------------------------
    def _build_layout(self) -> None:
        self.left_tabs.addTab(_scrolled(self.machine_panel), "Machine")
        self.left_tabs.addTab(_scrolled(self.model_panel), "Model")
        self.left_tabs.addTab(_scrolled(self.workload_panel), "Workload")
        self.left_tabs.addTab(_with_strip(_scrolled(self.measure_panel), self.measure_panel.run_strip), "Measure")
        self.left_tabs.setCurrentIndex(2)
        self.left_tabs.setMinimumWidth(340)
        side = QWidget()
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(0, 0, 0, 0)
        side_layout.addWidget(self.compare)
        side_layout.addWidget(self.stopwatch)
        side_layout.addStretch(1)
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(_scrolled(self.numbers))
        bottom.addWidget(_scrolled(side))
        bottom.setStretchFactor(0, 3)
        bottom.setStretchFactor(1, 1)
        bottom.setSizes([760, 360])
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.plot_panel)
        right.addWidget(bottom)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
        right.setSizes([560, 330])
        self.main_split = QSplitter(Qt.Orientation.Horizontal)
        self.main_split.addWidget(self.left_tabs)
        self.main_split.addWidget(right)
        self.main_split.setStretchFactor(1, 1)
        self.main_split.setSizes([380, 1100])
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(6, 4, 6, 4)
        # the messages under the panes: shown over them, a message moved every control down
        # under the pointer (30 px for one line)
        layout.addWidget(self.main_split, 1)
        layout.addWidget(self.messages)
        self.setCentralWidget(central)

    def _connect(self) -> None:
        self.recompute.recomputed.connect(self._on_recompute_recomputed)
        self.recompute.failed.connect(self._on_recompute_failed)
        self.opener.progressed.connect(self._on_opener_progressed)
        self.opener.opened.connect(self._on_opener_opened)
        self.opener.failed.connect(self._on_opener_failed)
        self.drops.dropped.connect(self._on_drops_dropped)
        self.model_panel.open_requested.connect(self._on_model_panel_open_requested)
        self.fit_view.open_requested.connect(self._on_model_panel_open_requested)
        self.machine_panel.message.connect(self._on_panel_message)
        self.measure.message.connect(self._on_panel_message)
        self.measure.server.server_measured.connect(self.plot_panel.redraw_serving)   # its levels, drawn
        self.measure.machine_measured.connect(self._on_measure_machine_measured)
        self.measure.engine_calibrated.connect(self._on_measure_engine_calibrated)
        self.measure.operations_measured.connect(self.plot_panel.show_measured_operations)
        # a read-out describes a point of the series on screen: it goes when the series does
        self.state.model_changed.connect(self._on_state_scenario_changed)
        self.state.machine_changed.connect(self._on_state_scenario_changed)
        self.state.workload_changed.connect(self._on_state_scenario_changed)
        from PySide6.QtGui import QGuiApplication

        QGuiApplication.styleHints().colorSchemeChanged.connect(self._on_color_scheme_changed)

    # -- opening models ---------------------------------------------------------------------
    def open_model(self, ref: str, weights: str | None = None) -> None:
        """Open a model file, folder or catalogue key off the GUI thread (see
        ``OpenModelController.open``); the model on screen stays until the new one is read."""
        self.opener.open(ref, weights)

    def _on_opener_progressed(self, message: str) -> None:
        self.statusBar().showMessage(message)

    def _on_opener_opened(self, opened: Opened) -> None:
        self.menus.refresh_recent()
        self.messages.clear("open")
        self.statusBar().showMessage(f"Opened {opened.spec.name}", 5000)
        self.left_tabs.setCurrentIndex(1)                     # the Model tab
        self.model_loaded.emit(opened.spec)

    def _on_opener_failed(self, exc: RooflabError) -> None:
        self.messages.show_message(f"Could not open the model: {exc}. "
                                   f"{self.state.model.name} stays loaded.", "error", "open")
        self.statusBar().clearMessage()
        self.model_failed.emit(str(exc))

    def _on_drops_dropped(self, paths: list[str]) -> None:
        ref = paths[0]
        ggufs = folder_ggufs(ref)
        if ggufs:                   # a folder of GGUFs (no config.json): its one GGUF, or the one picked
            ref = str(ggufs[0]) if len(ggufs) == 1 else self.ask_gguf(ref, ggufs)
            if not ref:
                return
        self.open_model(ref)
        if len(paths) > 1:
            self.statusBar().showMessage(f"Opened the first of {len(paths)} dropped items", 5000)

    def ask_gguf(self, folder: str, ggufs: list[Path]) -> str:
        """Which of the GGUF files of a dropped ``folder`` to open ("" when none is picked)."""
        names = [f"{p.name} ({fmt(float(p.stat().st_size), 'B')})" for p in ggufs]
        name, ok = QInputDialog.getItem(self, "Open a GGUF", f"{folder} holds {len(ggufs)} GGUF files: open which?",
                                        names, 0, False)
        return str(ggufs[names.index(name)]) if ok and name in names else ""

    def _on_model_panel_open_requested(self, ref: str, weights: str) -> None:
        self.open_model(ref, weights)

    # -- drawing ----------------------------------------------------------------------------
    def _on_recompute_recomputed(self, frame: Frame) -> None:
        self.plot_panel.show_frame(frame)
        self.setWindowTitle(window_title(frame.scenario.model.name, frame.scenario.machine.name))
        self.numbers.show_frame(frame)
        self.workload_panel.show_frame(frame)
        self.stopwatch.show_frame(frame)
        self.messages.clear("predict")
        self.redrawn.emit(frame)

    def _on_state_scenario_changed(self, _value: object) -> None:
        self.plot_panel.clear_readouts()

    def flush_plots(self) -> None:
        """Bring every plot, shown or not, up to the last frame."""
        self.plot_panel.flush()

    def _on_recompute_failed(self, message: str) -> None:
        self.messages.show_message(f"Cannot predict this combination: {message}", "warning", "predict")

    def _on_measure_engine_calibrated(self, _calibration: object) -> None:
        self.recompute.forget_calibrations()      # every model on this machine gains its expected figures
        self.compare_view.controller.forget()

    def _on_measure_machine_measured(self, _profile: object) -> None:
        self.machine_panel.refresh_picker()        # list "this machine, measured" to pick again

    def _on_panel_message(self, text: str, level: str) -> None:
        if level == "info":
            self.statusBar().showMessage(text, 8000)
        else:
            self.messages.show_message(text, level)

    # -- reports ----------------------------------------------------------------------------
    def save_report(self, folder: str | Path) -> ReportFiles:
        """Write the report for what is on screen into ``folder``."""
        if self.recompute.pending or self.recompute.frame is None:
            self.recompute.recompute_now()
        self.recompute.add_band()          # the expected curves with their band, not waiting for the pause
        frame = self.recompute.frame
        if frame is None:
            raise RooflabError("nothing to report: the current combination cannot be predicted")
        self.flush_plots()
        fit = self.measure_panel.results.text() if self.measure.series else ""
        # seconds of drawing and some seventy files: said at once, each step as it starts, and the
        # cursor waits (nothing showed until it was done); only painting runs meanwhile, no input
        # that could change the frame
        self._report_folder = Path(folder).expanduser()
        self.statusBar().showMessage(f"Saving the report to {self._report_folder}…")
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        QApplication.processEvents(QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents)
        try:
            files = write_report(folder, list(self.plots.values()), frame, fit=fit,
                                 progressed=self._on_report_progressed)
            if self.state.pinned:                       # the comparison table goes into the report too
                same_mode(files.sheet, *self.compare_view.save(files.folder))
        finally:
            QApplication.restoreOverrideCursor()
            self.statusBar().clearMessage()
        self.statusBar().showMessage(f"Saved the report: {len(files.all)} files in {files.folder}", 8000)
        self.settings.report_dir = str(files.folder)
        self.report_saved.emit(files)
        return files

    def _on_report_progressed(self, step: str) -> None:
        self.statusBar().showMessage(f"Saving the report to {self._report_folder}: {step}…")
        QApplication.processEvents(QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents)

    def save_screenshot(self, path: str | Path) -> Path:
        """Render the whole window to a PNG."""
        self.flush_plots()
        for _ in range(3):       # rows whose height follows their wrapped text settle a pass later
            QApplication.processEvents()
        target = Path(path).expanduser()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReportError(f"{target}: cannot write the screenshot ({exc.strerror or exc})") from exc
        if not self.grab().save(str(target)):
            raise ReportError(f"{target}: cannot write the screenshot")
        return target

    # -- look -------------------------------------------------------------------------------
    def set_theme(self, mode: str) -> None:
        self.settings.theme = mode
        self.theme = apply_theme(mode)
        self.plot_panel.apply_theme(self.theme)
        self.compare.apply_theme(self.theme)
        self.compare_view.apply_theme(self.theme)
        self.menus.check_theme(mode)

    def _on_color_scheme_changed(self, _scheme: object) -> None:
        if self.settings.theme == "system":
            self.set_theme("system")

    # -- closing ----------------------------------------------------------------------------
    def remember(self) -> None:
        """Copy what should survive a restart into the settings (and save them)."""
        s = self.settings
        s.geometry = bytes(self.saveGeometry().toBase64().data()).decode()
        s.machine = self.state.machine.key
        s.machine_data = {} if s.machine else self.state.machine.to_dict()
        s.workload = {f.name: getattr(self.state.workload, f.name) for f in dataclasses.fields(Workload)}
        s.placement = {} if self.state.placement.is_auto else self.state.placement.to_dict()
        if self._persist:
            try:
                save_settings(s)
            except OSError:
                log.exception("could not save settings")

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt API
        self.opener.shutdown()          # cancel, then wait: the only place a job is waited for
        self.measure.shutdown()
        self.fit_view.controller.shutdown()
        self.remember()
        self.drops.uninstall()
        for plot in (*self.plots.values(), self.plot_panel.serving):
            plot.unlink()
        super().closeEvent(event)
