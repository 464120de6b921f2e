"""The Measure tab's Server source against servers that answer badly (issue 34): the window's
box shows the command line's one line, never raw exception text, an escape sequence or the key."""

from __future__ import annotations

import pytest

pytest.importorskip("aiohttp", reason="aiohttp is not installed")

from tests.factories.fake_openai import FakeServer  # noqa: E402
from tests.factories.waits import WAIT_MS  # noqa: E402

SECRET = "sk-window-hostile-0123456789"


def _run(qtbot, window, url: str, model: str, key: str = "") -> str:
    box = window.measure_panel.server
    box.url.setText(url)
    box.model_name.setText(model)
    box.api_key.setText(key)
    box.concurrency.setText("1")
    box.rates.setText("")
    box.requests.setValue(2)
    window.state.update_workload(prompt=8, answer=4)
    box.run_button.click()
    qtbot.waitUntil(lambda: bool(window.measure_panel.error.text()), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not window.measure.server.jobs.busy, timeout=WAIT_MS)
    return window.measure_panel.error.text()


def test_a_web_site_is_one_line(qtbot, window):
    with FakeServer(site=True) as site:
        shown = _run(qtbot, window, site.url, "ok")
    assert "not an OpenAI-compatible answer" in shown and "\n" not in shown and "\x1b" not in shown


def test_a_key_with_a_line_break_is_one_line_without_the_key(qtbot, window):
    with FakeServer() as server:
        shown = _run(qtbot, window, server.url, "ok", key=SECRET + "\r\nX-Injected: yes")
    assert shown.endswith("holds a line break, space, control or non-ASCII character: a header cannot carry it")
    assert SECRET not in shown and not server.headers
