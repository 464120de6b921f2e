"""Several identical devices sharing the device's layers (llama.cpp's -sm layer), with the rest
in host memory: which device holds which layer, each one's bill, and the fit filling them."""

from __future__ import annotations

import pytest

from rooflab.core.errors import SpecError
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.autofit import fill_split, fit_placement
from rooflab.core.predict.footprint import plan_memory
from rooflab.core.predict.layer_split import device_of_layers, device_parts
from rooflab.core.predict.offload import placed_decode
from rooflab.core.predict.placement import Placement, split
from rooflab.core.values.workload import Workload
from tests.factories.hand_specs import SHORT, GiB, card, moe

W = Workload(prompt=2048, answer=256)


def test_layers_go_to_devices_as_llama_cpp_assigns_them(gptoss):
    # load_tensors: unit il of act = 37 goes to the first device whose cumulative split passes
    # il / 37: with an even split of 2, units 0-18 (il / 37 < 0.5) on the first, 19-36 (the output,
    # unit 36) on the second
    even = device_of_layers(gptoss, Placement(gpu_layers=37, devices=2))
    assert even == [0] * 19 + [1] * 18
    # -ts 23,14: cumulative 23/37, so units 0-22 and 23-36
    assert device_of_layers(gptoss, Placement(gpu_layers=37, devices=2, tensor_split=(23, 14))) == [0] * 23 + [1] * 14
    # -ngl 20 on 2 devices: the device's 20 units are layers 17-35 and the output, 10 each
    assert device_of_layers(gptoss, Placement(gpu_layers=20, devices=2)) == [0] * 10 + [1] * 10


def test_the_devices_hold_the_device_part_between_them(gptoss):
    p = Placement(gpu_layers=37, cpu_moe=3, devices=2)
    parts = device_parts(gptoss, p)
    whole = split(gptoss, p).device
    assert sum(part.weight_bytes for part in parts) == pytest.approx(whole.weight_bytes)
    assert [part.layers for part in parts] == [19, 17] and [part.output for part in parts] == [False, True]
    assert [part.expert_layers for part in parts] == [16, 17]
    bills = plan_memory(gptoss, load_machine("rtx-5090"), W, p)
    assert len(bills.devices) == 2 and bills.device == min(bills.devices, key=lambda u: u.free)
    assert sum(u.weights for u in bills.devices) == pytest.approx(whole.weight_bytes)


def test_a_split_must_name_every_device():
    with pytest.raises(SpecError, match="tensor_split"):
        Placement(gpu_layers=11, devices=2, tensor_split=(5,))
    with pytest.raises(SpecError, match="devices"):
        Placement(gpu_layers=11, devices=0)
    assert Placement(gpu_layers=11, devices=2, tensor_split=(6, 5)).flags() == "-ngl 11 -ts 6,5"


def test_the_fit_fills_the_devices_in_turn():
    # the MoE of test_fit_llamacpp (10 layers of 1.75 GiB, a 0.25 GiB head) on two 8 GiB cards (6.55 GiB
    # of room each, less a few MB of buffer): 17.75 GiB need the experts of some layers on the host. With
    # k of them there, those layers cost 0.25 GiB and the rest 1.75; filled in order, the first card
    # takes layers 0..k-1 and then full ones while they fit. k = 4: 4 x 0.25 + 3 x 1.75 = 6.25 on the
    # first card (one more layer would make 8.0), 3 x 1.75 + 0.25 = 5.5 on the second: -ts 7,4.
    # k = 3: 6.0 on the first (layers 0-5), and 4 x 1.75 = 7.0 left over for the second: no split
    spec = moe()
    two = card(8.0)
    fit = fit_placement(spec, two, SHORT, devices=2)
    assert fit.placement == Placement(gpu_layers=11, cpu_moe=4, devices=2, tensor_split=(7, 4))
    assert fit.fits
    assert fill_split(spec, two, SHORT, Placement(gpu_layers=11, cpu_moe=3, devices=2), context_length=4096) is None
    weights = [u.weights / GiB for u in fit.memory.devices]
    assert weights == pytest.approx([6.25, 5.5])


def test_the_hidden_state_hops_between_devices(gptoss):
    machine = load_machine("rtx-5090")                  # PCIe 5.0 x16 between the cards: 64 GB/s
    one = placed_decode(gptoss, machine, W, Placement(gpu_layers=37, cpu_moe=3), context=2048)
    two = placed_decode(gptoss, machine, W, Placement(gpu_layers=37, cpu_moe=3, devices=2), context=2048)
    hop = gptoss.hidden * 2 / 64e9 + 2.6e-6             # one token's hidden state in fp16, plus PCIe's step latency
    assert float(two.communication) == pytest.approx(hop)
    assert float(two.seconds) == pytest.approx(float(one.seconds) + hop)
