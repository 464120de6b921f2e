"""The window end to end: edits redraw every plot (control -> state -> curves handed to the
plot items) and state changes show in the controls; compare; hover read-out; measured layers."""

from __future__ import annotations

import numpy as np
import pytest

from rooflab.core.io.presets import load_machine
from rooflab.core.report.chart_types import Curve
from rooflab.core.report.charts import CHART_KEYS
from tests.factories.waits import WAIT_MS


def _plot_data(window, chart: str, panel: str, curve: str, layer: str = "current"):
    window.plot_tabs.setCurrentWidget(window.plots[chart])      # a hidden plot redraws when shown
    item = window.plots[chart].items(panel, curve, layer)[0]
    return np.asarray(item.xData), np.asarray(item.yData)      # the data handed over, before log scaling


def test_first_frame_draws_every_plot_with_units(window):
    frame = window.recompute.frame
    assert frame is not None
    window.flush_plots()
    for key in CHART_KEYS:
        plot = window.plots[key]
        assert plot.chart is frame.charts[key]
        assert plot.panel_keys() == [p.key for p in frame.charts[key].panels]
    left = window.plots["prefill"].panel_view("ttft").plot.getAxis("left")
    assert "Time to first token (s)" in left.labelString()
    assert window.numbers.value_text("ttft").endswith("ms")


def test_editing_prompt_spin_box_redraws_all_plots(qtbot, window):
    spin = window.workload_panel.fields["prompt"].spin
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as blocker:
        spin.setValue(8192)
    frame = blocker.args[0]
    assert window.state.workload.prompt == 8192
    # what the prefill plot's marker item was handed is the new prompt and the new TTFT
    x, y = _plot_data(window, "prefill", "ttft", "current")
    assert x.tolist() == [8192.0]
    assert y[0] == pytest.approx(frame.summary.estimate.ttft)
    # the plot on screen has the new frame's curves; the others get them when shown
    visible = window.plot_tabs.currentWidget()
    assert visible.chart is frame.charts[visible.chart_key]
    for key in CHART_KEYS:
        window.plot_tabs.setCurrentWidget(window.plots[key])
        assert window.plots[key].chart is frame.charts[key]
    decode_marker = window.plots["decode"].curve("rate", "current")
    assert decode_marker.x.tolist() == [8192.0 + window.state.workload.context]


def test_state_change_shows_in_controls(qtbot, window):
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(batch=16, kv_type="q8_0")
    assert window.workload_panel.fields["batch"].spin.value() == 16
    assert window.workload_panel.kv_type.currentText() == "q8_0"
    x, _ = _plot_data(window, "batching", "rate", "current")
    assert x.tolist() == [16.0]


def test_slider_moves_value_and_redraws(qtbot, window):
    field = window.workload_panel.fields["batch"]
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        field.slider.setValue(field.slider.maximum())
    assert window.state.workload.batch == field.spin.value() >= 1000


def test_machine_bandwidth_edit_redraws_with_new_roof(qtbot, window):
    panel = window.machine_panel
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        panel.bandwidth.setValue(500.0)
    machine = window.state.machine
    assert machine.bandwidth == pytest.approx(500e9)
    assert machine.key == ""                         # an edited preset is no longer the preset
    window.flush_plots()
    roof = window.plots["roofline"].curve("roofline", "roof")
    assert roof.y[0] == pytest.approx(roof.x[0] * 500e9)
    assert "edited" in panel.picker.currentText()


def test_invalid_workload_keeps_last_good_one(qtbot, window):
    before = window.state.workload
    window.workload_panel.kv_type.addItem("nonsense")
    window.workload_panel.kv_type.setCurrentText("nonsense")
    assert window.state.workload == before
    assert "kv_type" in window.workload_panel.error.text()


