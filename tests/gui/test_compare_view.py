"""The Compare view: rows from the selection, a table sortable by any column, a plot with a log
scale, recompute on a workload change, and saving the table as CSV and PNG."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Qt

from rooflab.core.io.presets import load_machine
from rooflab.core.report.compare import compare_row
from rooflab.gui.panels.compare_table import CompareTablePanel
from rooflab.gui.state.compare_rows import CompareController


@pytest.fixture
def panel(qtbot, state):
    machines = [load_machine(k) for k in ("rtx-4090", "h100-sxm", "desktop-ddr5")]
    view = CompareTablePanel(state, machines=machines,
                             controller=CompareController(state, expected=lambda spec, machine: None))
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


def test_add_rows_from_the_selection(qtbot, panel, state):
    with qtbot.waitSignal(panel.controller.rows_computed):
        qtbot.mouseClick(panel.add_button, Qt.MouseButton.LeftButton)
    assert panel.model.rowCount() == 1 and _texts(panel, "Model") == [state.model.name]
    row = panel.controller.rows[0]
    assert row == compare_row(state.model, state.machine, state.workload, weights=row.weights)
    panel.machine_picker.setCurrentIndex(1)                       # h100-sxm
    with qtbot.waitSignal(panel.controller.rows_computed):
        qtbot.mouseClick(panel.add_machine_button, Qt.MouseButton.LeftButton)
    assert _texts(panel, "Machine") == [state.machine.name, "NVIDIA H100 SXM"]
    qtbot.mouseClick(panel.add_button, Qt.MouseButton.LeftButton)  # already there: not twice
    assert panel.model.rowCount() == 2
    assert panel.plot.shown[0] == ["rtx-4090", "h100-sxm"]         # the part of the names that differs


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
    panel.table.sortByColumn(_column(panel, "Machine"), Qt.SortOrder.AscendingOrder)
    assert _texts(panel, "Machine") == sorted(_texts(panel, "Machine"))
    # removing the selected row removes that row, whatever the sort
    panel.table.selectRow(0)
    gone = _texts(panel, "Machine")[0]
    qtbot.mouseClick(panel.remove_button, Qt.MouseButton.LeftButton)
    assert gone not in _texts(panel, "Machine") and panel.model.rowCount() == 2


def test_log_scale_and_plotted_column(qtbot, panel, state):
    panel.controller.add(state.model, load_machine("rtx-4090"))
    panel.controller.add(state.model, load_machine("desktop-ddr5"))
    panel.column_picker.setCurrentText("TPOT")
    assert panel.plot.shown[1] == [r.tpot for r in panel.controller.rows]
    assert panel.plot.getAxis("bottom").labelText == "TPOT"
    panel.log_check.setChecked(True)
    assert panel.plot.getPlotItem().ctrl.logXCheck.isChecked()
    panel.log_check.setChecked(False)
    assert not panel.plot.getPlotItem().ctrl.logXCheck.isChecked()


def test_workload_change_recomputes_and_clear_empties(qtbot, panel, state):
    panel.controller.add(state.model, state.machine)
    before = panel.controller.rows[0].ttft
    with qtbot.waitSignal(panel.controller.rows_computed, timeout=3000):
        state.update_workload(prompt=state.workload.prompt * 4)
    after = panel.controller.rows[0].ttft
    assert after is not None and before is not None and after > before
    assert _texts(panel, "TTFT")[0] != ""
    qtbot.mouseClick(panel.clear_button, Qt.MouseButton.LeftButton)
    assert panel.model.rowCount() == 0 and "No rows yet" in panel.message.text()


def test_hidden_view_recomputes_when_shown(qtbot, panel, state):
    panel.controller.add(state.model, state.machine)
    panel.hide()
    state.update_workload(prompt=state.workload.prompt + 1)
    qtbot.wait(400)
    assert panel.controller.rows[0].ttft is not None
    stale = panel.controller.rows[0]
    with qtbot.waitSignal(panel.controller.rows_computed):
        panel.show()
    assert panel.controller.rows[0] != stale


def test_a_row_that_does_not_fit_shows_no_figures(qtbot, panel, state):
    from rooflab.core.io import load_model

    small = dataclasses.replace(load_machine("rtx-4090"), offload_memory=16e9, key="small")
    panel.controller.add(load_model("gpt-oss-120b-mxfp4"), small)
    assert _texts(panel, "Fits") == ["NO"] and _texts(panel, "TPOT") == [""]
    assert _texts(panel, "Placement")[0].startswith("does NOT fit")


def test_save_writes_csv_and_png(qtbot, panel, state, tmp_path):
    panel.controller.add(state.model, state.machine)
    csv_path, png_path = panel.save(tmp_path / "out")
    assert csv_path.read_text(encoding="utf-8").splitlines()[0].startswith("model,machine,weights")
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_grab(qtbot, panel, state):
    panel.controller.add(state.model, state.machine)
    assert not panel.grab().isNull()


def test_window_has_the_compare_tab(qtbot, window):
    tabs = window.plot_tabs
    titles = [tabs.tabText(i) for i in range(tabs.count())]
    assert "Compare table" in titles
    tabs.setCurrentWidget(window.compare_view)
    with qtbot.waitSignal(window.compare_view.controller.rows_computed):
        qtbot.mouseClick(window.compare_view.add_button, Qt.MouseButton.LeftButton)
    assert window.compare_view.model.rowCount() == 1


def test_saved_report_carries_the_table(qtbot, window, tmp_path):
    window.plot_tabs.setCurrentWidget(window.compare_view)
    window.compare_view.controller.add_current()
    files = window.save_report(tmp_path)
    assert (files.folder / "compare.csv").is_file() and (files.folder / "compare.png").is_file()


@pytest.mark.parametrize("depths", ["0,4096", "1000,8000,100000"])
def test_compare_out_draws_the_depths_asked_for(qtbot, tmp_path, monkeypatch, depths):
    """Issue 15: ``compare --depths 0,4096 --out DIR`` crashed (IndexError: compare.png's table
    had the default three depth columns), and three other depths were labelled 4,096 and 32,768."""
    from rooflab.core.cli import compare as cli_compare
    from rooflab.gui.main import main

    drawn: list[str] = []
    real = cli_compare.compare_text

    def recording(rows, depths=None):
        drawn.append(real(rows, depths))
        return drawn[-1]

    monkeypatch.setattr(cli_compare, "compare_text", recording)
    out = tmp_path / "out"
    assert main(["compare", "--models", "qwen3-0.6b", "--machines", "rtx-4090,desktop-ddr5", "--ceiling-only",
                 "--depths", depths, "--out", str(out)]) == 0
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    header = drawn[-1].splitlines()[0]                 # the table compare.png draws
    assert [f"@{int(d):,}" in header for d in depths.split(",")] == [True] * len(depths.split(","))
    assert header.count("tok/s @") == len(depths.split(","))
