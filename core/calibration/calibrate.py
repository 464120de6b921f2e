"""Calibration: fit the efficiency factors that turn the engine's ceiling into an estimate of
what one engine on one machine does, from timed passes.

A ``MeasuredPoint`` is one timed forward pass: a prefill of n tokens (TTFT) or one decode step
of b sequences at context t (TPOT). Points come from rooflab's own measurements and from
llama.cpp's benchmark tools; the fit sees only the point, not where it came from.

The model fitted is the engine's own (``predict.clocks``):

    decode:  t = (W + kv x K) / (B x eb)  + o        (memory-bound steps)
    prefill: t = max(W' / (B x eb), F / (C x ec)) + o

W weight bytes, K cache bytes attention reads, W' everything a prefill moves, F FLOPs, B and C
the machine's bandwidth and peak; the four unknowns are eb (bandwidth factor), kv (cache bytes
moved per byte attention reads), ec (compute factor) and o (seconds per pass). Deterministic
and robust: least absolute relative error throughout (a pass slowed by other load pulls the
fit less than with squares): a reweighted linear fit for the memory side, a bracketed 1-D
search for the compute side; no random starts."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rooflab.core.errors import SpecError
from rooflab.core.predict import work
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import KINDS, MeasuredPoint
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_BATCH, Workload

Array = NDArray[np.float64]
#: How far a measured pass may come in under its ceiling (timing noise, besides its own spread)
#: before the ceiling, that is the machine profile, is called wrong.
CEILING_BAND = 0.10


# --- predictions for points -------------------------------------------------------------------

def predict_points(spec: ModelSpec, machine: MachineProfile, points: Sequence[MeasuredPoint], *,
                   kv_type: str = "f16", dtype: str | None = None) -> Array:
    """Predicted seconds for each point with ``machine`` (its efficiency applied), each prompt
    in the ubatches its engine ran (llama.cpp's -ub; torch's every token at once)."""
    settings = next((p.settings for p in points if p.settings is not None), None)
    ubatch = settings.ubatch_size if settings is not None and settings.ubatch_size > 0 else MAX_BATCH
    flash = bool(settings.flash_attention) if settings is not None else True
    wl = Workload(kv_type=kv_type, compute_dtype=dtype, ubatch=ubatch, flash_attention=flash)
    out = np.empty(len(points))
    for kind in KINDS:
        idx = [i for i, p in enumerate(points) if p.kind == kind]
        if not idx:
            continue
        t = np.array([points[i].context for i in idx], dtype=np.float64)
        b = np.array([points[i].batch for i in idx], dtype=np.float64)
        if kind == "prefill":
            n = np.array([points[i].prompt for i in idx], dtype=np.float64)
            seconds = prefill_pass(spec, machine, wl, prompt=n, context=t, batch=b).seconds
        else:
            seconds = decode_pass(spec, machine, wl, context=t, batch=b).seconds
        out[idx] = seconds
    return out


def beaten_by(points: Sequence[MeasuredPoint], ceiling: Iterable[float]) -> list[tuple[MeasuredPoint, float]]:
    """The points that ran faster than their ``ceiling`` seconds by more than ``CEILING_BAND``
    plus their own spread, each with how much faster (ceiling / measured - 1), fastest first. A
    ceiling is what the machine allows: a pass that beats it says the machine profile is too low."""
    beaten = [(p, c / p.seconds - 1.0) for p, c in zip(points, ceiling, strict=True)
              if c > p.seconds * (1.0 + CEILING_BAND + p.spread)]
    return sorted(beaten, key=lambda x: -x[1])


def beating_the_machine(runs: Iterable[tuple[ModelSpec, Sequence[MeasuredPoint], str]], machine: MachineProfile,
                        dtype: str | None = None) -> tuple[str, ...]:
    """One note where points of ``runs`` (a model, its points, its cache type) beat ``machine``'s
    ceiling (its measured bandwidth and peaks, no efficiency; ``beaten_by``), none where none
    did: the profile is too low (a machine measured while it was slowed), and so is every rate
    a fit holds at it."""
    ceiling = dataclasses.replace(machine, efficiency=Efficiency())
    beaten, n = [], 0
    for spec, points, kv_type in runs:
        n += len(points)
        beaten += beaten_by(points, predict_points(spec, ceiling, points, kv_type=kv_type, dtype=dtype))
    if not beaten:
        return ()
    return (f"{len(beaten)} of {n} points beat this machine's ceiling (by up to {max(x for _, x in beaten):.0%}; "
            f"{machine.bandwidth / 1e9:.1f} GB/s, {machine.flops(dtype) / 1e9:.0f} GFLOP/s): the machine profile is "
            "wrong, too low, and so is every rate held at it: measure the machine again when it is quieter",)


@dataclass(frozen=True, slots=True)
class _Work:
    """Bytes and FLOPs of each point with no efficiency applied (cache at kv = 1)."""

    decode: NDArray[np.bool_]
    weights: Array          # bytes not scaled by kv (a prefill's cache writes included)
    cache: Array            # decode cache bytes attention reads (0 for prefill)
    flops: Array
    seconds: Array


def _work(spec: ModelSpec, points: Sequence[MeasuredPoint], kv_type: str) -> _Work:
    n = len(points)
    weights, cache, flops = np.zeros(n), np.zeros(n), np.zeros(n)
    for i, p in enumerate(points):
        if p.is_decode:
            w, k = work.decode_bytes(spec, p.context, p.batch, kv_type, 1.0)
            weights[i], cache[i] = float(w), float(k)
            flops[i] = float(work.decode_flops(spec, p.context, p.batch))
        else:
            weights[i] = float(work.prefill_bytes(spec, p.prompt, p.context, kv_type, p.batch))
            flops[i] = float(work.prefill_flops(spec, p.prompt, p.context, p.batch))
    return _Work(decode=np.array([p.is_decode for p in points], dtype=bool), weights=weights, cache=cache,
                 flops=flops, seconds=np.array([p.seconds for p in points]))


# --- errors -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorSummary:
    """|measured - predicted| / measured over ``count`` points."""

    median: float
    worst: float
    count: int


def relative_errors(measured: Array, predicted: Array) -> Array:
    return np.abs(measured - predicted) / measured


def error_summaries(points: Sequence[MeasuredPoint], predicted: Array) -> dict[str, ErrorSummary]:
    """Error summaries per kind present, and "all"."""
    measured = np.array([p.seconds for p in points])
    errors = relative_errors(measured, predicted)
    out = {}
    for kind in (*KINDS, "all"):
        mask = np.array([kind == "all" or p.kind == kind for p in points], dtype=bool)
        if mask.any():
            chosen = errors[mask]
            out[kind] = ErrorSummary(median=float(np.median(chosen)), worst=float(chosen.max()),
                                     count=int(mask.sum()))
    return out


# --- the fit ----------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Calibration:
    """A fitted Efficiency with the evidence: errors before and after, per point predictions."""

    efficiency: Efficiency
    prior: Efficiency
    fitted: tuple[str, ...]                 # factors the data determined
    bandwidth: float                        # the machine's B, bytes/s
    peak_flops: float                       # the machine's C at ``dtype``, FLOP/s
    dtype: str
    kv_type: str
    points: tuple[MeasuredPoint, ...]
    predicted_before: tuple[float, ...]
    predicted_after: tuple[float, ...]
    before: Mapping[str, ErrorSummary] = field(default_factory=dict)
    after: Mapping[str, ErrorSummary] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def effective_bandwidth(self) -> float:
        return self.bandwidth * self.efficiency.bandwidth

    @property
    def unknowns(self) -> int:
        """Factors the fit determined from the points (an overhead measured apart is not one)."""
        return sum(1 for name in self.fitted if name != "step_overhead")

    def beating_ceiling(self) -> list[tuple[MeasuredPoint, float]]:
        """The points that beat their ceiling (``beaten_by`` on the predictions before the fit)."""
        return beaten_by(self.points, self.predicted_before)

    @property
    def refusal(self) -> str:
        """Why this fit is not offered as the machine's efficiency, "" when it is: a fit resting on
        fewer points than its unknowns (or on a single point) fits nothing but its points, and one
        whose points beat the ceiling measured a profile that is wrong, not an efficiency."""
        n = len(self.points)
        if n < max(2, self.unknowns):
            return (f"it rests on {n} point{'s' if n != 1 else ''} for {self.unknowns} unknown"
                    f"{'s' if self.unknowns != 1 else ''}")
        beaten = self.beating_ceiling()
        if beaten:
            return (f"{len(beaten)} of {n} points beat the ceiling (by up to {beaten[0][1]:.0%}): "
                    "the machine profile is wrong")
        return ""

    @property
    def effective_flops(self) -> float:
        return self.peak_flops * self.efficiency.compute

    def apply(self, machine: MachineProfile) -> MachineProfile:
        """``machine`` with the fitted efficiency."""
        return dataclasses.replace(machine, efficiency=self.efficiency)

    def to_dict(self) -> dict[str, Any]:
        eff = dataclasses.asdict(self.efficiency)
        return {"efficiency": eff, "prior": dataclasses.asdict(self.prior), "fitted": list(self.fitted),
                "bandwidth": self.bandwidth, "peak_flops": self.peak_flops, "dtype": self.dtype,
                "kv_type": self.kv_type, "points": [p.to_dict() for p in self.points],
                "predicted_before": list(self.predicted_before), "predicted_after": list(self.predicted_after),
                "before": {k: dataclasses.asdict(v) for k, v in self.before.items()},
                "after": {k: dataclasses.asdict(v) for k, v in self.after.items()}, "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        try:
            return cls(efficiency=Efficiency(**data["efficiency"]), prior=Efficiency(**data["prior"]),
                       fitted=tuple(data["fitted"]), bandwidth=float(data["bandwidth"]),
                       peak_flops=float(data["peak_flops"]), dtype=str(data["dtype"]),
                       kv_type=str(data["kv_type"]),
                       points=tuple(MeasuredPoint.from_dict(p) for p in data["points"]),
                       predicted_before=tuple(float(x) for x in data["predicted_before"]),
                       predicted_after=tuple(float(x) for x in data["predicted_after"]),
                       before={k: ErrorSummary(**v) for k, v in data.get("before", {}).items()},
                       after={k: ErrorSummary(**v) for k, v in data.get("after", {}).items()},
                       notes=tuple(data.get("notes", ())))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SpecError(f"calibration record is malformed: {exc!r}") from exc


def _lstsq_relative(columns: Sequence[Array], target: Array, seconds: Array) -> Array:
    """Coefficients x minimising sum(|A x - target| / seconds): least absolute relative error,
    by iteratively reweighted least squares (robust to a few passes slowed by other load)."""
    a = np.stack([c / seconds for c in columns], axis=1)
    y = target / seconds
    weights: Array = np.ones_like(y)
    solution: Any = np.zeros(a.shape[1])
    for _ in range(30):
        root = np.sqrt(weights)
        solution, *_ = np.linalg.lstsq(a * root[:, None], y * root, rcond=None)
        weights = 1.0 / np.maximum(np.abs(a @ solution - y), 1e-3)
    return np.asarray(solution, dtype=np.float64)


def _fit_memory(w: _Work, mask: NDArray[np.bool_], overhead: float, notes: list[str],
                ) -> tuple[float, float, bool]:
    """(alpha, beta, kv fitted) with t - o = alpha W + beta K on the memory-bound decode points:
    alpha = 1 / (B eb) seconds per weight byte, beta = kv alpha per cache byte."""
    weights, cache, seconds = w.weights[mask], w.cache[mask], w.seconds[mask]
    target = np.maximum(seconds - overhead, 0.05 * seconds)
    share = cache / (weights + cache)
    # the cache must move the step time visibly (5 % of the bytes) before its cost is fitted
    if share.size >= 3 and float(share.max() - share.min()) >= 0.05:
        alpha, beta = _lstsq_relative([weights, cache], target, seconds)
        if alpha > 0 and beta >= alpha:
            return float(alpha), float(beta), True
        notes.append("cache bytes cost no more than weight bytes here: kv_read_factor kept at 1")
    (alpha,) = _lstsq_relative([weights + cache], target, seconds)
    return float(alpha), float(alpha), False


def _search_log(objective: Any, low: float, high: float) -> float:
    """Minimise ``objective`` over [low, high] in log space: a 241-point grid, then golden
    section between the grid neighbours of the best point. Deterministic."""
    grid = np.geomspace(low, high, 241)
    values = [objective(x) for x in grid]
    i = int(np.argmin(values))
    a, b = math.log(grid[max(i - 1, 0)]), math.log(grid[min(i + 1, grid.size - 1)])
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if objective(math.exp(c)) < objective(math.exp(d)):
            b = d
        else:
            a = c
    return math.exp((a + b) / 2)


def _fit_compute(w: _Work, mask: NDArray[np.bool_], memory_seconds: Array, overhead: float) -> float | None:
    """gamma = 1 / (C ec) seconds per FLOP minimising the relative error of
    max(memory, gamma F) + o (summed absolute) over the chosen points; None when none of them is compute-bound."""
    seconds, flops, memory = w.seconds[mask], w.flops[mask], memory_seconds[mask]
    if not np.any(seconds > 1.15 * (memory + overhead)):
        return None

    def objective(gamma: float) -> float:
        predicted = np.maximum(memory, gamma * flops) + overhead
        return float(np.sum(np.abs(predicted - seconds) / seconds))

    guesses = (seconds - overhead) / flops
    low, high = float(guesses.min()) / 20.0, float(guesses.max()) * 20.0
    return _search_log(objective, max(low, 1e-30), max(high, 1e-29))


def calibrate(spec: ModelSpec, machine: MachineProfile, points: Iterable[MeasuredPoint], *,
              kv_type: str = "f16", dtype: str | None = None, overhead: float | None = None,
              compute_from: tuple[str, ...] = ("prefill",), include_disturbed: bool = False) -> Calibration:
    """Fit ``machine``'s efficiency to ``points`` measured on ``spec``.

    overhead: seconds per pass measured separately (the torch engine's overhead probe,
    ``measure.engines.torch.passes.overhead_probe``), or None to take 0: from one model's
    decode steps alone the fixed cost per step and the bandwidth factor cannot be told apart
    (both add a constant), so without a probe the bandwidth factor absorbs it. compute_from:
    which kinds fit the compute factor (prefill: long prompts reach the peak that big
    multiplies do; small batched steps do not).
    Factors with no evidence keep ``machine``'s values. Points of different engines or engine
    settings are never fitted together (SpecError). Points marked disturbed are left out (with a
    note) unless ``include_disturbed``."""
    pts = tuple(points)
    if not pts:
        raise SpecError("calibration needs at least one measured point")
    notes: list[str] = []
    if not include_disturbed:
        left_out = [p for p in pts if p.disturbed]
        pts = tuple(p for p in pts if not p.disturbed)
        if not pts:
            raise SpecError(f"all {len(left_out)} points were disturbed ({left_out[0].disturbed}): measure again "
                            "on a quieter machine, or include them")
        if left_out:
            notes.append(f"{len(left_out)} disturbed point(s) left out of the fit: "
                         + "; ".join(f"{p.kind} {p.prompt}/{p.context}/{p.batch}: {p.disturbed}" for p in left_out[:4]))
    engines = sorted({p.engine_key for p in pts})
    if len(engines) > 1:
        raise SpecError(f"the points come from {len(engines)} engines or settings ({'; '.join(engines)}): "
                        "fit each apart")
    dtype = dtype or machine.default_dtype
    prior = machine.efficiency
    fitted: list[str] = []
    bandwidth, peak = machine.bandwidth, machine.flops(dtype)
    w = _work(spec, pts, kv_type)
    o = float(overhead) if overhead is not None else 0.0
    if overhead is not None:
        fitted.append("step_overhead")
    # classify with the prior: a decode step is memory-bound when bytes / B exceed FLOPs / C
    prior_memory = (w.weights + w.cache * prior.kv_read_factor) / (bandwidth * prior.bandwidth)
    prior_compute = w.flops / (peak * prior.compute)
    memory_bound = w.decode & (prior_memory >= prior_compute)
    eb, kv = prior.bandwidth, prior.kv_read_factor
    if memory_bound.any():
        alpha, beta, fit_kv = _fit_memory(w, memory_bound, o, notes)
        eb = min(100.0, max(1e-3, 1.0 / (alpha * bandwidth)))
        kv = min(100.0, max(1.0, beta / alpha)) if fit_kv else 1.0
        fitted += ["bandwidth", "kv_read_factor"] if fit_kv else ["bandwidth"]
    else:
        notes.append("no memory-bound decode step: bandwidth factor not fitted")
    memory_seconds = (w.weights + kv * w.cache) / (bandwidth * eb)
    ec = prior.compute
    chosen = np.array([p.kind in compute_from for p in pts], dtype=bool)
    gamma = _fit_compute(w, chosen, memory_seconds, o) if chosen.any() else None
    if gamma is not None:
        ec = min(100.0, max(1e-4, 1.0 / (gamma * peak)))
        fitted.append("compute")
    else:
        notes.append("no compute-bound pass: compute factor not fitted")
    efficiency = Efficiency(bandwidth=eb, compute=ec, step_overhead=min(max(o, 0.0), 59.0), kv_read_factor=kv)
    before = predict_points(spec, machine, pts, kv_type=kv_type, dtype=dtype)
    after = predict_points(spec, dataclasses.replace(machine, efficiency=efficiency), pts,
                           kv_type=kv_type, dtype=dtype)
    return Calibration(efficiency=efficiency, prior=prior, fitted=tuple(fitted), bandwidth=bandwidth,
                       peak_flops=peak, dtype=dtype, kv_type=kv_type, points=pts,
                       predicted_before=tuple(float(x) for x in before),
                       predicted_after=tuple(float(x) for x in after),
                       before=error_summaries(pts, before), after=error_summaries(pts, after), notes=tuple(notes))
