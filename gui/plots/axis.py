"""An axis that labels ticks in display units: "Memory (GB)" with 0, 10, 20 on a linear axis,
"1 ms, 10 ms, 100 ms" on a log axis. Values reach it in SI."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg

from rooflab.gui import units


class UnitAxis(pg.AxisItem):
    def __init__(self, orientation: str, title: str = "", unit: str = "") -> None:
        # set before AxisItem.__init__, which already calls updateAutoSIPrefix
        self._title = title
        self._unit = unit
        self._shown = unit
        self._divisor = 1.0
        super().__init__(orientation)
        self.enableAutoSIPrefix(True)      # so pyqtgraph calls updateAutoSIPrefix on range changes
        self.set_unit(title, unit)

    def set_unit(self, title: str, unit: str) -> None:
        self._title, self._unit = title, unit
        self.setLabel(title, units=unit)

    # pyqtgraph hooks ----------------------------------------------------------------------
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

    def logTickStrings(self, values: list[float], scale: float, spacing: float | None) -> list[str]:  # noqa: N802
        out = []
        for v in values:
            try:
                value = 10.0 ** float(v)
                mantissa = round(value / 10.0 ** math.floor(math.log10(value) + 1e-9))
                # pyqtgraph passes spacing None for the 2..9 x 10^k minor ticks: label 2 and 5 only
                out.append(units.tick(value, self._unit) if spacing is not None or mantissa in (2, 5) else "")
            except (TypeError, ValueError, OverflowError):
                out.append("")
        return out


def log_position(value: float, log: bool) -> float:
    """Where ``value`` sits in a view that is log10-scaled or not (reference lines need this)."""
    if not log:
        return value
    return float(np.log10(value)) if value > 0 else -math.inf
