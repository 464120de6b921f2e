"""Fixtures for the window tests: a real catalogue model (read once), a preset machine and a
window that saves no settings."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from rooflab.core.values.defaults import DEFAULT_MACHINE, DEFAULT_MODEL, DEFAULT_WORKLOAD
from tests.factories.waits import WAIT_MS

_SPECS: dict[str, object] = {}


def catalogue_spec(key: str = DEFAULT_MODEL):
    """A catalogue model, read once per session (ModelSpec is immutable, so sharing is safe)."""
    if key not in _SPECS:
        from rooflab.core.io import load_model

        _SPECS[key] = load_model(key)
    return _SPECS[key]


@pytest.fixture(autouse=True)
def windows_deleted_at_teardown(qapp):
    """Each test's windows are deleted as it ends, not at a moment of a later test's choosing.

    pytest-qt closes a test's widgets and calls ``deleteLater``; but with no event loop running
    between tests Qt deletes nothing, and a closed window, its plots and timers lived on until a
    later test's nested event loop or the garbage collector happened to delete it, in the middle
    of that test's own drawing (a test worker ended by a segfault in CI, in whichever window test
    ran then). Deleting them here, then collecting, does it at one quiet point."""
    from PySide6.QtCore import QCoreApplication, QEvent

    yield
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def state(qapp):
    from rooflab.core.io.presets import load_machine
    from rooflab.gui.state.app_state import AppState

    return AppState(catalogue_spec(), load_machine(DEFAULT_MACHINE), DEFAULT_WORKLOAD, model_ref=DEFAULT_MODEL)


@pytest.fixture
def window(qtbot, state):
    from rooflab.gui.shell.main_window import MainWindow
    from rooflab.gui.state.settings import Settings

    win = MainWindow(state, Settings(), persist=False)
    qtbot.addWidget(win)
    win.resize(1400, 900)
    return win


def write_tiny_config(folder: Path, name: str = "tiny-qwen3") -> Path:
    """A small, valid Hugging Face config.json (Qwen3 layout)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "_name_or_path": name,
        "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 1024, "max_position_embeddings": 4096,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-6,
    }
    path = folder / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.fixture
def tiny_config(tmp_path: Path) -> Path:
    return write_tiny_config(tmp_path / "tiny-qwen3")


def save_this_machine() -> None:
    """Keep a measured profile of this machine (a CPU): what a run timed here is fitted to."""
    from rooflab.core.io import presets
    from rooflab.core.values.machine import MachineProfile

    presets.save_measured_machine(MachineProfile(name="this machine (measured)", bandwidth=30e9,
                                                 peak_flops={"fp32": 150e9}, memory=16e9, default_dtype="fp32",
                                                 kind="cpu", key="measured"))


def open_placed(qtbot, window, model: str, choice=None, machine: str = "rtx-4090"):
    """Catalogue ``model`` on preset ``machine`` with placement ``choice`` (auto when None), and
    the frame drawn for exactly that (no recompute pending)."""
    from rooflab.core.io.presets import load_machine
    from rooflab.core.predict.choice import AUTO

    choice = AUTO if choice is None else choice
    state = window.state
    state.set_machine(load_machine(machine))
    state.set_model(catalogue_spec(model), ref=model)
    state.set_placement(choice)
    qtbot.waitUntil(lambda: window.recompute.frame is not None and not window.recompute.pending
                    and window.recompute.frame.scenario.model is state.model
                    and window.recompute.frame.scenario.placement == choice, timeout=WAIT_MS)
    return window.recompute.frame
