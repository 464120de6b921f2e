"""The "What fits" view: the catalogue ranked on the machine on screen, the rows of ``rooflab fit``
and ``rooflab compare``, sortable, a double-click opening the model."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from rooflab.core.app.resolve import expected_machine
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.report.compare import compare_row
from rooflab.gui.panels.fit_panel import FitPanel
from rooflab.gui.plots.compare_plot import columns
from rooflab.gui.state.fit_rows import FitController
from tests.factories.gguf_files import tiny_llama

TIMEOUT_MS = 240_000         # the first run reads the catalogue and prices ~300 placements on a worker


@pytest.fixture
def view(qtbot, state):
    panel = FitPanel(state, controller=FitController(state, expected=expected_machine))
    qtbot.addWidget(panel)
    panel.resize(1200, 600)
    with qtbot.waitSignal(panel.controller.rows_ranked, timeout=TIMEOUT_MS):
        panel.show()
        qtbot.waitExposed(panel)
    yield panel
    panel.controller.shutdown()


def _column(view, title):
    return next(i for i in range(view.model.columnCount()) if view.model.horizontalHeaderItem(i).text() == title)


def _texts(view, title):
    c = _column(view, title)
    return [view.model.item(r, c).text() for r in range(view.model.rowCount())]


def test_the_view_agrees_with_compare_on_every_row(view, state):
    """Each row shows ``rooflab compare``'s row for that model and format on the machine on
    screen, in the Compare table's own words and numbers."""
    machine, workload = state.machine, state.workload
    compare_columns = [c for c in columns() if c[0] not in ("Machine", "Fits")]
    titles = [view.model.horizontalHeaderItem(i).text() for i in range(view.model.columnCount())]
    assert titles[:6] == ["Rank", "Fit", "Model", "Weights", "Expected tok/s per seq", "tok/s per seq"]
    assert view.model.rowCount() == len(view.controller.rows) > 40
    for r in range(view.model.rowCount()):
        fit = view.row_at(r)
        same = compare_row(fit.entry.spec, machine, workload, weights=fit.entry.label, expected=expected_machine)
        assert fit.row == same, fit.row.model
        for title, _value, text in compare_columns:
            assert view.model.item(r, _column(view, title)).text() == text(same), (fit.row.model, title)
    assert any(text for text in _texts(view, "Expected tok/s per seq"))


def test_the_most_capable_that_run_first_and_sortable(qtbot, view):
    """As rooflab fit: usable (10 tokens/s, the spin box's start) and largest first, each row
    saying why it stands there; gpt-oss-120b heads an RTX 4090's list."""
    assert view.min_tps.value() == 10.0 == view.controller.min_tps
    assert _texts(view, "Rank") == [str(i) for i in range(1, view.model.rowCount() + 1)]
    fits = _texts(view, "Fit")
    assert _texts(view, "Model")[0].startswith("gpt-oss-120b") and fits[0].startswith("experts on the CPU, ")
    assert fits[0].endswith(" tok/s")
    first_slow = next(i for i, f in enumerate(fits) if f.endswith("below 10") or f.startswith("paged"))
    assert not any(f.endswith(" tok/s") and not f.startswith("paged") for f in fits[first_slow:])
    tpot = _column(view, "TPOT")
    view.table.sortByColumn(tpot, Qt.SortOrder.AscendingOrder)
    values = [view.model.item(r, tpot).data(Qt.ItemDataRole.UserRole + 1) for r in range(view.model.rowCount())]
    assert values == sorted(values)
    first = next(r for r, v in enumerate(values) if v != float("-inf"))     # rows without a figure sort first
    assert view.row_at(first).row.tpot == min(values[first:])


