"""A dropped folder of GGUF files (LM Studio's and llama.cpp's model folders: no config.json)
opens its GGUF, or the one the user picks of several (each split model once, by its first
shard); it said "folder has no config.json". A folder with neither stays an error, and the
model on screen stays."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.factories.gguf_files import tiny_llama
from tests.factories.waits import WAIT_MS
from tests.gui.test_gui_dnd import _drag_and_drop, _mime


def test_a_folder_of_one_gguf_opens_it(qtbot, window, tmp_path):
    folder = tmp_path / "lmstudio" / "tiny"
    folder.mkdir(parents=True)
    gguf = tiny_llama(folder / "tiny-llama-q8_0.gguf")
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS):
        _drag_and_drop(window.numbers, _mime(folder))
    assert window.state.model_ref == str(gguf)


def test_several_ggufs_ask_which(qtbot, window, tmp_path, monkeypatch):
    folder = tmp_path / "models"
    folder.mkdir()
    first = tiny_llama(folder / "a-q8_0.gguf")
    second = folder / "b-00001-of-00002.gguf"
    shutil.copy(first, second)
    shutil.copy(first, folder / "b-00002-of-00002.gguf")     # a later shard: not a model of its own
    asked: list[list[Path]] = []

    def pick(dropped: str, ggufs: list[Path]) -> str:
        asked.append(ggufs)
        return str(ggufs[1])

    monkeypatch.setattr(window, "ask_gguf", pick)
    with qtbot.waitSignal(window.model_loaded, timeout=WAIT_MS):
        _drag_and_drop(window.numbers, _mime(folder))
    assert asked == [[first, second]] and window.state.model_ref == str(second)
    before = window.state.model
    monkeypatch.setattr(window, "ask_gguf", lambda dropped, ggufs: "")         # the picker cancelled
    _drag_and_drop(window.numbers, _mime(folder))
    qtbot.wait(50)
    assert window.state.model is before and not window.opener.jobs.busy


def test_a_folder_with_neither_is_still_an_error(qtbot, window, tmp_path):
    (tmp_path / "notes").mkdir()
    before = window.state.model
    with qtbot.waitSignal(window.model_failed, timeout=WAIT_MS) as failed:
        _drag_and_drop(window.numbers, _mime(tmp_path / "notes"))
    assert "notes" in failed.args[0] and window.state.model is before
