"""The Compare table's "Pin current" takes the placement on screen (by hand, or several
devices): the row's figures are the headline's, and its placement column says how it sits.
Rows pinned from the machine picker stay on auto-fit."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from rooflab.core.predict.choice import PlacementChoice
from rooflab.core.report.units import fmt
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import open_placed

GPT_OSS, QWEN_32B = "gpt-oss-120b-mxfp4", "qwen3-32b-q4_k_m"


def _add_current(qtbot, window):
    view = window.compare_view
    window.show()
    qtbot.waitExposed(window)
    window.plot_tabs.setCurrentWidget(view)
    with qtbot.waitSignal(view.controller.rows_computed, timeout=WAIT_MS):
        qtbot.mouseClick(view.add_button, Qt.MouseButton.LeftButton)
    return view


def _cell(view, row: int, title: str) -> str:
    column = next(i for i in range(view.model.columnCount()) if view.model.horizontalHeaderItem(i).text() == title)
    return view.model.item(row, column).text()


def test_add_current_keeps_gpu_layers_set_by_hand(qtbot, window):
    """-ngl 20 of gpt-oss on a 4090 does not fit; the row said fits=yes, -ngl 37 --n-cpu-moe 23."""
    frame = open_placed(qtbot, window, GPT_OSS, PlacementChoice(gpu_layers=20))
    assert not frame.summary.placed.fits
    view = _add_current(qtbot, window)
    row = view.controller.rows[0]
    assert not row.fits and row.tpot is None and "--n-cpu-moe" not in row.placement
    assert _cell(view, 0, "Fits") == "NO" and _cell(view, 0, "TPOT") == ""
    assert _cell(view, 0, "Placement").startswith("-ngl 20 (does NOT fit")
    # the same model from the machine picker is placed by auto-fit, a row of its own
    view.machine_picker.setCurrentIndex(view.machine_picker.findText(window.state.machine.name))
    with qtbot.waitSignal(view.controller.rows_computed, timeout=WAIT_MS):
        qtbot.mouseClick(view.add_machine_button, Qt.MouseButton.LeftButton)
    assert view.model.rowCount() == 2
    auto = view.controller.rows[1]
    assert auto.fits and auto.flags == "-ngl 37 --n-cpu-moe 23 -ot blk.23.ffn_down=CPU"     # llama.cpp's fit
    assert [label.rsplit(" · ", 1)[-1] for label in view.controller.labels] == ["-ngl 20", "auto placement"]
    # pinning the current one again adds nothing; changing the workload keeps each row as pinned
    qtbot.mouseClick(view.add_button, Qt.MouseButton.LeftButton)
    assert view.model.rowCount() == 2
    window.state.update_workload(prompt=4096)
    first, second = view.controller.rows
    assert not first.fits and second.flags == "-ngl 37 --n-cpu-moe 23 -ot blk.23.ffn_down=CPU"


def test_add_current_on_two_devices_gives_the_headline(qtbot, window):
    """2 x tensor parallel: the row showed the one-card TPOT 19.7 ms against the headline's (11.4 ms
    since an all-reduce over the 4090s' PCIe costs 11.8 us, core/values/links.py: 2 x 64 layers
    of it, about 1.5 ms a step, on top of each card reading half the weights)."""
    frame = open_placed(qtbot, window, QWEN_32B, PlacementChoice(devices=2, parallel="tensor"))
    view = _add_current(qtbot, window)
    row = view.controller.rows[0]
    assert row.tpot == pytest.approx(frame.summary.estimate.tpot, rel=1e-12)
    assert row.ttft == pytest.approx(frame.summary.estimate.ttft, rel=1e-12)
    assert _cell(view, 0, "Placement") == "2 × tensor parallel"
    assert fmt(row.tpot, "s") == window.numbers.value_text("tpot") == "11.4 ms"
    assert row.device_used == pytest.approx(frame.summary.placed.parallel.memory.used)
