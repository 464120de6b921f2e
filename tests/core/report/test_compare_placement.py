"""A comparison row placed as the window's Placement group asks: by hand (fitting or not) or on
several devices, with the same figures as the window's headline for that choice; auto-fit when
nothing is chosen."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.app.figures import summarise
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.predict.parallel import Parallel
from rooflab.core.predict.placed import placed_summary
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.compare import DEPTHS, compare_row, row_labels
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.workload import Workload

W = Workload(prompt=2048, answer=256)


@pytest.fixture(scope="module")
def qwen32b():
    return load_model("qwen3-32b-q4_k_m")


def _headline(spec, machine, choice):
    return summarise(Scenario(model=spec, machine=machine, workload=W, placement=choice))


def test_gpu_layers_by_hand_that_do_not_fit_say_so(gptoss):
    """-ngl 20 of gpt-oss on a 4090 does not fit: the row said fits=yes with auto-fit's flags."""
    m = load_machine("rtx-4090")
    row = compare_row(gptoss, m, W, choice=PlacementChoice(gpu_layers=20))
    assert not row.fits and row.placement.startswith("-ngl 20 (does NOT fit: needs ")
    assert row.flags == "" and row.chosen == "-ngl 20"
    assert row.ttft is row.tpot is row.per_sequence is row.total is None and row.largest_context == 0
    assert all(rate is None for _, rate in row.decode_rates)
    s = placed_summary(gptoss, m, W, placement=PlacementChoice(gpu_layers=20).fit(gptoss, m, W))
    assert row.device_used == s.fit.memory.device.used > m.memory          # the device's bill as placed
    assert _headline(gptoss, m, PlacementChoice(gpu_layers=20)).placed.fits is False


def test_a_placement_by_hand_that_fits_is_the_headline(gptoss):
    m = load_machine("rtx-4090")
    choice = PlacementChoice(gpu_layers=37, cpu_moe=30)
    row = compare_row(gptoss, m, W, choice=choice)
    headline = _headline(gptoss, m, choice)
    assert row.fits and row.flags == "-ngl 37 --n-cpu-moe 30" and row.chosen == row.flags
    assert row.placement.endswith(", placed by hand")
    assert row.tpot == headline.estimate.tpot and row.ttft == headline.estimate.ttft
    auto = compare_row(gptoss, m, W)
    assert auto.flags == "-ngl 37 --n-cpu-moe 23 -ot blk.23.ffn_down=CPU"
    assert row.tpot > auto.tpot      # more experts on the CPU: slower


def test_experts_on_the_cpu_given_alone_are_the_headline(gptoss):
    """-ngl left on auto with --n-cpu-moe given: placed as the headline places it."""
    m = load_machine("rtx-4090")
    choice = PlacementChoice(cpu_moe=30)
    row = compare_row(gptoss, m, W, choice=choice)
    headline = _headline(gptoss, m, choice)
    assert row.fits == headline.placed.fits and row.flags == headline.placed.placement.flags()
    assert row.tpot == headline.estimate.tpot and row.chosen == choice.describe()


def test_tensor_parallel_rows_carry_the_devices_estimate(qwen32b):
    """2 x tensor parallel: the row showed the one-card 19.7 ms against the headline's 10.4 ms."""
    m = load_machine("rtx-4090")
    choice = PlacementChoice(devices=2, parallel="tensor")
    row = compare_row(qwen32b, m, W, choice=choice)
    headline = _headline(qwen32b, m, choice)
    one = compare_row(qwen32b, m, W)
    assert row.fits and row.placement == "2 × tensor parallel" and row.chosen == "2 × tensor parallel"
    assert row.tpot == pytest.approx(headline.estimate.tpot, rel=1e-12)
    # half the one-card 19.7 ms, plus 2 x 64 all-reduces of 11.8 us (PCIe at 2 devices: values.links) and their
    # 10 KB each at 32 GB/s: 9.85 + 1.55 = 11.4 ms
    assert row.tpot == pytest.approx(0.0114, abs=0.0002) and one.tpot == pytest.approx(0.0197, abs=0.0002)
    assert row.per_sequence == headline.estimate.decode_rate and row.total == headline.estimate.total_rate
    par = headline.placed.parallel
    assert row.device_used == par.memory.used and row.device_capacity == m.memory   # each device's memory
    assert row.device_used < one.device_used
    assert [d for d, _ in row.decode_rates] == list(DEPTHS)
    rates = [r for _, r in row.decode_rates]
    assert rates == sorted(rates, reverse=True) and rates[0] > one.decode_rates[0][1]    # faster than one card
    assert row.largest_context >= W.context + W.prompt + W.answer


def test_a_layer_split_is_named_as_the_control_names_it(qwen32b):
    row = compare_row(qwen32b, load_machine("rtx-4090"), W, choice=PlacementChoice(devices=2, parallel="layer"))
    assert row.placement == "2 × layer split"


def test_several_devices_that_cannot_hold_it_say_so(gptoss):
    row = compare_row(gptoss, load_machine("rtx-4090"), W, choice=PlacementChoice(devices=2, parallel="tensor"))
    assert not row.fits and row.placement.startswith("2 × tensor parallel (does NOT fit: needs ")
    assert row.placement.endswith("per device)") and row.tpot is None and row.largest_context == 0


def test_expected_figures_stand_on_the_devices(qwen32b):
    m = load_machine("rtx-4090")
    slower = dataclasses.replace(m, efficiency=Efficiency(bandwidth=0.5))
    choice = PlacementChoice(devices=2, parallel="tensor")
    row = compare_row(qwen32b, m, W, choice=choice, expected=lambda spec, machine: slower)
    assert row.expected_tpot is not None and row.tpot is not None
    p = Parallel.on(m, 2, "tensor")
    assert row.expected_tpot == placed_summary(qwen32b, slower, W, parallel=p).estimate.tpot
    assert row.tpot < row.expected_tpot < 2.2 * row.tpot                  # bandwidth-bound, plus the link


def test_no_choice_or_auto_is_auto_fit(gptoss):
    m = load_machine("rtx-4090")
    assert compare_row(gptoss, m, W, choice=AUTO) == compare_row(gptoss, m, W)
    assert compare_row(gptoss, m, W).chosen == ""


def test_labels_tell_one_model_placed_two_ways_apart(qwen32b):
    m = load_machine("rtx-4090")
    rows = [compare_row(qwen32b, m, W),
            compare_row(qwen32b, m, W, choice=PlacementChoice(devices=2, parallel="tensor"))]
    assert row_labels(rows) == ["Qwen3-32B Q4_K_M · rtx-4090 · auto placement",
                                           "Qwen3-32B Q4_K_M · rtx-4090 · 2 × tensor parallel"]
