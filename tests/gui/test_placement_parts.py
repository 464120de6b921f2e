"""The Placement group says where a placed token's and prompt's time go (GPU weights, experts
on the CPU, the GPU <-> host round trips, the prompt's PCIe streaming, the engine's fixed cost)
with the same seconds ``rooflab predict``'s why prints for the same flags, and says it again
when the flags change."""

from __future__ import annotations

import re

from rooflab.core.cli.main import main
from rooflab.core.predict.choice import PlacementChoice
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import open_placed

MODEL = "qwen3-30b-a3b-q4_k_m"


def _why_parts(capsys, *flags: str) -> list[str]:
    """The part-by-part lines of ``rooflab predict``'s why on an RTX 4090 with ``flags``."""
    assert main(["predict", "--model", MODEL, "--machine", "rtx-4090", *flags]) == 0
    out = capsys.readouterr().out
    return [line.strip() for line in out.splitlines() if "part by part" in line]


def test_the_panel_shows_the_seconds_predict_prints(qtbot, window, capsys):
    open_placed(qtbot, window, MODEL, PlacementChoice(cpu_moe=30))
    panel = window.workload_panel.placement
    text = panel.placed.text()
    printed = _why_parts(capsys, "--cpu-moe", "30")
    assert [line.split(" (")[0] for line in printed] == ["Prompt, part by part", "Token, part by part"]
    for line in printed:
        assert line in text.splitlines()
    token = printed[1]
    # an expected figure's (the CUDA back end's published fit): the experts on the CPU and the
    # round trips of 30 layers' experts there (60 crossings) are parts of it, in milliseconds
    assert token.startswith("Token, part by part (") and "Expected with llama.cpp CUDA" in token
    # (the preset names no host CPU: the 8-core desktop's arithmetic bounds its experts)
    assert re.search(r"[\d.]+ ms arithmetic of the experts on the CPU \(\d+ %\)", token)
    assert "round trips (" in token and "60 crossings × 25 µs" in token
    assert "PCIe streaming of the host's weights" in printed[0]

    # control -> state -> panel: fewer experts on the CPU, fewer crossings, and predict agrees again
    panel.cpu_moe_auto.setChecked(False)
    panel.cpu_moe.setValue(10)
    qtbot.waitUntil(lambda: not window.recompute.pending
                    and window.recompute.frame.scenario.placement == window.state.placement, timeout=WAIT_MS)
    text = panel.placed.text()
    assert "20 crossings × 25 µs" in text
    for line in _why_parts(capsys, "--cpu-moe", "10"):
        assert line in text.splitlines()


def test_a_model_the_gpu_holds_whole_has_no_parts(qtbot, window):
    open_placed(qtbot, window, "qwen3-8b-q4_k_m")
    assert "part by part" not in window.workload_panel.placement.placed.text()
