"""Whether a measured point can be trusted: repeats that disagree, or a machine that got busier
while the point ran, say that something else shared the machine.

A point judged disturbed keeps its figures and says why (``MeasuredPoint.disturbed``); the fit
leaves it out unless the user includes it (``calibrate(..., include_disturbed=True)``)."""

from __future__ import annotations

import dataclasses
import os

from rooflab.core.values.measured import MeasuredPoint

#: (median - best) / best above which repeats disagree too much to trust the best.
SPREAD_LIMIT = 0.20
#: Rise of the 1-minute load average (runnable processes) during a run that means another
#: program started competing for the cores.
LOAD_RISE_LIMIT = 1.0


def load_average() -> float | None:
    """The 1-minute load average, None where the system does not report one."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def judge(point: MeasuredPoint, load_at_start: float | None, load_now: float | None) -> MeasuredPoint:
    """``point`` with ``disturbed`` set when its spread or the load's rise since the run started
    passes the limits (the reasons joined); unchanged otherwise."""
    reasons = []
    if point.spread > SPREAD_LIMIT:
        reasons.append(f"repeats spread {point.spread:.0%} (over {SPREAD_LIMIT:.0%})")
    if load_at_start is not None and load_now is not None and load_now - load_at_start > LOAD_RISE_LIMIT:
        reasons.append(f"load average rose from {load_at_start:.2f} to {load_now:.2f}")
    return dataclasses.replace(point, disturbed="; ".join(reasons)) if reasons else point
