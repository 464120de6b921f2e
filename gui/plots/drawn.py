"""What a panel has on screen for one (layer, curve): shared by the panel, its label layout
and its memory bars."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rooflab.core.report.chart_types import Curve
from rooflab.gui.plots.style import Layer


@dataclass
class Drawn:
    """What is on screen for one (layer, curve key): the curve and its graphics items."""

    layer: Layer
    curve: Curve
    items: list[Any] = field(default_factory=list)
    style_key: tuple[object, ...] = ()        # what the items' pens were made for
    labels: list[Any] = field(default_factory=list)     # TextItems placed by ``layout_labels``
    slot: int = 0                             # 0: the current series, n: the n-th pinned one
    bar: int = 0                              # a memory bar's position on its panel

    def hide(self) -> None:
        for item in (*self.items, *self.labels):
            item.setVisible(False)

    @property
    def visible(self) -> bool:
        return bool(self.items) and self.items[0].isVisible()
