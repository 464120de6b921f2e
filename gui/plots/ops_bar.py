"""The Roofline tab's "where the time goes" bar: the prefill and the decode step, each a
horizontal bar cut into its operations (``core.report.ops_bar``), one bar per series (the
current one on top, each pinned one under it), so series compare operation by operation.

Widgets never compute: the bars come from core through the window's frame (``Figures.operations``)
and are drawn as handed. A segment wide enough says which operation it is; the hover reads any
segment's row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import QPointF, Signal
from PySide6.QtWidgets import QSizePolicy, QVBoxLayout, QWidget

from rooflab.core.predict.ops import DECODE, ORDER, PREFILL
from rooflab.core.report.ops_bar import PHASE_TITLES, TimeBar
from rooflab.core.report.units import fmt
from rooflab.gui.plots.axis import UnitAxis
from rooflab.gui.widgets.theme import LIGHT, Theme

#: segment colours by operation (ColorBrewer's Set3: every one takes black text, on a light or a
#: dark background); neighbours in a pass's order never share one
PALETTE = ("#80b1d3", "#fdb462", "#b3de69", "#fb8072", "#bebada", "#8dd3c7", "#ffed6f", "#fccde5",
           "#ccebc5", "#bc80bd", "#d9d9d9", "#ffffb3")
TOTAL_PX = 124                # room past the longest bar for its total ("8.35 ms expected")
SWATCH_PX = 10                # the series' swatch before its bars (with pinned series), px
BAR_HEIGHT = 0.62             # of a row
ROW_PX, FRAME_PX = 24, 50     # the widget's height: a row per series plus the axes and titles


def colour_of(name: str) -> str:
    """An operation's colour, the same in every bar (pinned series compare by it)."""
    index = ORDER.index(name) if name in ORDER else len(ORDER) + sum(map(ord, name))
    return PALETTE[index % len(PALETTE)]


