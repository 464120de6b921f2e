"""Measured points are fitted only to the machine they were measured on, a benchmark only to the
model it ran, and a machine's calibration is kept and found by the machine's key."""

from __future__ import annotations

import pytest

from rooflab.core.calibration import store
from rooflab.core.calibration.expectations import calibration_for, expected_on
from rooflab.core.errors import MeasurementError, SpecError
from rooflab.core.files.paths import data_dir
from rooflab.core.io import load_model, presets
from rooflab.core.io.llamabench import BenchImport, BenchModel
from rooflab.core.measure import workflow
from rooflab.core.values.calibration import EngineCalibration, Rates
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import EngineSettings, MeasuredPoint

HERE = MachineProfile(name="this machine", bandwidth=30e9, peak_flops={"fp32": 150e9}, memory=16e9,
                      default_dtype="fp32", kind="cpu", key="measured")
CPU_RUN = EngineSettings(engine="llama.cpp", device="cpu", threads=2)


def _points(settings: EngineSettings | None = CPU_RUN) -> list[MeasuredPoint]:
    return [MeasuredPoint(kind="decode", prompt=1, context=t, batch=1, seconds=0.03 + t * 1e-6, settings=settings)
            for t in (0, 512, 2048)]


def test_a_cpu_run_is_never_fitted_to_a_gpu():
    spec = load_model("qwen3-0.6b", weights="q8_0")
    gpu = presets.load_machine("rtx-4090")
    with pytest.raises(MeasurementError, match="measured here .*not on NVIDIA"):
        workflow.calibrate_and_keep(spec, gpu, _points(), meta={}, label="x", source="x", kv_type="f16")
    assert not (data_dir() / "calibrations").exists()          # nothing kept under the GPU's name
    done = workflow.calibrate_and_keep(spec, HERE, _points(), meta={}, label="x", source="x", kv_type="f16")
    assert done.machine_key == "measured" and done.kept


def test_the_window_fits_a_run_to_this_machine_as_measured_not_the_preset_on_screen():
    on_screen = presets.load_machine("rtx-4090")
    assert workflow.host_machine(on_screen) is None             # never measured: nothing to fit to
    presets.save_measured_machine(HERE)
    found = workflow.host_machine(on_screen)
    assert found is not None and found.key == "measured" and found.name == "this machine"


def test_an_imported_benchmark_must_have_run_the_model_on_screen():
    spec = load_model("qwen3-0.6b", weights="q8_0")
    points = tuple(_points(EngineSettings(engine="llama-bench", device="cpu", threads=4)))
    wrong = BenchImport(path="bench.json", tool="llama-bench", series={"s": points}, models=("llama 8B Q4_K - Medium",),
                        model=BenchModel(description="llama 8B Q4_K - Medium", params=8030261248, size=4912898304))
    with pytest.raises(SpecError, match=r"bench\.json: the benchmark ran llama 8B .*not Qwen3"):
        workflow.after_import(wrong, spec, HERE, source="x")
    right = BenchImport(path="bench.json", tool="llama-bench", series={"s": points}, models=("qwen3 0.6B Q8_0",),
                        model=BenchModel(architecture="qwen3", weight_format="Q8_0", params=spec.params_total,
                                         size=spec.weight_bytes))
    assert workflow.after_import(right, spec, HERE, source="x").kept


def _calibration(engine: str, machine: str = "measured") -> EngineCalibration:
    rates = Rates(bandwidth={"q8": 20e9}, prefill_flops={"q8": 100e9}, decode_flops={"q8": 80e9},
                  cache_bandwidth=5e9, pass_seconds=1e-3)
    return EngineCalibration(machine_key=machine, machine_name="this machine", engine_key=engine,
                             engine_label=engine, settings={}, date="2026-11-30T12:00:00+00:00", models=("a", "b"),
                             machine_bandwidth=30e9, machine_flops=150e9, central=rates)


def test_a_kept_calibration_gives_every_model_on_its_machine_an_expected_figure():
    store.save_engine_calibration(_calibration("llama.cpp cpu t2 fa kv-f16"))
    assert calibration_for(presets.load_machine("reference-cpu")) is None or \
        calibration_for(presets.load_machine("reference-cpu")).source == "public"   # not ours: another key
    found = expected_on(load_model("qwen3-8b-q4_k_m"), HERE)
    assert found is not None and found.calibration.engine_key == "llama.cpp cpu t2 fa kv-f16"
    assert any("k-quant" in n for n in found.notes)          # Q4_K_M, calibrated on Q8_0 only: said
    assert found.machine.efficiency.step_overhead == pytest.approx(1e-3)


def test_a_corrupt_calibration_is_set_aside_not_fatal():
    path = store.save_engine_calibration(_calibration("llama.cpp cpu t2 fa kv-f16"))
    path.write_text('{"format": 1, "machine_key": 5, "central": [1]}')
    assert store.load_engine_calibration("measured") is None
    assert list(path.parent.glob("*.corrupt-*"))


def test_a_back_ends_published_calibration_is_kept_and_a_bad_copy_fitted_again(monkeypatch, tmp_path):
    """Without a current shipped fit (data edited since it was written), a group is fitted once
    per version of the data and kept in the cache folder: a window's start reads it back
    instead of refitting; a corrupt copy is set aside and fitted again."""
    from rooflab.core.calibration import expectations
    from rooflab.core.files.paths import cache_dir

    monkeypatch.setattr(expectations, "shipped_path", lambda: tmp_path / "none.json")

    def fresh() -> EngineCalibration | None:
        expectations._shipped.cache_clear()
        expectations._backend.cache_clear()
        expectations._public.cache_clear()
        return calibration_for(presets.load_machine("rtx-4090"))

    first = fresh()
    assert first is not None and first.source == "public"
    (kept,) = (cache_dir() / "published").glob("cuda-*.json")
    assert fresh() == first
    kept.write_text('{"format": 1, "calibration": [1]}')
    assert fresh() == first
    assert list(kept.parent.glob("*.corrupt-*")) and kept.is_file()
    expectations._shipped.cache_clear()
    expectations._backend.cache_clear()
    expectations._public.cache_clear()
