"""The Measure tab's engines: a GGUF opened in the window is timed by llama.cpp (really run, in
process) with one click, its points arrive live and land on its own curves with the engine in
the legend and the hover, the model on screen stays the user's file, and the points come back
when the file is reopened; cancel leaves nothing behind; a config-defined model is timed through
a random-weight GGUF; the user's llama-bench is found (or the row says why not) and its JSONL
rows stream into the window (an executable fake that replays llama-bench rows with delays).
Both directions are checked: controls -> plans, model and workload -> controls."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from rooflab.core.calibration import store
from rooflab.core.values.defaults import DEFAULT_MODEL
from rooflab.core.values.measured import MeasuredPoint
from rooflab.gui.panels.measure_panel import SWEEPS
from rooflab.gui.plots.measure_overlays import measured_layer
from tests.factories import needs
from tests.factories.processes import children
from tests.factories.spies import spy
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import save_this_machine

llama_cpp = needs.llama_cpp(module_level=True)


@pytest.fixture
def tiny_gguf(tiny_config: Path, tmp_path: Path) -> Path:
    """A random-weight Q8_0 GGUF of the tiny Qwen3 config (about 3.5 MB)."""
    from rooflab.core.io import load_model
    from tests.factories.synthetic import write_synthetic_gguf_blocking

    return write_synthetic_gguf_blocking(load_model(tiny_config, weights="q8_0"), tmp_path / "tiny-q8_0.gguf")


def open_in(qtbot, window, ref: str) -> None:
    """Open ``ref`` as the user does (off the GUI thread) and wait until it is on screen."""
    with qtbot.waitSignal(window.model_loaded, timeout=30_000):
        window.open_model(ref)


def quick(panel, **texts: str) -> None:
    """A sweep of a second or so on one thread (two repeats: a point timed once is not fitted)."""
    panel.threads.setValue(1)
    panel.repeats.setValue(2)
    fields = {"prompts": "8, 32", "depths": "0, 32", "contexts": "16", "batches": "1, 2", **texts}
    for name, text in fields.items():
        getattr(panel, name).setText(text)


@pytest.fixture
def gguf_window(qtbot, window, tiny_gguf: Path):
    save_this_machine()
    open_in(qtbot, window, str(tiny_gguf))
    on_measure_tab(qtbot, window)
    yield window
    window.measure.shutdown()


def on_measure_tab(qtbot, window) -> None:
    """Show the window on its Measure tab, as a user reads it: the tab brings its estimate and
    llama-bench line up to date when it comes on screen, not while hidden."""
    window.show()
    window.left_tabs.setCurrentIndex(window.left_tabs.count() - 1)
    qtbot.waitUntil(window.measure_panel.isVisible, timeout=WAIT_MS)


def legend_texts(plot) -> list[str]:
    return [label.text for view in plot._panels.values() for _sample, label in view.legend.items]


def shown(panel, widget) -> bool:
    return widget.isVisibleTo(panel)


def catalogue_model():
    from rooflab.core.io import load_model

    return load_model(DEFAULT_MODEL)


# --- llama.cpp, in process, on the user's GGUF -----------------------------------------------------

def test_llamacpp_measures_the_gguf_on_screen_and_keeps_it(qtbot, gguf_window, tiny_gguf, monkeypatch, steady_timings):
    window, state = gguf_window, gguf_window.state
    panel, ctl = window.measure_panel, window.measure
    # model -> controls: a GGUF is timed in llama.cpp, whose controls show (torch's do not)
    assert panel.engine_key() == "llamacpp"
    assert all(shown(panel, w) for w in (panel.threads, panel.gpu_layers, panel.flash_attention, panel.kv_type,
                                         panel.depths))
    assert not any(shown(panel, w) for w in (panel.dtype, panel.device, panel.random_weights, panel.bench_path))
    assert panel.kv_type.currentText() == state.workload.kv_type
    quick(panel)
    panel.flash_attention.setCurrentText("off")
    assert panel.estimate.text().startswith("Needs about") and "GGUF" not in panel.estimate.text()
    before = (state.model, state.model.name, state.model.weights_format, state.workload, state.model_ref)
    calls = spy(monkeypatch, "after_engine_run")
    live: list[tuple[MeasuredPoint, bool]] = []
    ctl.sample_measured.connect(lambda p: live.append((p, ctl.jobs.busy)))
    with qtbot.waitSignal(ctl.jobs.returned, timeout=60_000) as returned:
        panel.model_button.click()
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=10_000)
    run = returned.args[0]
    assert run.engine == "llamacpp" and panel.error.isHidden()
    assert panel.step.text().startswith(f"Measured 6 points with {run.settings.legend};")
    # every point arrived live, while the job ran, then came back in the run
    assert [p for p, _ in live] == list(run.points) and all(busy for _, busy in live)
    assert [p.kind for p in run.points] == ["prefill"] * 2 + ["decode"] * 2 + ["batch"] * 2
    # controls -> plan: what llama.cpp ran with
    settings = run.settings
    assert (settings.engine, settings.threads, settings.flash_attention, settings.kv_type) == (
        "llama.cpp", 1, False, panel.kv_type.currentText())
    assert sorted(p.prompt for p in run.points if p.kind == "prefill") == [8, 32]
    # the workflow 'rooflab measure model' runs, once, for the user's own file
    ((args, kwargs, _done),) = calls
    assert args[0] is run and args[1].key == state.machine.key == "measured"   # this machine, not the preset
    assert kwargs == {"source": str(tiny_gguf), "include_disturbed": False}
    assert run.spec is before[0]
    # the file stays the user's: same model, weight format, cache type and reference
    assert (state.model, state.model.name, state.model.weights_format, state.workload, state.model_ref) == before
    assert state.model.weights_format.upper() == "Q8_0"
    # the points land on its curves, named by the engine in the legend and the hover
    window.flush_plots()
    (series,) = ctl.series
    assert series.points == run.points and series.label == "llama.cpp, 1 thread, kv f16"
    layer = measured_layer(series.key)
    prefill = window.plots["prefill"]
    ttft = prefill.curve("ttft", "measured_ttft", layer=layer)
    assert list(ttft.x) == [8.0, 32.0] and set(ttft.extras) == {"measured / predicted", "spread %", "disturbed"}
    legends = legend_texts(prefill)
    assert "llama.cpp, 1 thread, kv f16" in legends and "llama.cpp fit: TTFT" in legends
    assert not any("…" in text for text in legends)
    hover = prefill.readout_at("ttft", 8.0, float(ttft.y[0]))
    assert hover.startswith("llama.cpp, 1 thread, kv f16 — TTFT") and "measured / predicted" in hover
    assert "spread %" in hover
    assert "Calibration</b> of llama.cpp" in panel.results.text() and panel.apply_button.isEnabled()
    # the measurement is kept under the GGUF's own key, and reopening the file brings it back
    key, machine = store.model_key(state.model), store.machine_key(state.machine)
    assert [r["points"] for r in store.load_measurements(key, machine)] == [list(run.points)]
    fitted = ctl.calibration
    state.set_model(catalogue_model(), DEFAULT_MODEL)
    assert ctl.series == [] and ctl.calibration is None
    open_in(qtbot, window, str(tiny_gguf))
    assert [s.points for s in ctl.series] == [run.points]
    assert ctl.calibration is not None and ctl.calibration.efficiency == fitted.efficiency
    window.flush_plots()
    assert window.plots["prefill"].curve("ttft", "measured_ttft", layer=layer).x.size == 2


def test_cancel_mid_run_leaves_no_point_behind(qtbot, gguf_window, monkeypatch):
    window, panel, ctl = gguf_window, gguf_window.measure_panel, gguf_window.measure
    # the prompt's point arrives at once; then 20 runs up 40 depths to 20,480 tokens: a minute or
    # more were it not cancelled (the repeats go round the whole sweep, so no depth's point is in)
    quick(panel, prompts="16", depths=", ".join(str(512 * i) for i in range(1, 41)))
    panel.repeats.setValue(20)
    calls = spy(monkeypatch, "after_engine_run")
    with qtbot.waitSignal(ctl.sample_measured, timeout=60_000):
        panel.model_button.click()
    assert len(ctl.series) == 1                         # the first point is drawn live
    measuring = children()
    assert len(measuring) == os.path.isdir("/proc/self")   # llama.cpp measures in a child process
    started = time.monotonic()
    with qtbot.waitSignal(ctl.jobs.aborted, timeout=15_000), qtbot.waitSignal(ctl.jobs.finished, timeout=15_000):
        panel.cancel_button.click()
    assert time.monotonic() - started < 10
    assert children() == set()                          # which Cancel ended (and reaped)
    assert calls == [] and ctl.series == [] and ctl.points == [] and ctl.calibration is None
    state = window.state
    assert store.load_measurements(store.model_key(state.model), store.machine_key(state.machine)) == []
    window.flush_plots()
    assert not any(s.layer.kind == "measured" for s in window.plots["prefill"].drawn())
    assert panel.step.text() == "Cancelled" and panel.error.isHidden() and not panel.apply_button.isEnabled()
    assert panel.model_button.isEnabled() and panel.engine.isEnabled() and not panel.cancel_button.isEnabled()


def test_llama_cpp_killed_mid_run_leaves_the_window_its_pins_and_recent_files(qtbot, gguf_window, tiny_gguf,
                                                                             monkeypatch):
    """llama.cpp runs in a child process: the child really killing itself with SIGSEGV after its
    second point (``ROOFLAB_CHILD_CRASH``, read by the child) is one line naming the signal; the
    window, its pins and its recent files stay, and the two points stay drawn and kept, unfitted."""
    from rooflab.core.measure.engines.child_job import CRASH_ENV

    window, panel, ctl, state = gguf_window, gguf_window.measure_panel, gguf_window.measure, gguf_window.state
    quick(panel)
    pinned = state.pin_current()
    assert pinned is not None and str(tiny_gguf) in window.settings.recent
    recent = list(window.settings.recent)
    monkeypatch.setenv(CRASH_ENV, "SIGSEGV:2")
    calls = spy(monkeypatch, "after_engine_run")
    errors: list[tuple[str, str]] = []
    ctl.message.connect(lambda text, level: errors.append((text, level)))
    with qtbot.waitSignal(ctl.jobs.errored, timeout=60_000) as errored, \
            qtbot.waitSignal(ctl.jobs.finished, timeout=60_000):
        panel.model_button.click()
    exc = errored.args[0]
    line = "llama.cpp was killed by SIGSEGV after 2 of 6 points; the 2 are kept"
    assert str(exc) == line and exc.signal_name == "SIGSEGV"
    # the window is still there, with the user's pins and recent files
    assert window.isVisible() and state.pinned == (pinned,) and window.settings.recent == recent
    assert not panel.error.isHidden() and panel.error.text() == line
    assert [e for e in errors if e[1] != "info"] == [(f"Measurement: {line}", "error")]
    assert panel.model_button.isEnabled() and not panel.cancel_button.isEnabled()
    # the two points measured before stay on screen and in the store (beside this machine as
    # measured, where a finished run goes too), not fitted
    assert state.machine.key == "measured" and calls == [] and ctl.calibration is None
    (series,) = ctl.series
    assert series.points == exc.run.points and [p.kind for p in series.points] == ["prefill", "prefill"]
    kept = store.load_measurements(store.model_key(state.model), store.machine_key(state.machine))
    assert [r["points"] for r in kept] == [list(exc.run.points)]
    window.flush_plots()
    assert window.plots["prefill"].curve("ttft", "measured_ttft", layer=measured_layer(series.key)).x.size == 2
    # and the next run, the engine alive again, is measured and fitted as usual
    monkeypatch.delenv(CRASH_ENV)
    with qtbot.waitSignal(ctl.jobs.returned, timeout=60_000):
        panel.model_button.click()
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=10_000)
    assert len(calls) == 1 and ctl.calibration is not None and panel.error.isHidden()


def test_a_config_model_runs_as_a_random_weight_gguf(qtbot, window, tiny_config, monkeypatch):
    from rooflab.core.io import load_model

    state, panel, ctl = window.state, window.measure_panel, window.measure
    save_this_machine()
    on_measure_tab(qtbot, window)
    state.set_model(load_model(tiny_config, weights="q8_0"), str(tiny_config), "q8_0")
    assert panel.engine_key() == "torch"                # a Hugging Face config: torch by default
    assert shown(panel, panel.dtype) and not shown(panel, panel.kv_type)
    panel.set_engine("llamacpp")
    quick(panel, depths="0", batches="1")
    assert "Writes a random-weight GGUF" in panel.estimate.text()
    steps: list[str] = []
    ctl.jobs.yielded.connect(lambda p: steps.append(p.message))
    with qtbot.waitSignal(ctl.jobs.returned, timeout=60_000) as returned:
        panel.model_button.click()
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=10_000)
    window.measure.shutdown()
    assert any(m.startswith("writing a random-weight GGUF") for m in steps)
    run = returned.args[0]
    assert run.spec is state.model and state.model_ref == str(tiny_config)
    assert any("random-weight GGUF" in n for n in run.notes) and "random-weight GGUF" in panel.results.text()
    assert ctl.series[0].points == run.points


# --- the user's llama-bench -------------------------------------------------------------------------

def test_no_llama_bench_is_one_clear_line(qtbot, gguf_window, tmp_path, monkeypatch):
    panel, ctl = gguf_window.measure_panel, gguf_window.measure
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    panel.set_engine("llama-bench")
    assert shown(panel, panel.bench_path) and shown(panel, panel.bench_status) and not shown(panel, panel.estimate)
    assert panel.bench_status.text() == ("llama-bench is not on PATH: build llama.cpp and give the path of its "
                                         "llama-bench")
    quick(panel)
    panel.model_button.click()
    assert not ctl.jobs.busy and panel.error.text() == panel.bench_status.text()
    assert "\n" not in panel.error.text() and "Traceback" not in panel.error.text()
    panel.bench_path.setText(str(tmp_path / "nowhere" / "llama-bench"))
    panel.bench_path.editingFinished.emit()
    assert "no such file" in panel.bench_status.text()
    assert gguf_window.settings.llama_bench == str(tmp_path / "nowhere" / "llama-bench")     # remembered


# a llama-bench -o jsonl row as build 5163 prints it (tools/llama-bench/README.md), on a CPU build
_ROW = {"build_commit": "8cf427ff", "build_number": 5163, "cpu_info": "AMD Ryzen 7 7800X3D 8-Core Processor",
        "gpu_info": "", "backends": "CPU", "model_filename": "tiny-q8_0.gguf", "model_type": "qwen3 ?B Q8_0",
        "model_size": 3516608, "model_n_params": 3300000, "n_batch": 2048, "n_ubatch": 512, "n_threads": 1,
        "cpu_mask": "0x0", "cpu_strict": False, "poll": 50, "type_k": "q8_0", "type_v": "q8_0", "n_gpu_layers": 0,
        "split_mode": "layer", "main_gpu": 0, "no_kv_offload": False, "flash_attn": True, "tensor_split": "0.00",
        "use_mmap": True, "embeddings": False, "test_time": "2025-04-24T11:58:50Z"}
_HELP = """usage: llama-bench [options]
  -o, --output <csv|json|jsonl|md|sql>      output format printed to stdout (default: md)
  -d, --n-depth <n>                         (default: 0)"""
_FAKE = '''#!{python}
import json, sys, time
if "--help" in sys.argv:
    print({help!r})
    sys.exit(0)
open({argv!r}, "w").write(json.dumps(sys.argv[1:]))
print("load_backend: loaded CPU backend", file=sys.stderr, flush=True)
for delay, row in {rows!r}:
    time.sleep(delay)
    print(row, flush=True)
'''


def _row(n_prompt: int, n_gen: int, depth: int, seconds: float) -> str:
    tokens = n_prompt or n_gen
    samples = [seconds * f for f in (1.0, 1.04, 1.02)]
    return json.dumps({**_ROW, "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": depth,
                       "avg_ns": int(1e9 * sum(samples) / 3), "stddev_ns": int(1e9 * 0.02 * seconds),
                       "avg_ts": 3 * tokens / sum(samples), "stddev_ts": 0.02 * tokens / seconds,
                       "samples_ns": [int(1e9 * s) for s in samples], "samples_ts": [tokens / s for s in samples]})


def fake_llama_bench(folder: Path, delay: float = 0.3) -> Path:
    """An executable that answers --help like llama-bench, then prints JSONL rows (prompts 8
    and 32, 32 generated tokens, at depths 0 and 32), ``delay`` seconds apart."""
    rows = [(delay, _row(p, 0, d, 2e-4 * p)) for d in (0, 32) for p in (8, 32)]
    rows += [(delay, _row(0, 32, d, 32 * 1e-3)) for d in (0, 32)]
    path = folder / "llama-bench"
    path.write_text(_FAKE.format(python=sys.executable, help=_HELP, argv=str(folder / "argv.json"), rows=rows),
                    encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.mark.skipif(os.name != "posix", reason="the fake llama-bench is a #! script")
def test_llama_bench_rows_stream_into_the_window(qtbot, gguf_window, tmp_path, monkeypatch):
    window, state = gguf_window, gguf_window.state
    panel, ctl = window.measure_panel, window.measure
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    fake = fake_llama_bench(tmp_path)
    panel.set_engine("llama-bench")
    panel.bench_path.setText(str(tmp_path))            # the folder holding it, as build/bin
    panel.bench_path.editingFinished.emit()
    assert panel.bench_status.text() == f"Runs {fake}" and window.settings.llama_bench == str(tmp_path)
    quick(panel)
    panel.kv_type.setCurrentText("q8_0")
    panel.flash_attention.setCurrentText("on")
    messages: list[tuple[str, str]] = []
    ctl.message.connect(lambda text, level: messages.append((text, level)))
    live: list[tuple[MeasuredPoint, bool]] = []
    ctl.sample_measured.connect(lambda p: live.append((p, ctl.jobs.busy)))
    panel.include_disturbed.setChecked(True)           # control -> workflow: fit every point
    calls = spy(monkeypatch, "after_engine_run")
    before = (state.model, state.workload)
    with qtbot.waitSignal(ctl.jobs.returned, timeout=30_000) as returned:
        panel.model_button.click()
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=10_000)
    run = returned.args[0]
    ((_args, kwargs, _done),) = calls
    assert kwargs["include_disturbed"] is True
    # no llama-batched-bench beside it: the batches are left out, and the window says so
    assert any("llama-batched-bench" in text and level == "warning" for text, level in messages)
    # controls -> command line
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[argv.index("-p") + 1] == "8,32" and argv[argv.index("-d") + 1] == "0,32"
    assert argv[argv.index("-t") + 1] == "1" and argv[argv.index("-ctk") + 1] == "q8_0"
    assert argv[argv.index("-fa") + 1] == "1" and argv[argv.index("-m") + 1] == state.model_ref
    # rows arrived one by one while the tool ran, and are the run's points
    assert len(live) == 6 and all(busy for _, busy in live) and [p for p, _ in live] == list(run.points)
    assert run.engine == "llama-bench" and (state.model, state.workload) == before
    (series,) = ctl.series
    assert series.label == "llama-bench, 1 thread, FA, kv q8_0" and series.points == run.points
    assert series.settings.version == "b5163 (8cf427ff)"           # what the rows record
    window.flush_plots()
    assert "llama-bench, 1 thread, FA, kv q8_0" in legend_texts(window.plots["decode"])
    step = window.plots["decode"].curve("step", "measured_step", layer=measured_layer(series.key))
    assert list(step.x) == [15.0, 47.0]                  # generation of 32 tokens from depths 0 and 32


# --- controls, both directions ----------------------------------------------------------------------

def test_engine_controls_and_plans(qtbot, window, tiny_config):
    from rooflab.core.io import load_model

    state, panel = window.state, window.measure_panel
    assert panel.engine_key() == "llamacpp"             # the catalogue model on screen: llama.cpp
    # workload -> control: the cache type to measure with is the workload's
    state.update_workload(kv_type="q8_0")
    assert panel.kv_type.currentText() == "q8_0"
    panel.threads.setValue(3)
    panel.gpu_layers.setValue(0)
    panel.flash_attention.setCurrentText("on")
    panel.prompts.setText("4, 16")
    panel.depths.setText("0, 64")
    plan = panel.llamacpp_plan()
    assert (plan.threads, plan.flash_attention, plan.cache_type_k, plan.cache_type_v) == (3, True, "q8_0", "q8_0")
    assert (plan.prompts, plan.depths) == ((4, 16), (0, 64))
    panel.flash_attention.setCurrentText("off")
    with pytest.raises(Exception, match="flash attention"):
        panel.llamacpp_plan()                           # llama.cpp needs it for a quantised V cache
    panel.flash_attention.setCurrentText("on")
    bench, batched = panel.llamabench_plans("model.gguf")
    assert (bench.prompts, bench.depths, bench.options.threads, bench.options.cache_type_k) == (
        (4, 16), (0, 64), 3, "q8_0")
    assert batched.batches == tuple(int(b) for b in panel.batches.text().split(","))
    panel.flash_attention.setCurrentText("auto")        # the tools take -fa 1/0: auto is on for a q8_0 cache
    assert panel.llamabench_plans("model.gguf")[0].options.flash_attention is True
    # each engine keeps its own sweep; model -> control: a config.json is timed in torch
    state.set_model(load_model(tiny_config, weights="fp32"), str(tiny_config))
    assert panel.engine_key() == "torch" and panel.prompts.text() == SWEEPS["torch"]["prompts"]     # the quick sweep
    assert shown(panel, panel.dtype) and not shown(panel, panel.depths)
    assert panel.use_decode.text() == "Decode after each prompt (TPOT)"
    panel.set_engine("llamacpp")
    assert panel.prompts.text() == "4, 16" and panel.use_decode.text() == "Generation at each depth (TPOT)"
    # a choice the user made stays while another model is opened
    state.set_model(catalogue_model(), DEFAULT_MODEL)
    assert panel.engine_key() == "llamacpp"
    panel.set_engine("torch")
    state.set_model(load_model(tiny_config, weights="fp32"), str(tiny_config))
    assert panel.engine_key() == "torch"


def test_the_llama_bench_path_comes_from_the_settings(qtbot, state, tmp_path, monkeypatch):
    from rooflab.gui.shell.main_window import MainWindow
    from rooflab.gui.state.settings import Settings

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    fake = fake_llama_bench(tmp_path)
    win = MainWindow(state, Settings(llama_bench=str(fake)), persist=False)
    qtbot.addWidget(win)
    on_measure_tab(qtbot, win)
    panel = win.measure_panel
    assert panel.bench_path.text() == str(fake)         # settings -> control
    panel.set_engine("llama-bench")
    assert panel.bench_status.text() == f"Runs {fake}"
    # Browse: the file picked is shown, checked and remembered
    other = tmp_path / "build" / "bin"
    other.mkdir(parents=True)
    picked = fake_llama_bench(other)
    monkeypatch.setattr(panel, "ask_bench_binary", lambda: str(picked))
    panel.bench_browse.click()
    assert panel.bench_path.text() == str(picked) and win.settings.llama_bench == str(picked)
    assert panel.bench_status.text() == f"Runs {picked}"
    monkeypatch.setattr(panel, "ask_bench_binary", lambda: "")       # cancelled: nothing changes
    panel.bench_browse.click()
    assert win.settings.llama_bench == str(picked)


def test_grab_smoke_with_the_engine_controls(qtbot, window):
    panel = window.measure_panel
    panel.show()
    for engine in ("llamacpp", "llama-bench", "torch"):
        panel.set_engine(engine)
        assert not panel.grab().isNull()


def test_the_estimate_waits_for_the_measure_tab(qtbot, state, monkeypatch):
    """Sizing the random-weight GGUF of a catalogue model reads its whole vocabulary (a quarter
    of a second for Qwen3's 151,936 tokens): a window start does not pay it, the tab does."""
    from rooflab.gui.controllers import measure_jobs
    from rooflab.gui.shell.main_window import MainWindow
    from rooflab.gui.state.settings import Settings

    sized: list[object] = []
    real = measure_jobs.synthetic_size
    monkeypatch.setattr(measure_jobs, "synthetic_size", lambda spec: sized.append(spec) or real(spec))
    win = MainWindow(state, Settings(), persist=False)
    qtbot.addWidget(win)
    win.show()
    assert sized == [] and win.measure_panel.estimate.text() == ""
    on_measure_tab(qtbot, win)
    qtbot.waitUntil(lambda: win.measure_panel.estimate.text().startswith("Needs about"), timeout=WAIT_MS)
    # sized for the model on screen, once per model (a repeat would be a cache miss)
    assert sized and all(spec is state.model for spec in sized), sized
    assert len(sized) == 1, f"sized {len(sized)} times"


def test_one_repeat_is_kept_and_said_not_fitted(qtbot, gguf_window, monkeypatch):
    """Timed once, a point has no spread: the window keeps and draws the points, fits nothing and
    says why (it showed a fit on that noise), as ``rooflab measure model`` does."""
    needs.llama_cpp()
    window = gguf_window
    panel, ctl = window.measure_panel, window.measure
    quick(panel, depths="0", batches="1")
    panel.repeats.setValue(1)
    calls = spy(monkeypatch, "after_engine_run")
    with qtbot.waitSignal(ctl.jobs.returned, timeout=60_000) as returned:
        panel.model_button.click()
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=10_000)
    run = returned.args[0]
    assert calls == [] and panel.error.isHidden()
    assert "not fitted" in panel.step.text() and "Not fitted" in panel.results.text()
    assert ctl.series and ctl.series[0].points == run.points           # drawn all the same
