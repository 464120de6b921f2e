"""Series labels that say what sets series apart (the window's legends and the report charts
use them), and counts read in the singular for one. No Qt here."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
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


def test_series_of_one_model_on_two_machines_are_named_by_machine(qwen):
    """The legend used to cut "Qwen3-8B Q4_K_M · NVID…rk (GB10) · f16 cache" where they differ."""
    w = Workload()
    assert _labels(Scenario(model=qwen, machine=load_machine("rtx-4090"), workload=w),
                   Scenario(model=qwen, machine=load_machine("dgx-spark"), workload=w)) \
        == ["NVIDIA GeForce RTX 4090", "NVIDIA DGX Spark (GB10)"]


def test_models_formats_and_workloads_each_name_what_differs(qwen, gemma):
    m, w = load_machine("rtx-4090"), Workload()
    assert _labels(Scenario(model=qwen, machine=m, workload=w), Scenario(model=gemma, machine=m, workload=w)) \
        == ["Qwen3-8B", "Gemma-3-12B"]
    q8 = dataclasses.replace(qwen, name="Qwen3-8B Q8_0", weights_format="Q8_0")
    assert _labels(Scenario(model=qwen, machine=m, workload=w), Scenario(model=q8, machine=m, workload=w)) \
        == ["Q4_K_M", "Q8_0"]
    assert _labels(Scenario(model=qwen, machine=m, workload=w),
                   Scenario(model=qwen, machine=m, workload=Workload(batch=4, kv_type="q8_0"))) \
        == ["f16 cache, batch 1", "q8_0 cache, batch 4"]
    mixed = _labels(Scenario(model=gemma, machine=load_machine("dgx-spark"), workload=Workload(batch=4)),
                    Scenario(model=qwen, machine=m, workload=w))
    assert mixed == ["Gemma-3-12B · NVIDIA DGX Spark (GB10) · batch 4", "Qwen3-8B · NVIDIA GeForce RTX 4090 · batch 1"]


def test_a_lone_series_and_identical_ones_keep_readable_names(qwen):
    one = Scenario(model=qwen, machine=load_machine("rtx-4090"), workload=Workload())
    assert _labels(one) == ["Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090"]
    assert _labels(one, one) == ["Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090",
                                 "Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090 (2)"]
    assert distinguishing_labels([]) == []
    bare = Description(model="x", machine="m")
    assert distinguishing_labels([bare, Description(model="y", machine="m")]) == ["x", "y"]


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
