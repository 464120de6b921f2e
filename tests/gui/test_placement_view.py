"""A model the device cannot hold opens as llama.cpp would place it: the headline figures are
the placement's (never the card-alone fiction), and one that cannot run at all says so."""

from __future__ import annotations

import math

import pytest

from rooflab.core.predict.placement import brief_flags
from rooflab.core.report.units import fmt
from tests.factories.waits import WAIT_MS
from tests.gui.conftest import open_placed


def _at_fp32_accumulate(qtbot, window, frame=None):
    """The open machine computing at its bf16 peak (an RTX 4090's FP32-accumulate 165.2 TFLOP/s, the
    lesson's; its default fp16 is the FP16-accumulate 330.3), and the frame drawn for it."""
    window.state.update_machine(default_dtype="bf16")
    qtbot.waitUntil(lambda: window.recompute.frame is not None and not window.recompute.pending
                    and window.recompute.frame.scenario.machine.default_dtype == "bf16", timeout=WAIT_MS)
    return window.recompute.frame


def test_gpt_oss_on_a_4090_opens_with_its_experts_on_the_cpu(qtbot, window):
    frame = open_placed(qtbot, window, "gpt-oss-120b-mxfp4")
    placed = frame.summary.placed
    assert placed is not None and placed.fits and placed.placement.cpu_moe > 0
    keys = [line.key for line in window.numbers.lines]
    assert keys[0] == "placement" and window.numbers.value_text("placement") == brief_flags(placed.placement)
    assert window.numbers.value_text("tpot").endswith("ms")
    assert frame.summary.estimate.tpot == placed.estimate.tpot > 0.01      # not the card-alone 3.65 ms
    tpot = next(c for c in frame.charts["decode"].panel("step").curves if c.key == "tpot")
    assert tpot.label.startswith("TPOT as placed (-ngl")
    assert float(tpot.y[0]) == pytest.approx(frame.summary.estimate.tpot)
    step = next(c for c in frame.charts["decode"].panel("step").curves if c.key == "step")
    assert step.label.startswith("time per token as placed (-ngl") and float(step.y[0]) > 0.01   # the curve too
    # the batching chart stands on the same placement: its current point is the headline's rate,
    # its largest batch the placement's, its memory each memory's bill against its own size
    from rooflab.core.predict.autofit import largest_batch

    sc = frame.scenario
    rates = frame.charts["batching"].panel("rate")
    per_seq = next(c for c in rates.curves if c.key == "current")
    assert float(per_seq.y[0]) == pytest.approx(1.0 / placed.estimate.tpot, rel=0.1)   # TPOT: mean over the answer
    fit_line = next(c for c in rates.curves if c.key == "max_fit")
    length = sc.workload.context + sc.workload.prompt + sc.workload.answer
    assert float(fit_line.x[0]) == largest_batch(sc.model, sc.machine, sc.workload, placed.placement,
                                                 context_length=length) > 0
    memory = {c.key: c for c in frame.charts["batching"].panel("memory").curves}
    assert memory["resident"].label == "held on the GPU, as placed"
    assert float(memory["resident"].y[0]) == pytest.approx(placed.fit.memory.device.used, rel=0.02)
    assert float(memory["capacity"].y[0]) == sc.machine.memory
    assert float(memory["resident_host"].y[0]) == pytest.approx(placed.fit.memory.host.used, rel=0.02)
    assert float(memory["capacity_host"].y[0]) == sc.machine.offload_memory
    # the prefill chart too: its current point is the headline's TTFT, its n* the placement's
    prefill = frame.charts["prefill"].panel("ttft")
    here = next(c for c in prefill.curves if c.key == "current")
    assert float(here.y[0]) == pytest.approx(placed.estimate.ttft, rel=1e-9)
    assert next(c for c in prefill.curves if c.key == "ttft").label.startswith("TTFT as placed (-ngl")
    n_star = next(c for c in prefill.curves if c.key == "n_star")
    assert float(n_star.x[0]) == pytest.approx(frame.summary.headline_prefill_crossover)
    assert window.numbers.value_text("n_star") == f"{frame.summary.headline_prefill_crossover:,.0f} tokens"
    # the roofline puts the phases where the placement runs them, under the host memory's roof too
    from rooflab.core.predict.offload import placed_prefill

    roof = {c.key: c for c in frame.charts["roofline"].panel("roofline").curves}
    assert roof["prefill"].label.endswith(", as placed") and "host_roof" in roof
    pre = placed_prefill(sc.model, sc.machine, sc.workload, placed.placement)
    assert float(roof["prefill"].y[0]) == pytest.approx(float(pre.flops) / placed.estimate.ttft, rel=1e-9)
    assert float(roof["host_roof"].y[-1]) == pytest.approx(4 * 1.024e12)      # the host CPU's int8 path behind a GPU
    # the memory chart's bar is the GPU's bill as placed, with what host memory holds on top:
    # not 63 GB "over capacity" on a card the placement fits
    bar = frame.charts["memory"].panel("breakdown").curve("breakdown")
    parts = dict(zip(bar.categories, bar.y, strict=True))
    device, host = placed.fit.memory.device, placed.fit.memory.host
    assert "over capacity" not in parts and parts["free"] == pytest.approx(device.capacity - device.used)
    assert parts["weights"] + parts["KV cache"] + parts["buffers and reserve"] == pytest.approx(device.used)
    # host memory has its own bar, against its own size (it once sat on top of the GPU's, undrawn)
    host_bar = frame.charts["memory"].panel("breakdown").curve("breakdown_host")
    assert float(sum(host_bar.y[:-1])) == pytest.approx(host.used) and host.used > 30e9
    assert host_bar.categories[-1] == "free" and host_bar.extras["capacity"][0] == host.capacity
    window.flush_plots()
    assert window.plots["memory"].panel_view("breakdown").stack_labels == [sc.machine.name, host.name]
    growth = {c.key: c for c in frame.charts["memory"].panel("growth").curves}
    assert growth["resident"].label == "held on the GPU, as placed"
    assert float(growth["current"].y[0]) == pytest.approx(device.used)
    # and so do the numbers panel's memory and batch rows (not the card-alone "does NOT fit")
    most = largest_batch(sc.model, sc.machine, sc.workload, placed.placement, context_length=length)
    assert frame.summary.headline_max_batch == most and frame.summary.max_batch == 0
    (memory_line,) = [line for line in window.numbers.lines if line.key == "memory"]
    assert memory_line.sentence.startswith("As placed: ") and "on the GPU and " in memory_line.sentence
    assert f"at most {most:,} such sequences fit" in memory_line.sentence and "NOT" not in memory_line.sentence
    assert window.numbers.value_text("memory").startswith(fmt(placed.fit.memory.device.used, "B"))
    # at the card's FP16-accumulate peak (its default) the step never turns compute-bound as placed;
    # at FP32 accumulate (its bf16, the lesson's 165.2 TFLOP/s) the host's experts turn it so at ~425
    # sequences (their int8 path, 4 x the host's FP32 peak; ~99 when the host was priced at FP32);
    # the card alone never would
    assert math.isinf(frame.summary.headline_batch_crossover)
    assert not any(c.key == "crossover" for c in rates.curves)
    frame = _at_fp32_accumulate(qtbot, window)
    rates = frame.charts["batching"].panel("rate")
    cross = next(c for c in rates.curves if c.key == "crossover")
    assert math.isinf(frame.summary.batch_crossover)
    assert frame.summary.headline_batch_crossover == pytest.approx(float(cross.x[0])) and 200 < float(cross.x[0]) < 1000
    # ... beyond the few sequences that fit (issue 20: "Batch crossover 99 sequences" when 4 fit)
    assert 0 < most < float(cross.x[0])
    assert window.numbers.value_text("batch_crossover") == f"{float(cross.x[0]):,.0f} sequences (only {most} fit)"
    assert cross.label == "crossover, beyond what fits"


