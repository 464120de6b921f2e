"""A line over a plot box saying why it draws nothing (a placement that does not fit)."""

from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsTextItem

from rooflab.gui.plots.style import translucent
from rooflab.gui.widgets.theme import Theme


class PanelNote(QGraphicsTextItem):
    """A child of the view box, so it sits in its pixels whatever the axes' ranges; wrapped to
    the box's width, on a veil of the background."""

    def __init__(self, view_box: pg.ViewBox) -> None:
        super().__init__(view_box)
        self._box = view_box
        self.setZValue(60)
        self.hide()

    def show_text(self, text: str, theme: Theme) -> None:
        """Show ``text`` ("" hides the note)."""
        if text:
            veil = translucent(theme.background, 225).name(QColor.NameFormat.HexArgb)
            self.setHtml(f"<div style='background-color:{veil};color:{theme.foreground};'>{html.escape(text)}</div>")
        self.setVisible(bool(text))
        self.place()

    def place(self) -> None:
        """Across the top of the box (after the box is resized)."""
        self.setTextWidth(max(120.0, self._box.boundingRect().width() - 16.0))
        self.setPos(8.0, 6.0)
