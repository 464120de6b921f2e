"""A calibration measured in rounds: every model timed once per round, the rounds one after
another, each point the mean of its rounds.

On a shared machine the speed moves from one minute to the next (this VM's read bandwidth gave
43 and 71 GB/s minutes apart). Timed back to back, a model's repetitions all fall in the same
minute, so one model's points can be a quarter faster than the next model's, and the fit,
which prices every model with the same rates, cannot follow both. With one repetition per
round and the rounds spread over the run, a slow minute lands on every model alike and each
point's mean holds its test's repetitions from several minutes (the statistic llama-bench
reports, over repetitions taken minutes apart rather than back to back; their standard
deviation shows how far the minutes differed). A round the measuring code judged disturbed
(``trust.judge``) is left out of the mean; a point disturbed in every round stays disturbed."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence

from rooflab.core.errors import MeasurementError
from rooflab.core.measure.engines.engine import EngineRun
from rooflab.core.values.measured import MAX_REPEATS, MeasuredPoint

Key = tuple[str, int, int, int, str]


def _key(p: MeasuredPoint) -> Key:
    return p.kind, p.prompt, p.context, p.batch, p.test


def merge_points(rounds: Sequence[MeasuredPoint]) -> MeasuredPoint:
    """One point from the same test timed in several rounds: the mean, median and standard
    deviation of the undisturbed rounds' figures (each round one sample: with one repetition a
    round, llama-bench's statistics over repetitions), their best, and every repetition behind
    them counted; disturbed only when every round was, with the first round's reason."""
    if not rounds:
        raise MeasurementError("a point needs at least one round")
    if len({_key(p) for p in rounds}) != 1:
        raise MeasurementError("rounds of different tests cannot be merged")
    first = rounds[0]
    kept = [p for p in rounds if not p.disturbed]
    if not kept:
        return dataclasses.replace(first, disturbed=f"every round disturbed ({first.disturbed})"[:500])
    if len(kept) == 1:
        return kept[0]
    samples = [p.seconds for p in kept]
    return dataclasses.replace(
        kept[0], seconds=statistics.fmean(samples), median=statistics.median(samples),
        stdev=statistics.stdev(samples), best=min(p.best or p.seconds for p in kept),
        repeats=min(MAX_REPEATS, sum(p.repeats for p in kept)))


def merge_rounds(runs: Sequence[EngineRun]) -> EngineRun:
    """One model's runs, one per round, as one run: each test's points merged
    (``merge_points``) in the first round's order, and a note of how many rounds there were
    and how many of their points were left out as disturbed."""
    if not runs:
        raise MeasurementError("a model needs at least one round")
    if len(runs) == 1:
        return runs[0]
    by_key: dict[Key, list[MeasuredPoint]] = {}
    for run in runs:
        if run.settings.key != runs[0].settings.key:
            raise MeasurementError(f"{run.label}: the rounds ran with different settings")
        for p in run.points:
            by_key.setdefault(_key(p), []).append(p)
    points = tuple(merge_points(ps) for ps in by_key.values())
    left_out = sum(1 for ps in by_key.values() for p in ps if p.disturbed)
    note = (f"timed in {len(runs)} rounds spread over the calibration, one repetition each: a point is the "
            f"mean of its rounds")
    if left_out:
        note += f" ({left_out} disturbed round{'s' if left_out != 1 else ''} of a point left out)"
    first = runs[0]
    return dataclasses.replace(first, points=points, notes=(*first.notes, note))
