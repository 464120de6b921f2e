"""How well the published-benchmark fit (``public``) predicts rows it never saw, and how often
its band holds them.

Three protocols, each a fit per group without the left-out rows: leave one source out (a page
and the rows read from it), leave one model family out (all sizes and formats of a family, MoE
apart from dense), leave one machine out. Every row is scored by the fit that did not see it,
with its machine's own offset (``public.machine_offsets``) from that fit's rows where it has any:
none when its machine is left out (a unified GPU's prompt then gets the share the other unified
GPUs showed, ``public.unified_share``).

The band: an expected figure's 16-84 % band is the central figure times the 16th and 84th
percentiles of measured / predicted over out-of-sample rows of its group and test kind (pooled
over groups where a group has fewer than ``MIN_BAND_ROWS``). Scored here, a left-out fold's
band is built from the other folds' residuals only, so its coverage says how often a band holds
a row the band never saw."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from rooflab.core.calibration import public
from rooflab.core.io.public_bench import PublicBenchmarks, PublicRow
from rooflab.core.values.calibration import BAND

MIN_BAND_ROWS = 8            # out-of-sample rows a group's own band needs (else the kind's pooled one)
SHORT = 512                  # a prompt or depth up to this is "short"


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """One row predicted by a fit that did not see it, with the band of that fit."""

    row: int                      # index into PublicBenchmarks.rows
    measured: float               # tokens/s
    predicted: float              # tokens/s
    low: float = float("nan")     # the band, tokens/s (NaN: not banded)
    high: float = float("nan")

    @property
    def error(self) -> float:
        """|predicted - measured| / measured."""
        return abs(self.predicted - self.measured) / self.measured

    @property
    def inside(self) -> bool:
        return bool(self.low <= self.measured <= self.high)


def family(data: PublicBenchmarks, row: PublicRow) -> str:
    """A row's model family: the catalogue name before its size ("llama-3.1-8b" -> "llama-3.1",
    "qwen3-30b-a3b" -> "qwen3 MoE"), MoE told apart from dense."""
    key = data.model(row.model).catalogue
    base = re.split(r"-\d+(?:\.\d+)?(?:x\d+)?[bm](?:-|$)", key)[0]
    return base + (" MoE" if public.spec_of(data, row).is_moe else "")


def source(data: PublicBenchmarks, row: PublicRow) -> str:
    """The page a row was read from (its source key, or its URL without the comment anchor)."""
    return row.source.source or row.source.url.split("#")[0]


PROTOCOLS: dict[str, Callable[[PublicBenchmarks, PublicRow], str]] = {
    "source": source,
    "family": family,
    "machine": lambda data, row: row.machine,
}


def held_out(data: PublicBenchmarks, protocol: str, groups: Sequence[str] | None = None) -> tuple[Prediction, ...]:
    """Every fitted row (of ``groups``; None: all) predicted by fits without its fold
    (``PROTOCOLS[protocol]``); a row whose group has no rows left of both kinds is not predicted."""
    key = PROTOCOLS[protocol]
    rows = [i for g, members in public.group_rows(data).items() if groups is None or g in groups for i in members]
    folds: dict[str, list[int]] = {}
    for i in rows:
        folds.setdefault(key(data, data.rows[i]), []).append(i)
    group_of = public.row_groups(data)
    fitted = None if groups is None else sorted(set(groups) | public.unified_groups(data))
    out = []
    for fold, members in folds.items():
        leave = functools.partial(_in_fold, data, key, fold)
        fits = public.fit_groups(data, leave, fitted)
        offsets = public.machine_offsets(data, fits, {data.rows[i].machine for i in members}, leave,
                                         public.unified_share(data, fits, leave))
        for i in members:
            if group_of[i] not in fits:
                continue
            row = data.rows[i]
            out.append(Prediction(row=i, measured=row.tokens_per_second, predicted=public.predict_row(
                data, row, public.group_rates(fits, group_of[i]), offsets.get(row.machine))))
    return tuple(sorted(out, key=lambda p: p.row))


def _in_fold(data: PublicBenchmarks, key: Callable[[PublicBenchmarks, PublicRow], str], fold: str,
             row: PublicRow) -> bool:
    return key(data, row) == fold


def residual_quantiles(data: PublicBenchmarks, predictions: Iterable[Prediction], group: str, kind: str,
                       quantiles: Sequence[float] | np.ndarray) -> np.ndarray:
    """Quantiles of log(measured / predicted) over ``predictions`` of ``group`` and ``kind``
    ("tg"/"pp"); of the kind over every group where the group has fewer than ``MIN_BAND_ROWS``.
    Each machine weighs as one (its rows share its vote, as in the fit): the band is the spread
    between machines, not that of one chip swept 500 ways."""
    mine: list[tuple[float, str]] = []
    every: list[tuple[float, str]] = []
    groups = public.row_groups(data)
    for p in predictions:
        row = data.rows[p.row]
        if public.kind(row) != kind:
            continue
        r = (float(np.log(p.measured / p.predicted)), row.machine)
        every.append(r)
        if groups[p.row] == group:
            mine.append(r)
    chosen = mine if len(mine) >= MIN_BAND_ROWS else every
    if not chosen:
        return np.zeros(len(quantiles))
    counts: dict[str, int] = {}
    for _, m in chosen:
        counts[m] = counts.get(m, 0) + 1
    values = np.array([r for r, _ in chosen])
    weights = np.array([1.0 / counts[m] for _, m in chosen])
    return weighted_quantiles(values, weights, np.asarray(quantiles) / 100.0)


def weighted_quantiles(values: np.ndarray, weights: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Quantiles ``q`` (0..1) of ``values`` with ``weights``: the weighted empirical CDF,
    each value at the middle of its weight, interpolated linearly (equal weights give numpy's
    default quantiles' values at the ends and close to them between)."""
    order = np.argsort(values)
    v, w = values[order], weights[order]
    mid = (np.cumsum(w) - 0.5 * w) / w.sum()
    return np.interp(q, mid, v)


