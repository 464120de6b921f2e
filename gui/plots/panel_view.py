"""One plot area of a chart: axes, legend, and the graphics items of every layer's curves.

Items are created the first time a (layer, curve) is drawn and updated with ``setData``
afterwards; a curve that disappears is hidden, not deleted, until its layer goes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyqtgraph as pg
import shiboken6

from rooflab.core.report import units
from rooflab.core.report.chart_types import Curve, Panel
from rooflab.gui.plots import label_layout
from rooflab.gui.plots.axis import UnitAxis, log_position
from rooflab.gui.plots.drawn import Drawn
from rooflab.gui.plots.legend import Legend
from rooflab.gui.plots.note import PanelNote
from rooflab.gui.plots.stack import StackBars
from rooflab.gui.plots.style import (
    Layer,
    draws,
    legend_name,
    line_pen,
    point_style,
    translucent,
)
from rooflab.gui.widgets.theme import Theme

# the least plot-box height, px, whatever the y-axis title: below it ticks crowd together
MIN_BOX_HEIGHT = 110
LABEL_VEIL = 190          # opacity (0-255) of the background behind a label: lines under it fade


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
        self.legends = Legend()
        self.legend = self.legends.item
        self.drawn: dict[tuple[str, str], Drawn] = {}
        self._layout: tuple[str, str, str, str, str, bool, bool] | None = None     # what configure() last applied
        self.hover_dot = pg.ScatterPlotItem(size=13, pen=pg.mkPen("#888", width=2), brush=None)
        self.hover_dot.setZValue(50)
        self.plot.addItem(self.hover_dot, ignoreBounds=True)
        self.bars = StackBars(self.plot, self.legend)
        self._placing = False
        self._again = False
        self._framing = False
        self.placed_for: tuple[tuple[object, ...], list[Curve]] = ((), [])
        # labels move when the view's scale changes (resize, new range, a linked axis)
        self.plot.getViewBox().sigTransformChanged.connect(self._on_view_transform_changed)
        self.plot.getViewBox().sigResized.connect(self._on_view_transform_changed)
        self._x_title = True
        self.note = PanelNote(self.plot.getViewBox())      # why nothing is drawn
        self.theme = theme
        self.configure(panel)
        self.apply_theme(theme)

    @property
    def stack_labels(self) -> list[str]:
        """The series name of each memory bar (slot 0 the current series); empty elsewhere."""
        return self.bars.labels

    # -- set-up -----------------------------------------------------------------------------
    def configure(self, panel: Panel) -> None:
        layout = (panel.title, panel.x_label, panel.x_unit, panel.y_label, panel.y_unit, panel.log_x, panel.log_y)
        self.panel = panel
        if self._layout == layout:
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
        self.legend.setBrush(pg.mkBrush(translucent(theme.background, 200)))
        self.legend.setLabelTextColor(theme.foreground)
        for _sample, label in self.legend.items:
            # pyqtgraph stores the new colour but keeps the old text rendered: dark on dark
            label.setText(label.text)
        for drawn in self.drawn.values():
            for text in drawn.labels:                  # their veils: the new background
                text.fill = pg.mkBrush(translucent(theme.background, LABEL_VEIL))
                text.update()
        self.plot.showGrid(x=True, y=True, alpha=theme.grid_alpha)

    def set_note(self, text: str) -> None:
        """Show ``text`` over the plot box, wrapped to its width ("" hides it)."""
        self.note.show_text(text, self.theme)

    def set_legend_room(self, pixels: float) -> None:
        """Wrap the legend's entries to ``pixels`` (under a panel side by side with others), or
        to ``LEGEND_WIDTH`` characters (0: beside the panel)."""
        self.legends.set_room(pixels)

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
    def draw(self, layer: Layer, curves: Sequence[Curve], slot: int = 0) -> None:
        """Show ``curves`` for ``layer``, replacing what the layer showed before."""
        wanted = {c.key for c in curves if draws(layer, c)}
        for (layer_key, curve_key), drawn in self.drawn.items():
            if layer_key == layer.key and curve_key not in wanted:
                self._hide(drawn)
        for curve in curves:
            if not draws(layer, curve) or self._repeats_earlier(layer, curve, slot):
                stale = self.drawn.get((layer.key, curve.key))
                if stale is not None:
                    self._hide(stale)
                continue
            self._draw_one(layer, curve, legend_name(layer, curve), slot)

    def _hide(self, drawn: Drawn) -> None:
        """Hide a curve no longer drawn, and its legend entry (a hidden curve's entry showed a
        crossed-out eye for an icon)."""
        drawn.hide()
        for item in drawn.items:
            self.legends.hide(item)

    def _repeats_earlier(self, layer: Layer, curve: Curve, slot: int) -> bool:
        """A pinned series' limit line where the current series or one pinned before it
        already draws the same one (the same machine's memory, the same model's weights)
        would only print its label twice."""
        if layer.kind != "pinned" or not curve.is_reference:
            return False
        return any(d.visible and d.curve.key == curve.key and d.layer.kind in ("current", "pinned")
                   and d.slot < slot and np.array_equal(d.curve.x, curve.x) and np.array_equal(d.curve.y, curve.y)
                   for d in self.drawn.values())

    def drop_layer(self, layer_key: str) -> None:
        for key in [k for k in self.drawn if k[0] == layer_key]:
            drawn = self.drawn.pop(key)
            for item in (*drawn.items, *drawn.labels):
                if isinstance(item, (pg.PlotDataItem, pg.BarGraphItem)):
                    self.legends.hide(item)
                    self.legend.removeItem(item)
                self.plot.removeItem(item)

    def layers(self) -> list[Layer]:
        seen: dict[str, Layer] = {}
        for drawn in self.drawn.values():
            seen.setdefault(drawn.layer.key, drawn.layer)
        return list(seen.values())

    def curves_of(self, layer_key: str) -> list[Curve]:
        """The curves a layer shows now, in drawing order."""
        return [d.curve for (lk, _), d in self.drawn.items() if lk == layer_key and d.visible]

    def _draw_one(self, layer: Layer, curve: Curve, name: str | None, slot: int) -> None:
        key = (layer.key, curve.key)
        drawn = self.drawn.get(key)
        if drawn is None:
            drawn = self.drawn[key] = Drawn(layer=layer, curve=curve)
        drawn.layer, drawn.curve, drawn.slot = layer, curve, slot
        if curve.kind in ("line", "points"):
            self._draw_data(drawn, name)
        elif curve.kind in ("vline", "hline"):
            self._draw_reference(drawn, slot)
        else:
            self._draw_stack(drawn)

    def _draw_data(self, drawn: Drawn, name: str | None) -> None:
        layer, curve = drawn.layer, drawn.curve
        ordinal = self._point_ordinal(layer, curve) if curve.kind == "points" else 0
        twin = self._twin_role(layer, curve)
        key = (layer.kind, layer.index, curve.kind, curve.role, self.theme, ordinal, twin)
        style = {}
        if key != drawn.style_key:            # new pens rebuild a scatter's symbols: only on change
            style = point_style(layer, curve, self.theme, ordinal) if curve.kind == "points" else {
                "pen": line_pen(layer, curve, self.theme, twin)}
            drawn.style_key = key
        if not drawn.items:
            item = pg.PlotDataItem(**style)
            z = 20 if curve.kind == "points" else (10 if curve.role == "main" else 5)
            item.setZValue(z - (2 if layer.kind == "pinned" else 0))   # the current series on top
            self.plot.addItem(item)
            drawn.items.append(item)
        item = drawn.items[0]
        self.legends.show(item, name)
        item.setData(curve.x, curve.y, **style)
        item.setVisible(True)
        if curve.role == "marker" and curve.label != "current workload" and curve.x.size == 1 \
                and layer.kind == "current":
            self._annotate(drawn)

    def _twin_role(self, layer: Layer, curve: Curve) -> str:
        """A calibrated curve's prediction's role ("secondary" for the total rate), so each
        calibrated line takes its prediction's colour: two drawn alike shared one swatch. A
        series' own expected curves (the Serving chart's four latencies) take their ceiling
        twin's in that series: the four were drawn alike, in one dotted pen."""
        if layer.kind != "calibrated" and curve.role != "calibrated":
            return ""
        base = curve.key.removeprefix("calibrated_").removeprefix("expected_")
        twin = self.drawn.get(("current" if layer.kind == "calibrated" else layer.key, base))
        return twin.curve.role if twin is not None and twin.curve is not curve else ""

    def _point_ordinal(self, layer: Layer, curve: Curve) -> int:
        """Position of ``curve`` among this layer's point series on this panel (first drawn: 0)."""
        keys = [k for k, d in self.drawn.items() if k[0] == layer.key and d.curve.kind == "points"]
        return keys.index((layer.key, curve.key)) if (layer.key, curve.key) in keys else len(keys)

    def _annotate(self, drawn: Drawn) -> None:
        """Name a marker that is not simply "the current workload" (roofline: prefill, decode)."""
        self._set_labels(drawn, [drawn.curve.label], drawn.layer.colour(self.theme, "marker"))

    def _draw_reference(self, drawn: Drawn, slot: int) -> None:
        layer, curve = drawn.layer, drawn.curve
        vertical = curve.kind == "vline"
        values = curve.x if vertical else curve.y
        unit = curve.x_unit if vertical else curve.y_unit
        log = self.panel.log_x if vertical else self.panel.log_y
        while len(drawn.items) < values.size:
            line = pg.InfiniteLine(angle=90 if vertical else 0, movable=False)
            line.setZValue(3)
            self.plot.addItem(line, ignoreBounds=True)
            drawn.items.append(line)
        pen = line_pen(layer, curve, self.theme)
        for i, line in enumerate(drawn.items):
            if i >= values.size:
                line.setVisible(False)
                continue
            line.setPen(pen)
            line.setPos(log_position(float(values[i]), log))
            line.setVisible(True)
        # a pinned series' label: its colour says whose
        self._set_labels(drawn, [f"{curve.label} {units.fmt(float(v), unit)}" for v in values], pen.color())

    def _set_labels(self, drawn: Drawn, texts: Sequence[str], colour: Any) -> None:
        """Show ``texts`` as ``drawn``'s labels; ``layout_labels`` says where."""
        while len(drawn.labels) < len(texts):
            # on a veil of the background, so a line passing under it does not strike it through
            text = pg.TextItem(anchor=(0, 0), fill=translucent(self.theme.background, LABEL_VEIL))
            text.textItem.document().setDocumentMargin(1)        # 4 px a side took rows a panel lacks
            text.setZValue(21)
            self.plot.addItem(text, ignoreBounds=True)
            drawn.labels.append(text)
        for i, text in enumerate(drawn.labels):
            if i >= len(texts):
                text.setVisible(False)
                continue
            if (text.toPlainText(), text.color) != (texts[i], colour):
                text.setText(texts[i], color=colour)        # text layout is slow: only when it changed
            text.setVisible(True)

    def _draw_stack(self, drawn: Drawn) -> None:
        self.bars.draw(drawn, self.theme)
        self.bars.sync_legend([d for d in self.drawn.values() if d.visible], self.theme)

    # -- framing ----------------------------------------------------------------------------
    def frame(self) -> None:
        """Fit the view to every visible series and limit line (autorange ignores the latter)."""
        xs: list[np.ndarray] = []
        ys: list[np.ndarray] = []
        for drawn in self.drawn.values():
            if not drawn.visible:
                continue
            c = drawn.curve
            if c.kind in ("line", "points"):
                xs.append(c.x)
                ys.append(c.y)
            elif c.kind == "hline" and c.role in ("limit", "marker"):
                ys.append(c.y)
            elif c.kind == "stack":
                ys.append(np.concatenate([c.extras["base"] + c.y, c.extras["capacity"]]))
        self._framing = True                 # one layout for the new ranges, not one per axis
        try:
            if self.stack_labels:
                self.plot.setXRange(-0.6, len(self.stack_labels) - 0.4, padding=0)
            elif xs:
                self._set_range(np.concatenate(xs), self.panel.log_x, self.plot.setXRange, zero=False)
            if ys:
                self._set_range(np.concatenate(ys), self.panel.log_y, self.plot.setYRange, zero=True)
        finally:
            self._framing = False
        self.layout_labels()

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
        pad = 0.07 * (high - low)            # room for the labels of limit lines
        # an axis of counts (tokens in the cache) does not run into negative values; the
        # y axes keep room under 0 so a line along 0 stays off the axis
        start = low - pad if zero or low < 0 else max(0.0, low - pad)
        setter(start, high + pad, padding=0)

    # -- labels -----------------------------------------------------------------------------
    def layout_labels(self) -> None:
        """Put every visible label beside its line or point, inside the plot box, off the
        curves and off each other (``label_layout``), and word the bars' names to their width.
        A request while placing (the bars' names can resize the box) is served right after."""
        if self._placing:
            self._again = True
            return
        if not self._alive():
            return
        self._placing = True
        try:
            for _ in range(3):               # settles at once; the bound only guards a loop
                self._again = False
                label_layout.place_labels(self)
                self.bars.word_ticks()
                if not self._again:
                    break
        finally:
            self._placing = False

    def _alive(self) -> bool:
        """Whether the plot's C++ items still exist: a view box being torn down with its window
        still emits sigResized, and placing labels then touched its deleted child group (a
        segfault of the test process once, between two window tests)."""
        box = self.plot.getViewBox()
        return shiboken6.isValid(self.plot) and shiboken6.isValid(box) and shiboken6.isValid(box.childGroup)

    def shown_labels(self) -> list[tuple[Drawn, str, tuple[float, float, float, float]]]:
        """Each label on show, with its curve and its box (left, top, width, height) in the plot
        box's pixels: what tests check for overlaps."""
        return label_layout.shown_labels(self)

    def pixels(self, curve: Curve) -> np.ndarray:
        """A line's points in the plot box's pixels, as (n, 2)."""
        return label_layout.pixels(self, curve)

    def _on_view_transform_changed(self, *_args: object) -> None:
        if not self._alive():
            return
        if self.note.isVisible():
            self.note.place()
        if not self._framing:
            self.layout_labels()

    # -- hover ------------------------------------------------------------------------------
    def nearest(self, view_x: float, view_y: float, max_pixels: float = 24.0) -> tuple[Drawn, int] | None:
        """The drawn point closest to a view position (log10 coordinates on log axes), within
        ``max_pixels`` on screen."""
        px, py = self.plot.getViewBox().viewPixelSize()
        px, py = px or 1.0, py or 1.0
        best: tuple[float, Drawn, int] | None = None
        for drawn in self.drawn.values():
            c = drawn.curve
            if c.kind not in ("line", "points") or not drawn.visible:
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
            if c.kind != "stack" or not drawn.visible:
                continue
            if abs(view_x - drawn.bar) > 0.3:
                continue
            bases = c.extras["base"]
            inside = [i for i in range(c.y.size) if bases[i] <= view_y <= bases[i] + c.y[i] and c.y[i] > 0]
            if inside:
                return drawn, inside[-1]          # the segment drawn last is on top
        return None
