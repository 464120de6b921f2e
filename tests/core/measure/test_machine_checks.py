"""A machine measurement checks itself before its profile is kept or used (issue 18): judged on
injected figures, never on this machine's load or speed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rooflab.core.errors import MeasurementError
from rooflab.core.files.records import read_record
from rooflab.core.io import presets
from rooflab.core.measure import workflow
from rooflab.core.measure.machine_checks import SPREAD_LIMIT, disturbance, judge_machine, problems
from rooflab.core.measure.machine_result import BandwidthResult, MachineMeasurement, MatmulResult, RooflineSample

GB = 1e9


def _bandwidth(runs: tuple[float, ...]) -> BandwidthResult:
    ordered = sorted(runs)
    return BandwidthResult(kernel="read", device="cpu", buffer_bytes=512 << 20, bytes_per_call=512e6,
                           best=max(runs), median=ordered[len(runs) // 2], repeats=len(runs), threads=2, runs=runs)


def _matmul(runs: tuple[float, ...], size: int = 1792) -> MatmulResult:
    ordered = sorted(runs)
    return MatmulResult(dtype="fp32", device="cpu", size=size, best=max(runs), median=ordered[len(runs) // 2],
                        repeats=len(runs), threads=2, runs=runs)


def _roof(m: int, achieved: float) -> RooflineSample:
    flops = 2.0 * m * 2048 * 2048
    return RooflineSample(dtype="fp32", device="cpu", m=m, k=2048, n=2048, seconds=flops / achieved, flops=flops,
                          bytes=4.0 * (m * 2048 + 2048 * 2048 + m * 2048), intensity=0.0, achieved=achieved)


def quiet_run(**changes: object) -> MachineMeasurement:
    """A 2-core VM on a quiet day: 13 GB/s, 34 GFLOP/s fp32, roofline points under the peak."""
    run = MachineMeasurement(
        device="cpu", device_name="test cpu", threads=2, torch_version="2", date="2026-12-01T00:00:00+00:00",
        memory_total=8e9, bandwidth=(_bandwidth((12.6e9, 13.1e9, 12.9e9, 12.8e9, 12.7e9)),),
        matmul=(_matmul((33.9e9, 34.2e9, 33.5e9, 34.0e9, 33.8e9)),),
        roofline=(_roof(1, 3.1e9), _roof(64, 25e9), _roof(1024, 33e9)), load_start=0.4, load_end=0.6)
    return dataclasses.replace(run, **changes)


def test_a_quiet_run_passes():
    assert problems(quiet_run()) == [] and judge_machine(quiet_run()).disturbed == ""


def test_the_issues_busy_run_is_disturbed():
    """fp32 'peak' 1.73 GFLOP/s from 256 x 256 multiplies, roofline points at 30 GFLOP/s, 42.9 GB/s."""
    busy = quiet_run(bandwidth=(_bandwidth((42.9e9, 42.0e9, 43.1e9)),), matmul=(_matmul((1.7e9, 1.73e9, 1.75e9), 256),),
                     roofline=(_roof(64, 20e9), _roof(512, 30e9)))
    line = disturbance(busy)
    assert "a 512-row fp32 multiply reached 30.0 GFLOP/s, above the fp32 peak of 1.7 GFLOP/s" in line
    assert "FLOP per byte" in line                   # 1.73 GFLOP/s beside 42.9 GB/s is no machine
    assert "\n" not in line


def test_repeats_that_disagree_are_flagged():
    """Two runs of this VM minutes apart gave 42.9 and 70.9 GB/s: runs spread over one measurement
    that see such a change disagree by far more than the limit."""
    changed = quiet_run(bandwidth=(_bandwidth((42.9e9, 70.9e9, 55.0e9)),),
                        matmul=(_matmul((300e9, 310e9, 305e9)),), roofline=())
    assert problems(changed) == [f"read bandwidth runs differ by 51% (limit {SPREAD_LIMIT:.0%})"]
    wide = quiet_run(matmul=(_matmul((20e9, 34e9, 33e9)),))
    assert problems(wide) == [f"fp32 matmul runs differ by 42% (limit {SPREAD_LIMIT:.0%})"]


def test_a_load_that_rose_during_the_run_is_flagged():
    assert problems(quiet_run(load_start=0.5, load_end=2.1)) == ["the load average rose from 0.50 to 2.10"]
    assert problems(quiet_run(load_start=None, load_end=None)) == []     # no load average: nothing to judge


def test_the_one_line_counts_what_it_does_not_name():
    many = quiet_run(matmul=(_matmul((0.5e9, 1.5e9, 1.0e9)),), load_start=0.0, load_end=3.0)
    line = disturbance(many)
    assert line.endswith("; 2 more") and line.count(";") == 2


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def test_a_disturbed_run_is_kept_apart_and_never_made_the_measured_machine(data):
    good = workflow.keep_machine_run(quiet_run())
    assert good.bandwidth == pytest.approx(12.8e9)                       # the median, not the best run
    assert good.peak_flops["fp32"] == pytest.approx(33.9e9)
    busy = quiet_run(matmul=(_matmul((1.7e9, 1.73e9, 1.75e9), 256),))
    with pytest.raises(MeasurementError, match=r"disturbed \(a 1024-row fp32 multiply .* not used") as caught:
        workflow.keep_machine_run(busy)
    assert "\n" not in str(caught.value)
    assert presets.load_measured_machine() == good                       # not switched to
    kept = read_record(presets.disturbed_machine_path())
    assert kept["disturbed"].startswith("a 1024-row fp32 multiply")
    assert MachineMeasurement.from_dict(kept["measurement"]).matmul[0].size == 256


def test_a_peak_above_what_the_processor_allows_is_a_wrong_timing():
    """34 GFLOP/s on a CPU whose cores, clock and vectors allow 20 cannot be: the run says so."""
    assert problems(quiet_run(fp32_bound=100e9)) == []
    found = problems(quiet_run(fp32_bound=20e9))
    assert len(found) == 1 and "this processor's cores, clock and vector units allow" in found[0]


def test_the_processors_own_bound_is_read_from_its_description():
    import sys

    from rooflab.core.measure.sysinfo import cpu_fp32_bound
    if not sys.platform.startswith("linux") or "flags" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("no /proc/cpuinfo flags here")
    one, two = cpu_fp32_bound(1), cpu_fp32_bound(2)
    assert one is not None and 1e9 < one < 1e12          # one core: between 1 GFLOP/s and 1 TFLOP/s
    assert two is not None and two >= one
