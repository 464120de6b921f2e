"""``run_calibration`` with torch: the same job the CLI and the window run, on tiny configs."""

from __future__ import annotations

import pytest

from rooflab.core.calibration import store
from rooflab.core.calibration.models import CalibrationModel
from rooflab.core.jobs import CancelToken, run_job
from rooflab.core.measure import calibration_run
from rooflab.core.values.machine import MachineProfile
from tests.factories.llm_configs import llama_config

pytest.importorskip("torch")

HERE = MachineProfile(name="this machine", bandwidth=30e9, peak_flops={"fp32": 150e9}, memory=16e9,
                      default_dtype="fp32", kind="cpu", key="measured")
TINY = tuple(CalibrationModel(key=f"tiny-{layers}", description="", weights="fp32",
                              config=llama_config(hidden_size=128, num_hidden_layers=layers, num_attention_heads=4,
                                                  num_key_value_heads=2, intermediate_size=256, vocab_size=500))
             for layers in (2, 3, 4))


def _plan(self):
    from rooflab.core.measure.engines.torch.timing import ModelPlan

    return ModelPlan(dtype="fp32", threads=1, prompts=(4, 16, 64), decode_steps=2, repeats=1, contexts=(2, 16),
                     batches=(1, 2), random_weights=True, overhead_probe=False)


def test_torch_calibration_runs_fits_and_keeps(monkeypatch, steady_timings):
    """The run, the fit and what is kept; never whether this machine's timings agreed (on a
    loaded machine a model whose every point spread was left out, issue 15)."""
    monkeypatch.setattr(calibration_run, "calibration_models", lambda engine: TINY)
    monkeypatch.setattr(calibration_run.CalibrationPlan, "engine_plan", _plan)
    plan = calibration_run.CalibrationPlan(engine="torch", threads=1, repeats=1, measure_machine=False)
    fractions: list[float] = []
    run = run_job(calibration_run.run_calibration(plan, machine=HERE),
                  lambda p: fractions.append(p.fraction or 0.0))
    assert fractions == sorted(fractions) and fractions[-1] == 1.0           # one overall progress
    cal = run.calibration
    assert cal.engine_key.startswith("torch cpu t1") and cal.models == tuple(m.key for m in TINY)
    assert cal.central.bandwidth.keys() == {"float"}
    assert "leave_one_model_out" in cal.accuracy and run.kept
    assert store.load_engine_calibration("measured", cal.engine_key) is not None


def test_every_model_is_timed_once_a_round_and_its_points_are_the_rounds_mean(monkeypatch, steady_timings):
    """Two repeats are two rounds over the three models, one after the other; each point holds
    both rounds' timings (its mean, spread and count), and the run notes the rounds."""
    monkeypatch.setattr(calibration_run, "calibration_models", lambda engine: TINY)
    monkeypatch.setattr(calibration_run.CalibrationPlan, "engine_plan", _plan)
    plan = calibration_run.CalibrationPlan(engine="torch", threads=1, repeats=2, measure_machine=False)
    messages: list[str] = []
    run = run_job(calibration_run.run_calibration(plan, machine=HERE, keep=False),
                  lambda p: messages.append(p.message))
    order = [m.split(": ")[0] for m in messages if m.startswith("round")]
    assert list(dict.fromkeys(order)) == [f"round {r} of 2, model {i} of 3 (tiny-{i + 1})"
                                          for r in (1, 2) for i in (1, 2, 3)]
    for model in run.runs:
        both = [p for p in model.points if p.stdev > 0]          # a point with two clean rounds
        assert len(both) >= len(model.points) // 2
        assert all(p.best <= p.median and p.best <= p.seconds and p.repeats >= 2 for p in both)
        assert "timed in 2 rounds" in model.notes[-1]
    assert run.calibration.models == tuple(m.key for m in TINY) and not run.kept


