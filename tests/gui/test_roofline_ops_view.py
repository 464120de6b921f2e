"""The Roofline tab's operation view: the toggle hands the plot the operations chart core
builds (one point per operation, named for the hover), the workload's edits follow it, the
pass view comes back unchanged, and it renders (a grab() smoke test)."""

from __future__ import annotations

from rooflab.core.report.ops_chart import OPS_PANEL
from rooflab.gui.plots.roofline import OPERATIONS, PASSES
from tests.factories.waits import WAIT_MS


def _points(plot) -> dict[str, object]:
    return {c.key: c for c in plot.chart.panel(OPS_PANEL).curves if c.kind == "points"}


def test_toggle_between_passes_and_operations(qtbot, window, tmp_path):
    plot = window.plot_panel.roofline
    window.plot_tabs.setCurrentWidget(plot)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(context=4096)
    assert plot.panel_keys() == ["roofline"]
    with qtbot.waitSignal(plot.view_changed, timeout=WAIT_MS) as changed:
        plot.set_view(OPERATIONS)                            # control -> plot
    assert changed.args == [OPERATIONS]
    assert plot.panel_keys() == [OPS_PANEL]
    points = _points(plot)
    q = points["decode:dense:q_proj"]
    assert "q_proj" in q.label and q.role == "memory"     # named for the hover, coloured by its clock
    assert plot.readout_at(OPS_PANEL, float(q.x[0]), float(q.y[0])).count("q_proj") == 1
    before = float(points["decode:dense:attn_scores"].extras["seconds"][0])
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.update_workload(context=16384)          # model -> plot: the view follows the workload
    assert plot.mode == OPERATIONS and plot.panel_keys() == [OPS_PANEL]
    after = float(_points(plot)["decode:dense:attn_scores"].extras["seconds"][0])
    assert after > 1.5 * before                              # attention reads the longer cache
    image = plot.grab()
    assert not image.isNull() and image.width() > 100
    image.save(str(tmp_path / "roofline-ops-view.png"))
    plot.set_view(PASSES)
    assert plot.panel_keys() == ["roofline"]
    assert {c.key for c in plot.chart.panel("roofline").curves} >= {"roof", "prefill", "decode"}


def test_pinned_series_compare_operation_by_operation(qtbot, window):
    from rooflab.core.io.presets import load_machine

    plot = window.plot_panel.roofline
    window.plot_tabs.setCurrentWidget(plot)
    plot.set_view(OPERATIONS)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.pin_current()
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_machine(load_machine("m4-max"))
    layers = {s.layer.kind: s for s in plot.drawn() if s.panel == OPS_PANEL}
    assert {"current", "pinned"} <= layers.keys()
    pinned = {c.key: c for c in layers["pinned"].curves}
    current = {c.key: c for c in layers["current"].curves}
    key = "decode:dense:ffn_up"
    # the same operation on two machines: one intensity, each under its own machine's rate
    assert pinned[key].x[0] == current[key].x[0] and pinned[key].y[0] != current[key].y[0]


def test_a_model_that_does_not_fit_draws_no_operations(qtbot, window, tmp_path):
    from PySide6.QtGui import QImage

    from rooflab.core.app.resolve import choice_from
    from rooflab.core.cli.parser import build_parser
    from rooflab.core.io import load_model
    from rooflab.gui.main import main

    argv = ["--model", "llama-3.3-70b-q4_k_m", "--machine", "rtx-4090", "--gpu-layers", "81"]
    args = build_parser().parse_args(["predict", *argv])
    plot = window.plot_panel.roofline
    window.plot_tabs.setCurrentWidget(plot)
    plot.set_view(OPERATIONS)
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_model(load_model(args.model), ref=args.model)
        window.state.set_placement(choice_from(args))
    panel = plot.chart.panel(OPS_PANEL)
    assert not panel.curves and "NOT fit" in plot.chart.note     # nothing drawn as if it ran
    assert main(["report", *argv, "--out", str(tmp_path)]) == 0
    assert not QImage(str(tmp_path / "roofline-ops.png")).isNull()