def test_a_model_that_cannot_run_here_shows_no_figure(qtbot, window):
    # DeepSeek-V3's weights alone page from disk (mmap) beside a 4090: 64 caches of 100,000 tokens
    # more cannot be held anywhere
    open_placed(qtbot, window, "deepseek-v3-q4_k_m")
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as drawn:
        window.state.update_workload(batch=64, context=100_000)
    frame = drawn.args[0]
    assert not frame.summary.placed.fits
    assert window.numbers.value_text("placement") == "does NOT fit"
    assert "ttft" not in [line.key for line in window.numbers.lines]
    assert not any(line.key.startswith("expected") for line in window.numbers.lines)


def test_a_model_the_card_holds_keeps_the_one_memory_headline(qtbot, window):
    from rooflab.core.predict.placement import Placement
    from rooflab.core.predict.request import request

    frame = open_placed(qtbot, window, "qwen3-8b-q4_k_m")
    sc, placed = frame.scenario, frame.summary.placed
    # auto-fit puts every layer on the card: its request is the one-memory one, and no row is
    # spent saying so (the memory row says where it sits)
    assert placed.how == "auto" and placed.placement == Placement.all_on_device(sc.model)
    assert frame.summary.estimate == request(sc.model, sc.machine, sc.workload)
    assert window.numbers.lines[0].key == "ttft"


def test_the_reports_expected_figures_stand_on_the_placement(qtbot, window, tmp_path):
    from rooflab.core.report.expected import expected_request

    frame = open_placed(qtbot, window, "gpt-oss-120b-mxfp4")
    files = window.save_report(tmp_path / "report")
    rows = dict(line.split(",", 1) for line in (files.folder / "expected.csv").read_text().splitlines()
                if not line.startswith("#"))
    placed = expected_request(frame.scenario.model, frame.expected, frame.scenario.workload, frame.runs_on)
    assert float(rows["tpot"].split(",")[0]) == pytest.approx(placed["expected_tpot_seconds"], rel=1e-6)
    assert placed["expected_tpot_seconds"] > 0.01          # the placement's, not the card-alone figure
    summary = dict(line.split(",")[:2] for line in (files.folder / "summary.csv").read_text().splitlines()[1:]
                   if not line.startswith("#"))
    s = frame.summary
    assert summary["placement"] == s.placed.placement.flags() and summary["placement_fits"] == "yes"
    assert int(summary["placed_max_batch_that_fits"]) == s.headline_max_batch > 0
    assert int(summary["placed_device_bytes"]) == round(s.placed.fit.memory.device.used)
    assert float(summary["tpot"]) == pytest.approx(s.placed.estimate.tpot)


