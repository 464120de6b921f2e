"""Operations measured in the Measure tab ("By operation", torch's profiler on a tiny random-weight
model) appear on the Roofline tab's operation view beside the predicted ones, under the same
operation names, each at its predicted intensity and at the FLOP/s its measured time implies;
another model on screen takes them off."""

from __future__ import annotations

import pytest

from rooflab.core.io import load_model
from rooflab.core.measure.engines.op_times import predicted_for
from rooflab.core.report.ops_chart import OPS_PANEL
from rooflab.gui.export.report import render_operations
from rooflab.gui.plots.roofline import MEASURED_OPS, OPERATIONS
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import catalogue_spec, save_this_machine

RUN_MS = 240_000        # a torch child on a tiny model: seconds, minutes on a busy machine



def measure_by_operation(qtbot, window):
    """'By operation' ticked, one thread, one repeat, an 8-token prompt: Measure the model, and
    the measurement the controller announced once the run is over."""
    panel, ctl = window.measure_panel, window.measure
    panel.by_operation.setChecked(True)
    panel.threads.setValue(1)
    panel.repeats.setValue(1)
    panel.prompts.setText("8")
    with qtbot.waitSignal(ctl.operations_measured, timeout=RUN_MS) as got:
        panel.model_button.click()
    qtbot.waitUntil(lambda: not ctl.jobs.busy, timeout=WAIT_MS)
    return got.args[0]

def test_measured_torch_operations_appear_beside_the_predicted_ones(qtbot, window, tiny_config):
    pytest.importorskip("torch")
    save_this_machine()
    state, panel = window.state, window.measure_panel
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        state.set_model(load_model(tiny_config), str(tiny_config))
    plot = window.plot_panel.roofline
    window.plot_tabs.setCurrentWidget(plot)
    plot.set_view(OPERATIONS)
    # control -> model: the Measure tab's torch engine, by operation
    assert panel.engine_key() == "torch"
    assert panel.by_operation.isVisibleTo(panel) or not panel.isVisible()
    m = measure_by_operation(qtbot, window)
    assert "by operation" in panel.step.text().lower()
    # model -> chart: the measured layer on the operation view, one point per operation timed
    layers = {s.layer.key: s for s in plot.drawn() if s.panel == OPS_PANEL}
    assert MEASURED_OPS in layers and layers[MEASURED_OPS].layer.kind == "measured"
    points = {c.key: c for c in layers[MEASURED_OPS].curves}
    predicted = {c.key: c for c in layers["current"].curves}
    timed = {(o.phase, o.layer_kind, o.name): o for o in m.operations}
    q = points["decode:dense:q_proj:measured:8"]
    assert "q_proj" in q.label and "measured" in q.label
    assert float(q.extras["seconds"][0]) == timed[("decode", "dense", "q_proj")].seconds
    assert "decode:dense:q_proj" in predicted                      # the same operation, predicted
    # at the intensity the prediction gives the run's own workload, at its FLOPs over the measured time
    run = {(t.op.phase, t.op.layer_kind, t.op.name): t for t in predicted_for(m, state.machine, 8)}
    op = run[("decode", "dense", "q_proj")].op
    assert float(q.x[0]) == pytest.approx(op.intensity, rel=1e-12)
    assert float(q.y[0]) * float(q.extras["seconds"][0]) == pytest.approx(op.flops, rel=1e-12)
    assert plot.readout_at(OPS_PANEL, float(q.x[0]), float(q.y[0])).count("measured") >= 1
    # the window's report draws them in roofline-ops.png too
    frame = window.recompute.frame
    label, curves = plot.measured_operations()
    assert "torch" in label and q in curves
    plain = render_operations(frame, frame.figures.operations)["roofline-ops"]
    with_measured = render_operations(frame, frame.figures.operations, measured=(label, curves))["roofline-ops"]
    assert plain.size() == with_measured.size() and plain != with_measured
    # another model on screen: its operations were not measured, the points go
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        state.set_model(catalogue_spec(), ref="qwen3-8b-q4_k_m")
    assert MEASURED_OPS not in {s.layer.key for s in plot.drawn() if s.panel == OPS_PANEL}
    window.measure.shutdown()


def test_llama_cpp_nodes_appear_too(qtbot, window, tiny_config):
    from tests.factories import needs

    needs.llama_cpp()
    save_this_machine()
    state, panel = window.state, window.measure_panel
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        state.set_model(load_model(tiny_config, weights="q8_0"), str(tiny_config), "q8_0")
    plot = window.plot_panel.roofline
    window.plot_tabs.setCurrentWidget(plot)
    plot.set_view(OPERATIONS)
    panel.set_engine("llamacpp")                  # a random-weight GGUF of the model on screen
    m = measure_by_operation(qtbot, window)
    assert m.engine == "llama.cpp" and m.label == state.model.name
    layers = {s.layer.key: s for s in plot.drawn() if s.panel == OPS_PANEL}
    keys = {c.key for c in layers[MEASURED_OPS].curves}
    assert {"decode:dense:q_proj:measured:8", "prefill:dense:attn_scores:measured:8"} <= keys
    assert "llama.cpp" in layers[MEASURED_OPS].layer.label
    window.measure.shutdown()
