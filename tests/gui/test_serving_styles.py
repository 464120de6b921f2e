"""The Serving chart's curves can be told apart: each expected latency is drawn in its own
colour (its ceiling twin's, dotted) with its own legend entry (the four were one dotted blue
pen), and a log axis labels only the ticks whose labels keep apart (a rate axis under a decade
wide ran "0.050.060.0700.80.91" together)."""

from __future__ import annotations

import math

from PySide6.QtGui import QFont, QFontMetricsF

from rooflab.core.report.serving_chart import SERVING
from rooflab.gui.plots.axis import UnitAxis
from tests.factories.waits import WAIT_MS

LATENCIES = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50")


def _pen(plot, key: str):
    pen = plot.items("latency", key)[0].opts["pen"]
    return pen.color().name(), pen.style()


def test_the_four_expected_latencies_are_drawn_apart(qtbot, window):
    panel = window.plot_panel
    panel.tabs.setCurrentWidget(panel.serving)
    plot = panel.serving
    qtbot.waitUntil(lambda: plot.chart is not None and plot.chart.key == SERVING, timeout=WAIT_MS)
    assert window.recompute.frame.expected_figures is not None          # rtx-4090: published factors
    expected = [_pen(plot, "expected_" + key) for key in LATENCIES]
    assert len(set(expected)) == 4, expected
    for key, pen in zip(LATENCIES, expected, strict=True):
        ceiling = _pen(plot, key)
        assert pen[0] == ceiling[0] and pen != ceiling       # its ceiling's colour, its own line style
    names = {label.text.replace("<br>", " ") for _sample, label in plot.panel_view("latency").legend.items}
    assert sum("expected" in n for n in names) == 4, names   # one legend entry each


def _labels(axis: UnitAxis, low: float, high: float) -> list[tuple[float, str]]:
    axis.setRange(math.log10(low), math.log10(high))
    out = []
    for spacing, values in axis.tickValues(math.log10(low), math.log10(high), axis.width()):
        out += [(v, t) for v, t in zip(values, axis.tickStrings(values, 1.0, spacing or 1.0), strict=True) if t]
    return sorted(out)


def test_log_axis_labels_keep_apart(qtbot):
    font = QFontMetricsF(QFont())
    for low, high, width in ((0.05, 0.3, 330), (0.3, 0.9, 300), (0.045, 1.1, 330), (0.0015, 0.035, 300)):
        axis = UnitAxis("bottom", "Request rate", "requests/s")
        axis.setLogMode(True)
        axis.resize(width, 30)
        labels = _labels(axis, low, high)
        assert labels, (low, high)
        per_decade = width / (math.log10(high) - math.log10(low))
        for (a, ta), (b, tb) in zip(labels, labels[1:], strict=False):
            room = (b - a) * per_decade
            assert room >= (font.horizontalAdvance(ta) + font.horizontalAdvance(tb)) / 2, (low, high, ta, tb, room)
    wide = UnitAxis("bottom", "Request rate", "requests/s")
    wide.setLogMode(True)
    wide.resize(1600, 30)
    assert len(_labels(wide, 0.3, 0.9)) == 6                         # room enough: every mantissa


def test_legends_under_side_by_side_panels_take_columns(qtbot, window):
    """At 1280 x 720 the Serving legends ran one entry a row, 8 rows under each panel, and the
    window showed 1.5 of them: entries now share the panel's width in columns, and the expected
    ones read "TTFT p50, expected" (the engine in the panels' titles, once)."""
    window.resize(1280, 720)
    window.show()
    qtbot.waitExposed(window)
    panel = window.plot_panel
    panel.tabs.setCurrentWidget(panel.serving)
    plot = panel.serving
    qtbot.waitUntil(lambda: plot.chart is not None and plot.chart.key == SERVING, timeout=WAIT_MS)
    window.flush_plots()
    assert plot.columns() == 2
    latency = plot.panel_view("latency")
    texts = [label.text for _sample, label in latency.legend.items]
    assert len(texts) == 8 and not [t for t in texts if "<br>" in t]          # whole, none wrapped
    assert latency.legend.columnCount >= 2
    assert "TTFT p99, expected" in texts
    assert "llama.cpp" in plot.chart.panel("latency").title                   # whose expectation, once
