"""The window as a user sees it at common screen sizes: every stacked plot tall enough to read
(its y-axis title no longer than its axis), scrolling only where the screen is too short."""

from __future__ import annotations

import numpy as np
import pytest

from rooflab.core.report.charts import CHART_KEYS
from tests.factories.waits import WAIT_MS


def crossings(rect: tuple[float, float, float, float], curves: list[np.ndarray]) -> int:
    """How many of the polylines ``curves`` (pixel positions) pass through ``rect``: the count
    the label placer keeps at zero, asked for one rectangle."""
    from rooflab.gui.plots.labels import curve_counts, segments

    return int(curve_counts(np.array([rect], dtype=np.float64), segments(curves))[0])


def _show_at(qtbot, window, size: tuple[int, int], chart: str):
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    plot = window.plots[chart]
    window.plot_tabs.setCurrentWidget(plot)
    qtbot.wait(20)                       # let the layouts settle
    return plot


@pytest.mark.parametrize("chart", ["decode", "prefill", "batching"])
def test_at_1280x720_every_panel_is_tall_enough_for_its_axis_title(qtbot, window, chart):
    plot = _show_at(qtbot, window, (1280, 720), chart)
    for key in plot.panel_keys():
        view = plot.panel_view(key)
        box = view.plot.getViewBox().size().height()
        title = view.plot.getAxis("left").label.boundingRect().width()
        assert box >= 100, (key, box)
        assert title <= box + 4, f"{key}: y-axis title {title:.0f} px on a {box:.0f} px axis"


def _pin_three(window) -> None:
    """Three series pinned (two models, two machines), Qwen3-30B-A3B on the RTX 4090 on screen."""
    from rooflab.core.io.presets import load_machine
    from tests.gui.conftest import catalogue_spec

    state = window.state
    for model, machine in (("qwen3-8b-q4_k_m", "rtx-4090"), ("qwen3-8b-q4_k_m", "dgx-spark"),
                           ("gemma-3-12b-q4_k_m", "rtx-4090")):
        state.set_machine(load_machine(machine))
        state.set_model(catalogue_spec(model))
        state.pin_current()
    state.set_machine(load_machine("rtx-4090"))
    state.set_model(catalogue_spec("qwen3-30b-a3b-q4_k_m"))
    window.recompute.recompute_now()


@pytest.mark.parametrize("pins", [0, 3])
@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_every_chart_is_tall_enough_and_side_by_side_only_when_wide_enough(qtbot, window, size, pins):
    """Issue 20: with series pinned at 1280 x 720 the panels of a tab sat side by side about 200 px
    wide and 150 px tall, their tick labels running together ("10,00020,00030,000"). A panel is at
    least 300 px tall on every tab (side by side, at least 200 px where its row's legends take
    the rest of the view); panels sit side by side only while each keeps 400 px; the rest
    scrolls, and nothing runs past the plot's right edge."""
    from rooflab.gui.plots.grid import MIN_CHART_HEIGHT, MIN_CHART_WIDTH, MIN_FITTED_HEIGHT

    if pins:
        _pin_three(window)
    for chart in CHART_KEYS:
        plot = _show_at(qtbot, window, size, chart)
        columns = plot.columns()
        room = plot.scroll_area.viewport().width()
        least = MIN_CHART_HEIGHT if columns == 1 else MIN_FITTED_HEIGHT
        for key in plot.panel_keys():
            rect = plot.panel_view(key).plot.geometry()
            assert rect.height() >= least - 1, (chart, key, rect.height())
            assert rect.right() <= room + 1, (chart, key, rect.right(), room)
            if columns > 1:
                assert rect.width() >= MIN_CHART_WIDTH - 1, (chart, key, columns, rect.width())
        if size == (1920, 1080):          # every panel side by side and in full (a long legend may scroll)
            assert columns == len(plot.panel_keys()), chart
            for key in plot.panel_keys():
                bottom = plot.panel_view(key).plot.geometry().bottom()
                assert bottom <= plot.scroll_area.viewport().height(), (chart, key)
    if size == (1280, 720):
        assert window.plots["decode"].columns() == 2      # 3 x 290 px was too narrow


