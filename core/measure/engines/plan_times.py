"""How far a model run has come and how long it has left, from the points' predicted times.

A run's points cost very different times: a 4,096-token prompt is compute-bound, a 128-token
generation at depth 16,384 reads the cache 128 times, a batch of 16 at context 512 is a few
steps. Weighting them by a fixed guess of streaming and arithmetic rates left the progress
bar at 42 % for a minute and a half while the ETA climbed from 25 s to 114 s. Here each planned
point weighs what rooflab predicts it takes on the machine (``predict.clocks``), and the ETA
rescales those predictions by the time the finished points took, so it converges as the run goes;
between two points the bar moves and the ETA counts down. No Qt, no clock of its own: the
caller passes the time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rooflab.core.errors import RooflabError
from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload


@dataclass(frozen=True, slots=True)
class PlannedPoint:
    """One planned unit of a run: the kind of point it yields and its predicted seconds."""

    kind: str           # "prefill", "decode" or "batch", as ``MeasuredPoint.kind``
    seconds: float


def _prefill(spec: ModelSpec, m: MachineProfile, w: Workload, n: int, depth: int) -> float:
    return float(prefill_pass(spec, m, w, prompt=max(1, n), context=depth, batch=1).seconds)


def _step(spec: ModelSpec, m: MachineProfile, w: Workload, depth: int, batch: int = 1) -> float:
    return float(decode_pass(spec, m, w, context=depth, batch=batch).seconds)


def llamacpp_points(spec: ModelSpec, machine: MachineProfile, plan: LlamaCppPlan) -> tuple[PlannedPoint, ...]:
    """The units of an in-process llama.cpp run in the order they run: each test's runs (and its
    warm-up) at its depth, then each context's fill and its batches' steps."""
    w = Workload(kv_type=plan.kv_type, ubatch=plan.ubatch)
    runs = plan.repeats + (1 if plan.warmup else 0)
    units = [PlannedPoint(t.kind, _prefill(spec, machine, w, t.n_depth, 0) + runs * (
        (_prefill(spec, machine, w, t.n_prompt, t.n_depth) if t.n_prompt else 0.0)
        + t.n_gen * _step(spec, machine, w, t.n_depth))) for t in plan.tests]
    if "batch" in plan.experiments:
        for t in plan.contexts:
            fill = _prefill(spec, machine, w, t, 0)
            for i, b in enumerate(plan.batches):
                units.append(PlannedPoint("batch", (fill if i == 0 else 0.0)
                                          + (plan.batch_steps + 1) * _step(spec, machine, w, t, b)))
    return tuple(units)


def torch_points(spec: ModelSpec, machine: MachineProfile, plan: object) -> tuple[PlannedPoint, ...]:
    """The units of a torch run (``torch.timing.ModelPlan``): each prompt's prefill runs and its
    decode steps, then each (context, batch)'s fill and steps."""
    w = Workload()
    repeats = int(getattr(plan, "repeats", 1))
    units: list[PlannedPoint] = []
    for n in getattr(plan, "timed_prompts", ()):
        units.append(PlannedPoint("prefill", repeats * _prefill(spec, machine, w, n, 0)))
        steps = int(getattr(plan, "timed_steps", 0))
        if steps:
            units.append(PlannedPoint("decode", repeats * steps * _step(spec, machine, w, n)))
    for t, b in getattr(plan, "batch_grid", ()):
        units.append(PlannedPoint("batch", _prefill(spec, machine, w, t, 0)
                                  + (int(getattr(plan, "batch_steps", 1)) + 1) * _step(spec, machine, w, t, b)))
    return tuple(units)


def planned_points(engine: str, spec: ModelSpec, machine: MachineProfile, plan: object) -> tuple[PlannedPoint, ...]:
    """The units of a run in ``engine`` ("llamacpp" or "torch"); () when the plan cannot be
    priced (the run then shows the job's own progress)."""
    try:
        if engine == "llamacpp" and isinstance(plan, LlamaCppPlan):
            return llamacpp_points(spec, machine, plan)
        if engine == "torch":
            return torch_points(spec, machine, plan)
    except (RooflabError, ValueError, ZeroDivisionError):
        return ()
    return ()


class RunClock:
    """Fraction done and seconds left of a run of ``PlannedPoint`` units (times in seconds from
    any origin the caller keeps to). ``started``: the first unit began (loading is not timed);
    ``measured``: a point arrived, its unit (the next undone one of its kind) is done."""

    def __init__(self, units: Sequence[PlannedPoint]) -> None:
        self._units = [max(u.seconds, 1e-9) for u in units]
        self._kinds = [u.kind for u in units]
        self._done = [False] * len(units)
        self._total = sum(self._units) or 1.0
        self._began: float | None = None
        self._last: float | None = None

    @property
    def planned(self) -> bool:
        return bool(self._units)

    def started(self, now: float) -> None:
        if self._began is None:
            self._began = self._last = now

    def measured(self, kind: str, now: float) -> None:
        self.started(now)
        undone = [i for i, done in enumerate(self._done) if not done]
        if not undone:
            return
        same = [i for i in undone if self._kinds[i] == kind]
        self._done[(same or undone)[0]] = True
        self._last = now

    def _done_seconds(self) -> float:
        return sum(s for s, done in zip(self._units, self._done, strict=True) if done)

    def _current(self) -> float:
        """Predicted seconds of the unit running now (the first undone one)."""
        return next((s for s, done in zip(self._units, self._done, strict=True) if not done), 0.0)

    def _rate(self) -> float | None:
        """Seconds of this run per predicted second, from the units done (None before one is)."""
        done = self._done_seconds()
        if done <= 0 or self._began is None or self._last is None:
            return None
        return max(self._last - self._began, 1e-6) / done

    def fraction(self, now: float) -> float:
        """Units done, by predicted time, and the running one as far as its time has gone."""
        rate, done = self._rate(), self._done_seconds()
        running = 0.0
        if rate is not None and self._last is not None:
            running = min(self._current(), max(0.0, now - self._last) / rate)
        return min(1.0, (done + running) / self._total)

    def eta_seconds(self, now: float) -> float | None:
        """Seconds left: the rest at the rate the run has gone so far, counting down while a point
        runs, never below what the points after the running one take."""
        rate = self._rate()
        if rate is None or self._last is None:
            return None
        left = self._total - self._done_seconds()
        after = left - self._current()
        return max(rate * after, rate * left - max(0.0, now - self._last))
