"""Numbers as people read them, for every layer: significant figures and SI prefixes.

The one home of both: the report's display units (``report.units``), the command line and the
sentences predict writes (a placement's shortfall) all read amounts through these, so one
amount reads alike wherever it is printed (a shortfall read "needs 102,395.7 GB" beside a
memory row's "102 TB")."""

from __future__ import annotations

import math

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def significant(value: float, digits: int = 3) -> str:
    """``value`` with about ``digits`` significant figures, thousands separated, no exponent."""
    if not math.isfinite(value):
        return "∞" if value > 0 else ("-∞" if value < 0 else "n/a")
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def si_prefix(value: float) -> tuple[float, str]:
    """(divisor, prefix) that shows ``value`` with 1 to 3 integer digits: (1e12, "T") for 1.02e14."""
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale * 0.9995:
            return scale, prefix
    return 1.0, ""


def byte_text(nbytes: float, digits: int = 3) -> str:
    """An amount of bytes in GB (10^9 bytes), TB, ... to ``digits`` significant figures:
    ``byte_text(1.024e14) == "102 TB"``, ``byte_text(5.02e9) == "5.02 GB"`` (``report.units.fmt``
    of a "B" value reads the same)."""
    scale, prefix = si_prefix(nbytes)
    return f"{significant(nbytes / scale, digits)} {prefix}B"
