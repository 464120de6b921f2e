"""The published fit's solver (``solver._l1_nonnegative``: reweighted least squares with an
active set) reaches the optimum of the problem it solves: each call made while fitting every
group of the shipped published rows is solved again as the linear programme it is (bounded
least absolute relative error) with HiGHS (scipy's ``linprog``, a test-only dependency; core
stays numpy), and the hand-written solver's summed error is within ``EXCESS`` of HiGHS'.

The issue that asked for an exact solver (issue 36) allowed keeping the hand-written one where
a test shows it reaches the same optimum: this is that test. It also checks the solver on a
problem built so that a column goes below its bound in an early iterate and belongs in the
optimum: an active set that never let a dropped column back would miss it."""

from __future__ import annotations

import numpy as np
import pytest

from rooflab.core.calibration import public, public_fit, solver

linprog = pytest.importorskip("scipy.optimize").linprog

EXCESS = 0.005       # the hand-written optimum's summed error at most 0.5 % above HiGHS'


def _objective(a: np.ndarray, t: np.ndarray, w: np.ndarray, u: np.ndarray) -> float:
    return float(np.sum(w * np.abs(a @ u - t) / t))


def _highs(a: np.ndarray, t: np.ndarray, w: np.ndarray, lower: np.ndarray | None) -> np.ndarray:
    """min sum w |a u - t| / t subject to u >= lower, as an LP: a u / t - p + q = 1, p, q >= 0."""
    n, k = a.shape
    lo = np.zeros(k) if lower is None else lower
    scaled = a / t[:, None]
    norm = np.maximum(np.abs(scaled).max(axis=0), 1e-300)
    eq = np.hstack([scaled / norm, -np.eye(n), np.eye(n)])
    bounds = [(float(b * s), None) for b, s in zip(lo, norm, strict=True)] + [(0.0, None)] * (2 * n)
    r = linprog(np.concatenate([np.zeros(k), w, w]), A_eq=eq, b_eq=np.ones(n), bounds=bounds, method="highs")
    assert r.status == 0, r.message
    return np.asarray(r.x[:k] / norm)


def _calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[np.ndarray, ...]]:
    """Every (a, t, w, lower, u) the solver saw while fitting every published group afresh."""
    seen: list[tuple[np.ndarray, ...]] = []
    solve = solver._l1_nonnegative

    def recording(a, t, w, lower=None):
        u = solve(a, t, w, lower)
        seen.append((a.copy(), t.copy(), w.copy(), None if lower is None else lower.copy(), u))
        return u

    monkeypatch.setattr(solver, "_l1_nonnegative", recording)
    data = public.load_public()
    for group in public.group_rows(data):
        public_fit.fit_factors(public.design(data, group))
    return seen


def test_the_published_fit_reaches_the_linear_programmes_optimum(monkeypatch):
    calls = _calls(monkeypatch)
    assert len(calls) >= 50
    excess = []
    for a, t, w, lower, u in calls:
        exact = _highs(a, t, w, lower)
        best = _objective(a, t, w, exact)
        excess.append((_objective(a, t, w, u) - best) / max(best, 1e-9))
    assert max(excess) <= EXCESS, f"worst {max(excess):.2%} of {len(excess)} fits"


def test_a_column_dropped_early_comes_back_when_the_optimum_needs_it():
    """t = 2 x1 + 1 x2 exactly, with x2's column nearly collinear with x1's and a few points off:
    least squares from uniform weights puts x2 below 0 first; the optimum has it at 1."""
    rng = np.random.default_rng(7)
    x1 = rng.uniform(1.0, 2.0, 40)
    x2 = 0.9 * x1 + rng.uniform(0.0, 0.2, 40)
    a = np.column_stack([x1, x2])
    t = 2.0 * x1 + 1.0 * x2
    t[:3] *= 0.2                                      # three outliers pull a least-squares start astray
    w = np.ones_like(t)
    u = solver._l1_nonnegative(a, t, w)
    exact = _highs(a, t, w, None)
    assert _objective(a, t, w, u) <= _objective(a, t, w, exact) * (1 + EXCESS) + 1e-9
    assert u == pytest.approx([2.0, 1.0], rel=0.02)
