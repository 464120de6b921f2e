"""``summarise`` honours the scenario's placement choice: a placement by hand or N devices is
the headline, exactly as ``placed_summary`` (what ``rooflab predict``'s flags call) gives it;
auto is auto-fit's placement, all on the device for a model it holds (whose request is then the
one-memory one). No Qt here."""

from __future__ import annotations

import dataclasses
import math

import pytest

from rooflab.core.app.figures import summarise
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.predict.parallel import Parallel, parallel_estimate
from rooflab.core.predict.placed import placed_summary
from rooflab.core.predict.placement import Placement
from rooflab.core.predict.request import request
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.summary import headline_charts, summary_rows
from rooflab.core.values.workload import Workload

W = Workload(prompt=2048, answer=256)


@pytest.fixture(scope="module")
def rtx4090():
    return load_machine("rtx-4090")


def _sc(spec, machine, choice=AUTO, workload=W) -> Scenario:
    return Scenario(model=spec, machine=machine, workload=workload, placement=choice)


def test_a_placement_by_hand_is_the_headline(gptoss, rtx4090):
    s = summarise(_sc(gptoss, rtx4090, PlacementChoice(gpu_layers=37, cpu_moe=30)))
    given = Placement(gpu_layers=37, cpu_moe=30)
    assert s.placed is not None and s.placed.how == "manual" and s.placed.placement == given
    assert s.estimate == placed_summary(gptoss, rtx4090, W, placement=given).estimate
    auto = summarise(_sc(gptoss, rtx4090))
    assert auto.placed is not None and auto.placed.how == "auto" and auto.placed.placement.cpu_moe == 24
    # more experts on the CPU than auto-fit needs: slower per token, more room for sequences
    assert s.estimate.tpot > auto.estimate.tpot and s.headline_max_batch > auto.headline_max_batch
    assert ("placement", "-ngl 37 --n-cpu-moe 30", "") in summary_rows(s)


def test_a_placement_by_hand_places_even_a_model_the_card_holds(qwen8b, rtx4090):
    auto = summarise(_sc(qwen8b, rtx4090))         # auto-fit: all on the card, the one-memory request
    assert auto.placed.how == "auto" and auto.placed.placement == Placement.all_on_device(qwen8b)
    assert auto.estimate == request(qwen8b, rtx4090, W)
    s = summarise(_sc(qwen8b, rtx4090, PlacementChoice(gpu_layers=20)))
    assert s.placed is not None and s.placed.placement == Placement(gpu_layers=20)
    assert s.estimate.tpot > request(qwen8b, rtx4090, W).tpot       # half the layers read from host memory
    assert s.headline_max_batch == s.placed_max_batch > 0
    # a manual choice wins over the offload share, as a --gpu-layers flag does over --offload
    shared = dataclasses.replace(W, offload_fraction=0.5)
    assert summarise(_sc(qwen8b, rtx4090, PlacementChoice(gpu_layers=20), shared)).estimate == s.estimate


def test_several_devices_are_the_headline_and_the_charts_draw_them(rtx4090):
    spec = load_model("qwen3-32b-q4_k_m")
    sc = _sc(spec, rtx4090, PlacementChoice(devices=2, parallel="tensor"))
    s = summarise(sc)
    par = Parallel.on(rtx4090, 2, "tensor")
    assert s.placed is not None and s.placed.parallel is not None and s.placed.runs_on is None
    assert s.estimate == parallel_estimate(spec, rtx4090, W, par)
    assert s.estimate.tpot < request(spec, rtx4090, W).tpot         # half the bytes each, plus the link
    # the charts and their limits are the devices': each holds half the weights, so more sequences fit
    assert s.drawn_on == par and s.headline_max_batch == s.placed_max_batch > s.max_batch
    assert s.headline_prefill_crossover == s.placed_prefill_crossover and math.isfinite(s.placed_prefill_crossover)
    charts = headline_charts(sc, s)
    assert charts.keys() == headline_charts(_sc(spec, rtx4090), summarise(_sc(spec, rtx4090))).keys()
    assert charts["batching"].panel("rate").curve("max_fit").x[0] == s.placed_max_batch
    assert charts["decode"].panel("step").curve("tpot").y[0] == s.estimate.tpot
    assert len(charts["memory"].panel("breakdown").curves) == 2             # a bar per device
    rows = {name: value for name, value, _ in summary_rows(s)}
    assert rows["devices"] == 2 and rows["parallel"] == "tensor"
    assert rows["communication_seconds_per_token"] == pytest.approx(s.placed.parallel.communication_seconds_per_token)


def test_the_label_names_a_choice_that_is_not_auto(qwen8b, rtx4090):
    assert "placement" not in _sc(qwen8b, rtx4090).label
    assert _sc(qwen8b, rtx4090, PlacementChoice(gpu_layers=20)).label.endswith("· f16 cache, -ngl 20")
    assert dict(_sc(qwen8b, rtx4090).description.workload)["placement"] == "auto placement"