@pytest.mark.parametrize("pins", [0, 2])
@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_a_row_of_charts_and_its_legends_are_seen_whole(qtbot, window, size, pins):
    """Issue 39: at 1280 x 720 the view under the tabs is about 345 px and the panels side by
    side kept 300 px, so the Serving legends (8 entries, more with pins) sat wholly below it and
    the Decode and Batching ones were cut mid-entry; a pinned series was named again, in full,
    for each of its lines ("TTFT p90: Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090 · ..."). Side by
    side, the first row's panels give way to their legends: panels and legends end inside the
    view, unscrolled, on every tab; a pin is named once, in the line over the tabs."""
    from rooflab.core.io.presets import load_machine
    from rooflab.gui.plots.grid import MIN_FITTED_HEIGHT

    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    state = window.state
    if pins:
        state.pin_current()
        state.update_workload(prompt=5600, batch=4)
        state.pin_current()
        state.set_machine(load_machine("m3-max"))
    qtbot.waitUntil(lambda: not window.recompute.pending and len(window.recompute.frame.pinned) == pins,
                    timeout=WAIT_MS)
    pinned = {p.label for p, _ in window.recompute.frame.pinned}
    for plot in [*window.plots.values(), window.plot_panel.serving]:
        window.plot_tabs.setCurrentWidget(plot)
        qtbot.waitUntil(lambda plot=plot: plot.chart is not None and bool(plot.panel_keys()), timeout=WAIT_MS)
        window.flush_plots()
        qtbot.wait(30)
        if plot.columns() < 2:
            continue
        port = plot.scroll_area.viewport().height()
        assert plot.scroll_area.verticalScrollBar().value() == 0
        for key in plot.panel_keys()[:plot.columns()]:
            view = plot.panel_view(key)
            texts = [_words(label.text) for _sample, label in view.legend.items]
            assert not [t for t in texts if any(_words(name) in t for name in pinned)], (plot.chart_key, texts)
            assert view.legend.geometry().bottom() <= port + 1, (plot.chart_key, key, view.legend.geometry(), port)
            assert view.plot.geometry().height() >= MIN_FITTED_HEIGHT - 1, (plot.chart_key, key)
    for name in pinned:                                      # named, whole, over the tabs
        assert name in window.scenario_label.text()


@pytest.mark.parametrize("chart", CHART_KEYS)
def test_at_1920x1080_every_plot_fits_without_scrolling(qtbot, window, chart):
    plot = _show_at(qtbot, window, (1920, 1080), chart)
    assert plot.scroll_area.verticalScrollBar().maximum() == 0
    for key in plot.panel_keys():
        view = plot.panel_view(key)
        box = view.plot.getViewBox().size().height()
        assert view.plot.getAxis("left").label.boundingRect().width() <= box + 4, key


def _hover_marker(plot, panel: str) -> str:
    marker = plot.curve(panel, "current")
    return plot.readout_at(panel, float(marker.x[0]), float(marker.y[0]))


@pytest.mark.parametrize("change", ["model", "machine", "workload"])
def test_hover_readout_goes_when_what_it_describes_changes(qtbot, window, change):
    from rooflab.core.io.presets import load_machine
    from rooflab.gui.plots.base import HOVER_HINT
    from tests.gui.conftest import catalogue_spec

    plot = window.plots["prefill"]
    window.plot_tabs.setCurrentWidget(plot)
    before = _hover_marker(plot, "ttft")
    assert before and plot.readout.text() == before
    assert len(plot.panel_view("ttft").hover_dot.data) == 1
    if change == "model":
        window.state.set_model(catalogue_spec("qwen3-0.6b"))
    elif change == "machine":
        window.state.set_machine(load_machine("m4-max"))
    else:
        window.state.update_workload(prompt=512)
    assert plot.readout.text() == HOVER_HINT                       # state -> read-out
    assert len(plot.panel_view("ttft").hover_dot.data) == 0
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.recompute.recompute_now()
    after = _hover_marker(plot, "ttft")                             # read-out -> the new series
    assert after and after != before and plot.readout.text() == after


