"""At 1280 x 720 the Decode tab's third chart sits under the other two, out of sight and unsaid:
the read-out bar names the charts below ("↓ below: KV share of bytes read") until they are
scrolled into view."""

from __future__ import annotations

from tests.factories.waits import WAIT_MS


def test_the_bar_names_the_charts_below(qtbot, window):
    window.resize(1280, 720)
    window.show()
    qtbot.waitExposed(window)
    plot = window.plots["decode"]
    window.plot_tabs.setCurrentWidget(window.plot_panel.tabs.widget(window.plot_panel.tabs.indexOf(plot)))
    qtbot.waitUntil(lambda: plot.chart is not None, timeout=WAIT_MS)
    window.flush_plots()
    qtbot.wait(50)
    assert plot.columns() == 2 and len(plot.panel_keys()) == 3
    hidden = plot.hidden_below()
    assert hidden == [plot.chart.panels[2].title]
    assert not plot.below.isHidden() and hidden[0] in plot.below.text()
    bar = plot.scroll_area.verticalScrollBar()
    bar.setValue(bar.maximum())                          # scrolled down: nothing below, nothing said
    qtbot.waitUntil(lambda: plot.below.isHidden(), timeout=WAIT_MS)
    assert plot.hidden_below() == []