CENTRE = 50.0                # the percentile of measured / predicted an unseen machine's figure is moved to


def banded(data: PublicBenchmarks, predictions: Sequence[Prediction], protocol: str) -> tuple[Prediction, ...]:
    """``predictions`` with each fold's band built from the other folds' residuals. Leaving one
    machine out, the figure is moved to their median too (the fit's figure times the median
    measured / predicted of the other folds): what rooflab expects of a machine without rows of
    its own (``calibration.expectations``), the middle of its band. A machine with rows keeps its
    own offset instead, so the other protocols keep the fit's figure."""
    key = PROTOCOLS[protocol]
    groups = public.row_groups(data)
    fold_of = [key(data, data.rows[p.row]) for p in predictions]
    cache: dict[tuple[str, str, str], np.ndarray] = {}
    out = []
    for p, fold in zip(predictions, fold_of, strict=True):
        g, k = groups[p.row], public.kind(data.rows[p.row])
        if (fold, g, k) not in cache:
            others = [q for q, f in zip(predictions, fold_of, strict=True) if f != fold]
            cache[(fold, g, k)] = residual_quantiles(data, others, g, k, (BAND[0], CENTRE, BAND[1]))
        low, mid, high = np.exp(cache[(fold, g, k)]) * p.predicted
        predicted = float(mid) if protocol == "machine" else p.predicted
        out.append(Prediction(row=p.row, measured=p.measured, predicted=predicted, low=float(low),
                              high=float(high)))
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """Out-of-sample errors of one cell of the matrix: median and worst |pred - meas| / meas,
    how many rows, and the share of them inside their band."""

    median: float
    worst: float
    rows: int
    coverage: float


def cell(predictions: Iterable[Prediction]) -> Cell:
    ps = list(predictions)
    if not ps:
        return Cell(median=float("nan"), worst=float("nan"), rows=0, coverage=float("nan"))
    errors = [p.error for p in ps]
    return Cell(median=float(np.median(errors)), worst=float(np.max(errors)), rows=len(ps),
                coverage=float(np.mean([p.inside for p in ps])))


def matrix(data: PublicBenchmarks, predictions: Sequence[Prediction]) -> dict[tuple[str, str, str, str], Cell]:
    """``cell`` of the predictions of each (group, dense/MoE, tg/pp, short/long)."""
    groups = public.row_groups(data)
    by: dict[tuple[str, str, str, str], list[Prediction]] = {}
    for p in predictions:
        row = data.rows[p.row]
        moe = "MoE" if public.spec_of(data, row).is_moe else "dense"
        long = row.source.depth > SHORT or (row.test.kind != "decode" and row.test.tokens > SHORT)
        by.setdefault((groups[p.row], moe, public.kind(row), "long" if long else "short"), []).append(p)
    return {k: cell(v) for k, v in sorted(by.items(), key=lambda kv: kv[0])}