def test_window_title_names_rooflab_once(window):
    title = window.windowTitle()
    assert window.state.model.name in title and window.state.machine.name in title
    # the app's display name is "rooflab" (app.make_app), which Qt appends to a title that
    # does not already end with it: "rooflab — ... — rooflab" on Linux
    assert title.endswith(" — rooflab")
    assert title.count("rooflab") == 1


def test_a_one_token_prompt_reads_in_the_singular(qtbot, window):
    window.state.update_workload(prompt=1, answer=2)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.recompute.recompute_now()
    plot = window.plots["prefill"]
    window.plot_tabs.setCurrentWidget(plot)
    text = _hover_marker(plot, "ttft")
    assert "prompt 1 token" in text and "1 tokens" not in text
    from rooflab.core.app.figures import summarise
    from rooflab.core.report.explain import explain

    sc = window.state.scenario
    end_to_end = next(line for line in explain(sc, summarise(sc)) if line.key == "end_to_end")
    assert "plus 1 more step of TPOT" in end_to_end.sentence, end_to_end.sentence


def test_one_tensor_groups_and_one_fitting_sequence_read_in_the_singular(window):
    import dataclasses

    from rooflab.core.app.figures import summarise
    from rooflab.core.report.explain import explain
    from rooflab.gui.panels.model_panel import SHAPE

    tree = window.model_panel.tree
    shapes = [tree.topLevelItem(i).text(SHAPE) for i in range(tree.topLevelItemCount())]
    assert "1 tensor" in shapes and "1 tensors" not in shapes, shapes
    sc = window.state.scenario
    memory = next(line for line in explain(sc, dataclasses.replace(summarise(sc), placed_max_batch=1))
                  if line.key == "memory")
    assert "at most 1 such sequence fits." in memory.sentence, memory.sentence


def test_a_junk_file_is_described_in_hex_not_as_a_python_bytes_literal(qtbot, window, tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"\xf6C_\xb7" + bytes(64))
    with qtbot.waitSignal(window.model_failed, timeout=WAIT_MS) as blocker:
        window.open_model(str(junk))
    assert "f6 43 5f b7" in blocker.args[0], blocker.args[0]
    assert "b'" not in window.messages.text() and "\\x" not in window.messages.text()
    qtbot.waitUntil(lambda: not window.opener.jobs.busy, timeout=WAIT_MS)


@pytest.mark.parametrize("answer", ["Yes", "No"])
def test_report_folder_dialog_offers_to_create_a_new_folder(qtbot, tmp_path, monkeypatch, answer):
    from PySide6.QtWidgets import QDialog, QMessageBox

    from rooflab.gui.export.report import ReportFolderDialog

    asked: list[str] = []

    def question(_parent, _title, text, *_args):
        asked.append(text)
        return getattr(QMessageBox.StandardButton, answer)

    monkeypatch.setattr(QMessageBox, "question", question)
    new = tmp_path / "gone" / "report"           # the last report's folder, deleted since
    dialog = ReportFolderDialog(None, new)
    qtbot.addWidget(dialog)
    assert dialog.directory().absolutePath() == str(tmp_path)       # opens where it still can
    assert dialog.chosen() == new                                  # and offers the missing folder
    dialog.accept()
    assert asked and str(new) in asked[0]
    if answer == "Yes":
        assert new.is_dir() and dialog.result() == QDialog.DialogCode.Accepted
    else:
        assert not new.exists() and dialog.result() != QDialog.DialogCode.Accepted


