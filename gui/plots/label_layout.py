"""Where a panel's labels go on screen: the Qt side of ``labels.place``. A panel hands over
its drawn curves; this reads their pixel positions and the labels' sizes off the plot, places
them, and moves the text items there."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from rooflab.core.report.chart_types import Curve, Panel
from rooflab.gui.plots.axis import log_position
from rooflab.gui.plots.drawn import Drawn
from rooflab.gui.plots.labels import LabelSpec, place


class PanelView(Protocol):
    """What the layout reads of a panel (``panel_view.PanelView``)."""

    plot: Any
    panel: Panel
    drawn: dict[tuple[str, str], Drawn]
    placed_for: tuple[tuple[object, ...], list[Curve]]      # what the labels were last placed for

MARKER_REACH = 6.0          # px either side of a marker that labels keep off


def pixels(view: PanelView, curve: Curve) -> np.ndarray:
    """``curve``'s points in the plot box's pixels, as (n, 2)."""
    t = view.plot.getViewBox().childTransform()
    return np.column_stack([_view(curve.x, view.panel.log_x) * t.m11() + t.dx(),
                            _view(curve.y, view.panel.log_y) * t.m22() + t.dy()])


def _view(values: np.ndarray, log: bool) -> np.ndarray:
    """Values where a view puts them: log10 on a log axis (-inf for what is not positive)."""
    if not log:
        return np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(values > 0, np.log10(np.where(values > 0, values, 1.0)), -np.inf)


def shown_labels(view: PanelView) -> list[tuple[Drawn, str, tuple[float, float, float, float]]]:
    """Each label on show, with its curve and its box (left, top, width, height) in pixels."""
    vb = view.plot.getViewBox()
    out = []
    for drawn in view.drawn.values():
        for text in drawn.labels:
            if text.isVisible() and text.opacity() > 0:
                r = vb.mapRectFromItem(text, text.boundingRect())
                out.append((drawn, text.toPlainText(), (r.left(), r.top(), r.width(), r.height())))
    return out


def place_labels(view: PanelView) -> None:
    """Every visible label of ``view`` beside its line or point, inside the plot box, off the
    curves and off each other; the current series' first, then each pinned one's. A label
    with no room left (on a short panel) stays off rather than print over another."""
    vb = view.plot.getViewBox()
    vb.updateMatrix()                 # pyqtgraph defers a resize's new transform to the next paint
    rect = vb.boundingRect()
    t = vb.childTransform()
    sx, sy, dx, dy = t.m11(), t.m22(), t.dx(), t.dy()
    if rect.width() < 2 or rect.height() < 2 or not (sx and sy):
        return                                   # not laid out yet
    visible = sorted((d for d in view.drawn.values() if d.visible), key=lambda d: (d.layer.kind != "current", d.slot))
    # a panel is framed again whenever any panel of its plot changes: place only when this
    # one's scale, size, curves or labels did (the curves by identity: new charts, new objects)
    numbers = (sx, sy, dx, dy, rect.width(), rect.height(),
               *((d.slot, *(t.toPlainText() if t.isVisible() else None for t in d.labels)) for d in visible))
    curves_now = [d.curve for d in visible]
    last_numbers, last_curves = view.placed_for
    if numbers == last_numbers and len(curves_now) == len(last_curves) and all(
            a is b for a, b in zip(curves_now, last_curves, strict=True)):
        return
    view.placed_for = (numbers, curves_now)
    curves: list[np.ndarray] = []
    lines: list[LabelSpec] = []
    wanted: list[tuple[Any, LabelSpec]] = []
    for d in visible:
        c = d.curve
        if c.kind == "line":
            curves.append(pixels(view, c))
        elif c.kind == "points":                 # a marker: a small cross the labels keep off
            r = MARKER_REACH
            for px, py in pixels(view, c):
                curves += [np.array([[px - r, py - r], [px + r, py + r]]),
                           np.array([[px - r, py + r], [px + r, py - r]])]
        for i, text in enumerate(d.labels):
            if text.isVisible():
                spec = _spec(view, d, i, text.textItem.boundingRect(), (sx, sy, dx, dy))
                wanted.append((text, spec))
                if spec.kind != "point":
                    lines.append(spec)
    if not wanted:
        return
    spots = place((rect.left(), rect.top(), rect.width(), rect.height()), [spec for _, spec in wanted], curves, lines)
    for (text, _request), spot in zip(wanted, spots, strict=True):
        text.setOpacity(0.0 if spot is None else 1.0)
        if spot is not None:
            text.setPos((spot[0] - dx) / sx, (spot[1] - dy) / sy)


def _spec(view: PanelView, d: Drawn, i: int, size: Any, scale: tuple[float, float, float, float]) -> LabelSpec:
    """The placement request of label ``i`` of ``d``: beside its line, or by its point."""
    sx, sy, dx, dy = scale
    c = d.curve
    if c.kind in ("vline", "hline"):
        vertical = c.kind == "vline"
        at = log_position(float((c.x if vertical else c.y)[i]), view.panel.log_x if vertical else view.panel.log_y)
        at = at * sx + dx if vertical else at * sy + dy
        # series step along their lines: the current first, then each pinned one
        prefer = min(1.0, 0.3 * d.slot + (0.3 if c.role == "secondary" else 0.0))
        return LabelSpec(size.width(), size.height(), c.kind, x=at if vertical else 0.0,
                         y=0.0 if vertical else at, prefer=prefer)
    return LabelSpec(size.width(), size.height(), "point",
                     x=log_position(float(c.x[0]), view.panel.log_x) * sx + dx,
                     y=log_position(float(c.y[0]), view.panel.log_y) * sy + dy)
