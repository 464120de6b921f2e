"""One plot area of a chart: axes, legend, and the graphics items of every layer's curves.

Items are created the first time a (layer, curve) is drawn and updated with ``setData``
afterwards; a curve that disappears is hidden, not deleted, until its layer goes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyqtgraph as pg

from rooflab.core.report.chart_types import Curve, Panel
from rooflab.gui import units
from rooflab.gui.plots.axis import UnitAxis, log_position
from rooflab.gui.plots.style import MARKER_NAME, Layer, draws, legend_name, line_pen, point_style
from rooflab.gui.theme import Theme


@dataclass
class Drawn:
    """What is on screen for one (layer, curve key): the curve and its graphics items."""

    layer: Layer
    curve: Curve
    items: list[Any] = field(default_factory=list)
    style_key: tuple[object, ...] = ()        # what the items' pens were made for


# the least plot-box height, px, whatever the y-axis title: below it ticks crowd together
MIN_BOX_HEIGHT = 110


class PanelView:
    def __init__(self, panel: Panel, theme: Theme) -> None:
        self.key = panel.key
        self.panel = panel
        self._bottom = UnitAxis("bottom", panel.x_label, panel.x_unit)
        self._left = UnitAxis("left", panel.y_label, panel.y_unit)
        self.plot = pg.PlotItem(axisItems={"bottom": self._bottom, "left": self._left})
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        # the legend sits in its own column beside the plot, so it never hides a curve
        self.legend = pg.LegendItem(labelTextSize="8pt", verSpacing=-4, horSpacing=8)
        self.drawn: dict[tuple[str, str], Drawn] = {}
        self.hover_dot = pg.ScatterPlotItem(size=13, pen=pg.mkPen("#888", width=2), brush=None)
        self.hover_dot.setZValue(50)
        self.plot.addItem(self.hover_dot, ignoreBounds=True)
        self.stack_labels: list[str] = []
        self._legend_names: set[str] = set()
        self._x_title = True
        self.theme = theme
        self.configure(panel)
        self.apply_theme(theme)

    # -- set-up -----------------------------------------------------------------------------
    def configure(self, panel: Panel) -> None:
        layout = (panel.title, panel.x_label, panel.x_unit, panel.y_label, panel.y_unit, panel.log_x, panel.log_y)
        self.panel = panel
        if getattr(self, "_layout", None) == layout:
            return                      # re-applying titles and log modes costs a full relayout
        self._layout = layout
        self.plot.setTitle(panel.title, size="10pt")
        self._bottom.set_unit(panel.x_label, panel.x_unit)
        self._left.set_unit(panel.y_label, panel.y_unit)
        self._bottom.showLabel(self._x_title)
        self.plot.setLogMode(x=panel.log_x, y=panel.log_y)
        self.plot.showGrid(x=True, y=True, alpha=self.theme.grid_alpha)

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self._layout = None
        for axis in (self._bottom, self._left):
            axis.setPen(pg.mkPen(theme.foreground))
            axis.setTextPen(pg.mkPen(theme.foreground))
            axis.labelStyle = {"color": theme.foreground}
            axis.set_unit(axis.title, axis.unit)
        self._bottom.showLabel(self._x_title)
        self.plot.titleLabel.setText(self.panel.title, color=theme.foreground, size="10pt")
        self.legend.setBrush(pg.mkBrush(QColorA(theme.background, 200)))
        self.legend.setLabelTextColor(theme.foreground)
        for _sample, label in self.legend.items:
            # pyqtgraph stores the new colour but keeps the old text rendered: dark on dark
            label.setText(label.text)
        self.plot.showGrid(x=True, y=True, alpha=theme.grid_alpha)

    def show_x_title(self, shown: bool) -> None:
        """Show the x-axis title or not (a panel stacked over one with the same x axis
        leaves it to that one: the space goes to the plot)."""
        self._x_title = shown
        self._bottom.showLabel(shown)

    def min_height(self) -> float:
        """The least height, px, at which the y-axis title fits beside the plot box: the
        box as tall as the title is long, plus the panel title and the x axis."""
        title = self._left.label.boundingRect().width() if self._left.label.isVisible() else 0.0
        box = max(float(MIN_BOX_HEIGHT), title + 6.0)
        return box + self.plot.titleLabel.minimumHeight() + self._bottom.minimumHeight() + 4.0

    # -- drawing ----------------------------------------------------------------------------
    def draw(self, layer: Layer, curves: Sequence[Curve], stack_slot: int = 0) -> None:
        """Show ``curves`` for ``layer``, replacing what the layer showed before."""
        wanted = {c.key for c in curves if draws(layer, c)}
        for (layer_key, curve_key), drawn in self.drawn.items():
            if layer_key == layer.key and curve_key not in wanted:
                for item in drawn.items:
                    item.setVisible(False)
        for curve in curves:
            if not draws(layer, curve) or self._repeats_current(layer, curve):
                stale = self.drawn.get((layer.key, curve.key))
                for item in stale.items if stale else ():
                    item.setVisible(False)
                continue
            self._draw_one(layer, curve, legend_name(layer, curve), stack_slot)

    def _repeats_current(self, layer: Layer, curve: Curve) -> bool:
        """A pinned series' limit line where the current series already draws the same one
        (the same machine's memory, say) would only print its label twice."""
        if layer.kind != "pinned" or not curve.is_reference:
            return False
        current = self.drawn.get(("current", curve.key))
        return (current is not None and bool(current.items) and current.items[0].isVisible()
                and np.array_equal(current.curve.x, curve.x) and np.array_equal(current.curve.y, curve.y))

    def drop_layer(self, layer_key: str) -> None:
        for key in [k for k in self.drawn if k[0] == layer_key]:
            for item in self.drawn.pop(key).items:
                if isinstance(item, (pg.PlotDataItem, pg.BarGraphItem)):
                    self.legend.removeItem(item)
                self.plot.removeItem(item)

    def layers(self) -> list[Layer]:
        seen: dict[str, Layer] = {}
        for drawn in self.drawn.values():
            seen.setdefault(drawn.layer.key, drawn.layer)
        return list(seen.values())

    def curves_of(self, layer_key: str) -> list[Curve]:
        """The curves a layer shows now, in drawing order."""
        return [d.curve for (lk, _), d in self.drawn.items() if lk == layer_key and d.items
                and d.items[0].isVisible()]

    def _draw_one(self, layer: Layer, curve: Curve, name: str | None, stack_slot: int) -> None:
        key = (layer.key, curve.key)
        drawn = self.drawn.get(key)
        if drawn is None:
            drawn = self.drawn[key] = Drawn(layer=layer, curve=curve)
        drawn.layer, drawn.curve = layer, curve
        if curve.kind in ("line", "points"):
            self._draw_data(drawn, name)
        elif curve.kind in ("vline", "hline"):
            self._draw_reference(drawn, stack_slot)
        else:
            self._draw_stack(drawn, stack_slot)

    def _draw_data(self, drawn: Drawn, name: str | None) -> None:
        layer, curve = drawn.layer, drawn.curve
        ordinal = self._point_ordinal(layer, curve) if curve.kind == "points" else 0
        key = (layer.kind, layer.index, curve.kind, curve.role, self.theme, ordinal)
        style = {}
        if key != drawn.style_key:            # new pens rebuild a scatter's symbols: only on change
            style = point_style(layer, curve, self.theme, ordinal) if curve.kind == "points" else {
                "pen": line_pen(layer, curve, self.theme)}
            drawn.style_key = key
        if not drawn.items:
            item = pg.PlotDataItem(**style)
            z = 20 if curve.kind == "points" else (10 if curve.role == "main" else 5)
            item.setZValue(z - (2 if layer.kind == "pinned" else 0))   # the current series on top
            self.plot.addItem(item)
            if name and not (name == MARKER_NAME and MARKER_NAME in self._legend_names):
                self.legend.addItem(item, _short(name))
                self._legend_names.add(name)
            drawn.items.append(item)
        item = drawn.items[0]
        item.setData(curve.x, curve.y, **style)
        item.setVisible(True)
        if curve.role == "marker" and curve.label != "current workload" and curve.x.size == 1 \
                and layer.kind == "current":
            self._annotate(drawn)

    def _point_ordinal(self, layer: Layer, curve: Curve) -> int:
        """Position of ``curve`` among this layer's point series on this panel (first drawn: 0)."""
        keys = [k for k, d in self.drawn.items() if k[0] == layer.key and d.curve.kind == "points"]
        return keys.index((layer.key, curve.key)) if (layer.key, curve.key) in keys else len(keys)

    def _annotate(self, drawn: Drawn) -> None:
        """Name a marker that is not simply "the current workload" (roofline: prefill, decode)."""
        curve = drawn.curve
        if len(drawn.items) < 2:
            text = pg.TextItem(anchor=(-0.08, 1.05))
            text.setZValue(21)
            self.plot.addItem(text, ignoreBounds=True)
            drawn.items.append(text)
        text = drawn.items[1]
        label = curve.label
        colour = drawn.layer.colour(self.theme, "marker")
        if (text.toPlainText(), text.color) != (label, colour):
            text.setText(label, color=colour)
        text.setPos(log_position(float(curve.x[0]), self.panel.log_x), log_position(float(curve.y[0]),
                                                                                    self.panel.log_y))
        text.setVisible(True)

    def _draw_reference(self, drawn: Drawn, slot: int) -> None:
        layer, curve = drawn.layer, drawn.curve
        vertical = curve.kind == "vline"
        values = curve.x if vertical else curve.y
        unit = curve.x_unit if vertical else curve.y_unit
        log = self.panel.log_x if vertical else self.panel.log_y
        while len(drawn.items) < values.size:
            line = pg.InfiniteLine(angle=90 if vertical else 0, movable=False)
            line.setZValue(3)
            # labels of different series (and roles) step along the line so they do not print
            # over each other; pyqtgraph flips the anchor to keep the text inside the view
            step = (0.09 if vertical else 0.3) * slot + (0.3 if curve.role == "secondary" else 0.0)
            position = (0.96 - step) if vertical else (0.03 + step)
            anchors = [(-0.03, 0), (1.03, 0)] if vertical else [(0, 0), (0, 1)]
            pg.InfLineLabel(line, position=max(0.04, min(0.97, position)), anchors=anchors)
            self.plot.addItem(line, ignoreBounds=True)
            drawn.items.append(line)
        for i, line in enumerate(drawn.items):
            if i >= values.size:
                line.setVisible(False)
                continue
            value = float(values[i])
            line.setPen(line_pen(layer, curve, self.theme))
            line.setPos(log_position(value, log))
            label = f"{curve.label} {units.fmt(value, unit)}"      # a pinned series': its colour says whose
            colour = line_pen(layer, curve, self.theme).color()
            for child in line.childItems():
                if isinstance(child, pg.InfLineLabel) and (child.format, child.color) != (label, colour):
                    child.setFormat(label)          # text layout is slow: only when it changed
                    child.setColor(colour)
            line.setVisible(True)

    def _draw_stack(self, drawn: Drawn, slot: int) -> None:
        """Stacked bar ``slot`` (0 = current series) with a tick at the machine's capacity."""
        layer, curve = drawn.layer, drawn.curve
        sizes = curve.y
        if not drawn.items:
            for category in curve.categories:
                bar = pg.BarGraphItem(x=[slot], height=[0.0], width=0.55, y0=[0.0])
                self.plot.addItem(bar)
                if layer.kind == "current":
                    self.legend.addItem(bar, category)
                drawn.items.append(bar)
            cap = pg.PlotDataItem(pen=pg.mkPen(self.theme.current["limit"], width=2.5))
            cap.setZValue(15)
            self.plot.addItem(cap)
            drawn.items.append(cap)
        colours = self.theme.stack
        for i, bar in enumerate(drawn.items[:-1]):
            colour = colours[i % len(colours)]
            if curve.categories[i] == "over capacity":
                colour = self.theme.current["limit"]
            bar.setOpts(x=[slot], y0=[float(curve.extras["base"][i])], height=[float(sizes[i])],
                        brush=pg.mkBrush(colour), pen=pg.mkPen(self.theme.background, width=1))
            bar.setVisible(True)
        capacity = float(curve.extras["capacity"][0]) if "capacity" in curve.extras else math.nan
        cap_item = drawn.items[-1]
        cap_item.setData([slot - 0.38, slot + 0.38], [capacity, capacity])
        cap_item.setVisible(True)
        while len(self.stack_labels) <= slot:
            self.stack_labels.append("")
        self.stack_labels[slot] = layer.label
        ticks = [(i, _short(label)) for i, label in enumerate(self.stack_labels)]
        self.plot.getAxis("bottom").setTicks([ticks, []])

    # -- framing ----------------------------------------------------------------------------
    def frame(self) -> None:
        """Fit the view to every visible series and limit line (autorange ignores the latter)."""
        xs: list[np.ndarray] = []
        ys: list[np.ndarray] = []
        for drawn in self.drawn.values():
            if not drawn.items or not drawn.items[0].isVisible():
                continue
            c = drawn.curve
            if c.kind in ("line", "points"):
                xs.append(c.x)
                ys.append(c.y)
            elif c.kind == "hline" and c.role in ("limit", "marker"):
                ys.append(c.y)
            elif c.kind == "stack":
                ys.append(np.concatenate([c.extras["base"] + c.y, c.extras["capacity"]]))
        if self.stack_labels:
            self.plot.setXRange(-0.6, len(self.stack_labels) - 0.4, padding=0)
        elif xs:
            self._set_range(np.concatenate(xs), self.panel.log_x, self.plot.setXRange, zero=False)
        if ys:
            self._set_range(np.concatenate(ys), self.panel.log_y, self.plot.setYRange, zero=True)

    @staticmethod
    def _set_range(values: np.ndarray, log: bool, setter: Any, zero: bool) -> None:
        values = values[np.isfinite(values)]
        if log:
            values = values[values > 0]
        if values.size == 0:
            return
        low, high = float(values.min()), float(values.max())
        if log:
            low, high = math.log10(low), math.log10(high)
            if high - low < 1e-9:
                low, high = low - 0.5, high + 0.5
            setter(low, high, padding=0.05)
            return
        if zero:
            low = min(low, 0.0)
        if high - low <= 0:
            high = low + (abs(low) or 1.0)
        setter(low, high, padding=0.07)      # room for the labels of limit lines

    # -- hover ------------------------------------------------------------------------------
    def nearest(self, view_x: float, view_y: float, max_pixels: float = 24.0) -> tuple[Drawn, int] | None:
        """The drawn point closest to a view position (log10 coordinates on log axes), within
        ``max_pixels`` on screen."""
        px, py = self.plot.getViewBox().viewPixelSize()
        px, py = px or 1.0, py or 1.0
        best: tuple[float, Drawn, int] | None = None
        for drawn in self.drawn.values():
            c = drawn.curve
            if c.kind not in ("line", "points") or not drawn.items or not drawn.items[0].isVisible():
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                x = np.log10(c.x) if self.panel.log_x else c.x
                y = np.log10(c.y) if self.panel.log_y else c.y
            d = np.hypot((x - view_x) / px, (y - view_y) / py)
            d[~np.isfinite(d)] = np.inf
            if d.size == 0:
                continue
            i = int(np.argmin(d))
            score = float(d[i]) - (6.0 if c.kind == "points" else 0.0)   # markers win near ties
            if d[i] <= max_pixels and (best is None or score < best[0]):
                best = (score, drawn, i)
        return None if best is None else (best[1], best[2])

    def stack_at(self, view_x: float, view_y: float) -> tuple[Drawn, int] | None:
        for drawn in self.drawn.values():
            c = drawn.curve
            if c.kind != "stack" or not drawn.items or not drawn.items[0].isVisible():
                continue
            slot = self.stack_labels.index(drawn.layer.label) if drawn.layer.label in self.stack_labels else -1
            if abs(view_x - slot) > 0.3:
                continue
            bases = c.extras["base"]
            inside = [i for i in range(c.y.size) if bases[i] <= view_y <= bases[i] + c.y[i] and c.y[i] > 0]
            if inside:
                return drawn, inside[-1]          # the segment drawn last is on top
        return None


def _short(label: str, limit: int = 44) -> str:
    """``label`` in at most ``limit`` characters, cut in the middle: series pinned from the same
    model and machine differ only at the end ("..., batch 7"), which a cut at the end hid."""
    if len(label) <= limit:
        return label
    tail = (limit - 1) // 2
    return label[: limit - 1 - tail] + "…" + label[-tail:]


def QColorA(colour: str, alpha: int) -> Any:  # noqa: N802 - reads like the Qt constructor
    from PySide6.QtGui import QColor

    c = QColor(colour)
    c.setAlpha(alpha)
    return c
