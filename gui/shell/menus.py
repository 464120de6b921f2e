"""The main window's menu bar: File (open, recent, save report, screenshot, quit), Compare (pin,
clear), View (what fits, theme), Help (guide, About), and what each entry does that is a dialog
away from one of the window's own methods (``open_model``, ``save_report``, ``set_theme``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMainWindow, QMenu, QStatusBar, QTabWidget, QWidget

from rooflab.core.errors import RooflabError
from rooflab.gui.controllers.guide_controller import GuideController
from rooflab.gui.export.report import ReportFiles, choose_report_folder
from rooflab.gui.panels.model_panel import MODEL_FILTER, URL_PROMPT
from rooflab.gui.plots import ChartPlot
from rooflab.gui.shell import about
from rooflab.gui.state.app_state import AppState
from rooflab.gui.state.settings import Settings
from rooflab.gui.widgets.controls import MessageBar
from rooflab.gui.widgets.theme import THEME_MODES


class MenuHost(Protocol):
    """What the menus read and call of the main window (``main_window.MainWindow``)."""

    state: AppState
    settings: Settings
    messages: MessageBar
    plot_tabs: QTabWidget

    @property
    def fit_view(self) -> QWidget: ...
    def statusBar(self) -> QStatusBar: ...  # noqa: N802 - Qt API
    def open_model(self, ref: str, weights: str | None = None) -> None: ...
    def save_report(self, folder: str | Path) -> ReportFiles: ...
    def save_screenshot(self, path: str | Path) -> Path: ...
    def set_theme(self, mode: str) -> None: ...


class MenuController(QObject):
    """Builds ``window``'s menu bar and answers its entries; ``host``: the window again, as what
    the entries call; ``plots``: the charts whose "How is this computed?" the guide opens. The
    actions are the window's children (their shortcuts are the window's)."""

    def __init__(self, window: QMainWindow, host: MenuHost, plots: Iterable[ChartPlot]) -> None:
        super().__init__(window)
        self._window = window
        self._host = host
        bar = window.menuBar()
        file = bar.addMenu("&File")
        self.open_action = self._action(file, "&Open model…", self._on_open_action_triggered,
                                        QKeySequence.StandardKey.Open, "Open a .gguf, config.json or model folder")
        self._action(file, "Open model &folder…", self._on_open_folder_action_triggered)
        self.open_url_action = self._action(file, "Open &URL…", self._on_open_url_action_triggered, "Ctrl+L",
                                            "A Hugging Face name or a GGUF link: only its header is read")
        self.recent_menu = file.addMenu("Open &recent")
        file.addSeparator()
        self.save_action = self._action(file, "&Save report…", self._on_save_action_triggered,
                                        QKeySequence.StandardKey.Save,
                                        "PNG of every plot, a composed sheet and CSV of every series")
        self._action(file, "Save &screenshot…", self._on_screenshot_action_triggered, "Ctrl+Shift+S")
        file.addSeparator()
        self.quit_action = self._action(file, "&Quit", window.close, QKeySequence.StandardKey.Quit)
        compare = bar.addMenu("&Compare")
        self.pin_action = self._action(compare, "&Pin current series", self._on_pin_action_triggered, "Ctrl+P",
                                       "Draw what is on screen beside later changes on every plot")
        self._action(compare, "&Clear pinned series", self._on_clear_pins_action_triggered)
        view = bar.addMenu("&View")
        self._action(view, "&What can I run here?", self._on_fit_action_triggered, "Ctrl+Shift+F",
                     "Every catalogue model ranked by how it fits this machine and how fast it runs")
        theme_menu = view.addMenu("&Theme")
        self.theme_actions = QActionGroup(window)
        for mode in THEME_MODES:
            action = QAction(mode.capitalize() if mode != "system" else "Follow the system", window, checkable=True)
            action.setData(mode)
            action.setChecked(mode == host.settings.theme)
            self.theme_actions.addAction(action)
            theme_menu.addAction(action)
        self.theme_actions.triggered.connect(self._on_theme_actions_triggered)
        help_menu = bar.addMenu("&Help")
        self.guide = GuideController(window, help_menu, plots)     # Help > Guide, F1, the charts' links
        self._action(help_menu, "&About rooflab", self._on_about_action_triggered)
        self.refresh_recent()

    def _action(self, menu: QMenu, text: str, slot: Callable[[], object],
                shortcut: QKeySequence | QKeySequence.StandardKey | str | None = None, tip: str = "") -> QAction:
        action = QAction(text, self._window)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.setStatusTip(tip)
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def refresh_recent(self) -> None:
        """List the recently opened models under File > Open recent."""
        recent = self._host.settings.recent
        self.recent_menu.clear()
        for ref in recent:
            action = self.recent_menu.addAction(ref)
            action.setData(ref)
            action.triggered.connect(self._on_recent_action_triggered)
        self.recent_menu.setEnabled(bool(recent))

    def check_theme(self, mode: str) -> None:
        """Tick View > Theme's entry for ``mode``."""
        for action in self.theme_actions.actions():
            action.setChecked(action.data() == mode)

    # -- File -------------------------------------------------------------------------------
    def _on_open_action_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self._window, "Open model", "", MODEL_FILTER)
        if path:
            self._host.open_model(path)

    def _on_open_folder_action_triggered(self) -> None:
        path = QFileDialog.getExistingDirectory(self._window, "Open model folder")
        if path:
            self._host.open_model(path)

    def _on_open_url_action_triggered(self) -> None:
        text, ok = QInputDialog.getText(self._window, "Open URL", URL_PROMPT)
        if ok and text.strip():
            self._host.open_model(text.strip())

    def _on_recent_action_triggered(self) -> None:
        action = self.sender()
        if isinstance(action, QAction):
            self._host.open_model(str(action.data()))

    def _on_save_action_triggered(self) -> None:
        host = self._host
        folder = choose_report_folder(self._window, host.settings.report_dir)
        if folder is None:
            return
        try:
            files = host.save_report(folder)
        except (RooflabError, OSError) as exc:
            host.messages.show_message(f"Could not save the report: {exc}", "error")
            return
        host.messages.show_message(f"Saved {len(files.all)} report files to {files.folder}.", "info")

    def _on_screenshot_action_triggered(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self._window, "Save screenshot", "rooflab.png", "PNG image (*.png)")
        if path:
            try:
                self._host.save_screenshot(path)
            except RooflabError as exc:
                self._host.messages.show_message(str(exc), "error")

    # -- Compare, View, Help ----------------------------------------------------------------
    def _on_pin_action_triggered(self) -> None:
        if self._host.state.pin_current() is None:
            self._host.statusBar().showMessage("That series is already pinned", 4000)

    def _on_clear_pins_action_triggered(self) -> None:
        self._host.state.clear_pinned()

    def _on_fit_action_triggered(self) -> None:
        self._host.plot_tabs.setCurrentWidget(self._host.fit_view)

    def _on_theme_actions_triggered(self, action: QAction) -> None:
        self._host.set_theme(str(action.data()))

    def _on_about_action_triggered(self) -> None:
        about.show_about(self._window)
