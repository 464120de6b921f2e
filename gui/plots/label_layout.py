"""Where a panel's labels go on screen: the Qt side of ``labels.label_spots``. A panel hands over
its drawn curves; this reads their pixel positions and the labels' sizes off the plot, places
them, and moves the text items there."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from rooflab.core.report.chart_types import Curve, Panel
from rooflab.gui.plots.axis import log_position
from rooflab.gui.plots.drawn import Drawn
from rooflab.gui.plots.labels import LabelSpec, label_spots


class LaidOutPanel(Protocol):
    """What the layout reads of a panel (``panel_view.PanelView``)."""

    plot: Any
    panel: Panel
    drawn: dict[tuple[str, str], Drawn]
    placed_for: tuple[tuple[object, ...], list[Curve]]      # what the labels were last placed for

MARKER_REACH = 6.0          # px either side of a marker that labels keep off


def pixels(view: LaidOutPanel, curve: Curve) -> np.ndarray:
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


def shown_labels(view: LaidOutPanel) -> list[tuple[Drawn, str, tuple[float, float, float, float]]]:
    """Each label on show, with its curve and its box (left, top, width, height) in pixels."""
    vb = view.plot.getViewBox()
    out = []
    for drawn in view.drawn.values():
        for text in drawn.labels:
            if text.isVisible() and text.opacity() > 0:
                r = vb.mapRectFromItem(text, text.boundingRect())
                out.append((drawn, _whole(text), (r.left(), r.top(), r.width(), r.height())))
    return out


def place_labels(view: LaidOutPanel) -> None:
    """Every visible label of ``view`` beside its line or point, inside the plot box, off the
    curves and off each other; the current series' first, then each pinned one's. A label
    with no room on one line goes on two ("compute crossover" over "63.2 sequences": with three
    series at 1280 x 720 one of six was left off); one with no room on two either stays off
    rather than print over another."""
    vb = view.plot.getViewBox()
    vb.updateMatrix()                 # pyqtgraph defers a resize's new transform to the next paint
    rect = vb.boundingRect()
    t = vb.childTransform()
    sx, sy, dx, dy = t.m11(), t.m22(), t.dx(), t.dy()
    if rect.width() < 2 or rect.height() < 2 or not (sx and sy):
        return                                   # not laid out yet
    visible = sorted((d for d in view.drawn.values() if d.visible), key=lambda d: (d.layer.kind != "current", d.slot))
    # a panel is framed again whenever any panel of its plot changes: place only when this
    # one's scale, size, curves or labels as shown did (the curves by identity: new charts, new
    # objects; the labels as shown: a redraw puts one placed on two lines back on one)
    def shown() -> tuple[object, ...]:
        return (sx, sy, dx, dy, rect.width(), rect.height(),
                *((d.slot, *(t.toPlainText() if t.isVisible() else None for t in d.labels)) for d in visible))

    curves_now = [d.curve for d in visible]
    last_numbers, last_curves = view.placed_for
    if shown() == last_numbers and len(curves_now) == len(last_curves) and all(
            a is b for a, b in zip(curves_now, last_curves, strict=True)):
        return
    curves: list[np.ndarray] = []
    wanted: list[tuple[Any, Drawn, int]] = []
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
                if text.toPlainText() != _whole(text):
                    text.setText(_whole(text))            # on one line again: the room may have grown
                wanted.append((text, d, i))
    if not wanted:
        view.placed_for = (shown(), curves_now)
        return
    box = (rect.left(), rect.top(), rect.width(), rect.height())
    scale = (sx, sy, dx, dy)
    specs = [_spec(view, d, i, text.textItem.boundingRect(), scale) for text, d, i in wanted]
    spots = label_spots(box, specs, curves, [spec for spec in specs if spec.kind != "point"])
    if any(spot is None and " " in text.toPlainText() for spot, (text, _, _) in zip(spots, wanted, strict=True)):
        for spot, (text, _, _) in zip(spots, wanted, strict=True):
            if spot is None and " " in text.toPlainText():
                text.setText(two_lines(text.toPlainText()))
        specs = [_spec(view, d, i, text.textItem.boundingRect(), scale) for text, d, i in wanted]
        spots = label_spots(box, specs, curves, [spec for spec in specs if spec.kind != "point"])
    for (text, _d, _i), spot in zip(wanted, spots, strict=True):
        text.setOpacity(0.0 if spot is None else 1.0)
        if spot is not None:
            text.setPos((spot[0] - dx) / sx, (spot[1] - dy) / sy)
    view.placed_for = (shown(), curves_now)


def two_lines(text: str) -> str:
    """``text`` broken at the space that leaves its longer line shortest."""
    words = text.split(" ")
    cut = min(range(1, len(words)), key=lambda k: max(len(" ".join(words[:k])), len(" ".join(words[k:]))))
    return " ".join(words[:cut]) + "\n" + " ".join(words[cut:])


def _whole(text: Any) -> str:
    """A label's text on one line (``place_labels`` may have put it on two)."""
    return str(text.toPlainText()).replace("\n", " ")


def _spec(view: LaidOutPanel, d: Drawn, i: int, size: Any, scale: tuple[float, float, float, float]) -> LabelSpec:
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
