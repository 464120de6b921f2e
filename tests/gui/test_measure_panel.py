"""The Measure tab (the MeasurePanel view and its MeasureController): points reach the plots as
they arrive, a calibration is shown, cancel stops a measurement inside a forward pass, a run
that would not fit is refused with a message in the window, worker errors are shown (a bug
reaches the excepthook), imports are drawn, and the results go through the same workflow the
command line runs. Both directions are checked: controls -> what runs, results -> what the
widgets show."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest

from rooflab.core.measure import workflow
from rooflab.core.report.units import fmt
from rooflab.core.values.measured import MeasuredPoint
from rooflab.gui.plots.measure_overlays import measured_layer
from tests.factories.spies import spy
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import save_this_machine


@pytest.fixture
def tiny_window(window, tiny_config: Path, monkeypatch, tmp_path):
    """The window with the tiny config.json on screen (fp32) and a private data folder."""
    from rooflab.core.io import load_model

    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path / "data"))
    save_this_machine()
    window.state.set_model(load_model(tiny_config, weights="fp32"), str(tiny_config))
    panel = window.measure_panel
    panel.threads.setValue(1)
    panel.repeats.setValue(1)
    panel.prompts.setText("1, 8")
    panel.contexts.setText("4")
    panel.batches.setText("1, 2")
    yield window
    window.measure.shutdown()


def test_points_arrive_live_then_calibration(qtbot, tiny_window, tmp_path, monkeypatch):
    panel, ctl = tiny_window.measure_panel, tiny_window.measure
    calls = spy(monkeypatch, "after_engine_run")
    # the suite loads every core, so any point may be marked disturbed: fit them all here (the
    # rule itself is tests/core/measure/machine/test_trust.py's), which also checks the box reaches the fit
    panel.include_disturbed.setChecked(True)
    arrived: list[object] = []
    ctl.sample_measured.connect(arrived.append)
    steps: list[str] = []
    ctl.jobs.yielded.connect(steps.append)
    with qtbot.waitSignal(ctl.calibrated, timeout=60_000) as fit:
        panel.model_button.click()
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=10_000)
    messages = [progress.message for progress in steps]
    assert "prompt of 1 token: measured" in messages and not [m for m in messages if "1 tokens" in m]
    points = [a for a in arrived if isinstance(a, MeasuredPoint)]
    assert [p.kind for p in points] == ["prefill", "decode", "prefill", "decode", "batch", "batch"]
    # the workflow 'rooflab measure model' runs too (tests/core/cli/test_measure_cli.py)
    ((args, kwargs, _done),) = calls
    # torch stamps its settings on the points once the run ends (live points carry none yet)
    assert [dataclasses.replace(p, settings=None) for p in args[0].points] == points
    # timed here: fitted to this machine as measured, not the RTX 4090 that was on screen, and
    # the window moved to it
    assert args[1].key == "measured" and args[0].engine == "torch"
    assert tiny_window.state.machine.key == "measured"
    assert kwargs == {"source": str(tiny_window.state.model_ref), "include_disturbed": True}
    assert fit.args[0].after["all"].count == 6
    assert "Calibration" in panel.results.text() and "TTFT" in panel.results.text()
    # the model's own fit is fit quality; accuracy would come from a calibration that never saw it
    assert "<b>Fit quality</b> of this model's own fit (in sample, not accuracy)" in panel.results.text()
    assert "No calibration of this machine for these settings yet" in panel.results.text()
    # says what was measured, not only "Done"
    assert panel.step.text().startswith("Measured 6 points with torch, 1 thread") and panel.progress.value() == 1000
    assert panel.apply_button.isEnabled() and panel.model_button.isEnabled()
    tiny_window.flush_plots()
    (series,) = ctl.series                                   # one engine, one set of settings
    layer = measured_layer(series.key)
    assert series.label.startswith("torch, 1 thread") and series.points == args[0].points
    measured = tiny_window.plots["prefill"].curve("ttft", "measured_ttft", layer=layer)
    assert list(measured.x) == [1.0, 8.0] and "measured / predicted" in measured.extras
    assert tiny_window.plots["batching"].curve("rate", "measured_per_sequence_4", layer=layer).x.size == 2
    assert tiny_window.plots["decode"].curve("step", "calibrated_step", layer="calibrated").y.size > 10
    files = tiny_window.save_report(tmp_path / "report")
    assert any("measured" in p.name for p in files.csvs)            # measured series go into the report
    # control -> model: applying the fit changes the machine on screen
    panel.apply_button.click()
    assert tiny_window.state.machine.efficiency == ctl.calibration.efficiency


def test_a_torch_run_of_another_format_keeps_the_model_on_screen(qtbot, tiny_window, tiny_config):
    from rooflab.core.calibration import store
    from rooflab.core.io import load_model

    state, panel, ctl = tiny_window.state, tiny_window.measure_panel, tiny_window.measure
    state.set_model(load_model(tiny_config, weights="q8_0"), str(tiny_config), "q8_0")
    state.update_workload(kv_type="q8_0")
    assert panel.engine_key() == "torch"
    panel.use_batch.setChecked(False)
    panel.include_disturbed.setChecked(True)           # the suite shares the cores: fit whatever was timed
    messages: list[tuple[str, str]] = []
    ctl.message.connect(lambda text, level: messages.append((text, level)))
    before = (state.model, state.workload, state.model_ref, state.model_weights)
    with qtbot.waitSignal(ctl.jobs.returned, timeout=60_000) as returned:
        panel.model_button.click()
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=10_000)
    run = returned.args[0]
    assert run.dtype == "fp32" and store.model_key(run.spec) != store.model_key(state.model)
    # torch ran an fp32 copy: said so, and the Q8_0 model, its cache type and its file stay on screen
    assert (state.model, state.workload, state.model_ref, state.model_weights) == before
    assert any("torch" in text and "fp32" in text and level == "info" for text, level in messages)


def test_a_run_on_a_busy_machine_is_kept_and_drawn_but_not_fitted(qtbot, tiny_window, monkeypatch):
    from rooflab.core.calibration import store
    from rooflab.core.measure.engines import engine

    # another program starts while the run goes: the load average climbs by 2 between points
    loads = iter(range(0, 1000, 2))
    monkeypatch.setattr(engine, "load_average", lambda: float(next(loads)))
    state, panel, ctl = tiny_window.state, tiny_window.measure_panel, tiny_window.measure
    panel.use_batch.setChecked(False)
    with qtbot.waitSignal(ctl.jobs.finished, timeout=60_000):
        panel.model_button.click()
    # one line says why there is no fit and what to do
    assert "points were disturbed" in panel.error.text() and "load average rose" in panel.error.text()
    assert "\n" not in panel.error.text() and ctl.calibration is None
    # the minutes of measuring are not lost: the points are kept and drawn on this machine
    assert state.machine.key == "measured"
    (kept,) = store.load_measurements(store.model_key(state.model), store.machine_key(state.machine))
    assert len(kept["points"]) == 4 and all(p.disturbed for p in kept["points"])
    tiny_window.flush_plots()
    (series,) = ctl.series
    assert len(series.points) == 4
    assert tiny_window.plots["prefill"].curve("ttft", "measured_ttft", layer=measured_layer(series.key)).x.size == 2


def test_cancel_stops_the_run_inside_a_forward_pass(qtbot, tiny_window):
    import torch

    panel, ctl = tiny_window.measure_panel, tiny_window.measure
    panel.prompts.setText(", ".join(["4096"] * 200))      # minutes of work were it not cancelled
    panel.use_batch.setChecked(False)
    clicked = threading.Event()
    begun_after_click: list[str] = []

    def count(module, args):               # runs in the worker, before each layer's cancel check
        if clicked.is_set() and type(module).__name__.endswith("DecoderLayer"):
            begun_after_click.append(type(module).__name__)

    with qtbot.waitSignal(ctl.jobs.yielded, timeout=30_000, check_params_cb=lambda p: p.step == "prefill"):
        panel.model_button.click()
    handle = torch.nn.modules.module.register_module_forward_pre_hook(count)
    try:
        # 10 s: a bound a loaded 2-core machine keeps (the behaviour is asserted below)
        with qtbot.waitSignal(ctl.jobs.aborted, timeout=10_000), qtbot.waitSignal(ctl.jobs.finished, timeout=10_000):
            clicked.set()
            panel.cancel_button.click()
    finally:
        handle.remove()
    # the layer whose check raised, plus one begun between the click and the token being set
    assert len(begun_after_click) <= 2
    assert panel.step.text() == "Cancelled"
    assert panel.error.isHidden()
    assert panel.model_button.isEnabled() and not panel.cancel_button.isEnabled()


def test_memory_refusal_is_shown_in_the_window(qtbot, tiny_window):
    panel, ctl = tiny_window.measure_panel, tiny_window.measure
    ctl.memory_limit = 1e6
    messages: list[tuple[str, str]] = []
    ctl.message.connect(lambda text, level: messages.append((text, level)))
    with qtbot.waitSignal(ctl.jobs.errored, timeout=30_000) as failed:
        panel.model_button.click()
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=WAIT_MS)
    assert type(failed.args[0]).__name__ == "MeasurementError"      # the exception itself
    assert not panel.error.isHidden() and "not enough memory" in panel.error.text()
    assert messages and messages[-1][1] == "error"
    assert "not enough memory" in tiny_window.messages.label.text() and tiny_window.messages.level == "error"
    assert ctl.points == []


def test_worker_error_is_one_line_in_the_window(qtbot, tiny_window, tmp_path):
    bad = tmp_path / "bad" / "config.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"model_type": "no-such-architecture", "hidden_size": 8}))
    tiny_window.state.set_model(tiny_window.state.model, str(bad))
    panel, ctl = tiny_window.measure_panel, tiny_window.measure
    with qtbot.waitSignal(ctl.jobs.finished, timeout=30_000):
        panel.model_button.click()
    assert "no-such-architecture" in panel.error.text()
    assert "\n" not in panel.error.text()
    assert panel.step.text() == "Stopped"


def test_a_bug_in_a_job_reaches_the_excepthook(qtbot, tiny_window, monkeypatch):
    import sys

    from rooflab.gui.controllers import measure_jobs
    def broken(path, cancel):
        raise ZeroDivisionError("a bug")
        yield  # pragma: no cover

    hooked: list[BaseException] = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, exc, tb: hooked.append(exc))
    monkeypatch.setattr(measure_jobs, "import_job", broken)
    panel, ctl = tiny_window.measure_panel, tiny_window.measure
    with qtbot.waitSignal(ctl.jobs.finished, timeout=10_000):
        ctl.import_file("whatever.json")
    assert len(hooked) == 1 and isinstance(hooked[0], ZeroDivisionError) and hooked[0].__traceback__
    assert panel.step.text() == "Stopped" and panel.import_button.isEnabled()


def test_bad_controls_refuse_before_starting(qtbot, tiny_window):
    panel, ctl = tiny_window.measure_panel, tiny_window.measure
    panel.prompts.setText("1, lots")
    panel.model_button.click()
    assert "prompts" in panel.error.text() and not ctl.jobs.busy
    panel.prompts.setText("1")
    for box in (panel.use_prefill, panel.use_decode, panel.use_batch):
        box.setChecked(False)
    panel.model_button.click()
    assert "at least one model experiment" in panel.error.text()


def test_import_llama_bench(qtbot, tiny_window, tmp_path, monkeypatch):
    calls = spy(monkeypatch, "after_import")
    rows = [{"model_filename": "tiny.gguf", "n_prompt": n, "n_gen": 0, "avg_ts": 1000.0 * n ** 0.5} for n in (16, 256)]
    rows += [{"model_filename": "tiny.gguf", "n_prompt": 0, "n_gen": 64, "n_depth": d, "avg_ts": 500.0}
             for d in (0, 2048)]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(rows))
    ctl = tiny_window.measure
    with qtbot.waitSignal(ctl.calibrated, timeout=10_000):
        ctl.import_file(str(path))
    assert len(ctl.points) == 4
    # the workflow 'rooflab measure import --model' runs too (tests/core/cli/test_measure_cli.py)
    ((args, kwargs, _done),) = calls
    assert args[0].path == str(path) and args[1] is tiny_window.state.model
    assert kwargs == {"source": str(tiny_window.state.model_ref)}
    tiny_window.flush_plots()
    assert tiny_window.plots["decode"].curve("step", "measured_step", layer="measured").x.size == 2


def test_calibration_of_a_gpu_reads_in_gpu_units(qtbot, window, tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path / "data"))
    row = {"model_filename": "qwen3-8b-q4_k_m.gguf", "n_threads": 8, "type_k": "f16"}
    rows = [{**row, "n_prompt": 512, "n_gen": 0, "n_depth": 0, "avg_ns": 180_000_000, "avg_ts": 2844.4},
            {**row, "n_prompt": 0, "n_gen": 128, "n_depth": 0, "avg_ns": 800_000_000, "avg_ts": 160.0},
            {**row, "n_prompt": 0, "n_gen": 128, "n_depth": 8192, "avg_ns": 1_000_000_000, "avg_ts": 128.0}]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(rows))
    panel, ctl = window.measure_panel, window.measure
    with qtbot.waitSignal(ctl.calibrated, timeout=10_000):
        ctl.import_file(str(path))
    fitted = panel.results.text().split("<br>")[1]        # the line under "Calibration"
    assert "TFLOP/s" in fitted and "GB/s" in fitted and "GFLOP/s" not in fitted   # was "39953 of 165200 GFLOP/s"
    assert "of 330 TFLOP/s" in fitted and "of 1.01 TB/s" in fitted


def test_measurements_follow_the_machine_they_were_made_on(qtbot, window, tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path / "data"))
    row = {"model_filename": "qwen3-8b-q4_k_m.gguf", "type_k": "f16"}
    rows = [{**row, "n_prompt": 512, "n_gen": 0, "avg_ts": 2844.4},
            {**row, "n_prompt": 0, "n_gen": 128, "n_depth": 0, "avg_ts": 160.0}]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(rows))
    panel, ctl, picker = window.measure_panel, window.measure, window.machine_panel.picker
    with qtbot.waitSignal(ctl.calibrated, timeout=10_000):
        ctl.import_file(str(path))                         # timed on the RTX 4090 on screen
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=WAIT_MS)
    assert len(ctl.points) == 2
    window.machine_panel.bandwidth.setValue(900.0)         # a tweaked peak: still that machine's points
    assert len(ctl.points) == 2 and ctl.calibration is not None
    picker.activated.emit(picker.findData("preset:m4-max"))
    # not the 4090's points on the M4 Max's curves, nor the 4090's fit offered for the M4 Max
    assert ctl.points == [] and ctl.calibration is None and not panel.apply_button.isEnabled()
    window.flush_plots()
    assert {s.layer.key for s in window.plots["decode"].drawn()} - {"expected"} == {"current"}
    picker.activated.emit(picker.findData("preset:rtx-4090"))
    assert len(ctl.points) == 2                                           # kept, and back with it
    assert ctl.calibration is not None and panel.apply_button.isEnabled()     # the import's fit too


def test_an_imported_fit_serves_predict_calibrated(qtbot, window, tmp_path, monkeypatch, capsys):
    from rooflab.core.cli.main import main

    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path / "data"))
    rows = [{"n_prompt": 512, "n_gen": 0, "avg_ts": 2844.4}, {"n_prompt": 0, "n_gen": 128, "avg_ts": 160.0}]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(rows))
    with qtbot.waitSignal(window.measure.calibrated, timeout=10_000):
        window.measure.import_file(str(path))
    qtbot.waitUntil(lambda: not window.measure.jobs.busy, timeout=WAIT_MS)
    assert main(["predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--calibrated", "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)["machine"]["efficiency"]
    assert fitted["bandwidth"] == pytest.approx(window.measure.calibration.efficiency.bandwidth)
    assert fitted["bandwidth"] < 1.0


def test_machine_measurement_draws_the_roofline(qtbot, tiny_window, monkeypatch):
    from rooflab.core.measure.machine import benchmark as machine_module

    panel, ctl = tiny_window.measure_panel, tiny_window.measure
    small = machine_module.MachinePlan(threads=1, buffer_bytes=4 << 20, repeats=2, dtypes=("fp32",),
                                       matmul_max=256, roofline_k=256, roofline_ms=(1, 8, 64))
    monkeypatch.setattr(panel, "machine_plan", lambda: small)
    # this tiny run's own timings must not decide (the checks are judged on injected figures in
    # tests/core/measure/machine/test_machine_checks.py): it passes them here
    monkeypatch.setattr(workflow, "judge_machine", lambda run, earlier=(): dataclasses.replace(run, disturbed=""))
    calls = spy(monkeypatch, "keep_machine_run")
    live: list[object] = []
    ctl.sample_measured.connect(live.append)
    with qtbot.waitSignal(ctl.jobs.finished, timeout=30_000):
        panel.machine_button.click()
    assert [s.m for s in live] == [1, 8, 64]               # the multiplies, drawn as they were measured
    assert len(calls) == 1                                 # the step 'rooflab measure machine' takes too
    assert tiny_window.state.machine.key == "measured"
    # the status line says what was measured and where it went, not only "Done"
    from rooflab.core.io.presets import measured_machine_path

    profile = tiny_window.state.machine
    status = panel.step.text()
    assert status.startswith(f"Measured {fmt(profile.bandwidth, 'B/s')} bandwidth, peak ")
    assert "fp32" in status and str(measured_machine_path()) in status and profile.name in status
    # each figure a median of runs spread over the measurement, with how far they differ
    assert "Medians of 2 runs each; runs differ by read " in status and ", fp32 " in status
    # the Machine tab lists it as a machine (not "edited, unsaved") and can pick it again
    picker = tiny_window.machine_panel.picker
    assert picker.currentData() == "preset:measured" and "edited" not in picker.currentText()
    picker.activated.emit(picker.findData("preset:m4-max"))
    picker.activated.emit(picker.findData("preset:measured"))
    assert tiny_window.state.machine.key == "measured"
    tiny_window.plot_tabs.setCurrentWidget(tiny_window.plots["roofline"])
    tiny_window.flush_plots()
    curve = tiny_window.plots["roofline"].curve("roofline", "measured_multiplies", layer="measured-machine")
    assert list(curve.extras["rows m"]) == [1.0, 8.0, 64.0]
    # another machine's roof does not get this machine's multiplies (nor does its report)
    roofline = tiny_window.plots["roofline"]

    def shows_multiplies() -> bool:
        return any(series.layer.key == "measured-machine" for series in roofline.drawn())

    picker.activated.emit(picker.findData("preset:rtx-4090"))
    qtbot.waitUntil(lambda: not shows_multiplies(), timeout=WAIT_MS)
    picker.activated.emit(picker.findData("preset:measured"))
    qtbot.waitUntil(shows_multiplies, timeout=WAIT_MS)


def test_a_disturbed_machine_run_is_not_switched_to(qtbot, tiny_window, monkeypatch):
    """A machine run that fails its checks says why in one line; "Use the measured machine" is
    on, yet the window stays on the machine it showed and the measured machine is unchanged."""
    from rooflab.core.io import presets
    from rooflab.core.measure.machine import benchmark as machine_module

    panel, ctl = tiny_window.measure_panel, tiny_window.measure
    small = machine_module.MachinePlan(threads=1, buffer_bytes=4 << 20, repeats=1, dtypes=("fp32",),
                                       matmul_max=256, experiments=("bandwidth", "matmul"))
    monkeypatch.setattr(panel, "machine_plan", lambda: small)
    wide = "a 256-row fp32 multiply reached 30.0 GFLOP/s, above the fp32 peak of 1.7 GFLOP/s"
    monkeypatch.setattr(workflow, "judge_machine", lambda run, earlier=(): dataclasses.replace(run, disturbed=wide))
    assert panel.use_measured.isChecked()
    before, kept = tiny_window.state.machine, presets.load_measured_machine()
    with qtbot.waitSignal(ctl.jobs.finished, timeout=30_000):
        panel.machine_button.click()
    assert tiny_window.state.machine is before and presets.load_measured_machine() == kept
    shown = panel.error.text()
    assert f"disturbed ({wide})" in shown and "not used" in shown
    assert presets.disturbed_machine_path().is_file()


def test_grab_smoke(qtbot, tiny_window):
    panel = tiny_window.measure_panel
    panel.show()
    assert not panel.grab().isNull()