def test_workload_fields_take_the_whole_range_the_workload_accepts(qtbot, window):
    from PySide6.QtCore import Qt

    from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS

    fields = window.workload_panel.fields
    # typed digit by digit, as a person does: a narrower spin box turned 65536 into 655
    for key, typed in (("batch", str(MAX_BATCH)), ("context", "16000000")):
        spin = fields[key].spin
        spin.selectAll()
        qtbot.keyClicks(spin, typed)
        qtbot.keyClick(spin, Qt.Key.Key_Return)
    assert (window.state.workload.batch, window.state.workload.context) == (MAX_BATCH, 16_000_000)
    assert fields["prompt"].spin.maximum() == fields["answer"].spin.maximum() == MAX_TOKENS


def test_restored_extreme_workload_survives_an_edit_elsewhere(qtbot, state):
    from rooflab.gui.shell.main_window import MainWindow
    from rooflab.gui.state.settings import Settings

    state.update_workload(batch=65_536, context=16_000_000)
    win = MainWindow(state, Settings(), persist=False)
    qtbot.addWidget(win)
    try:
        with qtbot.waitSignal(win.redrawn, timeout=WAIT_MS):
            win.workload_panel.fields["answer"].spin.setValue(300)
        assert (state.workload.batch, state.workload.context, state.workload.answer) == (65_536, 16_000_000, 300)
        assert win.workload_panel.fields["batch"].value() == 65_536
    finally:
        win.close()          # uninstalls its drop filter from the application before it goes


def test_a_saved_offload_share_becomes_the_placement_it_means(qtbot, window):
    # one control for one idea (issue 20): the Workload tab has no share of its own; a share
    # saved before (or given as predict --offload) is the -ngl that keeps it in host memory
    from rooflab.core.predict.autofit import placement_for_offload

    assert "offload" not in window.workload_panel.fields
    state = window.state
    state.update_workload(offload_fraction=0.5)
    expected = placement_for_offload(state.model, state.machine, 0.5).gpu_layers
    assert state.workload.offload_fraction == 0 and state.placement.gpu_layers == expected
    panel = window.workload_panel.placement
    assert not panel.gpu_auto.isChecked() and panel.gpu_layers.value() == expected
    state.set_placement(state.placement.__class__())
    state.update_machine(offload_bandwidth=0.0, key="")         # no second memory: nothing to move to
    state.update_workload(offload_fraction=0.5)
    assert state.workload.offload_fraction == 0 and state.placement.is_auto


def test_compare_adds_a_series_to_every_plot(qtbot, window):
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.pin_action.trigger()
    pinned = window.state.pinned[0]
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_machine(load_machine("m4-max"))
    layer = f"pin:{pinned.pin_id}"
    window.flush_plots()
    for key in CHART_KEYS:
        layers = {s.layer.key for s in window.plots[key].drawn()}
        assert {"current", layer} <= layers, key
    current = window.plots["decode"].curve("rate", "ceiling")
    old = window.plots["decode"].curve("rate", "ceiling", layer)
    assert old.y[0] > current.y[0]                  # the 4090 reads faster than the M4 Max
    assert window.compare.list.count() == 2          # "current" + the pinned one
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.compare.clear_button.click()
    window.flush_plots()
    # the machine's expected curves (its back end's published efficiency) stay: they are not a pin
    assert {s.layer.key for s in window.plots["decode"].drawn()} - {"expected"} == {"current"}


def test_pinned_series_do_not_widen_the_window(qtbot, window):
    window.show()
    qtbot.waitExposed(window)
    narrowest = window.minimumSizeHint().width()
    for machine, batch in (("dgx-spark", 2), ("ryzen-ai-max-395", 3), ("a100-sxm-80gb", 4)):
        window.state.set_machine(load_machine(machine))
        with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
            window.state.update_workload(batch=batch)
        window.state.pin_current()
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(batch=5)
    assert "A100" in window.scenario_label.text()
    # the labels wrap: the window's minimum width (and so its width) does not grow past the screen
    assert window.minimumSizeHint().width() <= narrowest
    assert window.width() <= 1400


