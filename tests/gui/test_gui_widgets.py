"""Every top-level widget renders (grab smoke tests), shortcuts, tooltips, the About box,
the numbers panel, the stopwatch converter and the tensor table."""

from __future__ import annotations

import subprocess
import sys

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence

from rooflab.core.predict.work import weight_bytes_read_per_token
from rooflab.core.report.charts import CHART_KEYS
from rooflab.gui.panels.compare_panel import ComparePanel
from rooflab.gui.panels.machine_panel import MachinePanel
from rooflab.gui.panels.model_panel import FILE_BYTES, READ_BYTES, ModelPanel
from rooflab.gui.panels.numbers_panel import NumbersPanel
from rooflab.gui.panels.stopwatch_panel import StopwatchPanel
from rooflab.gui.panels.workload_panel import WorkloadPanel
from rooflab.gui.plots import PLOT_CLASSES
from rooflab.gui.shell.about import about_html, versions
from rooflab.gui.widgets.theme import LIGHT
from tests.factories.waits import WAIT_MS


def _not_blank(image) -> bool:
    """More than one colour: something was drawn (a smooth scale, so a thin line between two
    sampled pixels still tints them)."""
    small = image.scaled(64, 64, Qt.AspectRatioMode.IgnoreAspectRatio, Qt.TransformationMode.SmoothTransformation)
    colours = {small.pixel(x, y) for x in range(0, 64, 4) for y in range(0, 64, 4)}
    return len(colours) > 2


def test_grab_main_window(qtbot, window):
    window.show()
    qtbot.waitExposed(window)
    image = window.grab().toImage()
    assert image.width() >= 1000 and _not_blank(image)


@pytest.mark.parametrize("cls", PLOT_CLASSES, ids=lambda c: c.__name__)
def test_grab_each_plot(qtbot, window, cls):
    plot = cls(theme=LIGHT)
    qtbot.addWidget(plot)
    plot.set_charts(window.recompute.frame.charts[cls.chart_key])
    plot.resize(800, 500)
    assert _not_blank(plot.grab().toImage())


@pytest.mark.parametrize("name", ["machine", "model", "workload", "numbers", "compare", "stopwatch"])
def test_grab_each_panel(qtbot, window, name):
    make = {"machine": lambda: MachinePanel(window.state), "model": lambda: ModelPanel(window.state),
            "workload": lambda: WorkloadPanel(window.state), "numbers": NumbersPanel,
            "compare": lambda: ComparePanel(window.state, LIGHT), "stopwatch": StopwatchPanel}
    widget = make[name]()
    qtbot.addWidget(widget)
    if hasattr(widget, "show_frame"):
        widget.show_frame(window.recompute.frame)
    widget.resize(500, 400)
    assert _not_blank(widget.grab().toImage())


def test_typing_a_number_into_a_workload_field_gives_that_number(qtbot, window):
    # digit by digit, as a person types: each digit used to go to the state and come back
    # re-formatted with a thousands separator, and the fifth digit landed before the fourth
    spin = window.workload_panel.fields["prompt"].spin
    spin.selectAll()
    qtbot.keyClicks(spin, "12345")
    assert window.state.workload.prompt != 12354
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    assert window.state.workload.prompt == 12345
    assert spin.text() == "12,345"


def test_shortcuts(window):
    assert window.open_action.shortcut() == QKeySequence(QKeySequence.StandardKey.Open)
    assert window.save_action.shortcut() == QKeySequence(QKeySequence.StandardKey.Save)
    assert window.quit_action.shortcut() == QKeySequence(QKeySequence.StandardKey.Quit)
    assert window.pin_action.shortcut() == QKeySequence("Ctrl+P")


def test_pin_shortcut_pins(qtbot, window):
    with qtbot.waitActive(window):
        window.show()
        window.activateWindow()
    qtbot.keyClick(window.plot_tabs, Qt.Key.Key_P, Qt.KeyboardModifier.ControlModifier)
    assert len(window.state.pinned) == 1


def test_tooltips_give_formulas_in_words(window):
    assert "2 × active parameters" in window.workload_panel.fields["prompt"].spin.toolTip()
    assert "bytes per second" in window.machine_panel.bandwidth.toolTip()
    assert "layers × KV heads" in window.model_panel.summary_labels["kv"].toolTip()
    numbers_tips = [label.toolTip() for row in window.numbers._rows.values() for label in row[:1]]
    assert any("max(" in tip for tip in numbers_tips)
    window.flush_plots()
    for key in CHART_KEYS:
        assert window.plots[key].info.toolTip()


