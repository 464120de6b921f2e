"""The Model tab's weight format: choosing one re-prices the config-defined model on screen,
every way of opening a model follows it, a GGUF file keeps its own types, and the choice comes
back with the model after a restart."""

from __future__ import annotations

import argparse

from tests.factories.waits import WAIT_MS


def _choose(window, fmt: str) -> None:
    combo = window.model_panel.weights
    combo.setCurrentIndex(combo.findData(fmt))
    combo.activated.emit(combo.currentIndex())


def test_choosing_a_weight_format_reprices_the_model_on_screen(qtbot, window):
    assert window.state.model_ref == "qwen3-8b-q4_k_m"
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS) as loaded:
        _choose(window, "q8_0")
    assert loaded.args[0].weights_format == "Q8_0" and window.state.model_weights == "q8_0"
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS) as loaded:
        _choose(window, "")                                          # "its own" again
    assert loaded.args[0].weights_format == "Q4_K_M" and window.state.model_weights == ""


def test_a_gguf_opens_whatever_weight_format_is_chosen(qtbot, window, tmp_path, tiny_config):
    from tests.factories.gguf_files import tiny_llama

    gguf = tiny_llama(tmp_path / "tiny.gguf")
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS):
        _choose(window, "q8_0")
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS) as loaded:
        window.model_panel.open_requested.emit(str(gguf), window.model_panel.chosen_weights())
    assert loaded.args[0].source == str(gguf) and window.messages.text() == ""   # was "--weights does not apply"
    assert window.model_panel.weights.currentData() == "q8_0"                   # kept for the next config
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS) as loaded:
        window.open_model(str(tiny_config))                        # a drop or Ctrl+O: follows the choice
    assert loaded.args[0].weights_format == "Q8_0"


def test_the_weight_format_comes_back_after_a_restart(qtbot, window, monkeypatch):
    from rooflab.gui.shell import app
    from rooflab.gui.state.settings import load_settings

    window._persist = True
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS):
        _choose(window, "q8_0")
    window.close()
    saved, _ = load_settings()
    assert saved.model == "qwen3-8b-q4_k_m" and saved.weights == "q8_0"
    shown = {}

    def fake_exec(self):
        from rooflab.gui.shell.main_window import MainWindow

        restarted = next(w for w in app.QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible())
        shown["format"] = restarted.state.model.weights_format
        shown["combo"] = restarted.model_panel.weights.currentData()
        return 0

    monkeypatch.setattr(app.QApplication, "exec", fake_exec)
    assert app.run_gui(argparse.Namespace(model=None, machine=None, screenshot=None, weights=None)) == 0
    assert shown == {"format": "Q8_0", "combo": "q8_0"}


def test_every_weight_format_of_the_command_line_is_offered(window):
    from rooflab.core.values.quant import RECIPES

    combo = window.model_panel.weights
    offered = [combo.itemData(i) for i in range(combo.count())]
    assert offered == ["", *RECIPES]                     # q4_k_s was missing