def test_a_cancelled_calibration_keeps_nothing(monkeypatch):
    monkeypatch.setattr(calibration_run, "calibration_models", lambda engine: TINY)
    monkeypatch.setattr(calibration_run.CalibrationPlan, "engine_plan", _plan)
    cancel = CancelToken()
    plan = calibration_run.CalibrationPlan(engine="torch", threads=1, repeats=1, measure_machine=False)

    def stop(progress):
        if "model 2 of 3" in progress.message:
            cancel.cancel()

    from rooflab.core.errors import Cancelled

    with pytest.raises(Cancelled):
        run_job(calibration_run.run_calibration(plan, cancel, machine=HERE), stop)
    assert store.load_engine_calibration("measured") is None


def test_the_machine_is_measured_before_and_after_the_timings_and_the_faster_run_is_used(monkeypatch, steady_timings):
    """A calibration that began while neighbours held the machine (its first measurement
    consistent but half the speed) fits against the run after its timings, and says so; the
    calibration's machine, the kept "measured" profile and its notes agree."""
    from rooflab.core.io import presets
    from rooflab.core.jobs import Progress
    from tests.core.measure.machine.test_machine_checks import quiet_run, slowed_run

    monkeypatch.setattr(calibration_run, "calibration_models", lambda engine: TINY)
    monkeypatch.setattr(calibration_run.CalibrationPlan, "engine_plan", _plan)
    runs = [slowed_run(), quiet_run(date="2026-12-02T18:40:00+00:00")]
    messages: list[str] = []

    def measured(plan, cancel, message, fraction):
        yield Progress(step="machine", message=message, fraction=fraction)
        return runs.pop(0)

    monkeypatch.setattr(calibration_run, "_measure_machine", measured)
    plan = calibration_run.CalibrationPlan(engine="torch", threads=1, repeats=1, measure_machine=True)
    run = run_job(calibration_run.run_calibration(plan), lambda p: messages.append(p.message))
    assert messages[0] == "measuring this machine before the timings"
    assert messages.index("measuring this machine after the timings") > max(
        i for i, m in enumerate(messages) if m.startswith("model 3 of 3"))
    assert run.machine.peak_flops["fp32"] == pytest.approx(33.9e9) and presets.load_measured_machine() == run.machine
    assert run.calibration.notes[0].startswith("the machine measured before the timings was set aside (its fp32 peak "
                                               "of 15.1 GFLOP/s is 55% below the 33.9 GFLOP/s of this machine's run of "
                                               "2026-12-02 18:40")
    assert run.calibration.notes[0].endswith("the one measured after the timings is used")


def test_a_calibration_whose_every_machine_measurement_fails_keeps_nothing(monkeypatch, steady_timings):
    """Both measurements disturbed (and the second try too): one line naming each, no
    calibration kept, the measured machine unchanged (none)."""
    from rooflab.core.errors import MeasurementError
    from rooflab.core.io import presets
    from rooflab.core.jobs import Progress
    from tests.core.measure.machine.test_machine_checks import quiet_run

    monkeypatch.setattr(calibration_run, "calibration_models", lambda engine: TINY)
    monkeypatch.setattr(calibration_run.CalibrationPlan, "engine_plan", _plan)
    tried: list[str] = []

    def measured(plan, cancel, message, fraction):
        tried.append(message)
        yield Progress(step="machine", message=message, fraction=fraction)
        return quiet_run(fp32_bound=20e9)          # a peak above what this processor allows

    monkeypatch.setattr(calibration_run, "_measure_machine", measured)
    plan = calibration_run.CalibrationPlan(engine="torch", threads=1, repeats=1, machine_tries=2)
    with pytest.raises(MeasurementError) as caught:
        run_job(calibration_run.run_calibration(plan))
    assert tried == ["measuring this machine before the timings", "measuring this machine after the timings",
                     "measuring this machine after the timings (try 2)"]
    line = str(caught.value)
    assert "\n" not in line and line.count("this processor's cores, clock and vector units allow") == 3
    assert presets.load_measured_machine() is None and store.load_engine_calibration("measured") is None
