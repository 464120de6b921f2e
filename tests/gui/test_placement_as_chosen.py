"""The Placement group shows the placement as chosen (issue 20): with auto on, the greyed
controls hold what auto placed (not a value left from the model before); unticking auto starts
from it; -ngl takes "all" and any number at or above the layers (llama.cpp's 99); a CPU-only
machine has no GPU controls. Both directions: control -> state and state/frame -> control."""

from __future__ import annotations

from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.predict.placement import brief_flags
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import catalogue_spec, open_placed

GPT_OSS = "gpt-oss-120b-mxfp4"


def _settled(qtbot, window):
    qtbot.waitUntil(lambda: not window.recompute.pending and window.recompute.frame is not None
                    and window.recompute.frame.scenario.placement == window.state.placement, timeout=WAIT_MS)
    return window.recompute.frame


def test_auto_shows_what_auto_placed_and_unticking_starts_from_it(qtbot, window):
    panel = window.workload_panel.placement
    # a value by hand for the model before (the stale 19) ...
    window.state.set_placement(PlacementChoice(gpu_layers=19))
    _settled(qtbot, window)
    frame = open_placed(qtbot, window, GPT_OSS)                 # ... then auto on gpt-oss
    auto = frame.summary.placed.placement
    experts = auto.cpu_moe
    assert auto.gpu_layers == 37 and 0 < experts < 36                    # the issue's -ngl 37 --n-cpu-moe 23
    assert panel.gpu_auto.isChecked() and panel.cpu_moe_auto.isChecked()
    assert panel.gpu_layers.value() == 37 and panel.gpu_layers.text() == "all" and panel.cpu_moe.value() == experts
    assert not panel.gpu_layers.isEnabled() and not panel.cpu_moe.isEnabled()
    assert panel.placed.text().startswith(f"Auto placed {brief_flags(auto)}: weights ")
    # control -> state: unticking starts from auto's choice, which fits
    panel.gpu_auto.setChecked(False)
    assert window.state.placement == PlacementChoice(gpu_layers=37, cpu_moe=experts)
    assert not panel.cpu_moe_auto.isChecked() and panel.cpu_moe.isEnabled()
    frame = _settled(qtbot, window)
    assert frame.summary.placed.fits and frame.summary.runs
    # state -> control: a choice set elsewhere (a restored setting) shows as it is
    window.state.set_placement(PlacementChoice(gpu_layers=20, cpu_moe=5))
    assert not panel.gpu_auto.isChecked() and panel.gpu_layers.value() == 20 and panel.cpu_moe.value() == 5
    window.state.set_placement(AUTO)
    frame = _settled(qtbot, window)
    assert panel.gpu_auto.isChecked() and panel.gpu_layers.value() == 37 and panel.cpu_moe.value() == experts


def test_ngl_takes_all_and_any_number_at_or_above_the_layers(qtbot, window):
    open_placed(qtbot, window, GPT_OSS)
    panel = window.workload_panel.placement
    panel.gpu_auto.setChecked(False)
    for typed in ("99", "all", "37", "500"):
        panel.gpu_layers.lineEdit().setText(typed)
        panel.gpu_layers.interpretText()
        panel.gpu_layers.editingFinished.emit()
        assert window.state.placement.gpu_layers == 37, typed           # every layer (36 + the output)
        assert panel.gpu_layers.text() == "all", typed
    panel.gpu_layers.lineEdit().setText("20")
    panel.gpu_layers.interpretText()
    assert window.state.placement.gpu_layers == 20 and panel.gpu_layers.text() == "20"
    panel.gpu_layers.stepBy(17)
    assert window.state.placement.gpu_layers == 37 and panel.gpu_layers.text() == "all"


def test_a_cpu_only_machine_hides_the_gpu_controls(qtbot, window):
    panel = window.workload_panel.placement
    form = panel._form
    rows = (panel.gpu_auto.parentWidget(), panel.cpu_moe.parentWidget(), panel.kv_on_device)
    assert all(form.isRowVisible(row) for row in rows)
    window.state.set_machine(load_machine("desktop-ddr5"))
    assert window.state.machine.kind == "cpu"
    assert not any(form.isRowVisible(row) for row in rows)
    assert "is a CPU" in panel.note.text()
    window.state.set_machine(load_machine("rtx-4090"))
    assert all(form.isRowVisible(row) for row in rows)


def test_a_dense_model_has_no_experts_to_place(qtbot, window):
    panel = window.workload_panel.placement
    window.state.set_model(catalogue_spec(GPT_OSS), ref=GPT_OSS)
    window.state.set_placement(PlacementChoice(gpu_layers=30, cpu_moe=12))
    window.state.set_model(catalogue_spec("qwen3-8b-q4_k_m"), ref="qwen3-8b-q4_k_m")
    assert window.state.placement.cpu_moe is None and panel.cpu_moe.value() == 0
    assert not panel.cpu_moe.isEnabled() and not panel.cpu_moe_auto.isEnabled()


def test_several_devices_show_every_layer_not_a_number_left_from_one(qtbot, window):
    """Issue 39: -ngl 44 typed for one card, then 2 devices: the greyed box kept "44" while the
    devices held every layer."""
    open_placed(qtbot, window, "qwen3-32b-q4_k_m")
    panel = window.workload_panel.placement
    window.state.set_placement(PlacementChoice(gpu_layers=44))
    assert panel.gpu_layers.text() == "44" and panel.gpu_layers.isEnabled()
    panel.devices.setCurrentIndex(panel.devices.findData(2))
    assert window.state.placement.devices == 2
    assert not panel.gpu_layers.isEnabled() and panel.gpu_layers.text() == "all"
    _settled(qtbot, window)
    assert panel.gpu_layers.text() == "all"
    panel.devices.setCurrentIndex(panel.devices.findData(1))          # one device: its -ngl comes back
    assert window.state.placement == PlacementChoice(gpu_layers=44) and panel.gpu_layers.text() == "44"
