"""The window as a user sees it at common screen sizes: every stacked plot tall enough to read
(its y-axis title no longer than its axis), scrolling only where the screen is too short."""

from __future__ import annotations

import pytest

from rooflab.core.report.charts import CHART_KEYS


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


def test_at_1280x720_the_plots_scroll_instead_of_squashing(qtbot, window):
    plot = _show_at(qtbot, window, (1280, 720), "decode")
    assert plot.scroll.verticalScrollBar().maximum() > 0


@pytest.mark.parametrize("chart", CHART_KEYS)
def test_at_1920x1080_every_plot_fits_without_scrolling(qtbot, window, chart):
    plot = _show_at(qtbot, window, (1920, 1080), chart)
    assert plot.scroll.verticalScrollBar().maximum() == 0
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
    with qtbot.waitSignal(window.redrawn, timeout=3000):
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
    with qtbot.waitSignal(window.redrawn, timeout=3000):
        window.recompute.recompute_now()
    plot = window.plots["prefill"]
    window.plot_tabs.setCurrentWidget(plot)
    text = _hover_marker(plot, "ttft")
    assert "prompt 1 token" in text and "1 tokens" not in text
    from rooflab.core.report.summary import summarise
    from rooflab.gui.explain import explain

    sc = window.state.scenario
    end_to_end = next(line for line in explain(sc, summarise(sc)) if line.key == "end_to_end")
    assert "plus 1 more step of TPOT" in end_to_end.sentence, end_to_end.sentence


def test_one_tensor_groups_and_one_fitting_sequence_read_in_the_singular(window):
    import dataclasses

    from rooflab.core.report.summary import summarise
    from rooflab.gui.explain import explain
    from rooflab.gui.model_panel import SHAPE

    tree = window.model_panel.tree
    shapes = [tree.topLevelItem(i).text(SHAPE) for i in range(tree.topLevelItemCount())]
    assert "1 tensor" in shapes and "1 tensors" not in shapes, shapes
    sc = window.state.scenario
    memory = next(line for line in explain(sc, dataclasses.replace(summarise(sc), max_batch=1))
                  if line.key == "memory")
    assert "at most 1 such sequence fits." in memory.sentence, memory.sentence


def test_a_junk_file_is_described_in_hex_not_as_a_python_bytes_literal(qtbot, window, tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"\xf6C_\xb7" + bytes(64))
    with qtbot.waitSignal(window.model_failed, timeout=5000) as blocker:
        window.open_model(str(junk))
    assert "f6 43 5f b7" in blocker.args[0], blocker.args[0]
    assert "b'" not in window.messages.text() and "\\x" not in window.messages.text()
    qtbot.waitUntil(lambda: not window.opener.jobs.busy, timeout=3000)


@pytest.mark.parametrize("answer", ["Yes", "No"])
def test_report_folder_dialog_offers_to_create_a_new_folder(qtbot, tmp_path, monkeypatch, answer):
    from PySide6.QtWidgets import QDialog, QMessageBox

    from rooflab.gui.report import ReportFolderDialog

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

    from rooflab.gui.report import ReportFolderDialog

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
    from rooflab.gui.report import PLOT_SIZE
    from rooflab.gui.theme import LIGHT

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
