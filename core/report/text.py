"""Numbers as text for people, shared by the command line and the window: long durations in
hours or days, counts, capacities (significant figures are ``values.readable``'s, for every
layer). Everything else about display units is the GUI's (``report.units``) or the command
line's own layout."""

from __future__ import annotations

import math

from rooflab.core.values.readable import significant as significant  # re-exported: its callers read it here

HOUR = 3600.0            # seconds
DAY = 86400.0            # seconds


def long_duration(seconds: float, digits: int = 3) -> str | None:
    """A duration of an hour or more in hours, from two days in days, to ``digits`` significant
    figures: ``long_duration(32_141) == "8.93 h"``, ``long_duration(7.68e6) == "88.9 days"``.
    None under an hour (or not finite): the caller shows seconds its own way."""
    magnitude = abs(seconds)
    if not math.isfinite(magnitude) or magnitude < HOUR:
        return None
    if magnitude < 2 * DAY:
        return f"{significant(seconds / HOUR, digits)} h"
    return f"{significant(seconds / DAY, digits)} days"


def count(amount: int | str, noun: str, plural: str = "") -> str:
    """``amount`` and its noun, singular only for exactly one: ``count(1, "token") == "1 token"``,
    ``count(2048, "token") == "2,048 tokens"``, ``count("1.94", "token") == "1.94 tokens"``.
    ``amount`` may be text already formatted; ``plural`` when adding "s" is wrong."""
    shown = amount if isinstance(amount, str) else f"{amount:,}"
    return f"{shown} {noun if shown == '1' else plural or noun + 's'}"


GIB = float(1 << 30)     # bytes in a GiB: how GPU vendors (and DIMMs) count memory


def whole_gib(nbytes: float) -> int | None:
    """The number of GiB a capacity is when it is a whole number of them (how GPU vendors state
    memory: an RTX 4090's "24 GB" are 24 GiB), else None."""
    gib = nbytes / GIB
    return round(gib) if gib >= 1 and abs(gib - round(gib)) <= 0.001 * gib else None


def capacity_text(nbytes: float) -> str:
    """A memory's capacity as its vendor states it when it is a whole number of GiB ("24 GiB
    (25.8 GB)": an RTX 4090's "24 GB" are GiB), else in GB (10^9 bytes): "137 GB"."""
    gib = whole_gib(nbytes)
    if gib is not None:
        return f"{gib:,} GiB ({significant(nbytes / 1e9)} GB)"
    return f"{significant(nbytes / 1e9)} GB"
