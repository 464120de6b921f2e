"""Help > Guide: the guide built in core, opened from the menu (F1), at a figure's section by F1
over it, and at a chart's section by its "How is this computed?" link."""

from __future__ import annotations

from PySide6.QtCore import QPoint
from PySide6.QtCore import Qt as QtKey
from PySide6.QtGui import QCursor, QKeySequence

from rooflab.core.report.guide import SECTIONS
from rooflab.gui.controllers.guide_controller import topic_of
from rooflab.gui.dialogs.guide_dialog import GuideDialog, guide_html
from tests.factories.waits import WAIT_MS


def _help_actions(window):
    menu = next(a for a in window.menuBar().actions() if a.text() == "&Help").menu()
    return {a.text(): a for a in menu.actions()}


def test_the_dialog_shows_every_section_and_opens_at_one(qtbot):
    dialog = GuideDialog()
    qtbot.addWidget(dialog)
    assert dialog.contents.count() == len(SECTIONS)
    html = guide_html()
    assert all(f"name='{s.key}'" in html for s in SECTIONS)
    assert dialog.show_topic("n_star") == "n_star"
    assert dialog.contents.currentItem().text() == "Prefill crossover n*" and dialog.isVisible()
    assert dialog.show_topic("expected_tpot") == "expected"            # a numbers-panel key reaches its section
    assert dialog.show_topic("no-such-figure") == ""
    dialog.contents.setCurrentRow(3)
    assert dialog.current_topic == SECTIONS[3].key
    assert not dialog.grab().isNull()


def test_help_menu_has_the_guide_on_f1(qtbot, window):
    actions = _help_actions(window)
    guide = actions["&Guide: what each figure means"]
    assert guide.shortcut() == QKeySequence(QKeySequence.StandardKey.HelpContents)
    assert actions["&About rooflab"].shortcut().isEmpty()
    guide.trigger()
    assert window.guide.dialog is not None and window.guide.dialog.isVisible()
    window.guide.dialog.close()


def test_each_chart_link_opens_its_section(qtbot, window):
    for key, plot in window.plots.items():
        assert "href='guide:" in plot.info.text() and "How is this computed?" in plot.info.text()
        plot.info.linkActivated.emit(f"guide:{key}")
        assert window.guide.dialog.current_topic == {"roofline": "roofline", "prefill": "ttft", "decode": "ceiling",
                                                     "batching": "batch_crossover", "memory": "memory"}[key]
    window.guide.dialog.close()


def test_f1_over_a_figure_opens_its_section(qtbot, window):
    window.show()
    qtbot.waitExposed(window)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.recompute.recompute_now()
    numbers = window.numbers
    label = next(w for w in numbers.findChildren(type(window.scenario_label)) if w.property("guide_topic") == "n_star")
    assert topic_of(label) == "n_star" and topic_of(window.plots["decode"].view) == "decode"
    assert topic_of(window.fit_view.table) == "fit" and topic_of(window.machine_panel.balance) == "balance"
    QCursor.setPos(label.mapToGlobal(QPoint(2, 2)))
    window.activateWindow()
    window.left_tabs.setCurrentIndex(0)                      # the Machine tab
    spin = window.machine_panel.kv_read_factor
    spin.setFocus()
    qtbot.waitUntil(lambda: spin.hasFocus() or spin.lineEdit().hasFocus(), timeout=WAIT_MS)
    qtbot.keyClick(spin, QtKey.Key_F1)                      # F1 with the cache-read factor in focus
    assert window.guide.dialog is not None and window.guide.dialog.current_topic == "kv_read_factor"
    window.guide.dialog.close()


def test_the_chart_links_follow_the_theme(qtbot, window):
    # a label keeps the link colour its rich text was set with: after dark -> light the link
    # stayed pale blue, and in dark mode it was pure blue on dark grey
    from rooflab.gui.widgets.theme import DARK, LIGHT

    plot = window.plots["decode"]
    for mode, theme in (("dark", DARK), ("light", LIGHT), ("dark", DARK)):
        window.set_theme(mode)
        text = plot.info.text()
        assert f"color:{theme.hyperlink}" in text and text.count("<a ") == 1, (mode, text)
        assert "href='guide:decode'" in text
    assert DARK.hyperlink != LIGHT.hyperlink
