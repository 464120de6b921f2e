"""An axis that labels ticks in display units: "Memory (GB)" with 0, 10, 20 on a linear axis,
"1 ms, 10 ms, 100 ms" on a log axis. Values reach it in SI."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF

from rooflab.core.report import units


class UnitAxis(pg.AxisItem):  # type: ignore[misc]  # pyqtgraph is untyped
    def __init__(self, orientation: str, title: str = "", unit: str = "") -> None:
        # set before AxisItem.__init__, which already calls updateAutoSIPrefix
        self._title = title
        self._unit = unit
        self._shown = unit
        self._divisor = 1.0
        self._natural = 0.0                 # the width its own labels need, px
        self.peers: list[UnitAxis] = []    # left axes of panels stacked with it: one width for all
        super().__init__(orientation)
        self.enableAutoSIPrefix(True)      # so pyqtgraph calls updateAutoSIPrefix on range changes
        self.set_unit(title, unit)

    @property
    def title(self) -> str:
        return self._title

    @property
    def unit(self) -> str:
        return self._unit

    def set_unit(self, title: str, unit: str) -> None:
        self._title, self._unit = title, unit
        self.setLabel(title, units=unit, **self.labelStyle)

    # pyqtgraph hooks ----------------------------------------------------------------------
    def _updateWidth(self) -> None:  # noqa: N802 - pyqtgraph API
        """As wide as the widest of its peers: stacked panels whose left axes differ in width
        have their plot boxes, and so their linked x axes, out of line (the lower one then
        showed negative token counts)."""
        super()._updateWidth()
        self._natural = float(self.minimumWidth())
        widest = max([self._natural, *(p._natural for p in self.peers)])
        for axis in (self, *self.peers):
            if axis.minimumWidth() != widest:
                axis.setMinimumWidth(widest)
                axis.setMaximumWidth(widest)
                axis.picture = None

    def updateAutoSIPrefix(self) -> None:  # noqa: N802 - pyqtgraph API
        if self.logMode:
            self._divisor, self._shown = 1.0, self._unit
        else:
            top = max(abs(self.range[0]), abs(self.range[1]))
            self._divisor, self._shown = units.prefix_for(top, self._unit)
        self.autoSIPrefixScale = 1.0 / self._divisor
        self.labelUnitPrefix = ""
        self._updateLabel()

    def labelString(self) -> str:  # noqa: N802
        style = ";".join(f"{k}: {v}" for k, v in self.labelStyle.items())
        return f"<span style='{style}'>{units.axis_label(self._title, self._unit, self._shown)}</span>"

    # An exception raised in a paint-time override takes the process down with PySide6, so
    # the two tick formatters never raise: a tick they cannot format stays unlabelled.
    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:  # noqa: N802
        if self.logMode:
            return self.logTickStrings(values, scale, spacing)
        try:
            step = spacing * scale
            places = max(0, math.ceil(-math.log10(step))) if step > 0 else 0
            return [f"{v * scale:,.{places}f}" for v in values]
        except (TypeError, ValueError, OverflowError):
            return ["" for _ in values]

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list[tuple[float | None, list[float]]]:  # noqa: N802,N803
        """pyqtgraph's ticks, with values a coarser level already has dropped from finer
        levels (on log axes it repeats the decades among the minor ticks)."""
        levels = super().tickValues(minVal, maxVal, size)
        seen: set[float] = set()
        out = []
        for spacing, values in levels:
            kept = [v for v in values if round(float(v), 9) not in seen]
            seen.update(round(float(v), 9) for v in kept)
            out.append((spacing, kept))
        return out

    def logTickStrings(self, values: list[float], scale: float, spacing: float | None) -> list[str]:  # noqa: N802
        """Label 1, 2 and 5 x 10^k, or every mantissa, or only the decades: the finest of these
        whose labels keep apart at the axis's length (all nine over less than a decade ran
        together: "0.050.060.0700.80.91" on a rate axis 300 px wide)."""
        out: dict[int, tuple[float, str]] = {}
        mantissas: list[int] = []
        for i, v in enumerate(values):
            try:
                value = 10.0 ** float(v)
                mantissas.append(round(value / 10.0 ** math.floor(math.log10(value) + 1e-9)))
                out[i] = (float(v), units.tick(value, self._unit))
            except (TypeError, ValueError, OverflowError):
                mantissas.append(0)
        shown = self._shown_mantissas([(pos, text, m) for (pos, text), m in
                                       ((out[i], mantissas[i]) for i in out)])
        return [out[i][1] if i in out and mantissas[i] in shown else "" for i in range(len(values))]

    def _shown_mantissas(self, ticks: list[tuple[float, str, int]]) -> tuple[int, ...]:
        """The finest of every mantissa, (1, 2, 5) and (1,) whose labels (log10 position, text,
        mantissa) stand at least their own size apart on this axis (by the old span rule while
        the axis has no length yet)."""
        horizontal = self.orientation in ("bottom", "top")
        length = float(self.width() if horizontal else self.height())
        low, high = (float(r) for r in self.range)
        if length <= 0 or not high > low:
            span = max(p for p, _, _ in ticks) - min(p for p, _, _ in ticks) if ticks else 0.0
            return (1,) if span > 5 else (1, 2, 5) if span > 1 else tuple(range(1, 10))
        per_decade = length / (high - low)
        metrics = QFontMetricsF(self.style.get("tickFont") or QFont())
        for shown in (tuple(range(1, 10)), (1, 2, 5), (1,)):
            kept = sorted((p, t) for p, t, m in ticks if m in shown)
            sizes = [metrics.horizontalAdvance(t) if horizontal else metrics.height() for _, t in kept]
            if all((b[0] - a[0]) * per_decade >= (sa + sb) / 2 + 6
                   for a, b, sa, sb in zip(kept, kept[1:], sizes, sizes[1:], strict=False)):
                return shown
        return (1,)


def log_position(value: float, log: bool) -> float:
    """Where ``value`` sits in a view that is log10-scaled or not (reference lines need this)."""
    if not log:
        return value
    return float(np.log10(value)) if value > 0 else -math.inf