def test_legend_tells_apart_series_that_differ_only_at_the_end_of_their_label(qtbot, window):
    for batch in (7, 40):
        with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
            window.state.update_workload(batch=batch)
        window.state.pin_current()
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(batch=2)
    from tests.gui.test_gui_layout import _stacked_twin

    view = _stacked_twin(window.plots["decode"]).panel_view("rate")
    pinned = [label.text for _sample, label in view.legend.items
              if "batch" in label.text and not label.text.startswith("expected")]   # not "expected for batch 2"
    # both used to read "Qwen3-8B Q4_K_M · NVID…RTX 4090 · …"; a legend names model, machine and
    # placement (issue 20), then what differs, never cut
    # its parts, however the legend's width wraps them (a break between parts drops the " · ")
    parts = [[part for line in text.split("<br>") for part in line.split(" · ")] for text in pinned]
    assert [p[-1] for p in parts] == ["batch 7", "batch 40"], pinned
    assert all(p[:3] == ["Qwen3-8B Q4_K_M", "NVIDIA GeForce RTX 4090", "auto placement"] for p in parts), pinned
    assert not [t for t in pinned if "…" in t], pinned


def test_pinning_the_same_series_twice_adds_nothing(window):
    assert window.state.pin_current() is not None
    assert window.state.pin_current() is None
    assert len(window.state.pinned) == 1


def test_hover_readout_reports_value_under_cursor(window):
    plot = window.plots["prefill"]
    window.plot_tabs.setCurrentWidget(plot)
    marker = plot.curve("ttft", "current")
    text = plot.readout_at("ttft", float(marker.x[0]), float(marker.y[0]))
    assert "2,048 tokens" in text and "ms" in text
    assert plot.readout.text() == text
    assert plot.readout_at("ttft", 1e7, 1e-9) == ""


def test_hover_via_scene_mouse_move(qtbot, window):
    window.show()
    qtbot.waitExposed(window)
    window.plot_tabs.setCurrentWidget(window.plots["roofline"])
    plot = window.plots["roofline"]
    point = plot.curve("roofline", "decode")
    vb = plot.panel_view("roofline").plot.getViewBox()
    from PySide6.QtCore import QPointF

    scene_pos = vb.mapViewToScene(QPointF(np.log10(point.x[0]), np.log10(point.y[0])))
    with qtbot.waitSignal(plot.hovered, timeout=WAIT_MS) as blocker:
        plot.view.scene().sigMouseMoved.emit(scene_pos)
    assert "decode" in blocker.args[0]


def test_measured_and_calibrated_layers(qtbot, window):
    plot = window.plots["prefill"]
    window.plot_tabs.setCurrentWidget(plot)
    measured = Curve(key="ttft", label="llama-bench", x=[512, 2048], y=[0.05, 0.2], kind="points",
                     role="measured", x_name="prompt", x_unit="tokens", y_name="seconds", y_unit="s",
                     extras={"measured / predicted": [1.1, 1.2]})
    with qtbot.waitSignal(plot.redrawn, timeout=WAIT_MS):
        plot.set_measured("ttft", [measured])
    assert plot.curve("ttft", "ttft", "measured") is measured
    assert np.asarray(plot.items("ttft", "ttft", "measured")[0].xData).tolist() == [512, 2048]
    assert "measured / predicted 1.2" in plot.readout_at("ttft", 2048, 0.2)
    calibrated = Curve(key="ttft", label="calibrated", x=[1, 10], y=[0.01, 0.02], x_name="prompt",
                       x_unit="tokens", y_name="seconds", y_unit="s")
    plot.set_calibrated("ttft", [calibrated])
    kinds = {s.layer.kind for s in plot.drawn()}
    assert {"current", "measured", "calibrated"} <= kinds
    # a redraw of the predictions keeps the measured layer
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(prompt=1024)
    assert any(s.layer.key == "measured" for s in plot.drawn())
    plot.clear_layer("measured")
    assert not any(s.layer.key == "measured" for s in plot.drawn())


