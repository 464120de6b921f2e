"""The placement a user asks for, read by one rule for ``rooflab predict``'s flags and the
window: -ngl as given, or every layer when only --n-cpu-moe / --no-kv-offload is given; N
devices over the machine's link; one-device flags and several devices never together."""

from __future__ import annotations

import pytest

from rooflab.core.cli.main import build_parser
from rooflab.core.cli.placement import choice_from
from rooflab.core.errors import SpecError
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.predict.placement import Placement


def _flags(*argv: str) -> PlacementChoice:
    return choice_from(build_parser().parse_args(["predict", "--model", "m", "--machine", "x", *argv]))


def test_the_flags_read_as_llama_cpp_reads_them(gptoss):
    assert _flags() == AUTO and AUTO.is_auto and AUTO.placement(gptoss) is None
    assert _flags("--gpu-layers", "20").placement(gptoss) == Placement(gpu_layers=20)
    # --n-cpu-moe or -nkvo alone: every layer (36 + the output) on the device, as llama.cpp's -ngl default
    assert _flags("--cpu-moe", "30").placement(gptoss) == Placement(gpu_layers=37, cpu_moe=30)
    assert _flags("--no-kv-offload").placement(gptoss) == Placement(gpu_layers=37, kv_on_device=False)
    # "--cpu-moe 0" is a placement by hand (no expert on the CPU), not auto-fit
    assert _flags("--cpu-moe", "0").placement(gptoss) == Placement(gpu_layers=37)
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
    ({"devices": 2, "gpu_layers": 10}, "several devices"), ({"devices": 2, "kv_on_device": False}, "several devices"),
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
    assert PlacementChoice(devices=2, parallel="tensor").describe() == "2 devices, tensor parallel"
