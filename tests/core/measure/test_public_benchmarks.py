"""Per-back-end efficiency fitted to public llama-bench results, and its out-of-sample checks.

Ceilings come from rooflab's own clocks; the fit is the median of per-machine medians; the
validation must really leave the machine (or model) out: the synthetic cases below have
hand-computed errors that a fit seeing the held-out row would get wrong."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest

from rooflab.core.errors import SpecError
from rooflab.core.io.public_bench import (
    BACKENDS,
    PublicBenchmarks,
    PublicMachine,
    PublicModel,
    PublicRow,
    RowSource,
    parse_test,
)
from rooflab.core.measure import public
from rooflab.core.measure.public import (
    backend_efficiency,
    leave_one_machine_out,
    leave_one_model_out,
    load_public,
    tokens_per_second,
    validate,
)
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.values.workload import Workload


def test_every_backend_gets_factors_in_range():
    data = load_public()
    assert public.backends(data) == BACKENDS
    for backend in BACKENDS:
        e = backend_efficiency(backend)
        for low, mid, high in ((e.bandwidth_low, e.bandwidth, e.bandwidth_high),
                               (e.compute_low, e.compute, e.compute_high)):
            assert 0 < low <= mid <= high <= 1.5, (backend, low, mid, high)
        assert e.machines >= 4 and e.rows >= 2 * e.machines
        assert e.sources and all(url.startswith("https://") for url in e.sources)


def test_unknown_backend_is_a_spec_error():
    with pytest.raises(SpecError, match="backend"):
        backend_efficiency("opencl")


def test_tg128_ceiling_matches_hand_derivation():
    """Llama-2-7B Q4_0, tg128 on the RTX 5090 row (1,792 GB/s), batch 1, F16 cache.

    Weights one token reads (Q4_0: 18 bytes per 32 weights):
      matrices 32 x (4 x 4096^2 + 3 x 4096 x 11008) + 32000 x 4096 (head) = 6,607,077,376
               x 18/32                                                     = 3,716,481,024
      F32 norms (32 x 2 + 1) x 4096 x 4                                    =     1,064,960
      one embedding row 4096 / 32 x 18                                     =         2,304
      W                                                                    = 3,717,548,288
    Cache read at context t: 2 x 32 layers x 32 heads x 128 x 2 bytes = 524,288 x t.
    128 steps at t = 0..127: 128 W + 524,288 x 8,128 = 480,107,593,728 bytes
    / 1.792e12 bytes/s = 0.267917 s  ->  128 / 0.267917 = 477.76 tokens/s."""
    data = load_public()
    row = next(r for r in data.rows if r.machine == "rtx-5090" and r.test.name == "tg128")
    assert row.model == "llama-2-7b" and row.weights == "q4_0"
    assert data.machine("rtx-5090").bandwidth == 1792e9
    expected = 128 / ((128 * 3_717_548_288 + 524_288 * 8_128) / 1.792e12)
    assert expected == pytest.approx(477.7596, rel=1e-6)
    assert tokens_per_second(data, row) == pytest.approx(expected, rel=1e-9)
    assert row.tokens_per_second / expected == pytest.approx(public.row_efficiencies(data)[data.rows.index(row)])


def test_each_row_measures_the_factor_it_is_used_for():
    """The fit reads tg rows as the bandwidth factor and pp rows as the compute factor: at the
    ceiling every generation step is memory-bound and every prompt compute-bound."""
    data = load_public()
    for row in data.rows:
        spec = public.model_spec(data.model(row.model).catalogue, row.weights)
        machine = public.machine_profile(data.machine(row.machine))
        n = row.test.tokens
        if row.test.kind == "decode":
            p = decode_pass(spec, machine, Workload(), context=np.arange(n, dtype=np.float64), batch=1)
            assert np.all(p.memory_seconds > p.compute_seconds), row
        else:
            p = prefill_pass(spec, machine, Workload(prompt=n), prompt=n, context=0)
            assert p.compute_seconds > p.memory_seconds, row


def test_validation_reports_finite_errors_for_every_backend():
    for v in validate():
        assert v.machine_out_tg.rows > 0 and v.machine_out_pp.rows > 0, v.backend
        for s in (v.machine_out_tg, v.machine_out_pp):
            assert 0 <= s.median <= s.worst < 20
    by_backend = {v.backend: v for v in validate()}
    # several models/weights only on CUDA (Q4_0, Q4_K_M, F16) and Metal (F16, Q8_0, Q4_0, Q4_K_M)
    assert by_backend["cuda"].model_out_tg.rows > 0 and by_backend["metal"].model_out_pp.rows > 0
    assert by_backend["rocm"].model_out_tg.rows == 0 and math.isnan(by_backend["rocm"].model_out_tg.median)


# --- the held-out row really is held out ------------------------------------------------------

def _machine(key: str, backend: str = "cuda") -> PublicMachine:
    return PublicMachine(key=key, name=key, backend=backend, bandwidth=500e9, peak_fp16=100e12,
                         sources=(("bandwidth", "test"), ("peak_fp16", "test")))


def _synthetic(cases: list[tuple[str, str, float]]) -> PublicBenchmarks:
    """tg128 rows whose efficiency is exactly the given factor: (machine, weights, factor)."""
    machines = tuple(_machine(k) for k in dict.fromkeys(m for m, _, _ in cases))
    rows = tuple(PublicRow(machine=m, model="llama-2-7b", weights=w, test=parse_test("tg128"), tokens_per_second=1.0,
                           source=RowSource(url="https://example.org/row")) for m, w, _ in cases)
    draft = PublicBenchmarks(path="synthetic", sources=(), machines=machines, rows=rows,
                             models=(PublicModel(key="llama-2-7b", catalogue="llama-2-7b", name="Llama 2 7B"),))
    scaled = tuple(dataclasses.replace(r, tokens_per_second=f * tokens_per_second(draft, r))
                   for r, (_, _, f) in zip(rows, cases, strict=True))
    return dataclasses.replace(draft, rows=scaled)


def test_leave_one_machine_out_uses_only_the_other_machines():
    # efficiencies 0.5, 0.6, 0.7: each machine is predicted with the median of the other two
    # (0.65, 0.60, 0.55); a fit that saw it would use 0.6 for all (errors 0.2, 0, 0.143)
    data = _synthetic([("a", "q4_0", 0.5), ("b", "q4_0", 0.6), ("c", "q4_0", 0.7)])
    errors = {data.rows[p.row].machine: p.error for p in leave_one_machine_out(data)}
    assert errors == pytest.approx({"a": 0.15 / 0.5, "b": 0.0, "c": 0.15 / 0.7}, abs=1e-9)
    assert backend_efficiency("cuda", data).bandwidth == pytest.approx(0.6)


def test_leave_one_model_out_uses_only_the_other_models():
    # Q4_0 runs at 0.5 of its ceiling, Q8_0 at 0.8 on both machines: leaving Q4_0 out predicts it
    # from Q8_0 alone (error 0.6); a leaked fit would use median(0.5, 0.8) = 0.65 (error 0.3)
    data = _synthetic([("a", "q4_0", 0.5), ("a", "q8_0", 0.8), ("b", "q4_0", 0.5), ("b", "q8_0", 0.8)])
    errors = {(data.rows[p.row].machine, data.rows[p.row].weights): p.error for p in leave_one_model_out(data)}
    assert errors == pytest.approx({("a", "q4_0"): 0.6, ("b", "q4_0"): 0.6,
                                    ("a", "q8_0"): 0.375, ("b", "q8_0"): 0.375}, abs=1e-9)


def test_a_planted_outlier_moves_its_own_error_not_its_own_prediction():
    """Slow one CUDA machine's generation rows down 100x: its own held-out predictions must not
    move (they come from the other machines), its error must; the other back ends' predictions
    must not move at all, and the other CUDA machines' only down, by one rank of the median."""
    data = load_public()
    votes = public.machine_votes(data, range(len(data.rows)), "tg")
    cuda = [m.key for m in data.machines if m.backend == "cuda"]
    target = max(cuda, key=lambda k: votes[k])          # from the top of the median to the bottom
    planted = dataclasses.replace(data, rows=tuple(
        dataclasses.replace(r, tokens_per_second=r.tokens_per_second / 100)
        if r.machine == target and r.test.kind == "decode" else r for r in data.rows))
    ranked = sorted(votes[k] for k in cuda)
    middle = ranked[len(ranked) // 3: 2 * len(ranked) // 3 + 1]
    # one rank of the median of the other machines: two places apart in the full ranking
    one_rank = max(1 - low / high for low, high in zip(middle[:-2], middle[2:], strict=True))
    before = {p.row: p for p in leave_one_machine_out(data)}
    after = {p.row: p for p in leave_one_machine_out(planted)}
    assert before.keys() == after.keys()
    moved_own = [i for i in before if data.rows[i].machine == target and data.rows[i].test.kind == "decode"]
    assert moved_own
    for i in moved_own:
        assert after[i].predicted == before[i].predicted
        assert after[i].error > 50 * max(before[i].error, 0.01)
    for i in before:
        row = data.rows[i]
        if data.machine(row.machine).backend != "cuda":
            assert after[i].predicted == before[i].predicted
        elif row.machine != target:
            assert 1 - one_rank - 1e-12 <= after[i].predicted / before[i].predicted <= 1 + 1e-12


# --- cheap to import, cached once loaded ------------------------------------------------------

def test_import_reads_nothing_and_loading_is_cached():
    code = ("import rooflab.core.measure.public as p; "
            "assert p.load_public.cache_info().currsize == 0; "
            "assert p.load_public() is p.load_public(); print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
