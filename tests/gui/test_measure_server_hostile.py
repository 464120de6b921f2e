"""The Measure tab's Server source against servers that answer badly (issue 34): the window's
box shows the command line's one line, never raw exception text, an escape sequence or the key.
A server that breaks the protocol on every request (a redirect, a line past any limit, numbers
no count can be) gives the same counted lines as ``rooflab measure server``'s table, under the
button, and the run is kept and read back."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiohttp", reason="aiohttp is not installed")

from tests.factories.fake_openai import FakeServer  # noqa: E402
from tests.factories.waits import WAIT_MS  # noqa: E402

SECRET = "sk-window-hostile-0123456789"
RAW = ("\x1b", "\x07", "\r", "\x00", "\x9b")


def _start(window, url: str, model: str, key: str):
    """The Server box set to a two-request run of 8-token prompts at ``url``, started; the box."""
    box = window.measure_panel.server
    box.url.setText(url)
    box.model_name.setText(model)
    box.api_key.setText(key)
    box.concurrency.setText("1")
    box.rates.setText("")
    box.requests.setValue(2)
    window.state.update_workload(prompt=8, answer=4)
    box.run_button.click()
    return box


def _run(qtbot, window, url: str, model: str, key: str = "") -> str:
    _start(window, url, model, key)
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


def _measured(qtbot, window, url: str, model: str, key: str = "") -> str:
    """The result under the button of a run that ends with a measurement (its requests may all
    have failed), once it is kept; no error line."""
    window.measure_panel.server.result.setText("")
    box = _start(window, url, model, key)
    qtbot.waitUntil(lambda: bool(box.result.text()) or bool(window.measure_panel.error.text()), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not window.measure.server.jobs.busy, timeout=WAIT_MS)
    shown = box.result.text()
    assert not window.measure_panel.error.text() and not any(c in shown for c in RAW), repr(shown[:300])
    return shown


def _kept(window, url: str, model: str) -> dict:
    """The run just kept, as the store reads it back (not set aside), its file without the key."""
    from rooflab.core.calibration import store

    kept = window.measure.server.kept
    assert kept is not None and SECRET not in kept.read_text(encoding="utf-8")
    return store.load_server_runs(url, model, store.machine_key(window.state.machine))[-1]


def test_a_a_redirect_and_a_line_past_any_limit_are_counted_lines(qtbot, window):
    with FakeServer(api_key=SECRET) as server:
        shown = _measured(qtbot, window, server.url, "redirect", key=SECRET)
        assert f"2 × HTTP 302: the server redirects to http://127.0.0.1:{server.port}/v1/completions; give that " \
               "address (redirects are not followed)" in shown and SECRET not in shown
        assert _kept(window, server.url, "redirect")["levels"][0]["errors"] == 2
        shown = _measured(qtbot, window, server.url, "longline", key=SECRET)
        assert "2 × an event line of over 1,048,576 bytes" in shown and SECRET not in shown


def test_a_an_address_with_a_password_and_a_key_is_one_line(qtbot, window):
    with FakeServer() as server:
        shown = _run(qtbot, window, f"http://user:{SECRET}@127.0.0.1:{server.port}", "ok", key="sk-other-key")
    assert shown.endswith("holds a user and password, and an API key is given too: give one of them")
    assert SECRET not in shown and "\n" not in shown and not server.headers


def test_b_numbers_no_count_can_be(qtbot, window):
    with FakeServer() as server:
        shown = _measured(qtbot, window, server.url, "absurd")       # 1e300, -5 and 1.7e308 tokens: not believed
        level = _kept(window, server.url, "absurd")["levels"][0]
        assert level["completed"] == 2 and [r["answer_tokens"] for r in level["requests"]] == [2, 2]
        assert "e+300" not in shown and "e+30" not in json.dumps(level["stats"])
        shown = _measured(qtbot, window, server.url, "infinity")
    assert "2 × malformed event after 2 tokens: it holds Infinity, which is not a finite number" in shown
