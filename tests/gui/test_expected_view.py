"""Expected figures in the window: a calibrated machine gives every model an expected curve
with its band beside the ceiling, and a numbers-panel row with its out-of-sample accuracy; the
Measure tab's one button makes that calibration."""

from __future__ import annotations

from rooflab.core.calibration import store
from rooflab.core.io import load_model, presets
from rooflab.core.measure import calibration_run
from rooflab.core.report.expected import expected_request
from rooflab.core.report.overlays import BAND_HIGH, BAND_LOW
from rooflab.core.report.units import fmt
from rooflab.core.values.calibration import Accuracy, EngineCalibration, Rates
from tests.core.cli.test_calibrate_cli import TINY
from tests.factories import needs
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import save_this_machine


def _keep_calibration() -> EngineCalibration:
    rates = Rates(bandwidth={"k-quant": 20e9, "q8": 25e9}, prefill_flops={"k-quant": 100e9, "q8": 90e9},
                  decode_flops={"k-quant": 60e9, "q8": 50e9}, cache_bandwidth=5e9, pass_seconds=5e-4, overlap=0.0)
    slow = Rates(**{**rates.to_dict(), "bandwidth": {"k-quant": 15e9, "q8": 20e9}})
    cal = EngineCalibration(machine_key="measured", machine_name="this machine (measured)",
                            engine_key="llama.cpp cpu t2 fa kv-f16", engine_label="llama.cpp 0.3.36, cpu, 2 threads",
                            settings={}, date="2026-11-30T12:00:00+00:00", models=("a", "b", "c"),
                            machine_bandwidth=30e9, machine_flops=150e9, central=rates, replicates=(rates, slow) * 4,
                            accuracy={"leave_one_model_out": {"decode": Accuracy(median=0.07, worst=0.2, count=9)},
                                      "in_sample": {"decode": Accuracy(median=0.01, worst=0.02, count=9)}})
    store.save_engine_calibration(cal)
    return cal


def test_a_calibrated_machine_shows_expected_beside_the_ceiling(qtbot, window):
    save_this_machine()
    _keep_calibration()
    window.recompute.forget_calibrations()
    window.state.set_machine(presets.load_measured_machine())
    qtbot.waitUntil(lambda: window.recompute.frame is not None
                    and window.recompute.frame.scenario.machine.key == "measured", timeout=WAIT_MS)
    assert window.recompute.frame.expected_curves[("decode", "step")][0].extras == {}   # the band waits
    frame = window.recompute.add_band()          # what the band timer does once the edits pause
    assert frame is not None
    expected = expected_request(frame.scenario.model, frame.expected, frame.scenario.workload)
    assert window.numbers.value_text("expected_tpot") == fmt(expected["expected_tpot_seconds"], "s")
    assert float(expected["expected_tpot_seconds"]) > frame.summary.estimate.tpot        # slower than the ceiling
    row = next(line for line in window.numbers.lines if line.key == "expected_tpot")
    assert "off by 7% (median, worst 20%) on models the calibration did not see" in row.sentence
    assert "1%" not in row.sentence                                # the in-sample fit is not accuracy
    window.flush_plots()
    step = window.plots["decode"].curve("step", "expected_step", layer="expected")
    assert (step.extras[BAND_LOW] <= step.y).all() and (step.y <= step.extras[BAND_HIGH]).all()
    assert (step.extras[BAND_HIGH] > step.extras[BAND_LOW]).any()
    hover = window.plots["decode"].readout_at("step", float(step.x[10]), float(step.y[10]))
    assert hover.startswith("expected, llama.cpp") and "expected high" in hover


def test_a_preset_shows_its_back_ends_published_expectation(qtbot, window):
    window.state.set_machine(presets.load_machine("m4-max"))
    qtbot.waitUntil(lambda: window.recompute.frame is not None
                    and window.recompute.frame.scenario.machine.key == "m4-max", timeout=WAIT_MS)
    frame = window.recompute.frame
    assert frame.expected is not None and frame.expected.calibration.source == "public"
    row = next(line for line in window.numbers.lines if line.key == "expected_tpot")
    assert "machines the calibration did not see" in row.sentence
    # an efficiency set by hand is the user's estimate: no second one on top
    window.state.update_machine(efficiency=frame.scenario.machine.efficiency.__class__(bandwidth=0.5))
    qtbot.waitUntil(lambda: window.recompute.frame.expected is None, timeout=WAIT_MS)
    assert "expected_tpot" not in [line.key for line in window.numbers.lines]


