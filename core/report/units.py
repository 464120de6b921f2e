"""Display units: how SI numbers from core read on screen (GB, TFLOP/s, ms, tokens/s).

Shared by the window, the command line and the sentences of ``report.explain``. Core computes in SI; these are the only
functions that scale a number for a person to read (significant figures and hours/days come
from ``core.report.text``, which the command line shares). GB means 10^9 bytes, as in the lessons.
"""

from __future__ import annotations

import math
import re

from rooflab.core.report.text import long_duration
from rooflab.core.values.readable import si_prefix, significant

_SMALL = ((1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))
_WORDS = ((1e12, "trillion"), (1e9, "billion"), (1e6, "million"))
_PREFIXED = {"B", "B/s", "FLOP", "FLOP/s", "OP/s"}  # take k, M, G, T, P
_COUNTS = ("tokens", "sequences", "experts", "requests")


def prefix_for(value: float, unit: str) -> tuple[float, str]:
    """(divisor, prefixed unit) that shows ``value`` of ``unit`` with 1 to 3 integer digits."""
    magnitude = abs(value)
    if unit == "s":
        if magnitude >= 1 or magnitude == 0 or not math.isfinite(magnitude):
            return 1.0, "s"
        for scale, prefix in _SMALL:
            if magnitude >= scale * 0.9995:
                return scale, prefix + "s"
        return 1e-9, "ns"
    if unit in _PREFIXED:
        scale, prefix = si_prefix(magnitude)
        return scale, prefix + unit
    if unit == "1":
        return 0.01, "%"
    if unit == "params":
        for scale, word in _WORDS:
            if magnitude >= scale * 0.9995:
                return scale, word
        return 1.0, ""
    return 1.0, unit


def fmt(value: float, unit: str, digits: int = 3) -> str:
    """A value and its unit for a person: ``fmt(4.67e9, "B") == "4.67 GB"``,
    ``fmt(0.0123, "s") == "12.3 ms"``, ``fmt(2048, "tokens") == "2,048 tokens"`` (``"1 token"``, and
    so for sequences, experts and requests); an hour or
    more reads in hours, two days or more in days (``fmt(7.68e6, "s") == "88.9 days"``)."""
    if unit == "s" and (long := long_duration(value, digits)) is not None:
        return long
    return _fmt(value, unit, digits)


def _fmt(value: float, unit: str, digits: int) -> str:
    if not math.isfinite(value):
        return "never" if value > 0 else "n/a"
    if unit in _COUNTS and float(value).is_integer():
        return f"{int(value):,} {unit[:-1] if value == 1 else unit}"     # "1 token", "2 tokens", "1 request"
    scale, shown = prefix_for(value, unit)
    text = significant(value / scale, digits)
    if shown == "%":
        return f"{text} %"
    return f"{text} {shown}".rstrip()


def fmt_range(low: float, high: float, unit: str, digits: int = 3) -> str:
    """"``low`` to ``high``" in one prefix and one number of decimals, those ``high`` takes at
    ``digits`` significant figures (and ``low`` at one fewer): "7.0 ms to 10.3 ms" (``fmt``
    alone gave "7 ms to 10.3 ms", a figure that read rounder than its neighbour)."""
    if not (math.isfinite(low) and math.isfinite(high)) or unit in ("1", "params", *_COUNTS) or (
            unit == "s" and long_duration(high, digits) is not None):
        return f"{fmt(low, unit, digits)} to {fmt(high, unit, digits)}"
    scale, shown = prefix_for(max(abs(low), abs(high)), unit)

    def decimals(value: float, figures: int) -> int:
        return max(0, figures - 1 - math.floor(math.log10(value))) if value > 0 else 0

    # the high end's figures, and at least one fewer for the low end ("7.0", not "7")
    places = max(decimals(abs(high) / scale, digits), decimals(abs(low) / scale, digits - 1))
    return f"{low / scale:,.{places}f} {shown} to {high / scale:,.{places}f} {shown}"


def tick(value: float, unit: str) -> str:
    """A short tick label for a log axis: "10 ms", "1 GB", "100 T" (FLOP units), "10k" (counts)."""
    if unit in ("s", "1", "B", "B/s"):
        return _fmt(value, unit, 2)          # decade ticks stay in seconds: 10,000 s, not 2.8 h
    scale, prefix = si_prefix(value)
    if unit in ("FLOP/s", "FLOP"):
        return f"{significant(value / scale, 2)} {prefix}".rstrip()
    return f"{significant(value / scale, 2)}{prefix}"


def axis_label(title: str, unit: str, scaled_unit: str | None = None) -> str:
    """Axis title with its unit in brackets: "Memory (GB)"; no brackets for a unitless axis."""
    shown = scaled_unit if scaled_unit is not None else unit
    if shown in ("", "1"):
        return title
    return f"{title} ({shown})"


def gigabytes(value: float) -> float:
    """Bytes -> GB (10^9 bytes), for editing fields that show GB."""
    return value / 1e9


def from_gigabytes(value: float) -> float:
    return value * 1e9


NBSP, WORD_JOINER = "\u00a0", "\u2060"


def keep_together(text: str) -> str:
    """``text`` with no line break inside a figure: a number stays with its unit ("1.01 TB/s",
    "2.7 %") and a flag with its number ("--n-cpu-moe 23"), and a unit or a flag is not broken at
    its "/" or "-" ("FLOP/" then "s": Qt breaks after either). Only non-breaking spaces and
    zero-width word joiners are added: the text reads and copies as before."""
    text = re.sub(r"(?<=\d) (?=[^\W\d_]|%)", NBSP, text)
    text = re.sub(r"(?<=[a-z]) (?=\d)", lambda m: NBSP if _ends_flag(m.string, m.start()) else " ", text)
    text = re.sub(r"(?<=\w)/(?=\w)", "/" + WORD_JOINER, text)
    return re.sub(r"-(?=\w)", "-" + WORD_JOINER, text)


def _ends_flag(text: str, end: int) -> bool:
    """Whether the word before ``end`` is a command-line flag ("-ngl", "--n-cpu-moe")."""
    start = text.rfind(" ", 0, end) + 1
    return text.startswith("-", start)