def test_a_placement_that_does_not_fit_draws_nothing_as_if_it_ran(qtbot, window):
    # -ngl 19 for gpt-oss on a 4090 (issue 20): the numbers said "does NOT fit" while Decode,
    # Prefill and Roofline drew curves and "TPOT as placed (-ngl 19) 19.2 ms". Now every chart is
    # empty but for a line saying why and how to fit; the memory chart keeps each memory's bill
    from rooflab.core.predict.choice import PlacementChoice

    open_placed(qtbot, window, "gpt-oss-120b-mxfp4")
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as drawn:
        window.state.set_placement(PlacementChoice(gpu_layers=19))
    frame = drawn.args[0]
    placed = frame.summary.placed
    assert placed is not None and not placed.fits and not frame.summary.runs
    for key, chart in frame.charts.items():
        assert chart.note.startswith("Nothing to draw: does NOT fit") and "To fit: " in chart.note, key
        if key != "memory":
            assert all(not panel.curves for panel in chart.panels), key
    window.flush_plots()
    for key, plot in window.plots.items():
        # over the first panel, which is empty; the memory chart's bills are drawn, so above them
        note = plot.panel_view(plot.panel_keys()[0]).note
        shown = plot.banner.text() if key == "memory" else note.toPlainText()
        assert (not plot.banner.isHidden() if key == "memory" else note.isVisible()), key
        assert "To fit:" in shown, key
        if key != "memory":
            assert not any(series.layer.kind == "current" for series in plot.drawn()), key
    bars = {c.label: c for c in frame.charts["memory"].panel("breakdown").curves}
    assert "over capacity" in bars[window.state.machine.name].categories
    host = bars[window.state.machine.offload_name]               # the host memory's own bar, against its size
    assert host.extras["capacity"][0] == window.state.machine.offload_memory
    assert "does NOT fit" in window.scenario_label.text()
    assert frame.expected is None and frame.expected_curves is None
    assert not any(line.key.startswith("expected") for line in window.numbers.lines)
    (line,) = [x for x in window.numbers.lines if x.key == "placement"]
    assert "To fit: put all 37 layers on the GPU, the experts of" in line.sentence
    (memory,) = [x for x in window.numbers.lines if x.key == "memory"]
    assert "(too much)" in memory.sentence
    assert "Nothing predicted for the workload on screen" in window.stopwatch.result.text()
    # back to auto: the charts draw again and the note goes
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS):
        window.state.set_placement(PlacementChoice())
    window.flush_plots()
    assert not window.plots["decode"].panel_view("rate").note.isVisible()
    assert window.plots["decode"].curve("step", "tpot").y[0] > 0


def test_the_bounds_and_n_star_are_the_placements(qtbot, window):
    # auto-fit gpt-oss on a 4090: a 2,048-token prompt streams the host's experts over PCIe and is
    # memory-bound as placed, though the placed prefill first turned compute-bound near 100 tokens
    frame = _at_fp32_accumulate(qtbot, window, open_placed(qtbot, window, "gpt-oss-120b-mxfp4"))
    e = frame.summary.estimate
    assert e.prefill_bound == "memory" and frame.summary.prefill.bound == "compute"   # card alone: compute
    bounds = {line.key: line.bound for line in window.numbers.lines}
    assert bounds["ttft"] == bounds["prompt_rate"] == "memory" and bounds["tpot"] == e.decode_bound
    (n_star,) = [x for x in window.numbers.lines if x.key == "n_star"]
    assert frame.summary.headline_prefill_crossover < 2048 and "bandwidth-bound again" in n_star.sentence


def test_the_host_cpu_s_flops_field_reaches_the_placed_prefill(qtbot, window):
    # Machine tab > Second memory tier > Host compute: the layers kept on the host compute at it
    frame = open_placed(qtbot, window, "gpt-oss-120b-mxfp4")
    panel = window.machine_panel
    assert panel.offload_flops.value() == 0.0                      # the preset does not state it
    assert panel.offload_flops.text() == "not stated (1.024 TFLOP/s assumed)"     # with its unit (issue 20)
    before = frame.summary
    with qtbot.waitSignal(window.redrawn, timeout=WAIT_MS) as drawn:
        panel.offload_flops.setValue(0.5)                          # a slow host: 0.5 TFLOP/s
    m, after = window.state.machine, drawn.args[0].summary
    assert m.offload_flops == 0.5e12 and m.key == ""
    # short prompts, computed on the host, turn compute-bound sooner; decode (bandwidth-bound on
    # the host) and a 2,048-token prompt (streamed to the GPU over PCIe) do not change
    assert after.headline_prefill_crossover < before.headline_prefill_crossover / 2
    assert after.estimate.tpot == before.estimate.tpot and after.estimate.ttft == before.estimate.ttft
