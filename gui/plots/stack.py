"""The memory chart's stacked bars on one panel: a bar per memory of each series (one for a model
on one memory; a bar per device and one for host memory as placed), the current series' first,
each pinned one's after them, its name under it, and one legend swatch per kind of segment."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF

from rooflab.gui.plots.drawn import Drawn
from rooflab.gui.plots.labels import wrap_text
from rooflab.gui.widgets.theme import Theme

#: the order of a memory bar's segments in its legend
STACK_ORDER = ("weights", "KV cache", "buffers and reserve", "free", "over capacity")


def stack_colour(theme: Theme, category: str) -> str:
    """A segment's colour by what it is, so "free" never takes another's."""
    if category == "over capacity":
        return theme.current["limit"]
    index = {"weights": 0, "KV cache": 1, "free": 2, "buffers and reserve": 4}.get(category, 2)
    return theme.stack[index % len(theme.stack)]


class StackBars:
    """The bars of one panel, in the order drawn since ``clear``. ``labels``: the name under each
    bar: its series' name when the series has one bar, else the bar's own ("device 1 of 2",
    "host memory"), after its series' name when several series draw bars."""

    def __init__(self, plot: pg.PlotItem, legend: pg.LegendItem) -> None:
        self.plot = plot
        self.legend = legend
        self._bars: list[tuple[str, str]] = []        # (series name, bar name) per position
        self._ticks: list[tuple[int, str]] | None = None
        self._swatches: dict[str, pg.BarGraphItem] = {}
        self._shown: list[str] = []

    def clear(self) -> None:
        """Forget the positions: a redraw places every bar again, in order."""
        self._bars.clear()
        self._ticks = None

    @property
    def labels(self) -> list[str]:
        series = [name for name, _ in self._bars]
        several = len(set(series)) > 1
        short = _distinct_parts(list(dict.fromkeys(series)))
        out = []
        for name, bar in self._bars:
            if series.count(name) == 1:
                out.append(short[name])
            else:
                # the card's bar names the card: the series' name leaves the machine to it
                own = {b for n, b in self._bars if n == name}
                parts = [part for part in short[name].split(" · ") if part not in own] or [short[name]]
                out.append(f"{' · '.join(parts)}: {bar}" if several else bar)
        return out

    def draw(self, drawn: Drawn, theme: Theme) -> None:
        """``drawn`` (its curve a "stack") as the next bar, with a tick at its memory's capacity."""
        curve = drawn.curve
        if not drawn.items:                   # the capacity tick, last; the segments go before it
            cap = pg.PlotDataItem(pen=pg.mkPen(theme.current["limit"], width=2.5))
            cap.setZValue(15)
            self.plot.addItem(cap)
            drawn.items.append(cap)
        while len(drawn.items) - 1 < len(curve.categories):      # a bill of more parts than before
            bar = pg.BarGraphItem(x=[0.0], height=[0.0], width=0.55, y0=[0.0])
            self.plot.addItem(bar)
            drawn.items.insert(len(drawn.items) - 1, bar)
        slot = drawn.bar = len(self._bars)
        self._bars.append((drawn.layer.label, curve.label))
        bars, cap = drawn.items[:-1], drawn.items[-1]
        for i, bar in enumerate(bars):
            if i >= len(curve.categories):
                bar.setVisible(False)
                continue
            bar.setOpts(x=[slot], y0=[float(curve.extras["base"][i])], height=[float(curve.y[i])],
                        brush=pg.mkBrush(stack_colour(theme, curve.categories[i])),
                        pen=pg.mkPen(theme.background, width=1))
            bar.setVisible(True)
        capacity = float(curve.extras["capacity"][0]) if "capacity" in curve.extras else math.nan
        cap.setPen(pg.mkPen(theme.current["limit"], width=2.5))
        cap.setData([slot - 0.38, slot + 0.38], [capacity, capacity])
        cap.setVisible(True)
        self._ticks = None                    # worded again, to the bars' width, by ``word_ticks``

    def sync_legend(self, shown: Iterable[Drawn], theme: Theme) -> None:
        """One swatch per segment kind any bar on show has, in its own colour: the bars' own
        items kept the name of their first kind ("free" turning red when over)."""
        wanted: list[str] = []
        for drawn in shown:
            if drawn.curve.kind == "stack":
                wanted += [name for name, size in zip(drawn.curve.categories, drawn.curve.y, strict=True)
                           if size > 0 and name not in wanted]
        wanted.sort(key=lambda name: STACK_ORDER.index(name) if name in STACK_ORDER else len(STACK_ORDER))
        for name in wanted:
            swatch = self._swatches.setdefault(name, pg.BarGraphItem(x=[0], height=[1], width=1))
            swatch.setOpts(brush=pg.mkBrush(stack_colour(theme, name)), pen=pg.mkPen(theme.background))
        if self._shown == wanted:
            return
        for name in self._shown:
            self.legend.removeItem(self._swatches[name])
        # short names, two a row: one a row, the four kinds ran under the window at 1280 x 720
        self.legend.setColumnCount(2 if len(wanted) > 2 else 1)
        for name in wanted:
            self.legend.addItem(self._swatches[name], name)
        self._shown = wanted

    def word_ticks(self) -> None:
        """Each bar's name under it, on as many lines as the bar's width needs (a name wider
        than its bar was dropped by the axis: with two series pinned only the middle one kept one)."""
        if not self.labels:
            return
        width = self.plot.getViewBox().boundingRect().width()
        room = max(40.0, width / (len(self.labels) + 0.2) - 8)
        axis = self.plot.getAxis("bottom")
        metrics = QFontMetricsF(axis.style.get("tickFont") or QFont())
        ticks = [(i, "\n".join(wrap_text(label, room, metrics.horizontalAdvance))) for i,
                 label in enumerate(self.labels)]
        if ticks != self._ticks:
            self._ticks = ticks
            axis.setTicks([ticks, []])
            # as tall as the most lines a name needs: a fixed axis cut the last line ("placement") off
            lines = max(t.count("\n") + 1 for _, t in ticks)
            label = metrics.height() + 6 if axis.label.isVisible() else 0
            height = int(lines * metrics.lineSpacing() + 14 + label)
            if axis.fixedHeight != height:        # a relayout only when the height really changes
                axis.setHeight(height)


SAME = " (same as above)"            # ``chart_types.distinguishing_labels``' twin of a series


def _distinct_parts(names: list[str]) -> dict[str, str]:
    """Each series name without the " · " parts every one of ``names`` has, wherever it stands
    (the model they share, "auto placement" between a machine and a workload): the line over the
    tabs names them whole, and under a bar 130 px wide the shared words wrapped a name over six
    to eleven lines at 1280 x 720. One name stays whole; a name keeps at least one part."""
    if len(names) < 2:
        return {n: n for n in names}
    # a series identical to one before it is named "... (same as above)": its parts are the same
    bases = [n.removesuffix(SAME) for n in names]
    parts = [b.split(" · ") for b in bases]
    shared = set.intersection(*(set(p) for p in parts))
    kept = [[part for part in p if part not in shared] or p[-1:] for p in parts]
    return {n: " · ".join(p) + n[len(b):] for n, b, p in zip(names, bases, kept, strict=True)}
