"""Machine measurement on small buffers: structure, sanity, the profile it makes, cancel.

Never absolute speeds: only that rates are positive, that a roofline's intensity grows with m,
and that the profile carries what it was measured with."""

from __future__ import annotations

import threading

import pytest

from rooflab.core.errors import Cancelled, MeasurementError
from rooflab.core.jobs import CancelToken, Progress
from rooflab.core.measure import machine as machine_module
from rooflab.core.measure.machine import MachinePlan, measure_machine, measure_machine_blocking
from rooflab.core.measure.machine_result import (
    BandwidthResult,
    MachineMeasurement,
    MatmulResult,
    RooflineSample,
)

SMALL = MachinePlan(threads=1, buffer_bytes=8 << 20, repeats=2, dtypes=("fp32",), matmul_max=256,
                    roofline_k=256, roofline_ms=(1, 4, 16, 64), target_seconds=0.002)


@pytest.fixture(scope="module")
def run() -> tuple[MachineMeasurement, list[object]]:
    items: list[Progress] = []
    result = measure_machine_blocking(SMALL, on_progress=items.append)
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


def test_results_ride_on_progress_as_they_finish(run):
    result, items = run
    assert all(isinstance(i, Progress) for i in items)            # a job yields Progress only
    samples = [i.sample for i in items if i.sample is not None]
    assert [s for s in samples if isinstance(s, BandwidthResult)] == list(result.bandwidth)
    assert [s for s in samples if isinstance(s, MatmulResult)] == list(result.matmul)
    assert [s for s in samples if isinstance(s, RooflineSample)] == list(result.roofline)
    assert len(samples) == len(result.bandwidth) + len(result.matmul) + len(result.roofline)


def test_progress_reports_fraction_and_eta(run):
    _, items = run
    progress = list(items)
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


def test_cancel_stops_before_the_next_timed_call(monkeypatch):
    cancel = CancelToken()
    plan = MachinePlan(threads=1, buffer_bytes=32 << 20, repeats=1000, dtypes=("fp32",), experiments=("bandwidth",))
    # Timed calls begun after the cancel: the job checks before each one, so at most the call
    # that began as the cancel landed. (A wall-clock bound would measure the machine's load.)
    begun_after_cancel: list[bool] = []
    timed = machine_module.timed

    def counting(device, fn):
        if cancel.is_set():
            begun_after_cancel.append(True)
        return timed(device, fn)

    monkeypatch.setattr(machine_module, "timed", counting)
    job = measure_machine(plan, cancel)
    next(job)
    timer = threading.Timer(0.3, cancel.cancel)
    timer.start()
    with pytest.raises(Cancelled):
        for _ in job:
            pass
    timer.join()
    assert cancel.cancelled and len(begun_after_cancel) <= 1


def test_bad_plans():
    with pytest.raises(MeasurementError):
        MachinePlan(repeats=0)
    with pytest.raises(MeasurementError):
        MachinePlan(experiments=("bogus",))
    with pytest.raises(MeasurementError, match="cpu, cuda or mps"):
        measure_machine_blocking(MachinePlan(device="tpu", experiments=("bandwidth",)))


@pytest.mark.parametrize("plan, changes", [
    ("machine", {"threads": 10**20}), ("machine", {"repeats": 10**20}), ("machine", {"threads": 0}),
    ("torch", {"threads": 10**20}), ("torch", {"repeats": 10**20}), ("torch", {"decode_steps": 10**20}),
    ("llamacpp", {"threads": 10**20}), ("llamacpp", {"repeats": 10**20}), ("llamacpp", {"gen_tokens": 10**20}),
    ("calibration", {"threads": 10**20}), ("calibration", {"repeats": 10**20}),
])
def test_every_plan_refuses_counts_no_machine_has(plan, changes):
    """The window and scripts build plans without the command line's argument checks: a plan
    itself refuses what would abort llama.cpp (std::bad_alloc) or never end (issue 15)."""
    from rooflab.core.measure.calibration_run import CalibrationPlan
    from rooflab.core.measure.llamacpp.plan import LlamaCppPlan
    from rooflab.core.measure.torch.timing import ModelPlan

    kind = {"machine": MachinePlan, "torch": ModelPlan, "llamacpp": LlamaCppPlan, "calibration": CalibrationPlan}
    with pytest.raises(MeasurementError, match=next(iter(changes)).split("_")[0]):
        kind[plan](**changes)
