"""The Workload tab's Placement group: llama.cpp's -ngl / --n-cpu-moe / --no-kv-offload and N
devices set by hand in the window give the headline ``rooflab predict`` gives with the same
flags; "auto" gives auto-fit back; the controls apply only where they mean something; the
choice survives a restart and a bad stored one is ignored."""

from __future__ import annotations

import json

import pytest

from rooflab.core.cli.main import main
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.predict.placement import Placement
from rooflab.core.report.units import fmt
from rooflab.gui.shell.app import initial_state
from rooflab.gui.state.settings import Settings
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import catalogue_spec, open_placed

GPT_OSS, QWEN_32B = "gpt-oss-120b-mxfp4", "qwen3-32b-q4_k_m"


def _predicted(capsys, model: str, *flags: str) -> dict:
    """``rooflab predict --json`` on an RTX 4090 with ``flags`` (the window's default workload)."""
    assert main(["predict", "--model", model, "--machine", "rtx-4090", *flags, "--json",
                 "--contexts", "0", "--batches", "1", "--prompts", "1"]) == 0
    return json.loads(capsys.readouterr().out)


def _frame_after_edit(qtbot, window):
    """The frame the debounced recompute draws for the state as it is now."""
    assert window.recompute.pending              # the edit went through the same debounce as the rest
    qtbot.waitUntil(lambda: not window.recompute.pending
                    and window.recompute.frame.scenario.placement == window.state.placement, timeout=WAIT_MS)
    return window.recompute.frame