def test_machine_change_reranks(qtbot, view, state):
    with qtbot.waitSignal(view.controller.rows_ranked, timeout=TIMEOUT_MS):
        state.set_machine(load_machine("rtx-3060-12gb"))
    assert "RTX 3060" in view.title.text()
    llama = next(f for f in view.controller.rows if f.entry.key == "llama-3.3-70b-q4_k_m" and f.entry.weights is None)
    assert llama.fit == "layers"
    with qtbot.waitSignal(view.controller.rows_ranked, timeout=TIMEOUT_MS):
        view.min_tps.setValue(30.0)
    slow = [f for f in view.controller.rows if not f.fast_enough]
    assert slow and all(f.rank > max(g.rank for g in view.controller.rows if g.fast_enough and g.runs) for f in slow)
    assert any(t.endswith(" tok/s, below 30") for t in _texts(view, "Fit"))


def test_double_click_asks_to_open_that_model(qtbot, view):
    row = next(r for r in range(view.model.rowCount()) if view.row_at(r).entry.weights == "q8_0")
    fit = view.row_at(row)
    index = view.model.index(row, 1)
    with qtbot.waitSignal(view.open_requested) as opened:
        view.table.doubleClicked.emit(index)
    assert opened.args == [fit.entry.key, "q8_0"]


def test_the_model_on_screen_is_ranked_when_the_catalogue_lacks_it(qtbot, view, state, tmp_path):
    """A model opened from a file (or an hf: name, a link) ranks among the catalogue's, in bold,
    and a double-click opens it again by what it was opened with."""
    assert not any(f.entry.named for f in view.controller.rows)          # a catalogue model on screen
    path = tiny_llama(tmp_path / "tiny.gguf")
    with qtbot.waitSignal(view.controller.rows_ranked, timeout=TIMEOUT_MS):
        state.set_model(load_model(path), str(path))
    named = [f for f in view.controller.rows if f.entry.named]
    assert [(f.entry.key, f.row.model) for f in named] == [(str(path), "tiny-llama")]
    r = next(i for i in range(view.model.rowCount()) if view.row_at(i).entry.named)
    assert view.model.item(r, _column(view, "Model")).font().bold()
    with qtbot.waitSignal(view.open_requested) as opened:
        view.table.doubleClicked.emit(view.model.index(r, 1))
    assert opened.args == [str(path), ""]


def test_grab(view):
    assert not view.grab().isNull()


def test_window_shows_it_and_opens_a_model_from_it(qtbot, window):
    tabs = window.plot_tabs
    assert "What fits" in [tabs.tabText(i) for i in range(tabs.count())]
    action = next(a for a in window.menuBar().actions() if a.text() == "&View").menu().actions()[0]
    assert action.text() == "&What can I run here?"
    window.show()
    qtbot.waitExposed(window)
    with qtbot.waitSignal(window.fit_view.controller.rows_ranked, timeout=TIMEOUT_MS):
        action.trigger()
    assert tabs.currentWidget() is window.fit_view
    view = window.fit_view
    row = next(r for r in range(view.model.rowCount())
               if view.row_at(r).entry.key == "qwen3-0.6b" and view.row_at(r).entry.weights is None)
    with qtbot.waitSignal(window.model_loaded, timeout=TIMEOUT_MS) as loaded:
        window.fit_view.table.doubleClicked.emit(window.fit_view.model.index(row, 0))
    assert loaded.args[0].source == "catalogue:qwen3-0.6b"
    window.close()


def test_the_table_says_it_is_ranking_before_the_first_rows(qtbot, state):
    """Before the first ranking ends the table holds one line saying what it does (it stood
    blank); the ranked rows replace it, and a double-click on it opens nothing."""
    panel = FitPanel(state, controller=FitController(state, expected=expected_machine))
    qtbot.addWidget(panel)
    panel.resize(1200, 600)
    lines: list[str] = []
    panel.controller.progressed.connect(
        lambda _m: lines.append(panel.model.item(0, 0).text() if panel.model.rowCount() == 1 else ""))
    with qtbot.waitSignal(panel.controller.rows_ranked, timeout=TIMEOUT_MS):
        panel.show()
        qtbot.waitExposed(panel)
    panel.controller.shutdown()
    assert lines and all(line.startswith(f"Ranking the catalogue on {state.machine.name}") for line in lines)
    assert panel.model.rowCount() == len(panel.controller.rows) > 40
    assert panel.table.columnSpan(0, 0) == 1 and panel.row_at(0) is not None