def test_about_box_lists_versions():
    v = versions()
    assert {"rooflab", "Qt", "PySide6", "pyqtgraph", "numpy", "Python"} <= set(v)
    assert "torch" not in v or "torch" in sys.modules
    assert v["Qt"] in about_html()


def test_numbers_panel_says_which_clock_bounds_each_phase(window):
    lines = {line.key: line for line in window.numbers.lines}
    assert lines["ttft"].bound in ("memory", "compute")
    assert "bound" in lines["tpot"].sentence
    assert lines["tpot"].value == window.numbers.value_text("tpot")
    # the memory as placed (auto-fit's: every layer on the card), its buffer and reserve counted
    assert lines["memory"].sentence.startswith("As placed:") and "reserve" in lines["memory"].sentence


def test_numbers_panel_sentences_at_the_extremes(window):
    import dataclasses

    from rooflab.core.app.figures import summarise
    from rooflab.core.report.explain import explain

    sc = window.state.scenario

    def sentences(machine=sc.machine, **workload):
        s = dataclasses.replace(sc, machine=machine, workload=dataclasses.replace(sc.workload, **workload))
        return {line.key: line.sentence for line in explain(s, summarise(s))}

    huge = sentences(batch=65_536, context=1_000_000, answer=1)       # 1,002,049 tokens a sequence
    # nothing can hold that: no figure, the placement says so, the memory line says why
    assert "ttft" not in huge and huge["placement"].startswith("Does NOT fit")
    assert "65,536 × 1,002,049 tokens" in huge["memory"]
    assert "not even one sequence of 1,002,049 tokens fits beside the weights" in huge["memory"]
    assert "at most 0" not in huge["memory"]
    # 56 caches of 2,304 cells (2,049 tokens padded to 256, as llama.cpp holds them) fit the card's memory
    # on their own, but not beside the compute buffer and reserve: placed, the prompts are named per part
    big = sentences(batch=56, answer=1)
    assert "56 × 2,048-token prompts" in big["ttft"] and big["end_to_end"].startswith("TTFT alone")
    tiny = dataclasses.replace(sc.machine, memory=0.3e9, key="")
    # placed with every layer on the host, the card's own reserve and buffer still overflow its 300 MB
    assert "before any cache, the weights placed on the GPU and the back end's reserve" in sentences(tiny)["memory"]
    alone = dataclasses.replace(tiny, offload_memory=0.0, offload_bandwidth=0.0)         # no host memory
    assert "before any cache, the weights placed on the GPU and the back end's reserve" in sentences(alone)["memory"]
    roomy = sentences(dataclasses.replace(sc.machine, key=""))["memory"]              # the card holds it whole
    assert roomy.startswith("As placed:") and "tokens; at most" in roomy and "such sequences fit" in roomy


def test_crossovers_of_a_machine_that_computes_slowly_read_right(window):
    import dataclasses

    from rooflab.core.app.figures import summarise
    from rooflab.core.report.explain import explain

    slow = dataclasses.replace(window.state.machine, key="", peak_flops={"fp16": 0.01e12})   # balance 0.01
    sc = dataclasses.replace(window.state.scenario, machine=slow)
    lines = {line.key: line for line in explain(sc, summarise(sc))}
    assert lines["n_star"].value == "1 token" and lines["n_star"].sentence.startswith("Every prompt")
    assert lines["batch_crossover"].value == "1 sequence"
    assert lines["batch_crossover"].sentence.startswith("Decode is compute-bound from the first sequence")
    assert "one sequence's arithmetic" in lines["tpot"].sentence            # was "1 sequences' arithmetic"


def test_speculative_sentence_counts_in_words(qtbot, window):
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(draft_tokens=1, acceptance=0.0)
    sentence = next(line.sentence for line in window.numbers.lines if line.key == "speculative")
    assert sentence == "1 draft at 0 % acceptance yields 1 token per verify step. That step costs 1 decode step."
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(draft_tokens=4, acceptance=1.0)
    sentence = next(line.sentence for line in window.numbers.lines if line.key == "speculative")
    assert sentence.startswith("4 drafts at 100 % acceptance yield 5 tokens per verify step")


def test_speculative_row_appears_with_drafts(qtbot, window):
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.workload_panel.fields["draft_tokens"].spin.setValue(4)
    assert window.numbers.value_text("speculative").endswith("×")
    assert window.workload_panel.fields["acceptance"].isEnabled()