def test_gpt_oss_placed_by_hand_gives_what_predict_gives(qtbot, window, capsys):
    open_placed(qtbot, window, GPT_OSS)
    panel = window.workload_panel.placement
    assert not panel.cpu_moe.isEnabled() and not panel.gpu_layers.isEnabled()  # auto: the spins wait
    assert panel.gpu_layers.all_layers == 37                                    # layers + 1
    panel.gpu_auto.setChecked(False)
    assert panel.gpu_layers.isEnabled() and panel.cpu_moe.isEnabled() and not panel.cpu_moe_auto.isChecked()
    panel.gpu_layers.setValue(37)
    panel.cpu_moe.setValue(30)
    assert window.state.placement == PlacementChoice(gpu_layers=37, cpu_moe=30)
    frame = _frame_after_edit(qtbot, window)
    placed = frame.summary.placed
    assert placed is not None and placed.how == "manual"
    assert placed.placement == Placement(gpu_layers=37, cpu_moe=30, kv_on_device=True)
    request = _predicted(capsys, GPT_OSS, "--gpu-layers", "37", "--cpu-moe", "30")["request"]
    assert frame.summary.estimate.tpot == request["tpot_seconds"]
    assert frame.summary.estimate.ttft == request["ttft_seconds"]
    assert window.numbers.value_text("placement") == "-ngl 37 --n-cpu-moe 30"
    (line,) = [x for x in window.numbers.lines if x.key == "placement"]
    assert "as set in the Workload tab" in line.tooltip and "fit does" not in line.tooltip
    assert [x for x in window.numbers.lines if x.key == "tpot"][0].sentence.startswith(
        "Decode is bandwidth-bound. Placed by hand, each part at its own memory")
    assert window.numbers.value_text("expected_tpot") == fmt(request["expected_tpot_seconds"], "s")
    # the placement is where the weights sit: no share of its own beside it
    assert "offload" not in window.workload_panel.fields
    assert panel.placed.text().startswith("Placed -ngl 37 --n-cpu-moe 30: weights ")

    # the KV cache on the host: --no-kv-offload
    panel.kv_on_device.setChecked(False)
    frame = _frame_after_edit(qtbot, window)
    assert frame.summary.placed.placement == Placement(gpu_layers=37, cpu_moe=30, kv_on_device=False)
    request = _predicted(capsys, GPT_OSS, "--gpu-layers", "37", "--cpu-moe", "30", "--no-kv-offload")["request"]
    assert frame.summary.estimate.tpot == request["tpot_seconds"]
    panel.kv_on_device.setChecked(True)

    # "auto" GPU layers with experts still on the CPU is --cpu-moe alone: the experts stay as set and
    # rooflab fits -ngl around them, as predict does (with 30 on the CPU every layer fits)
    panel.gpu_auto.setChecked(True)
    assert not panel.gpu_layers.isEnabled()
    frame = _frame_after_edit(qtbot, window)
    assert frame.summary.placed.how == "auto"
    assert frame.summary.placed.placement == Placement(gpu_layers=37, cpu_moe=30)
    assert frame.summary.estimate.tpot == _predicted(capsys, GPT_OSS, "--cpu-moe", "30")["request"]["tpot_seconds"]
    # with 10 the layers' experts no longer fit beside them: fewer GPU layers, not "does NOT fit"
    panel.cpu_moe.setValue(10)
    frame = _frame_after_edit(qtbot, window)
    moe = _predicted(capsys, GPT_OSS, "--cpu-moe", "10")
    assert frame.summary.placed.fits and frame.summary.placed.how == "auto"
    assert frame.summary.placed.placement.flags() == moe["placement"]["flags"] == "-ngl 14 --n-cpu-moe 10"
    assert frame.summary.estimate.tpot == moe["request"]["tpot_seconds"]

    # 0 experts on the CPU by hand means none (it once meant "auto" as well)
    panel.cpu_moe.setValue(0)
    assert window.state.placement == PlacementChoice(cpu_moe=0)
    # the KV cache on the host and nothing else set: fitted around it, as predict --no-kv-offload
    panel.cpu_moe_auto.setChecked(True)
    assert not panel.cpu_moe.isEnabled()
    panel.kv_on_device.setChecked(False)
    assert window.state.placement == PlacementChoice(kv_on_device=False)
    frame = _frame_after_edit(qtbot, window)
    nkvo = _predicted(capsys, GPT_OSS, "--no-kv-offload")
    assert frame.summary.placed.fits and frame.summary.placed.how == "auto"
    assert frame.summary.placed.placement.flags() == nkvo["placement"]["flags"] == \
        "-ngl 37 --n-cpu-moe 22 -ot 'blk.22.ffn_(gate|up|down)=CPU' --no-kv-offload"
    assert frame.summary.estimate.tpot == nkvo["request"]["tpot_seconds"]

    # and with nothing set, auto-fit chooses again, as predict does without flags
    panel.kv_on_device.setChecked(True)
    assert window.state.placement == AUTO
    frame = _frame_after_edit(qtbot, window)
    auto = _predicted(capsys, GPT_OSS)
    assert frame.summary.placed.how == "auto"
    assert frame.summary.placed.placement.flags() == auto["placement"]["flags"] == \
        "-ngl 37 --n-cpu-moe 23 -ot blk.23.ffn_down=CPU"
    assert frame.summary.estimate.tpot == auto["request"]["tpot_seconds"]


