"""How each layer and role of a curve looks: pens, symbols and legend names.

A *layer* is one source of curves on every plot: the current scenario, a pinned one, a
measured series, a calibrated prediction. Roles come from ``Curve.role``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from rooflab.core.report.chart_types import Curve
from rooflab.gui.plots.labels import wrap_text
from rooflab.gui.widgets.theme import Theme

LayerKind = Literal["current", "pinned", "measured", "calibrated"]


@dataclass(frozen=True, slots=True)
class Layer:
    """One series source: ``key`` is unique on a plot ("current", "pin:3", "measured")."""

    key: str
    label: str
    kind: LayerKind
    index: int = 0          # colour slot for pinned series, stable while pinned

    def colour(self, theme: Theme, role: str) -> QColor:
        """The colour of a curve of ``role``: the current series' (the calibrated fit of slot 0
        too), the expected colours (a calibrated layer of any other slot: ``EXPECTED_INDEX``),
        a measured series' (black or white, then greys: never a pinned series' colour) or a
        pinned series' own."""
        if self.kind == "current" or (self.kind == "calibrated" and self.index == 0):
            return QColor(theme.current.get(role, theme.current["main"]))
        if self.kind == "calibrated":
            return QColor(theme.expected.get(role, theme.expected["main"]))
        if self.kind == "measured":
            if self.index == 0:
                return QColor(theme.measured)
            return QColor(theme.measured_series[(self.index - 1) % len(theme.measured_series)])
        return QColor(theme.series[self.index % len(theme.series)])


CURRENT = Layer(key="current", label="current", kind="current")
#: the colour slot of the expected curves' calibrated layer (``Theme.expected``); slot 0 is the
#: Measure tab's fit, drawn in the current series' colours
EXPECTED_INDEX = 1

_DASH = {"memory": Qt.PenStyle.DashLine, "compute": Qt.PenStyle.DashLine, "limit": Qt.PenStyle.DashDotLine,
         "crossover": Qt.PenStyle.DashLine, "secondary": Qt.PenStyle.SolidLine,
         "calibrated": Qt.PenStyle.DotLine, "main": Qt.PenStyle.SolidLine, "marker": Qt.PenStyle.DotLine,
         "link": Qt.PenStyle.DashDotDotLine}
_WIDTH = {"main": 2.6, "secondary": 2.0, "memory": 1.4, "compute": 1.4, "limit": 1.6, "crossover": 1.3,
          "marker": 1.2, "calibrated": 2.0, "link": 1.8}


def draws(layer: Layer, curve: Curve) -> bool:
    """Whether a layer draws a curve: pinned series skip the clock components (the plot would
    drown in lines) but keep their own limits, crossovers and markers."""
    return not (layer.kind == "pinned" and curve.role in ("memory", "compute", "link"))


def line_pen(layer: Layer, curve: Curve, theme: Theme, twin_role: str = "") -> Any:
    """The pen of a line. ``twin_role``: for a calibrated curve, the role of the prediction it
    calibrates; the dotted line takes that prediction's colour (the total rate's, say)."""
    role = "calibrated" if layer.kind == "calibrated" else curve.role
    colour = layer.colour(theme, twin_role if role == "calibrated" and twin_role else role)
    style = _DASH.get(role, Qt.PenStyle.SolidLine)
    if layer.kind == "pinned" and curve.role == "secondary":
        style = Qt.PenStyle.DashLine
    return pg.mkPen(colour, width=_WIDTH.get(role, 1.5), style=style, cosmetic=True)


MEASURED_SYMBOLS = ("o", "s", "t", "d", "t1")


def point_style(layer: Layer, curve: Curve, theme: Theme, ordinal: int = 0) -> dict[str, Any]:
    """Keyword arguments for a PlotDataItem drawing points: filled circles for the current
    workload, diamonds for pinned series, hollow symbols for measurements (rings, then squares,
    triangles... for the ``ordinal``-th point series of one measured layer on a panel, so the
    machine's multiplies and the model's passes stay apart on the roofline)."""
    if layer.kind == "measured":
        colour = layer.colour(theme, "main")
        symbol = MEASURED_SYMBOLS[ordinal % len(MEASURED_SYMBOLS)]
        return dict(pen=None, symbol=symbol, symbolSize=9, symbolBrush=None,
                    symbolPen=pg.mkPen(colour, width=1.8))
    colour = layer.colour(theme, "marker" if curve.role == "marker" else curve.role)
    symbol = "d" if layer.kind == "pinned" else "o"
    return dict(pen=None, symbol=symbol, symbolSize=11, symbolBrush=pg.mkBrush(colour),
                symbolPen=pg.mkPen(theme.background, width=1.5))


MARKER_NAME = "current workload"
PINNED_SUFFIX = ", pinned"


def legend_name(layer: Layer, curve: Curve) -> str | None:
    """The legend entry for a drawn curve, None for no entry (one per series, not per line;
    the current workload's markers share ``MARKER_NAME``, which a legend lists once). A pinned
    series is named once, by its main curve; its other lines share "<line>, pinned" with every
    pin (``shared_name``): its colour names the series, the entry the line. (Named each with the
    series in full, "TTFT p90: Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090 · ...", two pins made the
    Serving legend 14 entries of two lines, taller than the plot at 1280 x 720.)"""
    if curve.is_reference:
        return None
    if layer.kind == "current":
        return MARKER_NAME if curve.kind == "points" else curve.label
    if layer.kind == "pinned":
        if curve.kind == "points":
            return None
        return layer.label if curve.role == "main" else f"{curve.label}{PINNED_SUFFIX}"
    if curve.label == layer.label:      # a series that is the layer's only curve on its panel
        return layer.label
    return f"{layer.label}: {curve.label}"


def shared_name(name: str) -> bool:
    """Whether entries of this name are listed once in a legend (``legend_name``)."""
    return name == MARKER_NAME or name.endswith(PINNED_SUFFIX)


#: legend text wraps past this many characters (a name is never cut: its parts are what
#: tells series apart, see ``chart_types.distinguishing_labels``)
LEGEND_WIDTH = 40


def legend_text(name: str, room: float = LEGEND_WIDTH, measure: Callable[[str], float] = len) -> str:
    """A legend entry, on more lines when longer than ``room`` (``LEGEND_WIDTH`` characters, or
    pixels as ``measure`` reckons them)."""
    return "<br>".join(wrap_text(name, room, measure))


def translucent(colour: str, alpha: int) -> QColor:
    """``colour`` with ``alpha`` (0-255): a legend's or a label's veil over the plot."""
    c = QColor(colour)
    c.setAlpha(alpha)
    return c
