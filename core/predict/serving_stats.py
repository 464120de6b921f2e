"""The figures of one serving level, from per-request times, the same way for a prediction (the
event simulation in ``serving``) and a measurement (``measure.loadtest.run``), so the two can be laid
side by side and a test can recompute them from the raw data.

Per request (seconds, from the moment it is sent or arrives):

    TTFT = first token - arrival                     (queueing + prefill)
    TPOT = (last token - first token) / (answer - 1)  (requests of one token have none)
    E2E  = last token - arrival
    ITL  = every gap between two successive tokens of one request

Per level, over ``duration`` = last request's end - first request's arrival:
requests/s = completed / duration, output tokens/s = answer tokens / duration, tokens/s per
sequence = the mean over requests of 1 / TPOT, goodput = requests/s that met both the TTFT and
the TPOT bound (vLLM's definition). Percentiles interpolate linearly (numpy's default)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.errors import SpecError

MODES = ("concurrency", "rate")
PERCENTILES = (50.0, 90.0, 99.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Percentiles:
    """Mean and percentiles of one latency, seconds (NaN when there was nothing to summarise)."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def empty(cls) -> Percentiles:
        nan = math.nan
        return cls(mean=nan, p50=nan, p90=nan, p99=nan)

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p99": self.p99}


def summarize(values: ArrayLike, weights: ArrayLike | None = None) -> Percentiles:
    """Mean, p50, p90, p99 of ``values``. With ``weights`` (how many times each value occurs,
    say a step's duration and the sequences that waited on it) the mean and the percentiles are
    weighted: the percentile interpolates on the cumulative weight, which for unit weights is
    numpy's linear percentile."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if weights is None:
        if v.size == 0:
            return Percentiles.empty()
        p50, p90, p99 = np.percentile(v, PERCENTILES)
        return Percentiles(mean=float(v.mean()), p50=float(p50), p90=float(p90), p99=float(p99))
    w = np.asarray(weights, dtype=np.float64).ravel()
    keep = w > 0
    v, w = v[keep], w[keep]
    if v.size == 0:
        return Percentiles.empty()
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    # rank of each value's first copy among all copies: numpy's linear rule on the expanded list
    first = np.cumsum(w) - w
    last = first + w - 1.0
    total = float(w.sum())

    def at(q: float) -> float:
        rank = q / 100.0 * (total - 1.0)
        i = int(np.searchsorted(last, rank, side="left"))
        if i >= v.size:
            return float(v[-1])
        if rank >= first[i] or i == 0:
            return float(v[i])
        # between the last copy of value i-1 and the first of value i
        share = (rank - last[i - 1]) / (first[i] - last[i - 1])
        return float(v[i - 1] + share * (v[i] - v[i - 1]))

    mean = float(np.dot(v, w) / total)
    return Percentiles(mean=mean, p50=at(50.0), p90=at(90.0), p99=at(99.0))


@dataclass(frozen=True, slots=True, kw_only=True)
class Bounds:
    """Latency bounds a request must meet to count as goodput (seconds; None: no bound)."""

    ttft: float | None = None
    tpot: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft", "tpot"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and 0 < value < 1e6):
                raise SpecError(f"bounds.{name} must be a number of seconds in (0, 1e6), got {value!r}")

    @property
    def given(self) -> bool:
        return self.ttft is not None or self.tpot is not None

    def met(self, ttft: ArrayLike, tpot: ArrayLike) -> np.ndarray:
        """Which requests met both bounds (a request without a TPOT meets that bound)."""
        first = np.asarray(ttft, dtype=np.float64)
        per = np.nan_to_num(np.asarray(tpot, dtype=np.float64), nan=0.0)
        ok = np.ones(first.shape, dtype=bool)
        if self.ttft is not None:
            ok &= first <= self.ttft
        if self.tpot is not None:
            ok &= per <= self.tpot
        return ok


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingLevel:
    """The figures of one load level: ``mode`` "concurrency" (``level`` clients, each sending
    its next request when the last one ends) or "rate" (Poisson arrivals at ``level``
    requests/s). Latencies in seconds, rates per second. ``goodput`` is None without bounds."""

    mode: str
    level: float
    completed: int
    duration: float
    ttft: Percentiles
    tpot: Percentiles
    itl: Percentiles
    e2e: Percentiles
    requests_per_second: float
    output_tokens_per_second: float
    tokens_per_second_per_sequence: float
    mean_prompt_tokens: float
    mean_answer_tokens: float
    sustained_requests_per_second: float = math.nan   # ``sustained_rate``
    goodput: float | None = None             # requests/s that met the bounds
    goodput_share: float | None = None       # share of completed requests that met them

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if isinstance(value, Percentiles) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServingLevel:
        """The level ``to_dict`` wrote (a number JSON kept as null is NaN again). Raises
        TypeError, KeyError or ValueError for data of another shape."""
        def number(value: Any) -> float:
            if value is None:
                return math.nan
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"expected a number, got {value!r}")
            return float(value)

        out: dict[str, Any] = {}
        for f in fields(cls):
            value = data[f.name] if f.name in data else (None if f.default is MISSING else f.default)
            if f.name == "mode":
                out[f.name] = str(value)
            elif f.name == "completed":
                out[f.name] = int(number(value))
            elif f.name in ("ttft", "tpot", "itl", "e2e"):
                if not isinstance(value, Mapping):
                    raise TypeError(f"{f.name} must be an object of mean, p50, p90, p99")
                out[f.name] = Percentiles(**{q: number(value[q]) for q in ("mean", "p50", "p90", "p99")})
            elif f.name in ("goodput", "goodput_share"):
                out[f.name] = None if value is None else number(value)
            else:
                out[f.name] = number(value)
        return cls(**out)


def level_stats(*, mode: str, level: float, arrival: ArrayLike, first: ArrayLike, end: ArrayLike,
                prompt_tokens: ArrayLike, answer_tokens: ArrayLike, itl: ArrayLike,
                itl_weights: ArrayLike | None = None, bounds: Bounds | None = None) -> ServingLevel:
    """The level's figures from its completed requests: their arrival, first-token and end times
    (seconds on one clock), token counts, and the inter-token gaps (all requests' together;
    ``itl_weights``: how many gaps each value stands for, None for one each)."""
    if mode not in MODES:
        raise SpecError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    a, f, e = (np.asarray(x, dtype=np.float64).ravel() for x in (arrival, first, end))
    answers = np.asarray(answer_tokens, dtype=np.float64).ravel()
    prompts = np.asarray(prompt_tokens, dtype=np.float64).ravel()
    n = int(a.size)
    ttft, e2e = f - a, e - a
    steps = answers - 1.0
    tpot = np.divide(e - f, steps, out=np.full(n, np.nan), where=steps > 0)
    duration = float(e.max() - a.min()) if n else 0.0
    per_second = 1.0 / duration if duration > 0 else math.nan
    has_tpot = np.isfinite(tpot) & (tpot > 0)
    goodput = share = None
    if bounds is not None and bounds.given and n:
        met = int(bounds.met(ttft, tpot).sum())
        goodput, share = met * per_second, met / n
    return ServingLevel(
        mode=mode, level=float(level), completed=n, duration=duration,
        ttft=summarize(ttft), tpot=summarize(tpot[np.isfinite(tpot)]), itl=summarize(itl, itl_weights),
        e2e=summarize(e2e), requests_per_second=n * per_second if n else 0.0,
        output_tokens_per_second=float(answers.sum()) * per_second if n else 0.0,
        tokens_per_second_per_sequence=float(np.mean(1.0 / tpot[has_tpot])) if has_tpot.any() else math.nan,
        mean_prompt_tokens=float(prompts.mean()) if n else math.nan,
        mean_answer_tokens=float(answers.mean()) if n else math.nan,
        sustained_requests_per_second=sustained_rate(mode, level, a, e), goodput=goodput, goodput_share=share)


def sustained_rate(mode: str, level: float, arrival: ArrayLike, end: ArrayLike) -> float:
    """Requests/s the server keeps up while the load is whole. A closed loop of C clients: the
    answers between the first one and the last request's sending, (n - 1 - C) / (arrival[n-1] -
    arrival[C]) (each answer there sends the next request, so the ramp at the start and the
    drain at the end, with clients gone, are left out). A request rate: completed / duration.
    NaN when the run is too short to tell (fewer than C + 2 requests)."""
    a = np.sort(np.asarray(arrival, dtype=np.float64).ravel())
    e = np.asarray(end, dtype=np.float64).ravel()
    if mode == "concurrency":
        c = int(level)
        if a.size < c + 2:
            return math.nan
        span = float(a[-1] - a[c])
        return (a.size - 1 - c) / span if span > 0 else math.nan
    span = float(e.max() - a[0]) if a.size else 0.0
    return a.size / span if span > 0 else math.nan


def saturation_rate(levels: Sequence[ServingLevel]) -> float:
    """The highest sustained requests/s among ``levels``: the rate the server keeps up once every
    slot is busy. Past it arrivals only queue, so TTFT grows with the run's length instead of
    the load. NaN without a level that completed requests."""
    rates = [lv.sustained_requests_per_second for lv in levels
             if lv.completed and math.isfinite(lv.sustained_requests_per_second)]
    return max(rates) if rates else math.nan
