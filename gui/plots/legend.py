"""A panel's legend: one entry per named series, wrapped to the room it has (beside its panel
``LEGEND_WIDTH`` characters, under a panel side by side with others the panel's width),
renamed when its curve's name changes, and gone while its curve is hidden (a hidden curve's
entry showed a crossed-out eye for an icon)."""

from __future__ import annotations

from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetricsF

from rooflab.gui.plots.style import legend_text, shared_name

LEGEND_POINTS = 8         # the legend's text size, pt
SWATCH = 48               # px an entry's swatch and margins take beside its text (grid.LEGEND_SWATCH)
MAX_COLUMNS = 3
WHOLE = 0.75              # the share of entries a column is wide enough to hold unwrapped


def _font() -> QFont:
    font = QFont()
    font.setPointSizeF(LEGEND_POINTS)
    return font


class Legend:
    """The entries of ``item`` (a ``pg.LegendItem``) by the graphics item each names."""

    def __init__(self) -> None:
        self.item = pg.LegendItem(labelTextSize=f"{LEGEND_POINTS}pt", verSpacing=-4, horSpacing=8)
        self._names: dict[int, str] = {}       # id(graphics item) -> its name, unwrapped
        self._items: dict[int, Any] = {}       # id(graphics item) -> the item, listed or left out
        self._room = 0.0                       # px an entry may take (0: LEGEND_WIDTH characters)
        self._left_out: frozenset[str] = frozenset()   # names another legend beside this one lists

    def _text(self, name: str) -> str:
        if not self._room:
            return legend_text(name)
        return legend_text(name, self._entry_room(), QFontMetricsF(_font()).horizontalAdvance)

    def _entry_room(self) -> float:
        """Pixels one entry's text may take: the room shared by the legend's columns."""
        columns = max(1, self.item.columnCount)
        return (self._room + SWATCH) / columns - SWATCH

    def _columns(self) -> int:
        """Under a panel (``_room`` px), as many columns as hold ``WHOLE`` of its entries unwrapped,
        at most ``MAX_COLUMNS``: one column of eight entries under a panel side by side at 1280 x
        720 ran past the window's height (1.5 of them in sight)."""
        if not self._room:
            return 1
        listed = [n for n in self._names.values() if n not in self._left_out]
        if not listed:
            return max(1, self.item.columnCount)      # a bar panel's swatches set their own (``StackBars``)
        # most entries whole: a pinned series' long name may wrap in its column rather than
        # keep every short one in a single column
        widths = sorted(QFontMetricsF(_font()).horizontalAdvance(n) for n in listed)
        typical = widths[int(WHOLE * (len(widths) - 1))]
        return max(1, min(MAX_COLUMNS, len(listed), int((self._room + SWATCH) // (typical + SWATCH))))

    def _arrange(self) -> None:
        """Lay the entries out in ``_columns`` columns, each worded to its room, each swatch at its
        text's first line (a row as tall as a wrapped entry beside it left the swatch below its text)."""
        columns = self._columns()
        if columns != self.item.columnCount:
            self.item.setColumnCount(columns)
            for sample, label in self.item.items:
                name = self._names.get(id(getattr(sample, "item", None)))
                if name is not None:
                    label.setText(self._text(name))
        for sample, label in self.item.items:
            self.item.layout.setAlignment(sample, Qt.AlignmentFlag.AlignTop)
            self.item.layout.setAlignment(label, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)

    def show(self, item: Any, name: str | None) -> None:
        """``item``'s entry named ``name`` (None: no entry); the current workload's markers, and
        a line of every pinned series, share one entry (``style.shared_name``), listed once."""
        old = self._names.get(id(item))
        if old is None:
            if name and not (shared_name(name) and name in self._names.values()):
                self._names[id(item)] = name
                self._items[id(item)] = item
                if name not in self._left_out:
                    self.item.addItem(item, self._text(name))
                    self._arrange()
        elif name is not None and name != old:
            self._names[id(item)] = name
            for sample, label in self.item.items:
                if getattr(sample, "item", None) is item:
                    label.setText(self._text(name))

    def hide(self, item: Any) -> None:
        """No entry for ``item`` (hidden, or gone)."""
        if self._names.pop(id(item), None) is not None:
            self._items.pop(id(item), None)
            self.item.removeItem(item)

    def names(self) -> set[str]:
        return set(self._names.values())

    def leave_out(self, names: frozenset[str]) -> None:
        """List no entry named in ``names`` (a legend beside this one lists them: the series
        pinned, the current workload), and every other again."""
        if names == self._left_out:
            return
        self._left_out = names
        listed = {id(getattr(sample, "item", None)) for sample, _label in self.item.items}
        for key, name in self._names.items():
            item = self._items[key]
            if name in names and key in listed:
                self.item.removeItem(item)
            elif name not in names and key not in listed:
                self.item.addItem(item, self._text(name))
        self._arrange()

    def set_room(self, pixels: float) -> None:
        """Wrap the entries to ``pixels``, or to ``LEGEND_WIDTH`` characters (0)."""
        if pixels == self._room:
            return
        self._room = pixels
        self._arrange()
        for sample, label in self.item.items:
            name = self._names.get(id(getattr(sample, "item", None)))
            if name is not None:
                label.setText(self._text(name))
