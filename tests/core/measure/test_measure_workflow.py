"""The after-measurement workflow the window and the command line share: calibrate, keep the
points and the fit, explain the gaps; and the measured machine's profile, kept."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rooflab.core.calibration import store
from rooflab.core.calibration.calibrate import calibrate, predict_points
from rooflab.core.io import load_model, presets
from rooflab.core.io.llamabench import BenchImport
from rooflab.core.measure import workflow
from rooflab.core.report.gaps import explain_gaps
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.machine_run import BandwidthResult, MachineMeasurement, MatmulResult
from rooflab.core.values.measured import MeasuredPoint

MACHINE = MachineProfile(name="cpu", bandwidth=40e9, peak_flops={"fp32": 2e11}, memory=16e9, default_dtype="fp32")
TRUE = Efficiency(bandwidth=0.5, compute=0.6, step_overhead=0.012, kv_read_factor=2.0)


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture(scope="module")
def measured():
    """qwen3-0.6b's points as a machine at known efficiencies would time them."""
    spec = load_model("qwen3-0.6b", weights="fp32")
    pts = [MeasuredPoint(kind="prefill", prompt=n, context=0, batch=1, seconds=1.0) for n in (1, 64, 512)]
    pts += [MeasuredPoint(kind="decode", prompt=1, context=t, batch=1, seconds=1.0) for t in (4, 512, 2048)]
    seconds = predict_points(spec, dataclasses.replace(MACHINE, efficiency=TRUE), pts, kv_type="f32", dtype="fp32")
    return spec, [dataclasses.replace(p, seconds=float(s)) for p, s in zip(pts, seconds, strict=True)]


def test_calibrates_keeps_and_explains(data, measured):
    spec, points = measured
    done = workflow.calibrate_and_keep(spec, MACHINE, points, meta={"dtype": "fp32"}, label="tiny",
                                       source="qwen3-0.6b", kv_type="f32", dtype="fp32", overhead=0.012,
                                       notes=["a note"])
    expected = calibrate(spec, MACHINE, points, kv_type="f32", dtype="fp32", overhead=0.012)
    assert done.calibration.efficiency == expected.efficiency                 # the one fit
    assert done.gaps == tuple(explain_gaps(spec, expected))                        # the one explanation
    assert (done.model_key, done.machine_key) == (store.model_key(spec), store.machine_key(MACHINE))
    assert done.kept and not done.keep_error and done.notes == ("a note",)
    runs = store.load_measurements(done.model_key, done.machine_key)
    assert runs[-1]["points"] == points and runs[-1]["meta"] == {"dtype": "fp32"}
    assert store.load_calibration(done.model_key, done.machine_key) == done.calibration.efficiency
    assert store.load_calibration("qwen3-0.6b", done.machine_key) == done.calibration.efficiency  # by source


def test_keep_false_writes_nothing(data, measured):
    spec, points = measured
    done = workflow.calibrate_and_keep(spec, MACHINE, points, meta={}, label="", source="", kv_type="f32",
                                       keep=False)
    assert not done.kept and done.calibration.points
    assert not data.exists() or not any(data.rglob("*.json"))


def test_a_store_that_cannot_be_written_is_reported_not_raised(data, measured, monkeypatch):
    spec, points = measured

    def refuse(*args, **kwargs):
        raise PermissionError("read-only folder")

    monkeypatch.setattr(store, "save_measurement", refuse)
    done = workflow.calibrate_and_keep(spec, MACHINE, points, meta={}, label="", source="", kv_type="f32")
    assert not done.kept and "read-only folder" in done.keep_error
    assert done.gaps                                          # the fit is still worth showing


def test_import_keeps_the_file_and_tool(data, measured):
    spec, points = measured
    bench = BenchImport(path="/x/bench.json", tool="llama-bench", series={"m.gguf": tuple(points)},
                        models=("m.gguf",), kv_type="f32", metadata={"n_threads": "8"})
    done = workflow.after_import(bench, spec, MACHINE, source="qwen3-0.6b")
    assert done.notes == ("llama-bench: m.gguf",)
    meta = store.load_measurements(done.model_key, done.machine_key)[-1]["meta"]
    assert meta == {"tool": "llama-bench", "file": "/x/bench.json", "n_threads": "8"}


def _machine_run(**changes) -> MachineMeasurement:
    run = MachineMeasurement(
        device="cpu", device_name="test cpu", threads=1, torch_version="2", date="2025-01-01T00:00:00+00:00",
        memory_total=8e9,
        bandwidth=(BandwidthResult(kernel="read", device="cpu", buffer_bytes=1 << 20, bytes_per_call=1e6,
                                   best=30e9, median=28e9, repeats=2, threads=1),),
        matmul=(MatmulResult(dtype="fp32", device="cpu", size=256, best=1e11, median=9e10, repeats=2, threads=1),))
    return dataclasses.replace(run, **changes)


def test_machine_run_is_kept_as_the_measured_machine(data):
    profile = workflow.keep_machine_run(_machine_run())
    assert profile.key == "measured" and profile.bandwidth == 28e9        # the median run
    assert presets.load_measured_machine() == profile
    assert presets.load_machine_measurement()["device"] == "cpu"
    # a later run without matmul takes its peaks from the profile kept before
    again = workflow.keep_machine_run(_machine_run(matmul=(), bandwidth=()), keep=False)
    assert again.peak_flops["fp32"] == 9e10 and again.bandwidth == 28e9
    assert presets.load_measured_machine() == profile            # keep=False left it alone


def test_run_job_closes_the_job_when_its_listener_stops_it():
    """Ctrl+C arrives in the progress line (the command line's listener): the job's finally
    block still runs at once, so a llama.cpp model or a child process is freed then."""
    from rooflab.core.jobs import Progress, run_job

    freed: list[bool] = []

    def job():
        try:
            while True:
                yield Progress(step="work", message="working")
        finally:
            freed.append(True)

    def interrupt(_progress: Progress) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_job(job(), interrupt)
    assert freed == [True]