def test_the_calibrate_button_calibrates_this_machine_for_every_model(qtbot, window, monkeypatch):
    needs.llama_cpp()
    monkeypatch.setattr(calibration_run, "calibration_models", lambda engine: TINY)
    monkeypatch.setattr(calibration_run.CalibrationPlan, "engine_plan", _quick_plan)
    save_this_machine()
    window.state.set_model(load_model("qwen3-0.6b", weights="q4_k_m"), "qwen3-0.6b")
    panel, ctl = window.measure_panel, window.measure
    panel.set_engine("llamacpp")
    panel.threads.setValue(1)
    panel.repeats.setValue(1)
    panel.remeasure.setChecked(False)              # the machine measured before (tests/core: a fresh one)
    with qtbot.waitSignal(ctl.engine_calibrated, timeout=120_000) as done:
        panel.calibrate_button.click()
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=10_000)
    cal = done.args[0]
    assert cal.models == tuple(m.key for m in TINY) and cal.machine_key == "measured"
    assert store.load_engine_calibration("measured", cal.engine_key) is not None
    assert "models left out" in panel.results.text() and "fit quality (in sample, not accuracy)" in panel.results.text()
    window.state.set_machine(presets.load_measured_machine())
    qtbot.waitUntil(lambda: window.recompute.frame.scenario.machine.key == "measured", timeout=WAIT_MS)
    assert window.recompute.frame.expected.calibration.engine_key == cal.engine_key


def _quick_plan(self):
    from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan

    return LlamaCppPlan(threads=self.threads, prompts=(16, 64, 256, 768), depths=(0, 512, 1536), gen_tokens=4,
                        contexts=(128,), batches=(1, 2, 4, 8), batch_steps=2, repeats=self.repeats)


def test_a_cpu_asked_for_fp32_says_why_it_has_no_expected_figure(qtbot, window):
    """The Machine tab's compute dtype at fp32 on a CPU: llama.cpp's published factors are of the
    int8 path, so the numbers panel shows no expected figure and one row saying why (it had put
    them on the FP32 peak, 4x slow)."""
    window.state.set_machine(presets.load_machine("epyc-9654"))
    qtbot.waitUntil(lambda: window.recompute.frame is not None
                    and window.recompute.frame.scenario.machine.key == "epyc-9654", timeout=WAIT_MS)
    window.recompute.recompute_now()
    keys = [line.key for line in window.numbers.lines]
    assert "expected_tpot" in keys and "expected" not in keys
    panel = window.machine_panel
    panel.default_dtype.setCurrentText("fp32")
    panel.edit_field(panel.default_dtype)
    window.recompute.recompute_now()
    assert window.state.machine.default_dtype == "fp32"
    keys = [line.key for line in window.numbers.lines]
    assert window.numbers.value_text("expected") == "none" and "expected_tpot" not in keys
    row = next(line for line in window.numbers.lines if line.key == "expected")
    assert "int8 path" in row.sentence and "fp32" in row.sentence


def test_tensor_parallel_over_pcie_says_why_it_has_no_expected_figure(qtbot, window):
    """Two RTX 4090s in tensor parallel: no published vLLM run all-reduced over PCIe, so the
    numbers panel has no expected figure, and its "Expected: none" row says that (the command
    line said it; the window only dropped the row)."""
    from rooflab.core.predict.choice import PlacementChoice
    from tests.gui.conftest import open_placed

    open_placed(qtbot, window, "qwen3-32b-q4_k_m", PlacementChoice(devices=2, parallel="tensor"))
    row = next(line for line in window.numbers.lines if line.key == "expected")
    assert row.value == "none" and "PCIe" in row.sentence and "expected_tpot" not in \
        [line.key for line in window.numbers.lines]
    assert row.tooltip.startswith("No vLLM calibration applies here")
