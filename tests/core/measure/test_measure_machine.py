"""Machine measurement on small buffers: structure, sanity, the profile it makes, cancel.

Never absolute speeds: only that rates are positive, that a roofline's intensity grows with m,
and that the profile carries what it was measured with."""

from __future__ import annotations

import threading
import time

import pytest

from rooflab.core.errors import Cancelled, MeasurementError
from rooflab.core.jobs import Progress
from rooflab.core.measure.machine import MachinePlan, measure_machine, measure_machine_blocking
from rooflab.core.measure.machine_result import MachineMeasurement

SMALL = MachinePlan(threads=1, buffer_bytes=8 << 20, repeats=2, dtypes=("fp32",), matmul_max=256,
                    roofline_k=256, roofline_ms=(1, 4, 16, 64), target_seconds=0.002)


@pytest.fixture(scope="module")
def run() -> tuple[MachineMeasurement, list[object]]:
    items: list[object] = []
    result = measure_machine_blocking(SMALL, on_item=items.append)
    return result, items


def test_structure_and_sanity(run):
    result, items = run
    assert [r.kernel for r in result.bandwidth] == ["read", "copy", "triad"]
    for r in result.bandwidth:
        assert r.best >= r.median > 0
        assert r.buffer_bytes == 8 << 20
        assert r.threads >= 1
    assert result.bandwidth[1].bytes_per_call == 2 * result.bandwidth[0].bytes_per_call   # copy reads and writes
    (mm,) = result.matmul
    assert mm.dtype == "fp32" and mm.size == 256 and mm.best >= mm.median > 0
    assert [s.m for s in result.roofline] == [1, 4, 16, 64]
    intensities = [s.intensity for s in result.roofline]
    assert intensities == sorted(intensities)           # more rows reuse the k x n operand more
    for s in result.roofline:
        assert s.flops == 2 * s.m * s.k * s.n
        assert s.achieved == pytest.approx(s.flops / s.seconds)
    assert result.threads >= 1 and result.torch_version and result.memory_total > 0


def test_progress_reports_fraction_and_eta(run):
    _, items = run
    progress = [i for i in items if isinstance(i, Progress)]
    assert progress and {p.step for p in progress} >= {"bandwidth", "matmul", "roofline"}
    fractions = [p.fraction for p in progress]
    assert fractions == sorted(fractions) and 0 <= fractions[0] and fractions[-1] <= 1
    assert any(p.eta_seconds is not None for p in progress)


def test_profile_is_spec_free_and_documented(run):
    result, _ = run
    profile = result.profile()
    assert profile.key == "measured"
    assert profile.bandwidth == max(r.best for r in result.bandwidth)
    assert profile.peak_flops["fp32"] == result.matmul[0].best
    assert profile.efficiency.is_identity
    assert profile.kind == "cpu"
    for key in ("bandwidth", "date", "torch", "threads", "peak_flops.fp32"):
        assert profile.sources[key]
    assert MachineMeasurement.from_dict(result.to_dict()) == result


def test_cancel_latency_measured_from_the_request():
    cancel = threading.Event()
    plan = MachinePlan(threads=1, buffer_bytes=32 << 20, repeats=1000, dtypes=("fp32",), experiments=("bandwidth",))
    job = measure_machine(plan, cancel)
    next(job)
    asked: list[float] = []

    def ask() -> None:
        asked.append(time.perf_counter())
        cancel.set()

    timer = threading.Timer(0.3, ask)
    timer.start()
    with pytest.raises(Cancelled):
        for _ in job:
            pass
    timer.join()
    assert time.perf_counter() - asked[0] < 1.0


def test_bad_plans():
    with pytest.raises(MeasurementError):
        MachinePlan(repeats=0)
    with pytest.raises(MeasurementError):
        MachinePlan(experiments=("bogus",))
    with pytest.raises(MeasurementError, match="cpu, cuda or mps"):
        measure_machine_blocking(MachinePlan(device="tpu", experiments=("bandwidth",)))
