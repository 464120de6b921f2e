"""Machine measurement on small buffers: structure, sanity, the profile it makes, cancel.

Never absolute speeds: only that rates are positive, that a roofline's intensity grows with m,
and that the profile carries what it was measured with."""

from __future__ import annotations

import statistics
import threading

import pytest

from rooflab.core.errors import Cancelled, MeasurementError
from rooflab.core.jobs import CancelToken, Progress
from rooflab.core.measure.machine import benchmark as machine_module
from rooflab.core.measure.machine.benchmark import MachinePlan, measure_machine, measure_machine_blocking
from rooflab.core.values.machine_run import (
    STEADY_SPREAD,
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


def test_figures_are_medians_of_runs_taken_in_rounds(run):
    """Every kernel and dtype is timed once a round, so one figure's runs are spread over the
    whole measurement; each keeps its runs, and its median and best are of those runs."""
    result, items = run
    order = [i.message.split(":")[0] for i in items if ": run " in i.message]
    one_round = ["read", "copy", "triad", "fp32"]
    assert order == one_round * SMALL.repeats
    for figure in (*result.bandwidth, *result.matmul):
        assert len(figure.runs) == figure.repeats == SMALL.repeats
        assert figure.median == pytest.approx(statistics.median(figure.runs))
        assert figure.best == max(figure.runs)
        assert figure.spread == pytest.approx((max(figure.runs) - min(figure.runs)) / figure.median)


def test_matmul_size_comes_from_the_cache_and_the_cores(monkeypatch):
    """A peak is timed on a multiply big enough to saturate the units whatever the load: three
    operands at least the LLC, 2 x 768^3 FLOP per thread, never under 1024 on a CPU."""
    monkeypatch.setattr(machine_module, "last_level_cache_bytes", lambda: 32 << 20)
    assert machine_module.matmul_size("cpu", "fp32", 2, 4096) == 1792      # sqrt(32 MiB / 12 B) = 1672
    assert machine_module.matmul_size("cpu", "bf16", 2, 4096) == 2560      # sqrt(32 MiB / 6 B) = 2365
    assert machine_module.matmul_size("cpu", "fp32", 64, 4096) == 3072     # 768 x 64^(1/3)
    assert machine_module.matmul_size("cpu", "fp32", 2, 256) == 256        # the plan's cap wins
    monkeypatch.setattr(machine_module, "last_level_cache_bytes", lambda: 1 << 20)
    assert machine_module.matmul_size("cpu", "fp32", 1, 4096) == 1024


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
    # the figures are medians of runs (of the faster half where the runs disagree, as on a busy
    # machine: values.machine_run.settled), never an arbitrary run
    assert profile.bandwidth == max(r.figure for r in result.bandwidth)
    assert profile.peak_flops["fp32"] == result.matmul[0].figure
    for r in (*result.bandwidth, *result.matmul):
        assert r.figure == r.median if r.spread <= STEADY_SPREAD else r.median <= r.figure <= r.best
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
    from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan
    from rooflab.core.measure.engines.torch.timing import ModelPlan

    kind = {"machine": MachinePlan, "torch": ModelPlan, "llamacpp": LlamaCppPlan, "calibration": CalibrationPlan}
    with pytest.raises(MeasurementError, match=next(iter(changes)).split("_")[0]):
        kind[plan](**changes)
