"""What every chart builder shares: the chart keys and titles, the sweeps' x values, axis names,
and the reference lines (limits, crossovers, markers) as ``Curve``s."""

from __future__ import annotations

import math
from typing import TypedDict

import numpy as np

from rooflab.core.predict.work import Array
from rooflab.core.report.chart_types import Curve, CurveRole, Scenario
from rooflab.core.values.workload import MAX_TOKENS

ROOFLINE, PREFILL, DECODE, BATCHING, MEMORY = "roofline", "prefill", "decode", "batching", "memory"
CHART_KEYS: tuple[str, ...] = (ROOFLINE, PREFILL, DECODE, BATCHING, MEMORY)
CHART_TITLES: dict[str, str] = {ROOFLINE: "Roofline", PREFILL: "Prefill / TTFT", DECODE: "Decode vs context",
                                BATCHING: "Batching", MEMORY: "Memory"}


def pts(*values: float) -> Array:
    """A few literal values as a float array (markers, reference lines)."""
    return np.array(values, dtype=np.float64)


def log_tokens(low: float, high: float, count: int = 160) -> Array:
    """Distinct integers from ``low`` to ``high`` spaced evenly on a log scale (both included)."""
    low, high = max(1.0, low), max(low, high)
    values = np.unique(np.round(np.logspace(math.log10(low), math.log10(high), count)))
    return values.astype(np.float64)


def context_range(sc: Scenario) -> Array:
    """Tokens in the cache the decode and memory charts sweep: 0 to the trained context (or past
    the workload's end, whichever is further)."""
    w = sc.workload
    end = w.context + w.prompt + w.answer
    trained = sc.model.context_length or 32768
    high = float(min(MAX_TOKENS, max(trained, 1.25 * end)))
    return np.linspace(0.0, high, 257)


class Axes(TypedDict):
    x_name: str
    x_unit: str
    y_name: str
    y_unit: str


def axes(x_name: str, x_unit: str, y_name: str, y_unit: str) -> Axes:
    """What a curve's x and y are, and their SI units."""
    return Axes(x_name=x_name, x_unit=x_unit, y_name=y_name, y_unit=y_unit)


def finite_or(value: float, default: float) -> float:
    return value if math.isfinite(value) else default


def x_marker(key: str, label: str, x: float, name: str, unit: str, role: CurveRole) -> Curve:
    """A vertical line at ``x`` (a crossover, a limit)."""
    return Curve(key=key, label=label, x=pts(x), y=pts(), x_name=name, x_unit=unit, y_name="", y_unit="",
                 kind="vline", role=role)


def y_marker(key: str, label: str, y: float, name: str, unit: str, role: CurveRole = "limit") -> Curve:
    """A horizontal line at ``y`` (a capacity, the TPOT)."""
    return Curve(key=key, label=label, x=pts(), y=pts(y), x_name="", x_unit="", y_name=name, y_unit=unit,
                 kind="hline", role=role)
