"""File > Open URL… and a link dropped on the window open a remote model on the open-model
worker (served by a local HTTP server, HF_ENDPOINT pointed at it): the model arrives on the
state, the name goes into the recent list as typed, and a missing one is a message while the
model on screen stays."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QMimeData, QUrl
from PySide6.QtWidgets import QInputDialog

from tests.factories.gguf_files import tiny_llama
from tests.factories.model_server import hub_file, serve_files
from tests.factories.waits import WAIT_MS
from tests.gui.test_gui_dnd import _drag_and_drop


@pytest.fixture
def hub(tmp_path, monkeypatch):
    for var in ("HF_TOKEN", "HF_HOME", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    tiny_llama(hub_file(tmp_path / "hub", "org/Tiny-GGUF", "Tiny-Q4_K_M.gguf"))
    with serve_files(tmp_path / "hub") as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        yield served


def test_open_url_reads_a_hub_model_on_the_worker(qtbot, window, hub, monkeypatch):
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("  hf:org/Tiny-GGUF:Q4_K_M ", True))
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS) as blocker:
        window.menus.open_url_action.trigger()
    assert blocker.args[0].name == "tiny-llama" and blocker.args[0].source == "hf:org/Tiny-GGUF:Q4_K_M"
    qtbot.waitUntil(lambda: window.state.model.name == "tiny-llama", timeout=WAIT_MS)
    assert window.settings.recent[0] == "hf:org/Tiny-GGUF:Q4_K_M"
    assert ("GET", "/org/Tiny-GGUF/resolve/main/Tiny-Q4_K_M.gguf") in [(m, p) for m, p, _ in hub.requests]


def test_the_model_tabs_open_url_button_opens_a_link(qtbot, window, hub, monkeypatch):
    url = f"{hub.url}/org/Tiny-GGUF/resolve/main/Tiny-Q4_K_M.gguf"
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: (url, True))
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS) as blocker:
        window.model_panel.open_url_button.click()
    assert blocker.args[0].source == url and blocker.args[0].file_bytes > 0
    qtbot.waitUntil(lambda: window.state.model_ref == url, timeout=WAIT_MS)


def test_a_dropped_link_opens_and_a_missing_one_keeps_the_model(qtbot, window, hub):
    mime = QMimeData()
    mime.setUrls([QUrl(f"{hub.url}/org/Tiny-GGUF/resolve/main/Tiny-Q4_K_M.gguf")])
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS):
        assert _drag_and_drop(window.numbers, mime) == (True, True)
    before = window.state.model
    assert before.name == "tiny-llama"
    mime.setUrls([QUrl(f"{hub.url}/org/Tiny-GGUF/resolve/main/Missing.gguf")])
    with qtbot.waitSignal(window.model_failed, timeout=WAIT_MS) as blocker:
        _drag_and_drop(window.numbers, mime)
    assert blocker.args[0].endswith("Missing.gguf: Missing.gguf: not found (404)")
    assert window.state.model is before
