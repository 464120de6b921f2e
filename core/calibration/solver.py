"""The solver under both calibrations (one machine's, ``calibration_fit``; the published rows',
``public_fit``): every point's linear pieces (``Design``), where each unknown sits (``Unknowns``)
and the fit. For a given overlap and a given guess of which clock is the longer in each pass, a
pass's time is linear in the inverse rates:

    t = o + o_L x L + a x sum_f(W_f / bw_f) + a x K / bw_kv + c x sum_f(F_f / flops_f)
        + sum_f(A_f / batch_f)

(a, c: 1 for the longer clock, 1 - overlap for the shorter; a decode step of b sequences puts
its first sequence's FLOPs F / b in the compute clock and the others', A = (b - 1) x F / b,
after the overlap at their own rate; the cache rate bw_kv one for all points, or, where the
design groups the cache bytes by model (``Design.cache_model``), one per model, so that one
model's attention kernel, slower or faster per byte than the others', does not move the rates
they share, and the rate a model not seen gets is pooled afterwards, ``pooled_cache_terms``:
a cost per byte, per (query head, cached token) pair and per value of those, so that a model's
head shape sets it).
The fit minimises the summed
relative error |t - measured| / measured by iteratively reweighted least squares with every
inverse rate kept >= its lower bound (0, or one over what the machine allows: a bound is a
constraint of the fit, so the other terms are fitted with it, never clamped afterwards),
re-deciding the longer clock until it settles; the overlap is chosen on a grid. Deterministic."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
OVERLAPS = (0.0, 0.25, 0.5, 0.75, 1.0)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Design:
    """The linear pieces of every point, one row each."""

    seconds: Array
    weights: Array        # (n, classes): weight bytes by class
    cache: Array          # (n,)
    flops: Array          # (n, classes): FLOPs by class
    prefill: NDArray[np.bool_]
    layers: Array
    model: NDArray[np.int64]
    small: NDArray[np.bool_]
    weight: Array         # (n,): each point's weight in the summed error (1: all alike)
    rows: Array           # (n, 2): a prefill's rows per dense multiply and per routed expert (1 for decode)
    batch: Array          # (n,): a decode step's sequences (1 for a prefill)
    cache_model: Array    # (n, groups): each point's cache bytes in its model's column (groups 0: one rate)
    walk: Array           # (n, 2): query heads and their values per cache byte of each point's model
                          # (``work.attention_walk_per_cache_byte``)

    def subset(self, index: NDArray[np.bool_] | NDArray[np.int64]) -> Design:
        """The rows ``index`` picks (a mask, or row numbers, repeats allowed)."""
        return Design(*(getattr(self, f.name)[index] for f in dataclasses.fields(Design)))


@dataclass(frozen=True, slots=True)
class Unknowns:
    """Where each term sits in the fit's vector of unknowns ``u`` (all >= 0): the inverse
    bandwidth of each byte class, the cache's inverse bandwidth, the inverse prefill and decode
    FLOP/s of each FLOP class, the fixed seconds per pass and per layer, the inverse FLOP/s of
    each further decode sequence's arithmetic by FLOP class, then each model's inverse cache
    bandwidth where the cache is grouped by model (``cache_groups``; the shared one is then
    unused)."""

    byte_classes: int
    flop_classes: int
    cache_groups: int = 0

    @classmethod
    def of(cls, d: Design) -> Unknowns:
        return cls(byte_classes=d.weights.shape[1], flop_classes=d.flops.shape[1],
                   cache_groups=d.cache_model.shape[1])

    @property
    def bandwidth(self) -> slice:
        return slice(0, self.byte_classes)

    @property
    def cache(self) -> int:
        return self.byte_classes

    @property
    def prefill(self) -> slice:
        return slice(self.cache + 1, self.cache + 1 + self.flop_classes)

    @property
    def decode(self) -> slice:
        return slice(self.prefill.stop, self.prefill.stop + self.flop_classes)

    @property
    def pass_seconds(self) -> int:
        return self.decode.stop

    @property
    def layer_seconds(self) -> int:
        return self.pass_seconds + 1

    @property
    def batch(self) -> slice:
        return slice(self.layer_seconds + 1, self.layer_seconds + 1 + self.flop_classes)

    @property
    def model_cache(self) -> slice:
        return slice(self.batch.stop, self.batch.stop + self.cache_groups)

    @property
    def size(self) -> int:
        return self.model_cache.stop


def _split(d: Design) -> tuple[Array, Array]:
    """(FLOPs in the compute clock, FLOPs added after the overlap) of every point: a decode
    step's first sequence's and the further ones' (a prefill's all in the clock)."""
    first = d.flops / np.maximum(d.batch, 1.0)[:, None]
    return first, d.flops - first


def _clocks(d: Design, u: Array, first: Array) -> tuple[Array, Array]:
    """(memory, compute) seconds of every point at unknowns ``u`` (``first``: ``_split``'s FLOPs
    in the compute clock)."""
    at = Unknowns.of(d)
    cache = d.cache_model @ u[at.model_cache] if at.cache_groups else d.cache * u[at.cache]
    memory = d.weights @ u[at.bandwidth] + cache
    compute = np.where(d.prefill, first @ u[at.prefill], first @ u[at.decode])
    return memory, compute


def _predict(d: Design, u: Array, overlap: float) -> Array:
    at = Unknowns.of(d)
    first, after = _split(d)
    memory, compute = _clocks(d, u, first)
    longer = np.maximum(memory, compute)
    added = after @ u[at.batch]
    return (longer + (1.0 - overlap) * np.minimum(memory, compute) + added + u[at.pass_seconds]
            + u[at.layer_seconds] * d.layers)


def design_seconds(d: Design, u: Array, overlap: float) -> Array:
    """Seconds of every point of ``d`` at unknowns ``u`` (``fit_at``'s) and ``overlap``: what a
    term fitted after the others (``public_fit.moe_layer_seconds``) is fitted against."""
    return _predict(d, u, overlap)


def _columns(d: Design, memory_longer: NDArray[np.bool_], overlap: float, split: tuple[Array, Array]) -> Array:
    """The design matrix, its columns in ``Unknowns`` order (``split``: ``_split(d)``)."""
    a = np.where(memory_longer, 1.0, 1.0 - overlap)[:, None]
    c = np.where(memory_longer, 1.0 - overlap, 1.0)[:, None]
    pre, dec = d.prefill[:, None], ~d.prefill[:, None]
    first, added = split
    shared = np.zeros_like(d.cache) if d.cache_model.shape[1] else d.cache
    return np.hstack([d.weights * a, (shared * a[:, 0])[:, None], first * c * pre, first * c * dec,
                      np.ones((d.seconds.size, 1)), d.layers[:, None], added, d.cache_model * a])


def _nnls(a: Array, b: Array) -> Array:
    """x >= 0 minimising |a x - b|: Lawson and Hanson's active set, which moves a column into
    the solution while the residual's gradient says it helps and out when its coefficient would
    go below 0, so a column dropped on the way comes back where the optimum needs it."""
    n = a.shape[1]
    x, passive = np.zeros(n), np.zeros(n, dtype=bool)
    grad = a.T @ b
    tol = 1e-10 * max(float(np.abs(grad).max(initial=0.0)), 1e-300)
    for _ in range(3 * n + 3):
        candidates = np.where(passive, -np.inf, grad)
        if passive.all() or candidates.max() <= tol:
            break
        passive[int(np.argmax(candidates))] = True
        for _ in range(3 * n + 3):
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                break
            neg = passive & (z <= 0)
            step = float(np.min(x[neg] / np.maximum(x[neg] - z[neg], 1e-300)))
            x = x + step * (z - x)
            passive &= x > 1e-15
        x = np.where(passive, z, 0.0)
        grad = a.T @ (b - a @ x)
    return x


def _l1_nonnegative(a: Array, t: Array, w: Array, lower: Array | None = None) -> Array:
    """u >= ``lower`` (default 0) minimising sum w |a u - t| / t: reweighted least squares on
    u - lower, each step a non-negative least squares (``_nnls``), so a term held at its bound in
    one step is free to leave it in the next. tests/core/calibration/test_solver_optimum.py
    checks it against HiGHS' solution of the same linear programme."""
    lo = np.zeros(a.shape[1]) if lower is None else lower
    scaled, y = a / t[:, None], (t - a @ lo) / t
    norms = np.maximum(np.linalg.norm(scaled, axis=0), 1e-300)
    scaled = scaled / norms
    free = norms > 1e-250
    weights = w.copy()
    for _ in range(40):
        root = np.sqrt(weights)[:, None]
        u = np.zeros(a.shape[1])
        if free.any():
            u[free] = _nnls(scaled[:, free] * root, y * root[:, 0])
        weights = w / np.maximum(np.abs(scaled @ u - y), 1e-3)
    return np.asarray(lo + u / norms, dtype=np.float64)


def fit_at(d: Design, overlap: float, lower: Array | None = None) -> tuple[Array, float]:
    """(unknowns, summed relative error) at a fixed overlap, each unknown >= ``lower``."""
    memory_longer = ~d.prefill
    u = np.zeros(Unknowns.of(d).size)
    split = _split(d)
    for _ in range(8):
        u = _l1_nonnegative(_columns(d, memory_longer, overlap, split), d.seconds, d.weight, lower)
        memory, compute = _clocks(d, u, split[0])
        now = memory >= compute
        if (now == memory_longer).all():
            break
        memory_longer = now
    error = float(np.sum(d.weight * np.abs(_predict(d, u, overlap) - d.seconds) / d.seconds))
    return u, error


TIE = 1e-9          # summed relative errors this close (relative, or absolute near 0) are one score


def first_best(scored: Sequence[T], score: Callable[[T], float]) -> T:
    """The first of ``scored`` whose score is within ``TIE`` of the least. Where the points
    cannot tell grid values apart (fits that agree to rounding, exact ones among them), the
    choice is then the grid's order, not the last bits of a solver that move with the numpy
    build (exact fits at r0 = 0 and 32 scored 4.2e-15 and 3.5e-15 with numpy 2.4.6)."""
    least = min(score(x) for x in scored)
    return next(x for x in scored if score(x) <= least + TIE * max(abs(least), 1.0))


def fit_scored(d: Design, overlaps: Sequence[float] = OVERLAPS, lower: Array | None = None,
               ) -> tuple[Array, float, float]:
    """(unknowns, overlap, summed relative error) with the least summed relative error (ties:
    ``first_best``)."""
    best = first_best([(*fit_at(d, o, lower), o) for o in overlaps], lambda r: r[1])
    return best[0], best[2], best[1]


def by_model(cache: Array, model: NDArray[np.int64], groups: int) -> Array:
    """(n, groups): each point's ``cache`` bytes in the column of its ``model``."""
    out = np.zeros((cache.size, groups))
    out[np.arange(cache.size), model] = cache
    return out


def _shallowest(d: Design, rows: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Each row's base: the row of its model among ``rows`` with the fewest cache bytes (-1
    where its model has none among them)."""
    bytes_ = d.cache_model.sum(axis=1)
    base = np.full(d.seconds.size, -1, dtype=np.int64)
    for m in np.unique(d.model[rows]):
        mine = np.flatnonzero(rows & (d.model == m))
        base[d.model == m] = mine[np.argmin(bytes_[mine])]
    return base


def _implied_cache(d: Design, u: Array, overlap: float) -> tuple[Array, Array, NDArray[np.bool_]] | None:
    """(the seconds per cache byte each deeper single-sequence step implies, the point's weight:
    the share of its time its extra cache takes, which points), None where no point's extra
    cache takes 5 % of its time. A step is told against its model's shallowest one, as
    llama-bench's tgN @ dD against its tgN: the extra seconds, less what the fitted rest of the
    prediction adds between the two, over the extra bytes. The rest's misfit common to a model's
    steps (its weights, its fixed costs) cancels, where a step's own residual would put it all on
    the cache; batched steps, whose rest is most of their time, do not price the walk."""
    at = Unknowns.of(d)
    predicted = _predict(d, u, overlap)
    bytes_ = d.cache_model.sum(axis=1)
    own = d.cache_model @ u[at.model_cache]
    rest = predicted - own
    single = ~d.prefill & (d.batch <= 1)
    base = _shallowest(d, single)
    b = np.maximum(base, 0)
    extra = bytes_ - bytes_[b]
    use = single & (base >= 0) & (extra > 0) & (own - own[b] > 0.05 * predicted)
    if not use.any():
        return None
    implied = ((d.seconds - d.seconds[b]) - (rest - rest[b]))[use] / extra[use]
    return np.maximum(implied, 0.0), ((own - own[b]) / predicted)[use], use


def _weighted_median(values: Array, weights: Array) -> float:
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, cumulative[-1] / 2)])


def pooled_cache_terms(d: Design, u: Array, overlap: float, floor: float) -> tuple[float, float, float]:
    """(seconds per cache byte, per (query head, cached token) pair, per value of those) for a
    model the fit did not see: ``cache_terms`` through the seconds per byte each deeper
    single-sequence step implies against its model's shallowest (``_implied_cache``), weighted by
    its extra cache's share of its time, against its model's walk per byte (``Design.walk``).
    One rate a byte where the walk cannot be fitted: the median of those implied rates weighted
    the same way (a model whose attention reads its cache unlike the others' sways it by its
    share of points, not by its rate's distance); the shared unknown where the cache is not
    grouped by model; the median of the models' rates where no point shows its cache."""
    at = Unknowns.of(d)
    if not at.cache_groups:
        return max(floor, float(u[at.cache])), 0.0, 0.0
    implied = _implied_cache(d, u, overlap)
    if implied is None:
        return max(floor, float(np.median(u[at.model_cache]))), 0.0, 0.0
    y, w, use = implied
    return cache_terms(y, w, d.walk[use], floor, max(floor, _weighted_median(y, w)))


MIN_SHAPES = 3      # distinct head shapes (walks per byte) a fit of the three cache costs needs


def cache_terms(y: Array, w: Array, walk: Array, floor: float, one: float) -> tuple[float, float, float]:
    """(b, p, v): the seconds per byte ``y`` of caches whose attention walks ``walk`` (n, 2:
    query heads and their values per cached byte) as b + p x heads + v x values, the weighted
    (``w``) L1 fit of relative errors with b >= ``floor`` (no byte faster than the machine's
    memory) and p, v >= 0 (``_l1_nonnegative``, the fit's own solver), on the points whose cache
    took time. Caches of fewer than ``MIN_SHAPES`` head shapes cannot tell the three apart:
    (``one``, 0, 0), one rate a byte."""
    keep = (y > 0) & (walk > 0).all(axis=1)
    if not keep.any():              # no cache that took time, or no walk known (a torch calibration)
        return one, 0.0, 0.0
    y, w, walk = y[keep], w[keep], walk[keep]
    if len(np.unique(np.round(walk / np.maximum(walk.max(axis=0), 1e-300), 6), axis=0)) < MIN_SHAPES:
        return one, 0.0, 0.0
    a = np.hstack([np.ones((y.size, 1)), walk])
    b, p, v = _l1_nonnegative(a, y, w, np.array([floor, 0.0, 0.0]))
    return float(b), float(p), float(v)


def lower_bounds(at: Unknowns, bandwidth: float, flops: float) -> Array:
    """Each unknown's least value: one over the machine's ``bandwidth`` for the weights and the
    cache, one over its fastest ``flops`` for the multiplies, 0 for the fixed seconds."""
    lower = np.zeros(at.size)
    lower[at.bandwidth] = lower[at.cache] = lower[at.model_cache] = 1.0 / bandwidth
    lower[at.prefill] = lower[at.decode] = lower[at.batch] = 1.0 / flops
    return lower


ROWS_HALF = (0.0, 8.0, 32.0, 128.0, 512.0)   # the grid r0 is chosen on (rows per multiply at half rate)


def at_rows_half(d: Design, rows_half: float, columns: Sequence[int], experts: int | None) -> Design:
    """``d`` with each prefill multiply's FLOPs in ``columns`` weighted by 1 + r0 / its rows: the
    dense ones by the pass's rows, column ``experts`` (routed experts) by each expert's."""
    if rows_half <= 0:
        return d
    flops = d.flops.copy()
    pre = d.prefill
    for j in columns:
        r = d.rows[:, 1] if j == experts else d.rows[:, 0]
        flops[pre, j] *= 1.0 + rows_half / r[pre]
    return dataclasses.replace(d, flops=flops)


def mostly_in(columns: Array, rows: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """(n, k): whether each of ``rows`` holds at least half of its total over ``columns`` (its
    bytes or FLOPs by class) in each column: the points that show that class's rate."""
    total = columns.sum(axis=1, keepdims=True)
    share = np.divide(columns, total, out=np.zeros_like(columns), where=total > 0)
    return (share >= 0.5) & rows[:, None]
