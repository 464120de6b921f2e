"""One scenario, drawn everywhere (issue 20): for one device, two devices in a layer split and in
tensor parallel, a model offloaded to host memory, a placement that does not fit and a batch of
16, each tab is rendered and every figure a chart labels (TPOT, TTFT, the decode ceiling, n*,
the batch crossover, the largest batch, each memory's bill, the link's time) is the one the
numbers panel shows and ``rooflab predict --json`` prints.

(Llama-3.3-70B on 2 x RTX 3090 fit at 23.3 of 25.8 GB per device while the Memory chart drew one
red bar at 42.5 GB; tensor parallel said 42.7 tok/s while the Decode chart marked 22.)"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest

from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.report.explain import per_sequence
from rooflab.core.report.units import fmt
from rooflab.core.values.defaults import DEFAULT_WORKLOAD
from rooflab.gui.main import main
from tests.gui.conftest import open_placed


@dataclass(frozen=True)
class Case:
    model: str
    machine: str
    choice: PlacementChoice = AUTO
    flags: tuple[str, ...] = ()
    batch: int = 1


CASES = {
    "one device": Case("qwen3-8b-q4_k_m", "rtx-4090"),
    "2 devices, layer split": Case("llama-3.3-70b-q4_k_m", "rtx-3090", PlacementChoice(devices=2, parallel="layer"),
                                   ("--devices", "2", "--parallel", "layer")),
    "2 devices, tensor parallel": Case("llama-3.3-70b-q4_k_m", "rtx-3090",
                                       PlacementChoice(devices=2, parallel="tensor"),
                                       ("--devices", "2", "--parallel", "tensor")),
    "offloaded": Case("gpt-oss-120b-mxfp4", "rtx-4090"),
    "not fitting": Case("gpt-oss-120b-mxfp4", "rtx-4090", PlacementChoice(gpu_layers=19), ("--gpu-layers", "19")),
    "batch 16": Case("qwen3-8b-q4_k_m", "rtx-4090", batch=16),
    "offloaded, batch 4": Case("gpt-oss-120b-mxfp4", "rtx-4090", batch=4),
}


def _predicted(capsys, case: Case) -> dict:
    assert main(["predict", "--model", case.model, "--machine", case.machine, *case.flags, "--batch",
                 str(case.batch), "--ceiling-only", "--json", "--contexts", "0", "--batches", "1",
                 "--prompts", "1"]) == 0
    return json.loads(capsys.readouterr().out)


def _drawn(qtbot, window, case: Case):
    window.state.update_workload(batch=case.batch)
    frame = open_placed(qtbot, window, case.model, case.choice, case.machine)
    assert frame.scenario.workload.batch == case.batch
    for plot in window.plots.values():              # each tab rendered, as a user would see it
        window.plot_tabs.setCurrentWidget(plot)
        qtbot.wait(1)
    return frame


def _inf(value: float | None) -> float:
    return math.inf if value is None else value


@pytest.mark.parametrize("name", list(CASES))
def test_every_chart_draws_what_the_numbers_and_predict_report(qtbot, window, capsys, name):
    case = CASES[name]
    predicted = _predicted(capsys, case)
    frame = _drawn(qtbot, window, case)
    plots, numbers, s = window.plots, window.numbers, frame.summary
    # predict prints a placement always; the window's headline stands on it once it places the
    # model (a model the device holds whole keeps the one-memory figures, as predict's top level)
    placed = predicted["placement"] if s.placed is not None else None
    devices = case.choice.devices
    label = window.scenario_label.text()
    assert "charts: one device" not in label
    if devices > 1:
        assert f"{devices} × {'tensor parallel' if case.choice.parallel == 'tensor' else 'layer split'}" in label

    if not predicted["fits"]:
        _nothing_drawn_as_if_it_ran(window, frame, predicted)
        return
    request = predicted["request"]
    # Decode: the TPOT line, the current point (the ceiling at the first answer token)
    tpot = plots["decode"].curve("step", "tpot")
    assert tpot.y[0] == pytest.approx(request["tpot_seconds"], rel=1e-12)
    assert numbers.value_text("tpot") == fmt(request["tpot_seconds"], "s")
    ceiling = plots["decode"].curve("rate", "current")
    assert ceiling.y[0] == pytest.approx(request["decode_ceiling_tokens_per_second"], rel=1e-9)
    assert numbers.value_text("ceiling") == per_sequence(fmt(request["decode_ceiling_tokens_per_second"],
                                                             "tokens/s"), case.batch)
    # Prefill: TTFT at the prompt and n*
    ttft = plots["prefill"].curve("ttft", "current")
    assert ttft.y[0] == pytest.approx(request["ttft_seconds"], rel=1e-9)
    assert numbers.value_text("ttft") == fmt(request["ttft_seconds"], "s")
    n_star = (placed or predicted)["prefill_crossover_tokens"]
    assert plots["prefill"].curve("ttft", "n_star").x[0] == pytest.approx(n_star, rel=1e-9)
    assert numbers.value_text("n_star").startswith(f"{n_star:,.0f} tokens")
    # Batching: the largest batch that fits and the crossover, said to lie beyond it when it does
    most = (placed or predicted)["max_batch_that_fits"]
    assert plots["batching"].curve("rate", "max_fit").x[0] == most
    b_star = _inf((placed or predicted)["batch_crossover"])
    if math.isfinite(b_star):
        cross = plots["batching"].curve("rate", "crossover")
        assert cross.x[0] == pytest.approx(b_star, rel=1e-9)
        beyond = 0 < most < b_star
        assert ("beyond what fits" in cross.label) == beyond == ("only" in numbers.value_text("batch_crossover"))
    # Memory: a bar per device and one for host memory, each the bill predict prints
    _memory_bars_are_the_bills(window, predicted, devices, placed is not None)
    # several devices: the link's share of each step is the one predict prints
    if devices > 1:
        link = plots["decode"].curve("step", "link")
        assert link.y[0] == pytest.approx(predicted["communication_seconds_per_step"], rel=1e-9)
        share = plots["decode"].curve("kv_share", "link_share")
        assert 0 < share.y[0] < 1
    else:
        assert ("current", "link") not in plots["decode"].panel_view("step").drawn or \
            not plots["decode"].panel_view("step").drawn[("current", "link")].visible


def _memory_bars_are_the_bills(window, predicted: dict, devices: int, is_placed: bool) -> None:
    view = window.plots["memory"].panel_view("breakdown")
    bars = [d.curve for d in sorted(view.drawn.values(), key=lambda d: d.bar)
            if d.visible and d.layer.kind == "current"]
    placed = predicted["placement"] if is_placed else None
    if placed is None:                          # one memory: weights + the batch's cache
        (bar,) = bars
        held = sum(y for y, name in zip(bar.y, bar.categories, strict=True) if name not in ("free", "over capacity"))
        assert window.numbers.value_text("memory").startswith(fmt(held, "B"))
        return
    bills = [d for d in placed["devices"] for _ in range(d["count"])]
    # devices that share every layer hold all of it (predict's host bill is one device's fit)
    shared = placed["devices"][0]["count"] == devices > 1
    if placed["host"]["used_bytes"] > 0 and not shared:
        bills.append(placed["host"])
    assert len(bars) == len(bills) >= devices
    for bar, bill in zip(bars, bills, strict=True):
        parts = dict(zip(bar.categories, bar.y, strict=True))
        held = sum(v for k, v in parts.items() if k not in ("free", "over capacity"))
        assert held == pytest.approx(bill["used_bytes"], rel=1e-9)
        assert bar.extras["capacity"][0] == bill["capacity_bytes"]
        assert ("over capacity" in parts) == (not bill["fits"])
    if devices > 1:
        assert view.stack_labels == [f"device {i + 1} of {devices}" for i in range(devices)]


def _nothing_drawn_as_if_it_ran(window, frame, predicted: dict) -> None:
    assert not frame.summary.runs and "does NOT fit" in window.scenario_label.text()
    assert window.numbers.value_text("placement") == "does NOT fit"
    assert "tpot" not in [line.key for line in window.numbers.lines]
    for key, plot in window.plots.items():
        # over the first panel, which is empty; the memory chart's bills are drawn, so above them
        note = plot.panel_view(plot.panel_keys()[0]).note
        shown = plot.banner.text() if key == "memory" else note.toPlainText()
        assert (not plot.banner.isHidden() if key == "memory" else note.isVisible()), key
        assert "To fit:" in shown, key
        if key != "memory":
            assert not [d for d in plot.drawn() if d.layer.kind == "current"], key
    assert not frame.charts["decode"].panel("step").curves            # no TPOT marker
    _memory_bars_are_the_bills(window, predicted, 1, True)


def test_the_scenario_line_names_the_devices(qtbot, window):
    frame = open_placed(qtbot, window, "qwen3-32b-q4_k_m", PlacementChoice(devices=8, parallel="layer"), "h100-sxm")
    assert frame.scenario.label.endswith("f16 cache, 8 × layer split")
    window.state.pin_current()
    assert window.state.pinned[0].label.endswith("8 × layer split")
    bars = frame.charts["memory"].panel("breakdown").curves
    assert [c.label for c in bars] == [f"device {i} of 8" for i in range(1, 9)]
    assert np.allclose([c.extras["capacity"][0] for c in bars], window.state.machine.memory)
    assert DEFAULT_WORKLOAD.batch == 1
