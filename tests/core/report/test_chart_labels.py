"""Series labels that say what sets series apart (the window's legends and the report charts
use them), and counts read in the singular for one. No Qt here."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import PlacementChoice
from rooflab.core.report.chart_types import Description, Scenario, distinguishing_labels
from rooflab.core.report.text import count
from rooflab.core.values.workload import Workload


@pytest.fixture(scope="module")
def qwen():
    return load_model("qwen3-8b-q4_k_m")


@pytest.fixture(scope="module")
def gemma():
    return load_model("gemma-3-12b-q4_k_m")


def _labels(*scenarios: Scenario) -> list[str]:
    return distinguishing_labels([s.description for s in scenarios])


def test_a_scenario_is_described_part_by_part(qwen):
    d = Scenario(model=qwen, machine=load_machine("rtx-4090"), workload=Workload(batch=4)).description
    assert (d.model, d.weights, d.machine) == ("Qwen3-8B", "Q4_K_M", "NVIDIA GeForce RTX 4090")
    assert dict(d.workload)["batch"] == "batch 4" and dict(d.workload)["kv_type"] == "f16 cache"
    assert d.identity == "Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090"


def test_series_always_name_model_machine_and_placement(qwen):
    """Issue 20: legends dropped the machine name ("NVIDIA DGX Spark (GB10)" alone)."""
    w = Workload()
    assert _labels(Scenario(model=qwen, machine=load_machine("rtx-4090"), workload=w),
                   Scenario(model=qwen, machine=load_machine("dgx-spark"), workload=w)) \
        == ["Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090 · auto placement",
            "Qwen3-8B Q4_K_M · NVIDIA DGX Spark (GB10) · auto placement"]


def test_workload_settings_that_differ_follow(qwen, gemma):
    m, w = load_machine("rtx-4090"), Workload()
    assert _labels(Scenario(model=qwen, machine=m, workload=w), Scenario(model=gemma, machine=m, workload=w)) \
        == ["Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090 · auto placement",
            "Gemma-3-12B Q4_K_M · NVIDIA GeForce RTX 4090 · auto placement"]
    q8 = dataclasses.replace(qwen, name="Qwen3-8B (Q8_0)", weights_format="Q8_0")
    assert _labels(Scenario(model=q8, machine=m, workload=w))[0].startswith("Qwen3-8B Q8_0 · ")
    assert _labels(Scenario(model=qwen, machine=m, workload=w),
                   Scenario(model=qwen, machine=m, workload=Workload(batch=4, kv_type="q8_0"))) \
        == ["Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090 · auto placement · f16 cache, batch 1",
            "Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090 · auto placement · q8_0 cache, batch 4"]
    by_hand = Scenario(model=qwen, machine=m, workload=w, placement=PlacementChoice(gpu_layers=20))
    assert _labels(by_hand)[0] == "Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090 · -ngl 20"


def test_look_alikes_say_how_they_differ_and_identical_ones_say_so(qwen):
    """No unexplained "(2)": an edited machine of the same name shows its figures; a series the
    same in every part says it is."""
    m = load_machine("rtx-4090")
    one = Scenario(model=qwen, machine=m, workload=Workload())
    assert _labels(one) == ["Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090 · auto placement"]
    assert _labels(one, one)[1] == "Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090 · auto placement (same as above)"
    slower = dataclasses.replace(one, machine=dataclasses.replace(m, bandwidth=500e9, key=""))
    first, second = _labels(one, slower)
    assert "(1,008 GB/s, 330 TFLOP/s, 24 GiB (25.8 GB))" in first and "(500 GB/s, 330 TFLOP/s" in second
    assert distinguishing_labels([]) == []
    bare = Description(model="x", machine="m")
    assert distinguishing_labels([bare, Description(model="y", machine="m")]) == ["x · m", "y · m"]


def test_counts_of_one_read_in_the_singular(qwen):
    """"1 drafts at 70%" in a series label; "prompt of 1 tokens" in measure progress."""
    assert count(1, "token") == "1 token" and count(2048, "token") == "2,048 tokens"
    assert count("1.94", "token") == "1.94 tokens" and count(0, "draft") == "0 drafts"
    one = Scenario(model=qwen, machine=load_machine("rtx-4090"), workload=Workload(draft_tokens=1))
    assert "1 draft at 70%" in one.label and "1 drafts" not in one.label
    two = Scenario(model=qwen, machine=load_machine("rtx-4090"), workload=Workload(draft_tokens=2))
    assert "2 drafts at 70%" in two.label


def test_memory_reads_in_the_unit_the_vendor_sells_it_in():
    from rooflab.core.report.text import capacity_text

    assert capacity_text(24 * 2**30) == "24 GiB (25.8 GB)"          # an RTX 4090's "24 GB"
    assert capacity_text(100e9) == "100 GB"                            # not a whole number of GiB
    assert capacity_text(128 * 2**30) == "128 GiB (137 GB)"


def test_a_clocks_legend_names_the_host_only_where_it_holds_part_of_the_model(qwen):
    """A CPU has no -ngl and no GPU: its TTFT and TPOT curves read as one memory's (they said
    "as placed (-ngl 37)" and "compute clocks, GPU + host"). A card that holds the model says its
    -ngl but names its own clocks; one that keeps layers on the host names both."""
    from rooflab.core.app.figures import figures

    def labels(machine: str, **workload: int) -> set[str]:
        sc = Scenario(model=qwen, machine=load_machine(machine), workload=Workload(**workload))
        charts = figures(sc).charts()
        return {c.label for key in ("prefill", "decode") for p in charts[key].panels for c in p.curves}

    cpu = labels("epyc-9654")
    assert not any("GPU" in x or "-ngl" in x for x in cpu), cpu
    assert "TTFT (slower clock)" in cpu and "memory clock (W / B)" in cpu
    whole = labels("rtx-4090")
    assert any(x.startswith("TTFT as placed (-ngl") for x in whole) and "compute clock (2 N n / C)" in whole
    assert not any("GPU + host" in x for x in whole)
    split = labels("rtx-4090", prompt=5600, batch=23)          # a reserve sends layers to the host
    assert "memory clocks, GPU + host" in split
