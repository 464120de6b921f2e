"""Settings (corrupt file backed up, defaults used, notice shown), remembered state across a
restart, and user machine profiles saved atomically in the config folder."""

from __future__ import annotations

import json
import sys

import pytest

from rooflab.core.files.paths import profiles_dir
from rooflab.core.io.presets import list_user_profiles
from rooflab.gui.shell.app import initial_state
from rooflab.gui.state.settings import MAX_RECENT, Settings, load_settings, save_settings, settings_path


def test_missing_settings_give_defaults_without_notice():
    settings, notice = load_settings()
    assert settings == Settings() and notice is None


def test_round_trip_and_recent_list_is_bounded():
    settings = Settings(theme="dark")
    for i in range(MAX_RECENT + 3):
        settings.add_recent(f"/models/{i}.gguf")
    settings.add_recent("/models/3.gguf")
    save_settings(settings)
    loaded, notice = load_settings()
    assert notice is None and loaded.theme == "dark"
    assert loaded.recent[0] == "/models/3.gguf" and len(loaded.recent) == MAX_RECENT


@pytest.mark.parametrize("text", ["{not json", '{"recent": "not a list"}', "[1, 2]", '{"recent": [1, 2]}'])
def test_corrupt_settings_are_backed_up_and_replaced(text):
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    settings, notice = load_settings()
    assert settings == Settings()
    backups = list(path.parent.glob("settings.json.corrupt-*"))
    assert len(backups) == 1 and backups[0].read_text(encoding="utf-8") == text   # nothing lost
    assert backups[0].name in notice
    assert not path.exists()


@pytest.mark.parametrize("raw", [b'{"theme": "dark\xf6"}', b"[" * 100_000 + b"]" * 100_000,
                                 b'{"theme": ' + b"9" * 5000 + b"}"])
def test_settings_that_used_to_stop_the_window_are_set_aside(raw):
    """A non-UTF-8 byte, deep nesting or a 5,000-digit number: defaults and a notice, the bytes
    kept beside (issue 11: only OSError was caught, so the window did not start)."""
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    settings, notice = load_settings()
    assert settings == Settings() and notice and "settings.json.corrupt-" in notice
    (backup,) = path.parent.glob("settings.json.corrupt-*")
    assert backup.read_bytes() == raw and not path.exists()


def test_a_settings_folder_is_set_aside_not_a_crash():
    path = settings_path()
    path.mkdir(parents=True)
    settings, notice = load_settings()
    assert settings == Settings() and notice and not path.exists()


