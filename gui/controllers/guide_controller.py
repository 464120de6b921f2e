"""Opens the guide (``dialogs.guide_dialog``) where the user asks: Help > Guide (F1), F1 over a
figure (the section of the figure under the mouse, else of the widget with focus), and each
chart's "How is this computed?" link (the chart's section).

A widget names its section with the Qt property ``guide_topic`` (a numbers-panel row's key, a
chart's key, or a section's: ``report.guide.topic`` maps it); a chart is known by its key."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QCursor, QKeySequence
from PySide6.QtWidgets import QApplication, QMenu, QWidget

from rooflab.gui.dialogs.guide_dialog import GuideDialog
from rooflab.gui.plots.base import ChartPlot

TOPIC = "guide_topic"           # the Qt property a widget names its guide section with
LINK = "<a href='guide:{key}'>How is this computed?</a>"


def topic_of(widget: QWidget | None) -> str:
    """The guide key of ``widget`` or the nearest of its parents that has one ("" for none)."""
    while widget is not None:
        named = widget.property(TOPIC)
        if isinstance(named, str) and named:
            return named
        if isinstance(widget, ChartPlot) and widget.chart_key:
            return widget.chart_key
        widget = widget.parentWidget()
    return ""


def name_topics(named: Iterable[tuple[QWidget, str]]) -> None:
    """Give each widget its guide section (F1 over it opens there)."""
    for widget, key in named:
        widget.setProperty(TOPIC, key)


class GuideController(QObject):
    """Help > Guide and F1 for ``window``; "How is this computed?" on each of ``plots``."""

    def __init__(self, window: QWidget, help_menu: QMenu, plots: Iterable[ChartPlot]) -> None:
        super().__init__(window)
        self._window = window
        self.dialog: GuideDialog | None = None
        self.action = QAction("&Guide: what each figure means", window)
        self.action.setShortcut(QKeySequence(QKeySequence.StandardKey.HelpContents))     # F1
        self.action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.action.setStatusTip("Each quantity in one paragraph with its formula; F1 over a figure opens its part")
        self.action.triggered.connect(self._on_action_triggered)
        help_menu.addAction(self.action)
        for plot in plots:
            plot.set_info_link(LINK.format(key=plot.chart_key))
            plot.info.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
            plot.info.linkActivated.connect(self._on_info_link_activated)

    def open(self, key: str = "") -> str:
        """Show the guide at ``key``'s section; returns the section shown ("" the top)."""
        if self.dialog is None:
            self.dialog = GuideDialog(self._window)
        return self.dialog.show_topic(key)

    def topic_here(self) -> str:
        """The section of the figure under the mouse, else of the widget with focus."""
        under = QApplication.widgetAt(QCursor.pos())
        if under is not None and under.window() is self._window:
            found = topic_of(under)
            if found:
                return found
        return topic_of(QApplication.focusWidget())

    def _on_action_triggered(self) -> None:
        self.open(self.topic_here())

    def _on_info_link_activated(self, link: str) -> None:
        self.open(link.removeprefix("guide:"))
