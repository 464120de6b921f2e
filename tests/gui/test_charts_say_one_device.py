"""With several devices the charts draw one of them; the line above the charts says so (the
note used to sit only on the Workload tab)."""

from __future__ import annotations

from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import AUTO, PlacementChoice
from tests.gui.conftest import catalogue_spec


def _shown(qtbot, window, choice: PlacementChoice) -> str:
    window.state.set_placement(choice)
    qtbot.waitUntil(lambda: window.recompute.frame is not None and not window.recompute.pending
                    and window.recompute.frame.scenario.placement == window.state.placement, timeout=5000)
    return window.scenario_label.text()


def test_the_scenario_line_says_the_charts_draw_one_device(qtbot, window):
    window.state.set_machine(load_machine("rtx-4090"))
    window.state.set_model(catalogue_spec("qwen3-32b-q4_k_m"), ref="qwen3-32b-q4_k_m")
    text = _shown(qtbot, window, PlacementChoice(devices=2, parallel="tensor"))
    assert "2 × tensor parallel (charts: one device)" in text
    assert window.state.scenario.label.endswith("f16 cache, 2 × tensor parallel (charts: one device)")
    # a pinned series on several devices says so too (the Compare list names it by this label)
    window.state.pin_current()
    assert window.state.pinned[0].label.endswith("(charts: one device)")
    window.state.clear_pinned()
    assert "8 × layer split (charts: one device)" in _shown(qtbot, window, PlacementChoice(devices=8, parallel="layer"))
    assert "charts: one device" not in _shown(qtbot, window, AUTO)
    assert "charts: one device" not in _shown(qtbot, window, PlacementChoice(gpu_layers=40))