def test_two_4090s_in_tensor_parallel_give_what_predict_gives(qtbot, window, capsys):
    open_placed(qtbot, window, QWEN_32B)
    panel = window.workload_panel.placement
    assert panel.devices.isEnabled() and not panel.parallel.isEnabled()
    assert not panel.cpu_moe.isEnabled()                                   # a dense model: no experts
    panel.parallel.setCurrentIndex(panel.parallel.findData("tensor"))      # waits, disabled, for the devices
    panel.devices.setCurrentIndex(panel.devices.findData(2))
    assert window.state.placement == PlacementChoice(devices=2, parallel="tensor")
    assert panel.parallel.isEnabled()
    for w in (panel.gpu_auto, panel.gpu_layers, panel.cpu_moe, panel.kv_on_device):
        assert not w.isEnabled()                                           # every layer is on the devices
    assert "every chart are theirs" in panel.note.text() and panel.interconnect.isEnabled()
    # the expected engine is vLLM's now: said where the mode is chosen (it changed without a word)
    assert "vLLM calibration" in panel.note.text()
    assert panel.gpu_layers.text() == "all"                  # every layer, not a value left from one device
    frame = _frame_after_edit(qtbot, window)
    placed = frame.summary.placed
    assert placed is not None and placed.parallel is not None and placed.runs_on is None
    assert (placed.parallel.devices, placed.parallel.parallel.mode) == (2, "tensor")
    predicted = _predicted(capsys, QWEN_32B, "--devices", "2", "--parallel", "tensor")
    assert frame.summary.estimate.tpot == predicted["request"]["tpot_seconds"]
    assert frame.summary.estimate.ttft == predicted["request"]["ttft_seconds"]
    assert predicted["parallel"]["mode"] == "tensor" and predicted["parallel"]["devices"] == 2
    # the numbers panel says two devices and each one's memory; tensor parallel is vLLM's, and with
    # no vLLM calibration of this machine there is no expected figure (the ceiling is not one),
    # in the window as in predict
    assert window.numbers.value_text("placement") == "2 × tensor parallel"
    assert window.numbers.value_text("memory").endswith("per device")
    (memory,) = [line for line in window.numbers.lines if line.key == "memory"]
    assert "Each of the 2 devices holds" in memory.sentence and "it fits." in memory.sentence
    request = predicted["request"]
    assert "expected_tpot_seconds" not in request and predicted.get("expected") is None
    assert "expected_tpot" not in {line.key for line in window.numbers.lines}
    # another link from the presets' (NVLink 4, 450 GB/s a direction): predict --interconnect 450
    panel.interconnect.setCurrentIndex(panel.interconnect.findData(450e9))
    assert window.state.placement == PlacementChoice(devices=2, parallel="tensor", link_bandwidth=450e9)
    frame = _frame_after_edit(qtbot, window)
    linked = _predicted(capsys, QWEN_32B, "--devices", "2", "--parallel", "tensor", "--interconnect", "450")
    assert frame.summary.estimate.tpot == linked["request"]["tpot_seconds"] < request["tpot_seconds"]
    panel.interconnect.setCurrentIndex(0)                                  # as the machine states it
    assert window.state.placement.link_bandwidth is None

    # layer split, then back to one device: the card holds the model, auto-fit's all on the card
    panel.parallel.setCurrentIndex(panel.parallel.findData("layer"))
    frame = _frame_after_edit(qtbot, window)
    layer = _predicted(capsys, QWEN_32B, "--devices", "2", "--parallel", "layer")["request"]
    assert frame.summary.estimate.tpot == layer["tpot_seconds"]
    panel.devices.setCurrentIndex(panel.devices.findData(1))
    assert window.state.placement == PlacementChoice(parallel="layer") and window.state.placement.is_auto
    assert not panel.parallel.isEnabled() and panel.gpu_auto.isEnabled()
    frame = _frame_after_edit(qtbot, window)
    assert frame.summary.placed.placement == Placement.all_on_device(frame.scenario.model)


def test_typing_99_experts_on_the_cpu_means_all_as_in_llama_cpp(qtbot, window, capsys):
    # the box's range stopped at the model's 36 layers: a typed 99 became 9, without a word
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    open_placed(qtbot, window, GPT_OSS)
    panel = window.workload_panel.placement
    panel.gpu_auto.setChecked(False)
    panel.cpu_moe.lineEdit().selectAll()
    QTest.keyClicks(panel.cpu_moe, "99")
    QTest.keyClick(panel.cpu_moe, Qt.Key.Key_Return)
    frame = _frame_after_edit(qtbot, window)
    assert panel.cpu_moe.value() == 36                                         # 99 read as every layer, shown so
    flags = _predicted(capsys, GPT_OSS, "--gpu-layers", str(panel.gpu_layers.value()), "--cpu-moe", "99")
    assert frame.summary.placed.placement.flags() == flags["placement"]["flags"]
    assert "--n-cpu-moe 36" in flags["placement"]["flags"]                     # every layer's experts


