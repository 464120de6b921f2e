"""Fit a calibration that carries over to models it never saw, and score it honestly.

The points of several models timed by one engine on one machine are fitted together to the
model form of ``values.calibration`` (rates by weight format, a cache rate, fixed costs per
pass and per layer, the overlap of the two clocks). For a given overlap and a given guess of
which clock is the longer in each pass, a pass's time is linear in the inverse rates:

    t = o + o_L x L + a x sum_f(W_f / bw_f) + a x K / bw_kv + c x sum_f(F_f / flops_f)
        + sum_f(A_f / batch_f)

(a prompt's n² attention FLOPs a FLOP class of their own where the prompts show it, ``Classes``;
a, c: 1 for the longer clock, 1 - overlap for the shorter; a batched decode step's first
sequence's FLOPs in the compute clock, each further one's, A, after the overlap: on a CPU one
sequence's arithmetic hides under the weights' streaming, sixteen's do not). The fit minimises the summed
relative error |t - measured| / measured (a pass slowed by other load pulls it less than with
squares) by iteratively reweighted least squares with every inverse rate kept >= 0, re-deciding
the longer clock until it settles. Each model reads its cache at a rate of its own (pooled for
the prediction by the walk: ``calibration_solver.pooled_cache_terms``), a single sequence's
cache as the engine splits it over its threads (``Classes.kv_chunks``), and the overlap is the
one of a grid that prices left-out architectures best (``calibration_holdout``). Deterministic.

Accuracy is scored only on points the fit did not see: leave one model out (fit on the other
models, predict the one left out), leave one architecture out (every model of one architecture
predicted by the fit of the others) and extrapolation (fit on short prompts, shallow caches and
small batches; predict long, deep and large). The in-sample error is reported as fit quality.
Uncertainty: the fit redone on resampled models and points (a seeded bootstrap). The solver
itself, which the published rows' fit (``public_fit``) shares: ``calibration_solver``."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rooflab.core.calibration.calibrate import beating_the_machine, predict_points
from rooflab.core.calibration.holdout import (
    every_point,
    extrapolation,
    leave_group_out,
    overlap_by_architecture,
)
from rooflab.core.calibration.solver import (
    OVERLAPS,
    ROWS_HALF,
    Array,
    Design,
    Unknowns,
    at_rows_half,
    by_model,
    first_best,
    fit_at,
    fit_scored,
    lower_bounds,
    mostly_in,
    pooled_cache_terms,
)
from rooflab.core.calibration.store import model_key
from rooflab.core.errors import SpecError
from rooflab.core.predict import work
from rooflab.core.predict.expected import EXPERTS, MINOR_SHARE, byte_shares, efficiency_for, flop_shares
from rooflab.core.values.calibration import PHASES, Accuracy, EngineCalibration, Rates
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from rooflab.core.values.model import ModelSpec

REPLICATES = 40
SMALL = {"prefill": 512, "decode": 1100, "batch": 4}     # the extrapolation fit's reach


@dataclass(frozen=True, kw_only=True)
class ModelPoints:
    """The points one calibration model gave, with the model they belong to."""

    key: str
    spec: ModelSpec
    points: tuple[MeasuredPoint, ...]
    kv_type: str = "f16"
    dtype: str | None = None


def _point_work(spec: ModelSpec, p: MeasuredPoint, kv_type: str,
                kv_chunks: int = 0) -> tuple[float, float, float, float]:
    """(weight bytes, cache bytes, FLOPs, the FLOPs of a prefill's n² attention among them)."""
    if p.is_decode:
        w, k = work.decode_bytes(spec, p.context, p.batch, kv_type, 1.0, kv_chunks)
        return float(w), float(k), float(work.decode_flops(spec, p.context, p.batch)), 0.0
    return (float(work.prefill_bytes(spec, p.prompt, p.context, kv_type, p.batch)), 0.0,
            float(work.prefill_flops(spec, p.prompt, p.context, p.batch)),
            float(p.batch * work.attention_flops(spec, p.prompt, p.context)))


def _is_small(p: MeasuredPoint) -> bool:
    if p.kind == "prefill":
        return p.prompt <= SMALL["prefill"]
    if p.kind == "decode":
        return p.context <= SMALL["decode"]
    return p.batch <= SMALL["batch"]


@dataclass(frozen=True, slots=True)
class Classes:
    """The classes the fit gives rates: format classes of the bytes, and of the FLOPs (routed
    experts apart), each holding at least ``MINOR_SHARE`` of some model's bytes or FLOPs; and
    whether a prefill's n² attention gets a FLOP column of its own (``_attention_shown``; else
    it rides with the multiplies)."""

    bytes: tuple[str, ...]
    flops: tuple[str, ...]
    attention: bool = False
    kv_chunks: int = 0      # the engine's split of one query's cache (``work.split_context``)

    @classmethod
    def of(cls, models: Sequence[ModelPoints]) -> Classes:
        def found(shares: Any) -> tuple[str, ...]:
            return tuple(sorted({k for m in models for k, v in shares(m.spec).items() if v >= MINOR_SHARE}))

        prompts = np.array([_point_work(m.spec, p, m.kv_type)[2:] for m in models for p in m.points
                            if not p.is_decode]).reshape(-1, 2)      # (FLOPs, attention's among them)
        settings = next((p.settings for m in models for p in m.points if p.settings is not None), None)
        return cls(bytes=found(byte_shares), flops=found(flop_shares),
                   attention=_attention_shown(prompts[:, 1], prompts[:, 0]),
                   kv_chunks=settings.kv_chunks if settings else 0)

    def unknowns(self, groups: int = 0) -> Unknowns:
        """Where the fit's unknowns sit: the attention column, where there is one, is the
        last FLOP class; ``groups`` models with a cache rate each."""
        return Unknowns(byte_classes=len(self.bytes), flop_classes=len(self.flops) + self.attention,
                        cache_groups=groups)


def _shares(shares: dict[str, float], classes: tuple[str, ...]) -> Array:
    """``shares`` over ``classes``; a minor class the fit has no column for goes to the
    model's largest one."""
    out = np.array([shares.get(k, 0.0) for k in classes])
    rest = 1.0 - out.sum()
    if rest > 0:
        out[int(np.argmax(out))] += rest
    return out


@dataclass(frozen=True, slots=True)
class _Row:
    """One point's linear pieces: its seconds, its weight bytes and FLOPs split by class, its
    cache bytes, and which model and kind of pass it is."""

    seconds: float
    weights: Array        # (classes,): weight bytes by class
    cache: float
    flops: Array          # (classes,): FLOPs by class
    prefill: bool
    layers: float
    model: int
    small: bool
    rows: tuple[float, float]     # a prefill's rows per dense multiply and per routed expert
    batch: float                  # a decode step's sequences (1 for a prefill)


def _rows(spec: ModelSpec, p: MeasuredPoint) -> tuple[float, float]:
    """Rows per multiply of ``p``'s pass: its tokens, min(b x n, -ub) in llama.cpp (every token
    at once in torch), and each routed expert's share of them (at least one)."""
    if p.is_decode:
        return 1.0, 1.0
    tokens = float(p.prompt * p.batch)
    ubatch = p.settings.ubatch_size if p.settings is not None and p.settings.ubatch_size > 0 else 0
    r = min(tokens, float(ubatch)) if ubatch else tokens
    spread = spec.expert_fraction
    return r, max(1.0, r * spread)


def _design(models: Sequence[ModelPoints], classes: Classes) -> Design:
    rows: list[_Row] = []
    for i, m in enumerate(models):
        bs, fs = _shares(byte_shares(m.spec), classes.bytes), _shares(flop_shares(m.spec), classes.flops)
        for p in m.points:
            w, k, f, a = _point_work(m.spec, p, m.kv_type, classes.kv_chunks)
            flops = np.append((f - a) * fs, a) if classes.attention else f * fs
            rows.append(_Row(seconds=p.seconds, weights=w * bs, cache=k, flops=flops, prefill=not p.is_decode,
                             layers=float(m.spec.layers), model=i, small=_is_small(p), rows=_rows(m.spec, p),
                             batch=float(p.batch) if p.is_decode else 1.0))
    if not rows:
        raise SpecError("calibration needs measured points")
    cache, model = np.array([r.cache for r in rows]), np.array([r.model for r in rows], dtype=np.int64)
    return Design(seconds=np.array([r.seconds for r in rows]), weights=np.stack([r.weights for r in rows]),
                   cache=cache, flops=np.stack([r.flops for r in rows]),
                   prefill=np.array([r.prefill for r in rows]), layers=np.array([r.layers for r in rows]),
                   model=model,
                   small=np.array([r.small for r in rows]), weight=np.ones(len(rows)),
                   rows=np.array([r.rows for r in rows], dtype=np.float64),
                   batch=np.array([r.batch for r in rows]),
                   cache_model=by_model(cache, model, len(models)),
                   walk=np.array([work.attention_walk_per_cache_byte(models[r.model].spec, models[r.model].kv_type)
                                  for r in rows]).reshape(-1, 2))


MIN_RATE_POINTS = 3      # points of a phase mostly in one class before that class's rate is given
ATTENTION_SHARE = 0.1    # a prompt's attention share of its FLOPs that shows attention's own rate


def _attention_shown(attention: Array, flops: Array) -> bool:
    """Whether ``MIN_RATE_POINTS`` prompts spend ``ATTENTION_SHARE`` of their ``flops`` on attention."""
    share = attention / np.maximum(flops, 1e-300)
    return int((share >= ATTENTION_SHARE).sum()) >= MIN_RATE_POINTS


def _shown(columns: Array, phase: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """The classes whose rate ``phase``'s points show: at least ``MIN_RATE_POINTS`` of them hold
    half their bytes or FLOPs in it (a rate no point shows would be whatever the solver left;
    every k-quant generation point once disturbed gave "3 GFLOP/s" and a 1 tokens/s figure).
    The best-shown class always is, so every table has a rate."""
    counts = mostly_in(columns, phase).sum(axis=0)
    shown = counts >= MIN_RATE_POINTS
    if not shown.any():
        shown[int(np.argmax(counts if counts.any() else columns.sum(axis=0)))] = True
    return np.asarray(shown, dtype=bool)


def _scaled(d: Design, classes: Classes, rows_half: float) -> Design:
    """``d`` with its prefill FLOPs weighted for rows per multiply at ``rows_half`` (r0)."""
    experts = classes.flops.index(EXPERTS) if EXPERTS in classes.flops else None
    return at_rows_half(d, rows_half, range(len(classes.flops)), experts)


def _caps(machine: MachineProfile, dtype: str | None) -> tuple[float, float]:
    """(bytes/s, FLOP/s) no fitted rate may pass: the machine's measured bandwidth, and the
    fastest multiply it measured (any dtype: llama.cpp's integer dot products may beat the fp32
    peak, not every unit at once)."""
    return machine.bandwidth, max([machine.flops(dtype), *machine.peak_flops.values()])


def _lower(classes: Classes, machine: MachineProfile, dtype: str | None, d: Design) -> Array:
    return lower_bounds(classes.unknowns(d.cache_model.shape[1]), *_caps(machine, dtype))


def _fit(d: Design, classes: Classes, machine: MachineProfile, dtype: str | None,
         overlaps: Sequence[float] = OVERLAPS) -> tuple[Array, float, float]:
    """(unknowns, overlap, r0): the fit at each r0 of ``ROWS_HALF`` and each of ``overlaps``, the
    one with the least summed relative error (ties: the first on the grid, ``first_best``, as the
    published-benchmark fit chooses it), every rate within what
    ``machine`` allows (a bound the fit works under: clamping a rate after the fit would leave
    the other terms fitted to a rate it no longer has)."""
    lower = _lower(classes, machine, dtype, d)
    best = first_best([(*fit_scored(_scaled(d, classes, r0), overlaps, lower), r0) for r0 in ROWS_HALF],
                      lambda f: f[2])
    return best[0], best[1], best[3]


def _rates(u: Array, overlap: float, d: Design, classes: Classes, machine: MachineProfile,
           dtype: str | None, rows_half: float = 0.0) -> Rates:
    """Unknowns as rates, each bounded by the machine the points ran on (``_caps``; the fit
    already kept within them, so the bound only guards rounding). A class none of ``d``'s points
    holds gets no rate (it is then priced at the pooled one), nor does attention unless ``d``'s
    prompts show it (``_attention_shown``)."""
    at = classes.unknowns(d.cache_model.shape[1])
    k = len(classes.flops)
    b_cap, c_cap = _caps(machine, dtype)
    seen_b = _shown(d.weights, ~d.prefill)
    dense = d.flops[:, :k]
    seen_p, seen_d = _shown(dense, d.prefill), _shown(dense, ~d.prefill)
    batched = d.batch > 1

    def rates(inverse: Array, names: tuple[str, ...], seen: NDArray[np.bool_], cap: float) -> dict[str, float]:
        return {name: rate(x, cap) for name, x, keep in zip(names, inverse, seen, strict=True) if keep}

    def rate(x: float, cap: float) -> float:
        return float(min(cap, 1.0 / x)) if x > 0 else cap

    shown = classes.attention and _attention_shown(d.flops[d.prefill, k], d.flops[d.prefill].sum(axis=1))
    per_byte, per_pair, per_value = pooled_cache_terms(d, u, overlap, 1.0 / b_cap)
    batch = rates(u[at.batch][:k], classes.flops, _shown(dense, batched), c_cap) if batched.any() else {}
    return Rates(bandwidth=rates(u[at.bandwidth], classes.bytes, seen_b, b_cap),
                 prefill_flops=rates(u[at.prefill][:k], classes.flops, seen_p, c_cap),
                 decode_flops=rates(u[at.decode][:k], classes.flops, seen_d, c_cap),
                 batch_flops=batch, attention_flops=rate(u[at.prefill][k], c_cap) if shown else None,
                 cache_bandwidth=rate(per_byte, b_cap), cache_pair_seconds=min(per_pair, 1e-3),
                 cache_value_seconds=min(per_value, 1e-3),
                 kv_chunks=classes.kv_chunks, pass_seconds=float(min(u[at.pass_seconds], 59.0)),
                 layer_seconds=float(min(u[at.layer_seconds], 1.0)), overlap=overlap, rows_half=rows_half)


# --- scoring through the app's own prediction path ---------------------------------------------

def predicted_seconds(m: ModelPoints, machine: MachineProfile, rates: Rates,
                      points: Sequence[MeasuredPoint] | None = None) -> Array:
    """Seconds the calibration expects for ``m``'s points: its rates turned into the model's
    Efficiency (``predict.expected``) and priced by the clocks, as every expected figure is."""
    eff = efficiency_for(m.spec, machine, rates, dtype=m.dtype)
    return predict_points(m.spec, dataclasses.replace(machine, efficiency=eff), points or m.points,
                          kv_type=m.kv_type, dtype=m.dtype)


def _errors(models: Sequence[ModelPoints], machine: MachineProfile, rates_of: dict[int, Rates],
            chosen: dict[int, NDArray[np.bool_]]) -> dict[str, Accuracy]:
    """Errors per phase of the chosen points of each model under that model's rates."""
    by_phase: dict[str, list[float]] = {k: [] for k in PHASES}
    for i, m in enumerate(models):
        if i not in rates_of or not chosen[i].any():
            continue
        pts = [p for p, keep in zip(m.points, chosen[i], strict=True) if keep]
        predicted = predicted_seconds(m, machine, rates_of[i], pts)
        for p, t in zip(pts, predicted, strict=True):
            by_phase[p.kind].append(abs(t - p.seconds) / p.seconds)
    return {k: Accuracy(median=float(np.median(v)), worst=float(np.max(v)), count=len(v))
            for k, v in by_phase.items() if v}


def calibrate_engine(models: Sequence[ModelPoints], machine: MachineProfile, *, engine_label: str,
                     settings: dict[str, object] | None = None, dtype: str | None = None,
                     replicates: int = REPLICATES, seed: int = 0) -> EngineCalibration:
    """Fit one calibration to every model's points, score it out of sample, and bound it.

    ``machine``: the profile the points were measured on (its key names the calibration; its
    bandwidth and peaks bound every fitted rate; points that beat them are noted). Points marked
    disturbed are left out (noted); other engine settings, or too few points, are refused (SpecError)."""
    notes: list[str] = []
    kept = []
    for m in models:
        good = tuple(p for p in m.points if not p.disturbed)
        if len(good) < len(m.points):
            notes.append(f"{m.key}: {len(m.points) - len(good)} disturbed point(s) left out")
        if good:
            kept.append(dataclasses.replace(m, points=good))
    notes += beating_the_machine([(m.spec, m.points, m.kv_type) for m in kept], machine, dtype)
    keys = sorted({p.engine_key for m in kept for p in m.points})
    if len(keys) != 1:
        raise SpecError(f"a calibration needs points of one engine and settings, got {len(keys)}: {'; '.join(keys)}")
    classes = Classes.of(kept)
    d = _design(kept, classes)
    at = Unknowns.of(d)
    batched = bool((d.batch > 1).any())     # none: no such rates; attention's column is a prefill's only
    unknowns = at.size - (0 if batched else at.flop_classes) - classes.attention * (1 + batched) \
        - bool(at.cache_groups)                # the shared cache rate, unused beside each model's
    if d.seconds.size < unknowns:
        raise SpecError(f"a calibration resting on {d.seconds.size} points cannot fit its {unknowns} unknowns: "
                        "measure more points (or leave fewer out as disturbed)")

    def refit(part: Design, overlaps: Sequence[float]) -> Rates:
        u, o, r0 = _fit(part, classes, machine, dtype, overlaps)
        return _rates(u, o, part, classes, machine, dtype, r0)

    def score(rates_of: dict[int, Rates], chosen: dict[int, NDArray[np.bool_]]) -> dict[str, Accuracy]:
        return _errors(kept, machine, rates_of, chosen)

    counts = [len(m.points) for m in kept]
    overlaps, by_architecture = overlap_by_architecture([m.spec.architecture for m in kept], d, refit, score, counts)
    u, overlap, rows_half = _fit(d, classes, machine, dtype, overlaps)
    central = _rates(u, overlap, d, classes, machine, dtype, rows_half)
    far = {i: np.array([not _is_small(p) for p in m.points]) for i, m in enumerate(kept)}
    accuracy = {"in_sample": score(dict.fromkeys(range(len(kept)), central), every_point(counts)),
                "leave_one_model_out": leave_group_out([str(i) for i in range(len(kept))], d, refit, score, counts,
                                                       overlaps),
                "extrapolation": extrapolation(d, far, refit, score, overlaps)}
    if by_architecture:
        accuracy["leave_one_architecture_out"] = by_architecture
    reps = _bootstrap(kept, d, classes, machine, dtype, (overlap, rows_half), replicates, seed)
    first = kept[0].points[0].settings
    return EngineCalibration(
        machine_key=machine.key or machine.name, machine_name=machine.name, engine_key=keys[0],
        engine_label=engine_label, settings=settings if settings is not None else (first.to_dict() if first else {}),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        models=tuple(m.key for m in kept), machine_bandwidth=machine.bandwidth, machine_flops=machine.flops(dtype),
        central=central, replicates=reps, accuracy=accuracy, notes=tuple(notes),
        points=int(d.seconds.size), model_keys=tuple(model_key(m.spec) for m in kept))


def _bootstrap(models: Sequence[ModelPoints], d: Design, classes: Classes, machine: MachineProfile,
               dtype: str | None, held: tuple[float, float], count: int, seed: int) -> tuple[Rates, ...]:
    """The fit redone ``count`` times on resampled data: models drawn with replacement among
    those of the same main format class (so every class stays present), points drawn with
    replacement within each model; the overlap and r0 held at the central fit's (``held``)."""
    overlap, rows_half = held
    rng = np.random.default_rng(seed)
    lower = _lower(classes, machine, dtype, d)
    groups: dict[str, list[int]] = {}
    for i, m in enumerate(models):
        shares = byte_shares(m.spec)
        groups.setdefault(max(shares, key=lambda k: shares[k]), []).append(i)
    out = []
    for _ in range(count):
        rows: list[NDArray[np.int64]] = []
        for members in groups.values():
            for i in rng.choice(members, size=len(members), replace=True):
                own = np.flatnonzero(d.model == i)
                rows.append(rng.choice(own, size=own.size, replace=True))
        part = d.subset(np.concatenate(rows))
        u, _ = fit_at(_scaled(part, classes, rows_half), overlap, lower)
        out.append(_rates(u, overlap, part, classes, machine, dtype, rows_half))
    return tuple(out)


def score(m: ModelPoints, machine: MachineProfile, calibration: EngineCalibration) -> dict[str, Accuracy]:
    """How well ``calibration`` predicts ``m``'s points, per phase: out of sample when ``m`` is
    not among the models it was fitted to (the caller checks ``calibration.models``)."""
    rates = calibration.central
    chosen = {0: np.array([not p.disturbed for p in m.points])}
    return _errors([m], machine, {0: rates}, chosen)
