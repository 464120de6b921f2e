"""Out-of-sample scores of an engine calibration, for any fit procedure: leave a group of models
out (one model, or every model of one architecture), fit the rest, price the group; fit the short
prompts, shallow caches and small batches, price the long, deep and large. And the one choice the
fit cannot make in sample: how far a pass's memory and compute clocks overlap.

Why the overlap is chosen out of sample: on one machine the overlap trades against the fixed
cost per layer and the decode rates (a step's arithmetic added after its streaming looks, in
sample, much like a slower stream or a dearer layer), so the in-sample error picks whichever
absorbs the calibration models' own quirks best; what should decide is which one prices a model
the fit did not see. Each overlap of the grid is fitted with one architecture left out at a
time, and the one whose held-out models come out closest (the sum of the three phases' median
errors) is kept. The leave-one-architecture-out score reported is that overlap's: it was one of
five candidates, so read it as the score of the chosen fit, slightly optimistic; leave one model
out and the extrapolation hold the chosen overlap and are scored as before. A held-out model is
priced at the pooled cache terms (costs per byte, per (query head, cached token) pair and per
value of those, fitted to the others), so where the models' caches read at rates far apart (half of
them at a third of the others' rate, made so in a test) their deep steps' errors can sway the
choice. On this machine's six thorough runs (models reading their caches at 3 to 8 GB/s) it
chose 0, 0.25, 0.25, 0.75, 1 and 1 (docs/accuracy.md).

The procedures come in as callables (``Refit``: the fit on some points at some overlaps;
``Score``: errors per phase of the models priced by their own rates), so this module needs
nothing of the fit's own but its design."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from rooflab.core.calibration.solver import OVERLAPS, Design, first_best
from rooflab.core.values.calibration import Accuracy, Rates

Refit = Callable[[Design, Sequence[float]], Rates]
Score = Callable[[dict[int, Rates], dict[int, NDArray[np.bool_]]], dict[str, Accuracy]]


def every_point(counts: Sequence[int]) -> dict[int, NDArray[np.bool_]]:
    """Each model's points, all of them (``counts[i]``: model i's)."""
    return {i: np.ones(n, dtype=bool) for i, n in enumerate(counts)}


def leave_group_out(group: Sequence[str], d: Design, refit: Refit, score: Score, counts: Sequence[int],
                    overlaps: Sequence[float] = OVERLAPS) -> dict[str, Accuracy]:
    """Each group of models (``group[i]``: model i's) priced by the fit of the other groups."""
    if len(set(group)) < 2:
        return {}
    rates_of: dict[int, Rates] = {}
    for name in dict.fromkeys(group):
        members = [i for i, g in enumerate(group) if g == name]
        rates = refit(d.subset(~np.isin(d.model, members)), overlaps)
        rates_of.update(dict.fromkeys(members, rates))
    return score(rates_of, every_point(counts))


def held_out_error(accuracy: dict[str, Accuracy]) -> float:
    """One number for a held-out score: the sum of its phases' median errors."""
    return float(sum(a.median for a in accuracy.values()))


def overlap_by_architecture(architectures: Sequence[str], d: Design, refit: Refit, score: Score,
                            counts: Sequence[int]) -> tuple[Sequence[float], dict[str, Accuracy]]:
    """(the overlaps the fit may choose from, the leave-one-architecture-out score): the one
    overlap of ``OVERLAPS`` whose models come out closest when their architecture is left out
    (ties: the first, ``first_best``), and its score; with fewer than two architectures, the
    whole grid (chosen in sample) and no score."""
    if len(set(architectures)) < 2:
        return OVERLAPS, {}
    scored = [((o,), leave_group_out(architectures, d, refit, score, counts, (o,))) for o in OVERLAPS]
    return first_best(scored, lambda s: held_out_error(s[1]))


def extrapolation(d: Design, far: dict[int, NDArray[np.bool_]], refit: Refit, score: Score,
                  overlaps: Sequence[float]) -> dict[str, Accuracy]:
    """The points of ``far`` (each model's long, deep and large ones) priced by the fit of the
    design's small ones (``Design.small``)."""
    if d.small.all() or not d.small.any():
        return {}
    return score(dict.fromkeys(far, refit(d.subset(d.small), overlaps)), far)
