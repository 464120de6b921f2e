"""The current series' expected curves are drawn in colours no pinned series takes, each in its
own (per sequence and total apart), and, once series are pinned, their legend entries say whose
expectation they are. They were dashed teal, the colour of the first pinned series."""

from __future__ import annotations

import pytest

from rooflab.core.io.presets import load_machine
from rooflab.gui.plots.plot_tabs import EXPECTED_LAYER
from rooflab.gui.widgets.theme import DARK, LIGHT
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import catalogue_spec


def _legend_texts(view) -> list[str]:
    return [label.text.replace("<br>", " ") for _sample, label in view.legend.items]


def _pen(plot, panel: str, key: str, layer: str) -> str:
    return plot.items(panel, key, layer)[0].opts["pen"].color().name()


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_expected_curves_are_nobodys_pinned_colour(qtbot, window, mode):
    window.set_theme(mode)
    theme = {"light": LIGHT, "dark": DARK}[mode]
    window.state.set_machine(load_machine("rtx-4090"))          # a published calibration: expected curves
    window.state.pin_current()                                  # Qwen3-8B, pin 1: the series' second colour
    window.state.set_model(catalogue_spec("qwen3-32b-q4_k_m"), ref="qwen3-32b-q4_k_m")
    qtbot.waitUntil(lambda: window.recompute.frame is not None and not window.recompute.pending
                    and window.recompute.frame.scenario.model is window.state.model, timeout=WAIT_MS)
    assert window.recompute.frame.expected is not None and window.recompute.frame.pinned
    window.flush_plots()
    pinned = {c.lower() for c in theme.series}
    assert not pinned & {c.lower() for c in theme.expected.values()}
    batching = window.plots["batching"]
    per_sequence = _pen(batching, "rate", "expected_per_sequence", EXPECTED_LAYER)
    total = _pen(batching, "rate", "expected_total", EXPECTED_LAYER)
    assert per_sequence != total and not {per_sequence, total} & pinned
    assert per_sequence == theme.expected["main"] and total == theme.expected["secondary"]
    ceiling = _pen(window.plots["decode"], "rate", "expected_ceiling", EXPECTED_LAYER)
    assert ceiling not in pinned and ceiling != _pen(window.plots["decode"], "rate", "ceiling", "pin:1")
    # the legend says the expectation is the current series' (named as the legend names it)
    texts = _legend_texts(batching.panel_view("rate"))
    mine = [t for t in texts if t.startswith("expected")]
    # the legend names whose expectation it is, the current series' (named first over the tabs;
    # named in full here, each entry took three lines of a legend), then the calibration
    assert len(mine) == 2 and all(t.startswith("expected for the current series, llama.cpp") for t in mine), texts
    # with nothing pinned there is only one series: no name
    window.state.clear_pinned()
    qtbot.waitUntil(lambda: not window.recompute.pending and not window.recompute.frame.pinned, timeout=WAIT_MS)
    window.flush_plots()
    texts = _legend_texts(window.plots["batching"].panel_view("rate"))
    assert [t for t in texts if t.startswith("expected")] and not [t for t in texts if " for " in t], texts