def test_save_report_into_a_new_folder_from_the_menu(qtbot, window, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from rooflab.gui.export.report import ReportFolderDialog

    new = tmp_path / "new" / "report"
    monkeypatch.setattr(QMessageBox, "question", lambda *a: QMessageBox.StandardButton.Yes)

    def exec_(dialog):
        from PySide6.QtWidgets import QLineEdit

        dialog.findChild(QLineEdit, "fileNameEdit").setText(str(new))     # the user types it
        dialog.accept()
        return dialog.result()

    monkeypatch.setattr(ReportFolderDialog, "exec", exec_)
    window.save_action.trigger()
    assert (new / "sheet.png").is_file(), window.messages.text()
    assert window.messages.level == "info" and str(new) in window.messages.text()


@pytest.mark.parametrize("chart", CHART_KEYS)
def test_a_report_twin_widens_its_y_axes_for_their_tick_labels(window, chart):
    """In the report sheet the TTFT y-axis title overlapped "100 ms": an axis learns its
    tick labels' width only when painted, after the one grab the report kept."""
    from rooflab.gui.export.report import PLOT_SIZE
    from rooflab.gui.widgets.theme import LIGHT

    window.flush_plots()
    plot = window.plots[chart]
    twin = type(plot)(theme=LIGHT)
    try:
        twin.resize(PLOT_SIZE)
        plot.replay_on(twin)
        twin.render_image(PLOT_SIZE)
        for key in twin.panel_keys():
            axis = twin.panel_view(key).plot.getAxis("left")
            wanted = axis.textWidth + axis.style["tickTextOffset"][0] + max(0, axis.style["tickLength"]) \
                + axis.label.boundingRect().height() * 0.8
            assert axis.width() >= wanted - 1, (key, axis.width(), wanted)
    finally:
        twin.deleteLater()


# -- labels and legends, as a user reads them (issue 11) -------------------------------------------

def _compare(qtbot, window, size=(1400, 900)):
    """The README's comparison: the current model and machine pinned, then another machine,
    then another model on screen: three series, two of one model, two on one machine."""
    from rooflab.core.io.presets import load_machine
    from tests.gui.conftest import catalogue_spec

    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    window.state.pin_current()
    window.state.set_machine(load_machine("dgx-spark"))
    window.state.pin_current()
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_model(catalogue_spec("gemma-3-12b-q4_k_m"))
    window.flush_plots()
    qtbot.wait(20)


def _words(text: str) -> str:
    """A legend entry's words, however it is wrapped (a legend under a narrow panel wraps more)."""
    return " ".join(text.replace("<br>", " ").replace("·", " ").split())


def _legend_texts(view) -> list[str]:
    return [_words(label.text) for _sample, label in view.legend.items]


def _stacked_twin(plot):
    """``plot`` drawn stacked, legends beside their panels, as a report's picture draws it
    (side by side on screen the line over the tabs names the pinned series, not the legends)."""
    from PySide6.QtCore import QSize

    twin = type(plot)()
    twin.resize(900, 1400)
    plot.replay_on(twin)
    twin.render_image(QSize(900, 1400))
    twin.deleteLater()
    return twin


def test_pinned_series_are_named_by_what_sets_them_apart(qtbot, window):
    """Legends cut "Qwen3-8B Q4_K_M · NVID…rk (GB10) · f16 cache" in the middle, where the
    machines differ: a series is named by the parts that differ, and never cut."""
    from rooflab.core.report.chart_types import distinguishing_labels

    _compare(qtbot, window)
    state = window.state
    expected = distinguishing_labels([state.scenario.description, *(p.scenario.description for p in state.pinned)])
    assert expected == ["Gemma-3-12B Q4_K_M · NVIDIA DGX Spark (GB10) · auto placement",
                        "Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090 · auto placement",
                        "Qwen3-8B Q4_K_M · NVIDIA DGX Spark (GB10) · auto placement"]     # model, machine, placement
    for chart in ("decode", "batching"):
        texts = _legend_texts(_stacked_twin(window.plots[chart]).panel_view("rate"))
        assert _words(expected[1]) in texts and _words(expected[2]) in texts, texts
        assert not [t for t in texts if "…" in t], texts
    memory = window.plots["memory"].panel_view("breakdown")
    # the bars: the same names (a series placed over two memories, a card and the host memory
    # its embedding table stays in, has a bar for each, named "series: memory")
    bars = memory.stack_labels
    # under the bars, less what every series shares (here "auto placement"; the line over the
    # tabs names them whole); a series with a bar per memory leaves its machine to its card's bar
    assert bars == ["Gemma-3-12B Q4_K_M · NVIDIA DGX Spark (GB10)", "Qwen3-8B Q4_K_M: NVIDIA GeForce RTX 4090",
                    "Qwen3-8B Q4_K_M: host DDR5 (dual channel)", "Qwen3-8B Q4_K_M · NVIDIA DGX Spark (GB10)"], bars


def _overlap(a, b, slack=2.0) -> bool:
    return (a[0] + slack < b[0] + b[2] and b[0] + slack < a[0] + a[2]
            and a[1] + slack < b[1] + b[3] and b[1] + slack < a[1] + a[3])


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_limit_and_marker_labels_stay_inside_the_plot_and_off_each_other(qtbot, window, size):
    """Three "TPOT over this answer" labels printed over each other, two machines' memory
    labels likewise, "prefill 2048 tok" ran off the roofline's right edge, and "weights 5.03 GB"
    was struck through by its own line."""
    import dataclasses

    _compare(qtbot, window, size)
    for chart, panel in (("decode", "step"), ("decode", "rate"), ("batching", "rate"), ("batching", "memory"),
                         ("memory", "growth"), ("roofline", "roofline")):
        plot = window.plots[chart]
        window.plot_tabs.setCurrentWidget(plot)
        qtbot.wait(20)
        view = plot.panel_view(panel)
        box = view.plot.getViewBox().boundingRect()
        shown = view.shown_labels()
        assert shown, f"{chart}/{panel}: no label on show"
        for drawn, text, (x, y, w, h) in shown:
            assert x >= -1 and y >= -1 and x + w <= box.width() + 1 and y + h <= box.height() + 1, (text, box)
            if drawn.curve.kind == "hline":
                at = view.pixels(dataclasses.replace(drawn.curve, kind="line", x=[1.0], y=drawn.curve.y[:1]))[0][1]
                assert not y + 1 < at < y + h - 1, f"{text!r} sits on its own line"
        for i, (_d, a_text, a) in enumerate(shown):
            for _e, b_text, b in shown[i + 1:]:
                assert not _overlap(a, b), (chart, panel, a_text, b_text)


def test_limit_labels_keep_off_the_curves(qtbot, window):
    """"largest batch that fits" crossed the total-rate line; "sliding window 1,024 tokens"
    sat on the decode ceiling."""
    from tests.gui.conftest import catalogue_spec

    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_model(catalogue_spec("gemma-3-12b-q4_k_m"))
    window.flush_plots()
    for chart, panel, label in (("batching", "rate", "max_fit"), ("decode", "rate", "window"),
                                ("decode", "step", "window"), ("decode", "step", "tpot")):
        plot = window.plots[chart]
        window.plot_tabs.setCurrentWidget(plot)
        qtbot.wait(20)
        view = plot.panel_view(panel)
        lines = [view.pixels(d.curve) for d in view.drawn.values() if d.visible and d.curve.kind == "line"]
        ((_drawn, text, rect),) = [s for s in view.shown_labels() if s[0].curve.key == label]
        assert crossings(rect, lines) == 0, f"{chart}/{panel}: {text!r} crosses a curve"


def _axis_texts(axis) -> list[str]:
    from PySide6.QtGui import QImage, QPainter

    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        _axis_spec, _ticks, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [text for _rect, _flags, text in texts]


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_every_memory_bar_is_named_under_it(qtbot, window, size):
    """With two series pinned only the middle bar had a name: the others were wider than their
    bar and the axis dropped them."""
    _compare(qtbot, window, size)
    plot = window.plots["memory"]
    window.plot_tabs.setCurrentWidget(plot)
    qtbot.wait(20)
    view = plot.panel_view("breakdown")
    drawn = _axis_texts(view.plot.getAxis("bottom"))
    # a bar per memory of each series as placed (the card's, and host memory's reserve beside it)
    assert len(drawn) == len(view.stack_labels) >= 3, drawn
    words = [" ".join(t.replace("-\n", "-").replace("·", " ").split()) for t in drawn]     # "Gemma-3-" / "12B"
    assert words == [" ".join(n.replace("·", " ").split()) for n in view.stack_labels]


def _swatches(view) -> dict[str, str]:
    return {label.text: sample.item.opts["brush"].color().name() for sample, label in view.legend.items}


def test_the_free_swatch_keeps_its_colour_when_memory_runs_over(qtbot, window):
    from rooflab.gui.plots.stack import stack_colour

    plot = window.plots["memory"]
    window.plot_tabs.setCurrentWidget(plot)
    view = plot.panel_view("breakdown")
    window.flush_plots()
    theme = plot.theme
    assert _swatches(view)["free"] == stack_colour(theme, "free")
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(batch=4096, context=100_000)            # far past the 24 GB
    window.flush_plots()
    over = _swatches(view)
    assert "free" not in over and over["over capacity"] == stack_colour(theme, "over capacity")
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(batch=1, context=0)
    window.flush_plots()
    back = _swatches(view)
    assert back["free"] == stack_colour(theme, "free") != stack_colour(theme, "over capacity")
    assert "over capacity" not in back


def test_calibrated_lines_on_one_panel_have_swatches_of_their_own(window):
    """The calibrated per-sequence and total rates were drawn alike: one swatch for two series."""
    import dataclasses

    from rooflab.core.report.overlays import calibrated_curves
    from rooflab.core.values.efficiency import Efficiency

    state = window.state
    machine = dataclasses.replace(state.machine, efficiency=Efficiency(bandwidth=0.6, compute=0.5))
    overlay = calibrated_curves(state.model, machine, state.workload)
    plot = window.plots["batching"]
    window.flush_plots()
    plot.set_calibrated("rate", overlay[("batching", "rate")], label="llama.cpp fit")
    pens = {curve.key: plot.items("rate", curve.key, "calibrated")[0].opts["pen"].color().name()
            for curve in overlay[("batching", "rate")]}
    assert len(set(pens.values())) == 2, pens
    for key, colour in pens.items():        # each in its prediction's colour, dotted
        twin = plot.items("rate", key.removeprefix("calibrated_"))[0].opts["pen"].color().name()
        assert colour == twin


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_stacked_panels_line_up_and_count_tokens_from_zero(qtbot, window, size):
    """The decode tab's lower panels ran into negative token counts: their y axes were
    narrower than the top one's, and the linked x axes shifted to line the boxes up."""
    plot = _show_at(qtbot, window, size, "decode")
    window.flush_plots()
    qtbot.wait(20)
    lefts, tops = set(), set()
    for key in plot.panel_keys():
        view = plot.panel_view(key)
        low = view.plot.getViewBox().viewRange()[0][0]
        assert low >= -1e-6, (key, low)
        lefts.add(round(view.plot.getViewBox().sceneBoundingRect().left()))
        tops.add(round(view.plot.getViewBox().sceneBoundingRect().top()))
    # stacked, the boxes' left edges line up; side by side, the tops of a row; in a grid, both
    columns = plot.columns()
    rows = -(-len(plot.panel_keys()) // columns)
    assert len(lefts) == columns and len(tops) == rows, (lefts, tops)


# -- the label placement itself (no Qt) -------------------------------------------------------------

def test_place_keeps_labels_apart_and_inside_and_off_a_curve():
    import numpy as np

    from rooflab.gui.plots.labels import LabelSpec, label_spots

    box = (0.0, 0.0, 400.0, 120.0)
    # three lines 6 px apart (as the TPOT of three series), their labels preferring one spot
    specs = [LabelSpec(150, 16, "hline", y=y) for y in (60.0, 66.0, 72.0)]
    diagonal = np.array([[0.0, 120.0], [400.0, 0.0]])
    spots = label_spots(box, specs, [diagonal])
    assert None not in spots
    rects = [(x, y, 150, 16) for x, y in spots]
    for i, a in enumerate(rects):
        assert 0 <= a[0] and a[0] + a[2] <= 400 and 0 <= a[1] and a[1] + a[3] <= 120
        for b in rects[i + 1:]:
            assert not _overlap(a, b, slack=0)
    # one label, room either side of the curve: it keeps off
    (spot,) = label_spots(box, [LabelSpec(120, 16, "vline", x=200.0)], [diagonal])
    assert crossings((spot[0], spot[1], 120, 16), [diagonal]) == 0


def test_place_leaves_out_a_label_with_no_room_rather_than_overprint():
    from rooflab.gui.plots.labels import LabelSpec, label_spots

    box = (0.0, 0.0, 150.0, 20.0)
    spots = label_spots(box, [LabelSpec(140, 16, "hline", y=18.0), LabelSpec(140, 16, "hline", y=18.5)], [])
    assert spots[0] is not None and spots[1] is None


def test_wrap_text_breaks_between_parts_and_never_cuts_a_name():
    from rooflab.gui.plots.labels import wrap_text

    name = "tokens/s total: Qwen3-8B · NVIDIA GeForce RTX 4090 · batch 4"
    lines = wrap_text(name, 40, len)
    assert lines == ["tokens/s total: Qwen3-8B", "NVIDIA GeForce RTX 4090 · batch 4"]
    assert " · ".join(lines) == name                      # broken where a part ends: nothing lost
    assert wrap_text("short", 40, len) == ["short"]
    # a word wider than a line breaks after its hyphens ("Qwen3-30…" was all a memory bar kept)
    assert wrap_text("a-very-long-word-indeed", 10, len) == ["a-very-", "long-word-", "indeed"]
    assert wrap_text("Qwen3-30B-A3B Q4_K_M", 10, len) == ["Qwen3-30B-", "A3B Q4_K_M"]
    assert wrap_text("unhyphenatedword", 10, len) == ["unhyphena…"]       # no break left: cut


def test_pins_and_messages_leave_every_click_target_where_it_was(qtbot, window):
    """Issue 39: three pins wrapped the line over the tabs onto a second and third line, and a
    message bar opened over the panes, each moving the tabs, the charts and every control down
    under the pointer (30 px for a message). The line over the tabs keeps two lines (the current
    series, then the pinned ones; more scroll) and messages open under the panes."""
    from PySide6.QtCore import QPoint

    window.resize(1280, 720)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.recompute.frame is not None and not window.recompute.pending, timeout=WAIT_MS)
    targets = [window.plot_tabs.tabBar(), window.plots["roofline"], window.workload_panel.fields["prompt"],
               window.left_tabs.tabBar()]

    def where() -> list[QPoint]:
        qtbot.wait(20)
        return [w.mapTo(window, QPoint(0, 0)) for w in targets]

    before = where()
    assert "Nothing pinned" in window.scenario_label.text()
    _pin_three(window)
    qtbot.waitUntil(lambda: not window.recompute.pending and len(window.recompute.frame.pinned) == 3, timeout=WAIT_MS)
    assert where() == before
    window.messages.show_message("A long message " * 12, "warning")
    assert where() == before
    window.messages.hide()
    assert where() == before
