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
from rooflab.core.measure.machine.checks import disturbance, judge_machine, problems, short_of, unsteadiness
from rooflab.core.values.machine_run import BandwidthResult, MachineMeasurement, MatmulResult, RooflineSample

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


def test_repeats_that_disagree_are_kept_at_their_faster_half_and_said():
    """Two runs of this VM minutes apart gave 42.9 and 70.9 GB/s; on a shared VM every machine
    measurement had runs that far apart, and refusing them left the user with no measured
    machine at all. A timing cannot beat the hardware: the faster runs are the nearer the ceiling."""
    changed = quiet_run(bandwidth=(_bandwidth((42.9e9, 70.9e9, 55.0e9, 68.0e9)),),
                        matmul=(_matmul((300e9, 310e9, 305e9)),), roofline=())
    assert problems(changed) == []
    assert unsteadiness(changed) == ["read bandwidth runs differ by 41%",
                                     "each such figure is the median of its faster runs"]
    judged = judge_machine(changed)
    assert judged.disturbed == "" and judged.unsteady.startswith("read bandwidth runs differ by 41%")
    assert judged.profile().bandwidth == pytest.approx((68.0e9 + 70.9e9) / 2)   # faster half: 68.0 and 70.9
    assert "the faster half's median" in judged.spread_text()
    wide = judge_machine(quiet_run(matmul=(_matmul((20e9, 34e9, 33e9)),)))
    assert wide.disturbed == "" and wide.peak_flops()["fp32"] == pytest.approx(33.5e9)  # faster half: 33 and 34
    steady = judge_machine(quiet_run())
    assert steady.unsteady == "" and steady.profile().bandwidth == pytest.approx(12.8e9)   # agreeing runs: the median


def test_a_load_that_rose_during_the_run_is_said_not_refused():
    rose = judge_machine(quiet_run(load_start=0.5, load_end=2.1))
    assert rose.disturbed == "" and rose.unsteady.startswith("the load average rose from 0.50 to 2.10")
    assert unsteadiness(quiet_run(load_start=None, load_end=None)) == []     # no load average: nothing to judge


def test_the_one_line_counts_what_it_does_not_name():
    # a roof beaten, a balance no machine has and a peak above what the processor allows
    many = quiet_run(matmul=(_matmul((0.5e9, 1.5e9, 1.0e9)),), fp32_bound=0.5e9)
    line = disturbance(many)
    assert line.endswith("; 1 more") and line.count(";") == 2


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

    from rooflab.core.measure.machine.sysinfo import cpu_fp32_bound
    if not sys.platform.startswith("linux") or "flags" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("no /proc/cpuinfo flags here")
    one, two = cpu_fp32_bound(1), cpu_fp32_bound(2)
    assert one is not None and 1e9 < one < 1e12          # one core: between 1 GFLOP/s and 1 TFLOP/s
    assert two is not None and two >= one


def slowed_run(**changes: object) -> MachineMeasurement:
    """The same VM measured while neighbours held its cores and memory all along: every figure
    about half the quiet one's, the runs agreeing with each other, roofline points under the
    slowed peak. Alone it passes every check (the 18:06 run of 2026-12-02: 30 GFLOP/s fp32
    where the quiet machine gives 67)."""
    run = quiet_run(bandwidth=(_bandwidth((6.3e9, 6.5e9, 6.4e9, 6.6e9, 6.4e9)),),
                    matmul=(_matmul((15.1e9, 15.3e9, 14.9e9, 15.2e9, 15.0e9)),),
                    roofline=(_roof(1, 1.5e9), _roof(64, 12e9)), date="2026-12-02T18:06:00+00:00")
    return dataclasses.replace(run, **changes)


def test_a_run_far_short_of_an_earlier_one_of_this_machine_is_disturbed():
    assert problems(slowed_run()) == []                        # consistent: no check of its own finds it
    found = problems(slowed_run(), [quiet_run()])
    assert found == ["its fp32 peak of 15.1 GFLOP/s is 55% below the 33.9 GFLOP/s of this machine's run of "
                     "2026-12-01 00:00",
                     "its bandwidth of 6.4 GB/s is 50% below the 12.8 GB/s of this machine's run of 2026-12-01 00:00"]
    # the faster run is the nearer the ceiling: it is never short of a slower one
    assert problems(quiet_run(), [slowed_run()]) == []
    # within the band of the earlier run: agrees
    assert problems(quiet_run(matmul=(_matmul((28.0e9, 28.2e9, 27.9e9)),), roofline=()), [quiet_run()]) == []


