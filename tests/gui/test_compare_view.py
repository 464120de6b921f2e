"""The Compare view: its rows are the pinned series (Ctrl+P, the Compare panel and the table pin
and unpin one set), each ``report.compare``'s row at its pinned workload and placement, named as
the charts' legends name it, in a table sortable by any column and a chart that starts at 0 with
a log scale option, in the window's theme; saving writes compare.csv and a compare.png with its
title and workload."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from PySide6.QtCore import Qt

from rooflab.core.io.presets import load_machine
from rooflab.core.report.chart_types import distinguishing_labels
from rooflab.core.report.compare import compare_row
from rooflab.gui.panels.compare_table import CompareTablePanel
from rooflab.gui.state.compare_rows import CompareController
from rooflab.gui.widgets.theme import DARK, LIGHT


@pytest.fixture
def panel(qtbot, state):
    machines = [load_machine(k) for k in ("rtx-4090", "h100-sxm", "desktop-ddr5")]
    view = CompareTablePanel(state, machines=machines,
                             controller=CompareController(state, expected=lambda spec, machine, choice=None: None))
    qtbot.addWidget(view)
    view.resize(1200, 700)
    view.show()
    qtbot.waitExposed(view)
    return view


def _column(panel, title):
    return next(i for i in range(panel.model.columnCount())
                if panel.model.horizontalHeaderItem(i).text() == title)


def _texts(panel, title):
    c = _column(panel, title)
    return [panel.model.item(r, c).text() for r in range(panel.model.rowCount())]


def test_pins_and_rows_are_one_set(qtbot, panel, state):
    """Issue 20: pins (Ctrl+P) never appeared in the table: two separate mechanisms."""
    with qtbot.waitSignal(panel.controller.rows_computed):
        state.pin_current()                                       # what Ctrl+P does
    assert panel.model.rowCount() == 1 and _texts(panel, "Model") == [state.model.name]
    row = panel.controller.rows[0]
    assert row == compare_row(state.model, state.machine, state.workload)
    panel.machine_picker.setCurrentIndex(1)                       # h100-sxm
    with qtbot.waitSignal(panel.controller.rows_computed):
        qtbot.mouseClick(panel.add_machine_button, Qt.MouseButton.LeftButton)
    assert len(state.pinned) == 2 and state.pinned[1].scenario.machine.key == "h100-sxm"     # a pin too
    assert _texts(panel, "Machine") == [state.machine.name, "NVIDIA H100 SXM"]
    qtbot.mouseClick(panel.add_button, Qt.MouseButton.LeftButton)  # already pinned: not twice
    assert panel.model.rowCount() == 2 and len(state.pinned) == 2
    # the series column and the chart name rows as the charts' legends do: model, machine, placement
    labels = distinguishing_labels([p.scenario.description for p in state.pinned])
    assert _texts(panel, "Series") == labels == panel.plot.shown[0]
    assert labels[1] == "Qwen3-8B Q4_K_M · NVIDIA H100 SXM · auto placement"
    # unpinning elsewhere removes the row; the table's Unpin unpins
    with qtbot.waitSignal(panel.controller.rows_computed):
        state.unpin(state.pinned[0].pin_id)
    assert _texts(panel, "Machine") == ["NVIDIA H100 SXM"]
    panel.table.selectRow(0)
    qtbot.mouseClick(panel.remove_button, Qt.MouseButton.LeftButton)
    assert not state.pinned and panel.model.rowCount() == 0 and "Nothing pinned yet" in panel.message.text()


def test_each_row_is_priced_at_its_pinned_workload(qtbot, panel, state):
    state.pin_current()
    before = panel.controller.rows[0]
    state.update_workload(prompt=state.workload.prompt * 4)
    state.pin_current()
    first, second = panel.controller.rows
    assert first == before and second.ttft > first.ttft            # the first keeps its own workload
    assert "each at its own workload" in panel.message.text()
    assert [p.scenario.workload.prompt for p in panel.controller.pins] == [2048, 8192]


def test_sort_by_any_column_both_ways(qtbot, panel, state):
    for key in ("rtx-4090", "h100-sxm", "desktop-ddr5"):
        panel.controller.add(state.model, load_machine(key))
    tpot = _column(panel, "TPOT")
    panel.table.sortByColumn(tpot, Qt.SortOrder.AscendingOrder)
    values = [panel.model.item(r, tpot).data(Qt.ItemDataRole.UserRole + 1) for r in range(3)]
    assert values == sorted(values)
    assert _texts(panel, "Machine")[0] == "NVIDIA H100 SXM"          # fastest first
    panel.table.sortByColumn(tpot, Qt.SortOrder.DescendingOrder)
    assert _texts(panel, "Machine")[0] == "8-core desktop CPU, DDR5 dual channel"
    # unpinning the selected row unpins that series, whatever the sort
    panel.table.selectRow(0)
    gone = _texts(panel, "Machine")[0]
    qtbot.mouseClick(panel.remove_button, Qt.MouseButton.LeftButton)
    assert gone not in _texts(panel, "Machine") and panel.model.rowCount() == 2
    assert gone not in [p.scenario.machine.name for p in state.pinned]


def test_the_chart_starts_at_zero_and_has_a_log_scale(qtbot, panel, state):
    panel.controller.add(state.model, load_machine("rtx-4090"))
    panel.controller.add(state.model, load_machine("desktop-ddr5"))
    panel.column_picker.setCurrentText("TPOT")
    assert panel.plot.shown[1] == [r.tpot for r in panel.controller.rows]
    assert panel.plot.getAxis("bottom").labelText == "TPOT"
    low, high = panel.plot.getViewBox().viewRange()[0]
    assert low == 0 and high >= max(r.tpot for r in panel.controller.rows)
    panel.log_check.setChecked(True)
    assert panel.plot.getPlotItem().ctrl.logXCheck.isChecked()
    panel.log_check.setChecked(False)
    assert not panel.plot.getPlotItem().ctrl.logXCheck.isChecked()


def test_points_take_their_series_colours_and_the_theme(qtbot, panel, state):
    panel.controller.add(state.model, load_machine("rtx-4090"))
    panel.controller.add(state.model, load_machine("h100-sxm"))
    colours = [LIGHT.series[p.pin_id % len(LIGHT.series)] for p in state.pinned]
    assert panel.colours() == colours
    drawn = [b.color().name() for b in panel.plot.points.data["brush"]]
    assert drawn == colours
    panel.apply_theme(DARK)
    assert panel.plot.backgroundBrush().color().name() == DARK.background
    assert [b.color().name() for b in panel.plot.points.data["brush"]] == \
        [DARK.series[p.pin_id % len(DARK.series)] for p in state.pinned]
    image = panel.plot.grab().toImage()
    corner = image.pixelColor(3, 3).name()
    assert corner == DARK.background                                 # the chart is dark, not white


def test_hidden_view_works_rows_out_when_shown(qtbot, panel, state):
    panel.hide()
    state.pin_current()
    assert panel.controller.rows == []
    with qtbot.waitSignal(panel.controller.rows_computed):
        panel.show()
    assert len(panel.controller.rows) == 1


def test_names_and_figures_are_read_whole(qtbot, window):
    """Issue 39: rows pinned while the tab was hidden kept their headers' widths, and the table
    read "Qwe… Q4_…", "NVIDIA GeForce …": every column is as wide as its widest cell (the Series
    column at most ``SERIES_WIDTH``, its name wrapped onto as many lines as it takes)."""
    from PySide6.QtGui import QFontMetrics

    from rooflab.gui.panels.compare_table import SERIES_WIDTH

    window.resize(1280, 720)
    window.show()
    qtbot.waitExposed(window)
    window.state.pin_current()
    window.state.update_workload(prompt=5600, batch=4)
    window.state.pin_current()
    view = window.compare_view
    with qtbot.waitSignal(view.controller.rows_computed, timeout=10_000):
        window.plot_tabs.setCurrentWidget(view)
    qtbot.wait(20)
    table, metrics = view.table, QFontMetrics(view.table.font())
    for column in range(1, view.model.columnCount()):
        for row in range(view.model.rowCount()):
            text = view.model.item(row, column).text()
            assert metrics.horizontalAdvance(text) < table.columnWidth(column), (text, table.columnWidth(column))
    assert table.columnWidth(0) <= SERIES_WIDTH
    for row in range(view.model.rowCount()):
        name = view.model.item(row, 0).text()
        wanted = metrics.boundingRect(0, 0, SERIES_WIDTH - 40, 1000, Qt.TextFlag.TextWordWrap, name).height()
        assert table.rowHeight(row) >= wanted, (name, table.rowHeight(row), wanted)


def test_a_row_that_does_not_fit_shows_no_figures(qtbot, panel, state):
    from rooflab.core.io import load_model

    # 2 GB of host memory: less than the back end's own reserve there (the weights alone could page from disk)
    small = dataclasses.replace(load_machine("rtx-4090"), offload_memory=2e9, key="small")
    panel.controller.add(load_model("gpt-oss-120b-mxfp4"), small)
    assert _texts(panel, "Fits") == ["NO"] and _texts(panel, "TPOT") == [""]
    assert _texts(panel, "Placement")[0].startswith("does NOT fit")


def test_save_writes_csv_and_a_png_with_title_and_workload(qtbot, panel, state, tmp_path, monkeypatch):
    from rooflab.gui.plots import compare_plot

    state.pin_current()
    seen = {}
    real = compare_plot.compare_image

    def recording(rows, **kw):
        seen.update(kw)
        return real(rows, **kw)

    monkeypatch.setattr(compare_plot, "compare_image", recording)
    csv_path, png_path = panel.save(tmp_path / "out")
    text = csv_path.read_text(encoding="utf-8")
    assert "# 1 pinned series at prompt 2,048, answer 256, context 0, batch 1, f16 cache" in text
    assert [line for line in text.splitlines() if not line.startswith("#")][0].startswith("model,machine,weights")
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert seen["heading"] == panel.heading() and seen["labels"] == panel.controller.labels
    image = real(panel.controller.rows, column="TPOT", heading=panel.heading())
    top = np.array([[image.pixelColor(x, y).lightness() for x in range(0, 400, 4)] for y in range(6, 40)])
    assert (top < 128).any()                                         # a title is drawn above the chart


def test_grab(qtbot, panel, state):
    state.pin_current()
    assert not panel.grab().isNull()


def test_window_has_the_compare_tab_and_ctrl_p_fills_it(qtbot, window):
    tabs = window.plot_tabs
    assert "Compare table" in [tabs.tabText(i) for i in range(tabs.count())]
    window.show()
    qtbot.waitExposed(window)
    tabs.setCurrentWidget(window.compare_view)
    with qtbot.waitSignal(window.compare_view.controller.rows_computed):
        window.pin_action.trigger()
    assert window.compare_view.model.rowCount() == 1
    assert window.compare.list.count() == 2                           # "Current" and the same pin
    window.set_theme("dark")
    assert window.compare_view.plot.backgroundBrush().color().name() == DARK.background
    window.set_theme("light")


def test_saved_report_carries_the_table(qtbot, window, tmp_path):
    window.state.pin_current()                      # the table never shown: the report still has it
    files = window.save_report(tmp_path)
    assert (files.folder / "compare.csv").is_file() and (files.folder / "compare.png").is_file()


@pytest.mark.parametrize("depths", ["0,4096", "1000,8000,100000"])
def test_compare_out_draws_the_depths_asked_for(qtbot, tmp_path, monkeypatch, depths):
    """Issue 15: ``compare --depths 0,4096 --out DIR`` crashed (IndexError: compare.png's table
    had the default three depth columns), and three other depths were labelled 4,096 and 32,768."""
    from rooflab.core.app import compare as app_compare
    from rooflab.gui.main import main

    drawn: list[str] = []
    real = app_compare.compare_text

    def recording(rows, depths=None):
        drawn.append(real(rows, depths))
        return drawn[-1]

    monkeypatch.setattr(app_compare, "compare_text", recording)
    out = tmp_path / "out"
    assert main(["compare", "--models", "qwen3-0.6b", "--machines", "rtx-4090,desktop-ddr5", "--ceiling-only",
                 "--depths", depths, "--out", str(out)]) == 0
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    header = drawn[-1].splitlines()[0]                 # the table compare.png draws
    assert [f"@{int(d):,}" in header for d in depths.split(",")] == [True] * len(depths.split(","))
    assert header.count("tok/s @") == len(depths.split(","))


def test_the_expected_ttft_has_its_column(qtbot, state, capsys):
    """``fit`` had an expected TTFT, ``compare`` (text and this table) had none (issue 39)."""
    from rooflab.core.app.resolve import expected_machine
    from rooflab.core.cli.main import main

    panel = CompareTablePanel(state, machines=[load_machine("rtx-4090")],
                              controller=CompareController(state, expected=expected_machine))
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitExposed(panel)
    panel.controller.add(state.model, load_machine("rtx-4090"))
    qtbot.waitUntil(lambda: len(panel.controller.rows) == 1, timeout=30_000)
    (row,) = panel.controller.rows
    assert row.expected_ttft is not None
    (text,) = _texts(panel, "Expected TTFT")
    assert text == f"{row.expected_ttft * 1e3:,.1f} ms"
    assert main(["compare", "--models", "qwen3-8b-q4_k_m", "--machines", "rtx-4090", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["expected_ttft_seconds"] == pytest.approx(row.expected_ttft)