def test_stopwatch_converter(qtbot):
    panel = StopwatchPanel()
    qtbot.addWidget(panel)
    panel.prompt_tokens.setValue(1000)
    panel.output_tokens.setValue(101)
    panel.first_token.setValue(0.5)
    panel.last_token.setValue(2.5)
    text = panel.result.text().replace("\u00a0", " ").replace("\u2060", "")    # as read: figures kept whole
    assert "TTFT <b>500 ms</b>" in text and "TPOT <b>20 ms</b>" in text and "50 tokens/s" in text
    panel.last_token.setValue(0.25)
    assert "the last token (0.25 s) must come after the first (0.5 s)" in panel.result.text()


def test_the_stopwatch_times_the_request_on_screen(qtbot, window):
    """The stopwatch's prediction is for the workload on screen, so its prompt and answer follow
    the workload's (model -> control); a run the user types in of another request is said to be
    one (control -> text), and the stopwatch never moves the workload."""
    sw = window.stopwatch

    def said() -> str:
        return sw.result.text().replace("\u00a0", " ").replace("\u2060", "")

    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(prompt=5600, answer=300)
    assert (sw.prompt_tokens.value(), sw.output_tokens.value()) == (5600, 300)
    assert "workload on screen (prompt 5,600, answer 300)" in said() and "another request" not in said()
    sw.prompt_tokens.setValue(2048)
    assert "another request (prompt 2,048, answer 300)" in said()
    assert window.state.workload.prompt == 5600


def test_tensor_table_grouped_and_sortable_by_bytes(window):
    tree = window.model_panel.tree
    spec = window.state.model
    assert tree.topLevelItemCount() == len(spec.groups)
    tree.sortByColumn(FILE_BYTES, Qt.SortOrder.DescendingOrder)
    sizes = [tree.topLevelItem(i).data(FILE_BYTES, Qt.ItemDataRole.UserRole)
             for i in range(tree.topLevelItemCount())]
    assert sizes == sorted(sizes, reverse=True)
    tree.sortByColumn(FILE_BYTES, Qt.SortOrder.AscendingOrder)
    first = tree.topLevelItem(0)
    children = [first.child(i).data(FILE_BYTES, Qt.ItemDataRole.UserRole) for i in range(first.childCount())]
    assert children == sorted(children)
    read = sum(tree.topLevelItem(i).data(READ_BYTES, Qt.ItemDataRole.UserRole)
               for i in range(tree.topLevelItemCount()))
    assert read == pytest.approx(weight_bytes_read_per_token(spec))


@pytest.mark.parametrize("model", ["qwen3-8b-q4_k_m", "deepseek-v2-lite-q4_k_m"])   # shared_experts: widest
def test_both_byte_columns_show_in_the_model_tab_as_it_opens(qtbot, window, model):
    from rooflab.core.io import load_model

    window.state.set_model(load_model(model), model)
    window.show()
    qtbot.waitExposed(window)
    window.left_tabs.setCurrentIndex(1)
    tree = window.model_panel.tree
    qtbot.waitUntil(lambda: tree.viewport().width() > 0)
    header = tree.header()
    for column in (FILE_BYTES, READ_BYTES):        # were off the right edge, behind a scroll bar
        right = header.sectionViewportPosition(column) + header.sectionSize(column)
        assert right <= tree.viewport().width(), tree.headerItem().text(column)


def test_entry_point_module_loads_no_qt_and_the_window_no_torch(tmp_path):
    code = ("import sys; import rooflab.gui.main; "
            "assert not any(m.startswith(('PySide6', 'pyqtgraph', 'torch')) for m in sys.modules), 'qt at import'; "
            "from rooflab.gui.shell.main_window import MainWindow; "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules; print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_numbers_panel_warns_past_the_trained_context(window):
    import dataclasses

    from rooflab.core.app.figures import summarise
    from rooflab.core.report.explain import explain

    sc = window.state.scenario
    trained = sc.model.context_length
    assert trained > 0

    def keys(**workload):
        s = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, **workload))
        return {line.key: line for line in explain(s, summarise(s))}

    assert "trained_context" not in keys(context=0)
    past = keys(context=trained)["trained_context"]
    assert f"of {trained:,} tokens" in past.value and "trained for" in past.sentence


def test_speculative_drafts_shorten_the_tpot_shown(qtbot, window):
    assert window.state.workload.draft_tokens == 0
    plain = window.numbers.value_text("tpot")
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(draft_tokens=4, acceptance=0.8)
    assert window.numbers.value_text("tpot") != plain
    tpot = next(line.sentence for line in window.numbers.lines if line.key == "tpot")
    assert "Speculative decoding divides it by" in tpot