def test_corrupt_settings_notice_reaches_the_window(qtbot, monkeypatch):
    from rooflab.gui.shell import app
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{garbage", encoding="utf-8")
    shown = {}
    from rooflab.gui.shell.main_window import MainWindow

    earlier = [w for w in app.QApplication.topLevelWidgets() if isinstance(w, MainWindow)]    # kept alive

    def fake_exec(self):  # the event loop: look at the window instead of running it
        (window,) = [w for w in app.QApplication.topLevelWidgets()
                     if isinstance(w, MainWindow) and not any(w is e for e in earlier)]   # run_gui's
        shown["message"] = window.messages.text()
        shown["hook"] = sys.excepthook
        return 0

    monkeypatch.setattr(app.QApplication, "exec", fake_exec)
    import argparse

    assert app.run_gui(argparse.Namespace(model=None, machine=None, screenshot=None, weights=None)) == 0
    assert "unreadable" in shown["message"] and "settings.json.corrupt-" in shown["message"]
    assert shown["hook"] is not sys.excepthook          # installed while running, restored after


def test_window_remembers_workload_machine_and_theme(qtbot, window):
    window._persist = True
    window.state.update_workload(prompt=777, batch=3)
    window.set_theme("dark")
    window.close()
    saved, _ = load_settings()
    assert saved.workload["prompt"] == 777 and saved.machine == "rtx-4090" and saved.theme == "dark"
    assert saved.geometry
    state, pending = initial_state(None, None, saved, [])
    assert pending is None
    assert state.workload.prompt == 777 and state.workload.batch == 3 and state.machine.key == "rtx-4090"


def test_edited_machine_survives_a_restart(window):
    window.machine_panel.bandwidth.setValue(123.0)
    window.remember()
    saved = window.settings
    assert saved.machine == "" and saved.machine_data["bandwidth"] == pytest.approx(123e9)
    state, _ = initial_state(None, None, saved, [])
    assert state.machine.bandwidth == pytest.approx(123e9)


def test_a_model_file_from_settings_opens_after_the_window(tiny_config):
    notices: list[str] = []
    state, pending = initial_state(None, None, Settings(model=str(tiny_config)), notices)
    assert pending == str(tiny_config) and state.model.source.startswith("catalogue:")


def test_save_load_delete_user_profile(qtbot, window):
    panel = window.machine_panel
    panel.bandwidth.setValue(2000.0)
    path = panel.save_profile("My Workstation")
    assert path.parent == profiles_dir() and path.is_file()
    assert json.loads(path.read_text(encoding="utf-8"))["bandwidth"] == pytest.approx(2000e9)
    assert not list(path.parent.glob(".*.tmp"))                   # written atomically: no leftovers
    assert [m.name for m in list_user_profiles()] == ["My Workstation"]
    assert window.state.machine.key == path.stem
    assert panel.picker.currentData() == f"user:{path.stem}"
    assert panel.delete_button.isEnabled()
    # switch away and back through the picker
    panel.picker.activated.emit(panel.picker.findData("preset:m4-max"))
    assert window.state.machine.key == "m4-max"
    panel.picker.activated.emit(panel.picker.findData(f"user:{path.stem}"))
    assert window.state.machine.bandwidth == pytest.approx(2000e9)
    panel.delete_profile(path.stem)
    assert not path.exists() and panel.picker.findData(f"user:{path.stem}") == -1


def test_save_as_profile_never_replaces_the_machine_it_started_from(qtbot, window):
    from rooflab.core.io.presets import load_machine

    panel = window.machine_panel
    assert window.state.machine.key == "rtx-4090"              # a preset, not edited
    first = panel.save_profile("Lab box")
    assert first.name == "lab-box.json"                       # not rtx-4090.json, which the preset shadows
    second = panel.save_profile("Lab box, faster")            # saved while "Lab box" is on screen
    assert second.name == "lab-box-faster.json" and first.is_file()
    assert sorted(m.name for m in list_user_profiles()) == ["Lab box", "Lab box, faster"]
    shadow = panel.save_profile("rtx 4090")                   # the name of a preset's key
    assert shadow.stem == "my-rtx-4090" and load_machine("my-rtx-4090").name == "rtx 4090"
    assert load_machine("rtx-4090").name == "NVIDIA GeForce RTX 4090"


def test_deleting_the_profile_on_screen_keeps_the_machine_for_the_next_start(window):
    panel = window.machine_panel
    path = panel.save_profile("Lab box")
    panel.delete_profile(path.stem)
    assert window.state.machine.name == "Lab box" and window.state.machine.key == ""
    assert "edited, unsaved" in panel.picker.currentText()
    window.remember()
    notices: list[str] = []
    state, _ = initial_state(None, None, window.settings, notices)
    assert notices == [] and state.machine.name == "Lab box"


def test_machine_fields_show_small_machines_and_never_send_zero(window):
    import dataclasses

    panel = window.machine_panel
    cpu = dataclasses.replace(window.state.machine, key="", peak_flops={"fp32": 0.19e12, "fp16": 0.04e12},
                              default_dtype="fp32")
    window.state.set_machine(cpu)
    assert panel.flops["fp16"].text() == "0.040 TFLOP/s"       # was "0.0 TFLOP/s"
    for box in (panel.bandwidth, panel.memory, panel.flops["fp32"]):
        box.setValue(0.0)                                      # the smallest the field allows
        assert box.value() > 0
    m = window.state.machine
    assert m.bandwidth > 0 and m.memory > 0 and m.peak_flops["fp32"] > 0
    assert panel.error.isHidden()


def test_a_rejected_machine_edit_puts_the_field_back(window, monkeypatch):
    from rooflab.core.errors import SpecError

    panel = window.machine_panel
    before = window.state.machine.bandwidth

    def reject(**_changes):
        raise SpecError("machine: bandwidth rejected for this test")

    monkeypatch.setattr(window.state, "update_machine", reject)
    panel.bandwidth.setValue(5.0)
    assert "rejected" in panel.error.text() and not panel.error.isHidden()
    assert panel.bandwidth.value() == pytest.approx(before / 1e9)     # the machine still in use


def test_peak_flops_fields_follow_the_machine(window):
    from rooflab.core.io.presets import load_machine

    window.state.set_machine(load_machine("m4-pro"))
    panel = window.machine_panel
    assert list(panel.flops) == list(window.state.machine.peak_flops)
    dtype = next(iter(panel.flops))
    panel.flops[dtype].setValue(50.0)
    assert window.state.machine.peak_flops[dtype] == pytest.approx(50e12)
    assert window.state.machine.bandwidth == load_machine("m4-pro").bandwidth    # untouched, not rounded
    # a CPU's int8 path (what its quantized multiplies are priced on) moves with its FP32 field
    window.state.set_machine(load_machine("epyc-9654"))
    ratio = window.state.machine.peak_flops["int8"] / window.state.machine.peak_flops["fp32"]
    panel.flops["fp32"].setValue(2.0)
    assert window.state.machine.peak_flops["int8"] == pytest.approx(2e12 * ratio)
    assert panel.flops["int8"].value() == pytest.approx(2.0 * ratio)


def _hostile_model(tmp_path) -> dict[str, str]:
    """Last models a settings file can name that can no longer be opened (issue 15)."""
    import os

    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    return {"gone": str(tmp_path / "gone" / "model.gguf"), "zero": "/dev/zero", "fifo": str(fifo),
            "broken": str(broken)}


@pytest.mark.skipif(sys.platform == "win32", reason="no FIFOs or /dev/zero")
@pytest.mark.parametrize("stored, part", [
    ({"weights": "bogus"}, "weight format 'bogus'"),                 # for the default model
    ({"model": "qwen3-0.6b", "weights": "bogus"}, "weight format 'bogus'"),
    ({"workload": {"kv_type": 5, "prompt": 777}}, "workload.kv_type"),
    ({"workload": {"compute_dtype": ["fp16"]}}, "workload.compute_dtype"),
    ({"model": "gone"}, "no such file"),
    ({"model": "zero"}, "character device"),
    ({"model": "fifo"}, "named pipe"),
    ({"model": "broken"}, "not a GGUF file"),                        # found only when the worker reads it
])
def test_a_bad_part_of_the_settings_is_set_aside_and_the_window_starts(tmp_path, capsys, stored, part):
    """Each used to stop ``rooflab gui --screenshot``: no PNG, a traceback (kv_type 5 reached
    ``.lower()``) or an error that did not name the settings file. Now the window starts on the
    rest, the PNG is written, the notice names the file, and the part is not kept."""
    import argparse

    from rooflab.gui.shell import app

    models = _hostile_model(tmp_path)
    stored = {k: models.get(v, v) if k == "model" else v for k, v in stored.items()}
    save_settings(Settings(**stored))
    png = tmp_path / "shot.png"
    status = app.run_gui(argparse.Namespace(model=None, machine=None, screenshot=str(png), weights=None))
    err = capsys.readouterr().err
    assert status == 0 and png.is_file() and png.stat().st_size > 0
    assert str(settings_path()) in err and part in err and "Traceback" not in err


@pytest.mark.parametrize("stored", [{"weights": "bogus"}, {"model": "/dev/zero", "weights": "q8_0"},
                                    {"workload": {"kv_type": 5, "prompt": 777, "bogus": 1}}])
def test_the_part_set_aside_is_not_saved_back(stored):
    settings = Settings(**stored)
    notices: list[str] = []
    state, pending = initial_state(None, None, settings, notices)
    assert pending is None and len(notices) == 1 and str(settings_path()) in notices[0]
    assert settings.weights == "" and settings.model == ""
    assert settings.workload in ({}, {"prompt": 777}) and state.workload.prompt in (2048, 777)
    assert state.model.source.startswith("catalogue:")


def test_a_last_model_that_fails_in_the_worker_is_forgotten(qtbot, window, tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    window.settings.model = str(broken)
    with qtbot.waitSignal(window.opener.failed, timeout=10_000) as failed:
        window.open_model(str(broken))
    assert window.settings.model == "" and str(settings_path()) in str(failed.args[0])
