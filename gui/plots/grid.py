"""How a plot tab lays out its panels: stacked, each legend beside its panel, when each gets
``MIN_CHART_HEIGHT`` px; else side by side (legends under them) in as many columns as keep each
``MIN_CHART_WIDTH`` px wide, else stacked all the same. On screen a panel is never shorter than
``MIN_CHART_HEIGHT``: what the window's height cannot hold scrolls. (Three panels squeezed side by
side at 1280 x 720 were about 200 px wide and 150 px tall, their tick labels running together.)
Side by side in a view too short for a row's panels and the legends under them, the panels give
way, down to ``MIN_FITTED_HEIGHT``, so that a row and its legends are seen whole: at 1280 x 720
the view is about 345 px, and 300 px panels left the Serving tab's legend wholly below it and cut
the Decode and Batching ones mid-entry."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

MIN_CHART_HEIGHT = 300            # px: a panel's least height on screen, stacked or side by side
MIN_FITTED_HEIGHT = 200           # px: how far a panel gives way to keep its row's legends in view
MIN_CHART_WIDTH = 400             # px: a panel's least width side by side; narrower, they stack
LEGEND_SWATCH = 48                # px a legend entry's swatch and margins take beside its text
SPACING = 6                       # px between panels


def columns_for(count: int, width: float, height: float, fixed: int = 0) -> int:
    """Columns for ``count`` panels in ``width`` x ``height`` px (``fixed``: that many, a
    report's picture keeping its panels stacked)."""
    if fixed or count < 2:
        return fixed or 1
    if height <= 0 or height / count >= MIN_CHART_HEIGHT:
        return 1
    fits = [c for c in range(2, count + 1) if (width - (c - 1) * SPACING) / c >= MIN_CHART_WIDTH]
    return max(fits, key=lambda c: (height / math.ceil(count / c), -c), default=1)


class Sized(Protocol):
    """What ``fit_heights`` reads of a panel view."""

    plot: object
    legend: object

    def min_height(self) -> float: ...


def fit_heights(views: Sequence[Sized], columns: int, on_screen: bool, room: float = 0.0) -> float:
    """Set each panel's least height (``on_screen``: at least ``MIN_CHART_HEIGHT``, or side by
    side in a view ``room`` px tall, as much as leaves the row's legends in view, down to
    ``MIN_FITTED_HEIGHT``; a report's picture has its own size) and least width (side by side:
    ``MIN_CHART_WIDTH``, so a wide legend under one panel cannot squeeze the next) and return
    the least height of the panels together, px: each row as tall as its tallest panel and, side
    by side, its legend under it."""
    need = float(max(0, math.ceil(len(views) / columns) - 1) * SPACING)
    for start in range(0, len(views), columns):
        row = views[start:start + columns]
        legend = 0.0 if columns == 1 else max(v.legend.boundingRect().height() for v in row)  # type: ignore[attr-defined]
        floor = 0.0
        if on_screen:
            floor = float(MIN_CHART_HEIGHT)
            if columns > 1 and room > 0:
                floor = min(floor, max(float(MIN_FITTED_HEIGHT), room - legend))
        least = max([floor, *(v.min_height() for v in row)])
        for view in row:
            view.plot.setMinimumHeight(least)                          # type: ignore[attr-defined]
            view.plot.setMinimumWidth(MIN_CHART_WIDTH if on_screen and columns > 1 else 0.0)  # type: ignore[attr-defined]
        need += least + legend
    return need


def share_legends(views: Sequence[Any], columns: int, named_above: frozenset[str] = frozenset()) -> None:
    """Side by side, an entry the legend of a panel to the left lists (a pinned series, the
    current workload) is not listed again under the next: legends under narrow panels ran past
    the plot's height at 1280 x 720. ``named_above``: series named, with their colour, in the
    line over the tabs (the pinned ones, on screen), which side by side no legend lists again: a
    pinned series' name wrapped to four lines under a 400 px panel, and two of them put the
    Serving legend under the window's edge. Stacked, every legend lists all its entries."""
    for start in range(0, len(views), columns):
        seen: set[str] = set(named_above) if columns > 1 else set()
        for view in views[start:start + columns]:
            view.legends.leave_out(frozenset(seen) if columns > 1 else frozenset())
            seen |= view.legends.names()