def test_only_an_accepted_run_of_the_same_machine_measured_the_same_way_is_compared_with():
    assert short_of(slowed_run(), [quiet_run(threads=4)]) == []           # four threads is another ceiling
    assert short_of(slowed_run(), [quiet_run(torch_version="3")]) == []   # so may a new torch be
    assert short_of(slowed_run(), [quiet_run(device_name="other cpu")]) == []
    assert short_of(slowed_run(), [quiet_run(disturbed="the load average rose")]) == []
    # several earlier runs: the best figure of each is the one to fall short of
    assert len(short_of(quiet_run(), [slowed_run(), quiet_run(matmul=(_matmul((60e9, 61e9, 60.5e9)),))])) == 1


def test_a_slowed_run_is_not_made_the_measured_machine_unless_the_user_says_it_is_slower_now(data):
    quiet = workflow.keep_machine_run(quiet_run())
    with pytest.raises(MeasurementError) as caught:
        workflow.keep_machine_run(slowed_run())
    line = str(caught.value)
    assert "\n" not in line and "55% below the 33.9 GFLOP/s" in line and "measure machine --replace" in line
    assert presets.load_measured_machine() == quiet                      # not switched to
    replaced = workflow.keep_machine_run(slowed_run(), replace=True)
    assert presets.load_measured_machine() == replaced and replaced.peak_flops["fp32"] == pytest.approx(15.1e9)
    # an internal failure alone says nothing of --replace (replacing would not help)
    with pytest.raises(MeasurementError) as caught:
        workflow.keep_machine_run(quiet_run(fp32_bound=20e9))        # a peak this processor cannot reach
    assert "--replace" not in str(caught.value)


def test_of_runs_spread_over_a_job_the_fastest_that_passes_is_used_and_the_rest_are_named(data):
    profile, notes = workflow.keep_best_machine_run([("before the timings", slowed_run()),
                                                     ("after the timings", quiet_run())])
    assert profile.peak_flops["fp32"] == pytest.approx(33.9e9) and presets.load_measured_machine() == profile
    assert notes == ("the machine measured before the timings was set aside (its fp32 peak of 15.1 GFLOP/s is "
                     "55% below the 33.9 GFLOP/s of this machine's run of 2026-12-01 00:00; its bandwidth of 6.4 "
                     "GB/s is 50% below the 12.8 GB/s of this machine's run of 2026-12-01 00:00); the one measured "
                     "after the timings is used",)
    # two runs that agree: the faster, no note
    faster = quiet_run(matmul=(_matmul((36.0e9, 36.1e9, 35.9e9)),), date="2026-12-01T01:00:00+00:00")
    profile, notes = workflow.keep_best_machine_run([("before", quiet_run()), ("after", faster)], keep=False)
    assert profile.peak_flops["fp32"] == pytest.approx(36.0e9) and notes == ()
    # none passes: one line naming each run's reason, nothing switched to
    with pytest.raises(MeasurementError, match=r"before: a 1024-row fp32 multiply .*; after: its fp32 peak") as caught:
        workflow.keep_best_machine_run([("before", quiet_run(matmul=(_matmul((1.7e9, 1.73e9, 1.75e9), 256),))),
                                        ("after", slowed_run())])
    assert "\n" not in str(caught.value) and presets.load_measured_machine().peak_flops["fp32"] == pytest.approx(
        33.9e9)


def test_a_measured_cpu_takes_the_int8_path_its_flags_allow():
    """A measured CPU's quantized multiplies run on int8 dot products: its measured fp32 figure x
    4 (AVX2, VNNI, SDOT), x 8 on an Arm core whose features name i8mm; the profile says so."""
    from rooflab.core.measure.machine.sysinfo import cpu_int8_path

    x86 = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_vnni\n"
    neoverse = "processor\t: 0\nFeatures\t: fp asimd asimddp sve i8mm bf16\nCPU part\t: 0xd40\n"
    older = "processor\t: 0\nFeatures\t: fp asimd asimddp\n"
    assert (cpu_int8_path(x86), cpu_int8_path(neoverse), cpu_int8_path(older)) == (4.0, 8.0, 4.0)
    for ratio in (4.0, 8.0):
        profile = quiet_run(int8_path=ratio).profile()
        fp32 = profile.peak_flops["fp32"]
        assert profile.default_dtype == "int8" and profile.flops() == pytest.approx(ratio * fp32)
        assert f"x {ratio:g}" in profile.sources["peak_flops.int8"]
