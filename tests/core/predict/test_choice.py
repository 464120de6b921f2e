"""The placement a user asks for, read by one rule for ``rooflab predict``'s flags and the
window: -ngl as given (by hand, never fitted), or fitted around --n-cpu-moe / --no-kv-offload
when only those are given; N devices over the machine's link; one-device flags and several
devices never together."""

from __future__ import annotations

import pytest

from rooflab.core.app.resolve import choice_from
from rooflab.core.cli.parser import build_parser
from rooflab.core.errors import SpecError
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.predict.placement import Placement
from rooflab.core.values.workload import Workload

W = Workload(prompt=2048, answer=256)


def _flags(*argv: str) -> PlacementChoice:
    return choice_from(build_parser().parse_args(["predict", "--model", "m", "--machine", "x", *argv]))


def test_the_flags_read_as_llama_cpp_reads_them(gptoss):
    m = load_machine("rtx-4090")
    assert _flags() == AUTO and AUTO.is_auto and AUTO.fit(gptoss, m, W) is None     # placed_summary's auto-fit
    by_hand = _flags("--gpu-layers", "20").fit(gptoss, m, W)
    assert by_hand is not None and by_hand.placement == Placement(gpu_layers=20) and not by_hand.chosen
    # --n-cpu-moe or -nkvo alone: kept as given, -ngl fitted around them (rooflab's choice)
    moe = _flags("--cpu-moe", "30").fit(gptoss, m, W)
    assert moe is not None and moe.chosen and moe.fits and moe.kept == "--n-cpu-moe 30"
    assert moe.placement.cpu_moe == 30 and moe.placement.kv_on_device
    kv = _flags("--no-kv-offload").fit(gptoss, m, W)
    assert kv is not None and kv.chosen and kv.fits and kv.kept == "--no-kv-offload"
    assert not kv.placement.kv_on_device and kv.memory.kv_location == "host"
    # "--cpu-moe 0" keeps every expert with its layer: only -ngl is fitted, no expert moves to the CPU
    none = _flags("--cpu-moe", "0").fit(gptoss, m, W)
    assert none is not None and none.chosen and none.fits and none.placement.cpu_moe == 0
    assert none.placement.gpu_layers < 37 and none.kept == "--n-cpu-moe 0"
    assert _flags("--gpu-layers", "37", "--cpu-moe", "30") == PlacementChoice(gpu_layers=37, cpu_moe=30)


def test_devices_share_the_machines_link_or_the_one_given():
    m = load_machine("rtx-4090")
    assert AUTO.parallel_on(m) is None
    p = _flags("--devices", "2", "--parallel", "tensor").parallel_on(m)
    assert p is not None and (p.devices, p.mode, p.link_bandwidth) == (2, "tensor", m.interconnect_bandwidth)
    p = _flags("--devices", "4", "--interconnect", "64").parallel_on(m)
    assert p is not None and (p.devices, p.mode, p.link_bandwidth) == (4, "layer", 64e9)
    with pytest.raises(SpecError, match="no interconnect"):
        PlacementChoice(devices=2).parallel_on(load_machine("desktop-ddr5"))


@pytest.mark.parametrize("fields, name", [
    ({"gpu_layers": -1}, "gpu_layers"), ({"gpu_layers": True}, "gpu_layers"), ({"cpu_moe": 1.5}, "cpu_moe"),
    ({"devices": 0}, "devices"), ({"devices": 65}, "devices"), ({"parallel": "pipeline"}, "parallel"),
    ({"kv_on_device": 1}, "kv_on_device"), ({"link_bandwidth": 0.0}, "link_bandwidth"),
    # llama.cpp's placement flags go with a layer split (its own), not with vLLM's tensor parallel
    ({"devices": 2, "gpu_layers": 10, "parallel": "tensor"}, "tensor parallel"),
    ({"devices": 2, "kv_on_device": False, "parallel": "tensor"}, "tensor parallel"),
])
def test_bad_choices_name_what_is_wrong(fields, name):
    with pytest.raises(SpecError, match=name):
        PlacementChoice(**fields)


def test_a_choice_round_trips_through_its_dict_and_rejects_others():
    choice = PlacementChoice(gpu_layers=30, cpu_moe=12, kv_on_device=False)
    assert PlacementChoice.from_dict(choice.to_dict()) == choice
    assert PlacementChoice.from_dict({}) == AUTO
    for bad in ([1], {"bogus": 1}, {"devices": "2"}):
        with pytest.raises(SpecError):
            PlacementChoice.from_dict(bad)


def test_descriptions_name_the_flags_or_the_devices():
    assert AUTO.describe() == "auto placement"
    assert PlacementChoice(gpu_layers=37, cpu_moe=30, kv_on_device=False).describe() == \
        "-ngl 37 --n-cpu-moe 30 --no-kv-offload"
    assert PlacementChoice(cpu_moe=4).describe() == "-ngl auto --n-cpu-moe 4"
    assert PlacementChoice(devices=2, parallel="tensor").describe() == "2 × tensor parallel"
    assert PlacementChoice(devices=8, parallel="layer").describe() == "8 × layer split"
