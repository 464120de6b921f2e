"""Flash attention in the Workload tab: turned off beside a quantized KV cache, the window says
why (llama.cpp refuses a quantized V cache with -fa off) where the switches are, and the box
goes back to what runs; turned off beside an f16 cache, the numbers panel says what it moved
(the compute buffer holds the scores: more memory, the same time without a calibration that
timed both kernels). It was accepted and moved nothing on screen."""

from __future__ import annotations

from tests.factories.waits import WAIT_MS


def test_off_with_a_quantized_cache_is_refused_in_sight(qtbot, window):
    panel = window.workload_panel
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        panel.kv_type.setCurrentText("q8_0")
    assert window.state.workload.kv_type == "q8_0"
    panel.flash_attention.setChecked(False)                   # control -> refused
    assert window.state.workload.flash_attention is True
    assert panel.flash_attention.isChecked()                  # the box shows what runs
    assert not panel.error.isHidden() and "needs flash attention" in panel.error.text()
    # the message sits under the switches, not under the placement (below the fold at 720p)
    layout = panel.layout()
    assert layout.indexOf(panel.error) < layout.indexOf(panel.placement)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        panel.kv_type.setCurrentText("f16")
    assert panel.error.isHidden()


def test_off_says_what_it_moves(qtbot, window):
    panel = window.workload_panel
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as on:
        window.state.update_workload(prompt=16000, batch=4)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as off:
        panel.flash_attention.setChecked(False)
    assert window.state.workload.flash_attention is False       # control -> state
    ttft = next(line for line in off.args[0].lines if line.key == "ttft")
    assert "Flash attention off (-fa off)" in ttft.sentence and "more memory" in ttft.sentence
    mem = {name: frame.summary.placed.fit.memory.device.used for name, frame in (("on", on.args[0]),
                                                                                   ("off", off.args[0]))}
    assert mem["off"] > mem["on"] + 1e9                           # the scores: > 1 GB at 4 x 16k
    assert any("Flash attention off" in line.sentence for line in window.numbers.lines)   # on screen