def test_the_controls_show_the_state_and_apply_only_where_they_mean_something(qtbot, window):
    state, panel = window.state, window.workload_panel.placement
    # state -> controls
    state.set_placement(PlacementChoice(gpu_layers=20, kv_on_device=False))
    assert not panel.gpu_auto.isChecked() and panel.gpu_layers.value() == 20 and panel.gpu_layers.isEnabled()
    assert not panel.kv_on_device.isChecked() and panel.devices.currentData() == 1
    assert not panel.cpu_moe.isEnabled() and "no routed experts" in panel.note.text()     # qwen3-8b is dense
    state.set_placement(AUTO)
    assert panel.gpu_auto.isChecked() and not panel.gpu_layers.isEnabled() and panel.kv_on_device.isChecked()
    # a machine with no interconnect runs on one device: the choice drops to one, the control waits
    state.set_placement(PlacementChoice(devices=4, parallel="tensor"))
    assert panel.devices.currentData() == 4 and panel.parallel.currentData() == "tensor"
    state.set_machine(load_machine("desktop-ddr5"))
    assert state.placement.devices == 1 and panel.devices.currentData() == 1
    assert not panel.devices.isEnabled() and "no interconnect" in panel.note.text()
    # a model with fewer layers clamps -ngl as llama.cpp does; a dense one drops --n-cpu-moe
    state.set_machine(load_machine("rtx-4090"))
    state.set_model(catalogue_spec(GPT_OSS), ref=GPT_OSS)
    state.set_placement(PlacementChoice(gpu_layers=37, cpu_moe=30))
    state.set_model(catalogue_spec("qwen3-8b-q4_k_m"), ref="qwen3-8b-q4_k_m")
    layers = state.model.layers
    assert state.placement == PlacementChoice(gpu_layers=min(37, layers + 1))
    assert panel.gpu_layers.value() == state.placement.gpu_layers and panel.cpu_moe.value() == 0
    assert not panel.cpu_moe.isEnabled() and not panel.cpu_moe_auto.isEnabled()


def test_pinned_series_with_other_placements_stay_apart(qtbot, window):
    state = window.state
    state.pin_current()
    state.set_placement(PlacementChoice(gpu_layers=10))
    assert state.pin_current() is not None and len(state.pinned) == 2
    assert state.pinned[1].label.endswith("-ngl 10") and "ngl" not in state.pinned[0].label


def test_the_choice_survives_a_restart(window):
    window.state.set_model(catalogue_spec(GPT_OSS), ref=GPT_OSS)
    window.state.set_placement(PlacementChoice(gpu_layers=30, cpu_moe=12, kv_on_device=False))
    window.remember()
    window.settings.model = GPT_OSS                  # what opening it from the window keeps
    state, _ = initial_state(None, None, window.settings, [])
    assert state.placement == PlacementChoice(gpu_layers=30, cpu_moe=12, kv_on_device=False)
    window.state.set_placement(AUTO)
    window.remember()
    assert window.settings.placement == {}
    assert initial_state(None, None, window.settings, [])[0].placement == AUTO


@pytest.mark.parametrize("stored", [{"gpu_layers": "many"}, {"devices": 3.5}, {"devices": 0},
                                    {"parallel": "pipeline"}, {"bogus": 1}, {"cpu_moe": -1},
                                    {"devices": 2, "gpu_layers": 10, "parallel": "tensor"}, {"kv_on_device": "no"}])
def test_a_bad_stored_placement_is_ignored(stored):
    notices: list[str] = []
    state, _ = initial_state(None, None, Settings(placement=stored, workload={"prompt": 777}), notices)
    assert state.placement == AUTO and state.workload.prompt == 777 and notices == []