def test_two_measured_series_on_one_panel_get_different_symbols(qtbot, window):
    plot = window.plots["roofline"]
    window.plot_tabs.setCurrentWidget(plot)
    common = dict(kind="points", role="measured", x_name="intensity", x_unit="FLOP/byte",
                  y_name="FLOP/s", y_unit="FLOP/s")
    multiplies = Curve(key="matmul", label="multiplies", x=[1, 10], y=[1e10, 5e10], **common)
    passes = Curve(key="passes", label="forward passes", x=[2, 20], y=[2e10, 6e10], **common)
    with qtbot.waitSignal(plot.redrawn, timeout=WAIT_MS):
        plot.set_measured("roofline", [multiplies, passes])
    symbols = {plot.items("roofline", key, "measured")[0].opts["symbol"] for key in ("matmul", "passes")}
    assert len(symbols) == 2


def test_moe_model_gets_experts_panel(qtbot, window):
    from rooflab.core.io import load_model

    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_model(load_model("qwen3-30b-a3b-q4_k_m"))
    window.plot_tabs.setCurrentWidget(window.plots["batching"])
    assert window.plots["batching"].panel_keys() == ["rate", "memory", "experts"]
    touched = window.plots["batching"].curve("experts", "touched")
    assert touched.y[0] == pytest.approx(8) and touched.y[-1] <= 128


def test_theme_switch_recolours_plots(qtbot, window):
    window.set_theme("dark")
    assert window.plots["memory"].theme.dark
    window.set_theme("light")
    assert not window.plots["memory"].theme.dark


def test_theme_switch_recolours_the_legend_of_the_plot_on_screen(qtbot, window):
    from PySide6.QtGui import QColor

    window.show()
    plot = window.plot_tabs.currentWidget()              # drawn already, not redrawn on the switch
    window.set_theme("light")
    window.set_theme("dark")
    labels = [label for view in plot._panels.values() for _sample, label in view.legend.items]
    foreground = QColor(window.theme.foreground).name()[1:]        # rrggbb
    assert labels and all(foreground in label.item.toHtml().lower() for label in labels)


def test_theme_switch_recolours_the_scenario_line(qtbot, window):
    window.set_theme("light")
    window.set_theme("dark")
    assert window.theme.current["main"] in window.scenario_label.text()


def test_machine_change_shows_in_machine_fields(qtbot, window):
    machine = load_machine("m4-max")
    window.state.set_machine(machine)
    panel = window.machine_panel
    assert panel.bandwidth.value() == pytest.approx(machine.bandwidth / 1e9)
    assert panel.memory.value() == pytest.approx(machine.memory / 1e9, abs=0.01)
    assert panel.picker.currentData() == "preset:m4-max"
    assert "FLOP/byte" in panel.balance.text()


def test_failed_prediction_warns_and_keeps_the_last_frame(qtbot, window, monkeypatch):
    from rooflab.core.errors import SpecError
    from rooflab.gui.state import recompute
    window.recompute.add_band()          # the expected curves' band, drawn once edits pause, is in
    before = window.recompute.frame

    def broken(sc, *_, **__):
        raise SpecError("workload.batch too large for this test")

    monkeypatch.setattr(recompute, "figures", broken)
    with qtbot.waitSignal(window.recompute.failed, timeout=WAIT_MS):
        window.state.update_workload(batch=2)
    assert window.recompute.frame is before
    assert "too large" in window.messages.text() and window.messages.level == "warning"
    monkeypatch.undo()
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(batch=3)
    assert window.messages.text() == ""


def test_hover_over_a_memory_bar_names_the_segment(window):
    plot = window.plots["memory"]
    window.plot_tabs.setCurrentWidget(plot)
    bar = plot.curve("breakdown", "breakdown")
    text = plot.readout_at("breakdown", 0.0, float(bar.y[0]) / 2)
    assert "weights" in text and "GB" in text