class TimeBarPlot(QWidget):
    """Where the time goes: the prefill and the decode step by operation, a bar per series."""

    hovered = Signal(str)

    def __init__(self, theme: Theme = LIGHT, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self.view = pg.GraphicsLayoutWidget()
        self.view.setAcceptDrops(False)
        self.view.ci.setContentsMargins(4, 2, 12, 2)
        self.view.setBackground(theme.background)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.view)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.plots: dict[str, pg.PlotItem] = {}
        self._items: list[object] = []
        self._labels: dict[str, list[tuple[pg.TextItem, float]]] = {}
        self._longest: dict[str, float] = {}
        self._swatches: dict[str, list[pg.BarGraphItem]] = {}
        self._pins: tuple[int | None, ...] = ()
        for col, phase in enumerate((PREFILL, DECODE)):
            axis = UnitAxis("bottom", f"{PHASE_TITLES[phase]}, time", "s")     # its title names the pass
            plot = self.view.addPlot(row=0, col=col, axisItems={"bottom": axis})
            plot.hideAxis("left")          # the rows are told apart by their swatches and the hover
            plot.setMenuEnabled(False)
            plot.setMouseEnabled(x=False, y=False)
            plot.hideButtons()
            plot.getViewBox().invertY(True)
            plot.getViewBox().sigResized.connect(self._on_box_resized)
            self.plots[phase] = plot
        for col in (0, 1):              # the two passes side by side, as wide as each other
            self.view.ci.layout.setColumnStretchFactor(col, 1)
            self.view.ci.layout.setColumnPreferredWidth(col, 1)
        self._bars: dict[str, tuple[TimeBar, ...]] = {PREFILL: (), DECODE: ()}
        self.view.scene().sigMouseMoved.connect(self._on_scene_mouse_moved)
        self._style()
        self._fit_height(1)

    @property
    def bars(self) -> dict[str, tuple[TimeBar, ...]]:
        """The bars drawn, by phase, the current series first (tests read what was handed)."""
        return dict(self._bars)

    def set_bars(self, bars: Sequence[TimeBar], pins: Sequence[int | None] = ()) -> None:
        """Draw ``bars`` (each series' prefill and decode bars, the current series' first);
        ``pins``: each series' pin id in that order (None: the current series), for the swatch
        in its colour at the start of its bars."""
        for plot in self.plots.values():
            for item in self._items:
                if item in plot.items:
                    plot.removeItem(item)
        self._items = []
        self._pins = tuple(pins)
        for phase, plot in self.plots.items():
            mine = tuple(b for b in bars if b.phase == phase)
            self._bars[phase] = mine
            self._draw_phase(plot, phase, mine)
        self._fit_height(max(1, len(self._bars[PREFILL])))

    def series_colour(self, row: int) -> str:
        """The colour of row ``row``'s series: the current one's, or its pin's (as the line over
        the plots shows them)."""
        pin = self._pins[row] if row < len(self._pins) else None
        return self.theme.current["main"] if pin is None else self.theme.series[pin % len(self.theme.series)]

    def _draw_phase(self, plot: pg.PlotItem, phase: str, bars: tuple[TimeBar, ...]) -> None:
        self._longest[phase] = max((b.seconds for b in bars), default=0.0)
        labels: list[tuple[pg.TextItem, float]] = []
        totals: list[pg.TextItem] = []
        for row, bar in enumerate(bars):
            if len(bars) > 1:           # which series: a swatch in its colour before the bar
                swatch = pg.BarGraphItem(x0=[0.0], width=[0.0], y=[row], height=BAR_HEIGHT,
                                         brush=pg.mkBrush(self.series_colour(row)), pen=pg.mkPen(None))
                totals.append(self._add(plot, swatch))
            if not bar.segments:
                continue
            item = pg.BarGraphItem(x0=[s.start for s in bar.segments], width=[s.seconds for s in bar.segments],
                                   y=[row] * len(bar.segments), height=BAR_HEIGHT,
                                   brushes=[pg.mkBrush(colour_of(s.name)) for s in bar.segments],
                                   pen=pg.mkPen(self.theme.background, width=1))
            self._add(plot, item)
            for s in bar.segments:
                text = pg.TextItem(s.name, color="#000000", anchor=(0.5, 0.5))
                text.setPos(s.start + s.seconds / 2, row)
                labels.append((self._add(plot, text), s.seconds))
            how = "expected" if bar.how == "as expected" else "ceiling"
            total = pg.TextItem(f" {fmt(bar.seconds, 's')} {how}", color=self.theme.foreground, anchor=(0, 0.5))
            total.setPos(bar.seconds, row)
            self._add(plot, total)
        self._labels[phase] = labels
        self._swatches[phase] = [t for t in totals if isinstance(t, pg.BarGraphItem)]
        plot.setYRange(-0.5, max(len(bars), 1) - 0.5, padding=0.05)
        self._fit_labels(phase)

    def _add(self, plot: pg.PlotItem, item: Any) -> Any:
        plot.addItem(item)
        self._items.append(item)
        return item

    def _fit_labels(self, phase: str) -> None:
        """Leave room past the longest bar for its total (and before it for the series'
        swatches), and name a segment on it only where the name fits in its width as drawn now."""
        plot = self.plots[phase]
        box = plot.getViewBox()
        longest, width = self._longest.get(phase, 0.0), box.width()
        high = longest / max(0.4, 1.0 - TOTAL_PX / width) if longest > 0 and width > 0 else 1.0
        low = -SWATCH_PX * high / width if self._swatches.get(phase) and width > 0 else 0.0
        for swatch in self._swatches.get(phase, []):
            swatch.setOpts(x0=[low], width=[-low * 0.7])
        plot.setXRange(low, high, padding=0)
        per_second = width / (high - low)
        for text, seconds in self._labels.get(phase, []):
            text.setVisible(seconds * per_second >= text.textItem.boundingRect().width() + 4)

    def _on_box_resized(self, _box: object) -> None:
        for phase in self.plots:
            self._fit_labels(phase)

    def _fit_height(self, rows: int) -> None:
        self.setFixedHeight(FRAME_PX + ROW_PX * rows)

    def _style(self) -> None:
        for plot in self.plots.values():
            for name in ("bottom", "left"):
                axis = plot.getAxis(name)
                axis.setPen(self.theme.foreground)
                axis.setTextPen(self.theme.foreground)

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.view.setBackground(theme.background)
        self._style()
        self.set_bars([b for phase in (PREFILL, DECODE) for b in self._bars[phase]], self._pins)

    def readout_at(self, phase: str, seconds: float, row: float) -> str:
        """The row of the segment at ``seconds`` into bar ``row`` of ``phase`` ("" for none),
        handed to ``hovered``."""
        bars = self._bars.get(phase, ())
        index = round(row)
        if not 0 <= index < len(bars) or abs(row - index) > BAR_HEIGHT / 2:
            return ""
        bar = bars[index]
        segment = bar.segment_at(seconds)
        if segment is not None:
            text = bar.describe(segment)
        else:              # on its swatch: the series
            text = f"{bar.series}: {fmt(bar.seconds, 's')} {bar.how}" if seconds < 0 and len(bars) > 1 else ""
        if text:
            self.hovered.emit(text)
        return text

    def _on_scene_mouse_moved(self, pos: QPointF) -> None:
        for phase, plot in self.plots.items():
            box = plot.getViewBox()
            if box.sceneBoundingRect().contains(pos):
                point = box.mapSceneToView(pos)
                self.readout_at(phase, point.x(), point.y())
                return
