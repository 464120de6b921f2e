"""The link between devices (an all-reduce's latency by kind of link, the link that joins N
devices) and llama.cpp's pipelining of a prompt's ubatches over a layer split."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.io.presets import list_presets, load_machine
from rooflab.core.predict import work
from rooflab.core.predict.layer_split import SCHED_COPIES, pipeline_share, pipelines
from rooflab.core.predict.offload import placed_decode, placed_prefill
from rooflab.core.predict.parallel import (
    ALLREDUCES_PER_LAYER,
    Parallel,
    communication_seconds,
    device_link,
    engine_of,
    parallel_decode,
    parallel_prefill,
)
from rooflab.core.predict.placement import Placement
from rooflab.core.values.links import LINKS, kind_of
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

US = 1e-6


@pytest.mark.parametrize("kind, devices, micros", [
    # NCCL's tuning model (src/graph/tuning.cc): base 6.6 us + 2 (N - 1) steps of 0.6 us on NVLink
    ("nvlink", 2, 6.6 + 2 * 0.6), ("nvlink", 4, 6.6 + 6 * 0.6), ("nvlink", 8, 6.6 + 14 * 0.6),
    # PCIe: the same base, 2.6 us a step fitted to nccl-tests' small all-reduces on PCIe-only cards
    ("pcie", 2, 6.6 + 2 * 2.6), ("pcie", 4, 6.6 + 6 * 2.6), ("pcie", 8, 6.6 + 14 * 2.6),
    ("pcie", 1, 0.0),
])
def test_allreduce_latency_by_link(kind, devices, micros):
    assert LINKS[kind].allreduce_latency(devices) == pytest.approx(micros * US, rel=1e-12)


def test_pcie_is_tens_of_microseconds_where_two_microseconds_a_step_said_four_and_twelve():
    # the old guess (2 us a ring step, no base) gave 4 us at TP2 and 12 us at TP4; PCIe now says
    # 11.8 and 22.2, NVLink 7.8 and 10.2
    pcie, nvlink = LINKS["pcie"], LINKS["nvlink"]
    assert pcie.allreduce_latency(2) > 2.5 * 4 * US and pcie.allreduce_latency(4) > 1.8 * 12 * US
    assert nvlink.allreduce_latency(4) < pcie.allreduce_latency(4) / 2
    assert all(link.source for link in LINKS.values())


@pytest.mark.parametrize("name, kind", [("NVLink 4 (NVSwitch)", "nvlink"), ("NVLink bridge (2 GPUs)", "nvlink"),
                                        ("PCIe 4.0 x16", "pcie"), ("Infinity Fabric (1 of 7 links)", "infinity-fabric"),
                                        ("Thunderbolt 5", "network"), ("ConnectX-7 (200 Gb/s)", "network"),
                                        ("", "pcie")])
def test_a_link_without_a_kind_is_read_from_its_name(name, kind):
    assert kind_of(name) == kind


def test_every_preset_with_an_interconnect_states_its_kind():
    for m in list_presets():
        if m.has_interconnect:
            assert m.interconnect_kind and m.interconnect_latency is LINKS[m.interconnect_kind], m.key
            assert m.interconnect_kind == kind_of(m.interconnect_name), m.key
        if "bridge" in m.interconnect_name.lower():
            assert m.interconnect_devices == 2, m.key           # a bridge joins two cards


def test_the_link_fields_round_trip():
    m = load_machine("a100-pcie-80gb")
    again = MachineProfile.from_dict(m.to_dict(), key=m.key)
    assert (again.interconnect_kind, again.interconnect_devices) == ("nvlink", 2)
    assert again == m


def test_a_bridge_joins_two_and_more_devices_talk_over_pcie():
    m = load_machine("a100-pcie-80gb")            # NVLink bridge between pairs, PCIe 4.0 x16 to the host
    two, four = Parallel.on(m, 2, "tensor"), Parallel.on(m, 4, "tensor")
    assert two.link is LINKS["nvlink"] and two.link_bandwidth == 300e9
    assert four.link is LINKS["pcie"] and four.link_bandwidth == 32e9 and "joins 2" in four.link_name
    sxm = Parallel.on(load_machine("a100-sxm-80gb"), 8, "tensor")    # NVSwitch joins all 8
    assert sxm.link is LINKS["nvlink"] and sxm.link_bandwidth == 300e9


def test_gpus_without_an_interconnect_talk_over_their_host_link():
    m = dataclasses.replace(load_machine("rtx-4090"), interconnect_bandwidth=0.0, interconnect_name="",
                            interconnect_kind="")
    bandwidth, name, link = device_link(m, 2)
    assert (bandwidth, name, link) == (32e9, "PCIe 4.0 x16", LINKS["pcie"])


def test_moe_under_tensor_parallel_pays_the_allreduce_every_layer(gptoss):
    # gpt-oss-120b on A100 PCIe, one decode token: 2 all-reduces in each of 36 layers of
    # hidden 2,880 x 2 bytes. TP2 over the NVLink bridge: 72 x (7.8 us + 5,760 B / 300 GB/s) = 0.563 ms;
    # TP4 over PCIe (the bridge joins 2): 72 x (22.2 us + 1.5 x 5,760 B / 32 GB/s) = 1.618 ms
    m = load_machine("a100-pcie-80gb")
    message = gptoss.hidden * 2.0
    assert ALLREDUCES_PER_LAYER * gptoss.layers == 72
    tp2 = float(communication_seconds(gptoss, Parallel.on(m, 2, "tensor"), 1))
    tp4 = float(communication_seconds(gptoss, Parallel.on(m, 4, "tensor"), 1))
    assert tp2 == pytest.approx(72 * (7.8 * US + message / 300e9), rel=1e-9)
    assert tp4 == pytest.approx(72 * (22.2 * US + 1.5 * message / 32e9), rel=1e-9)
    assert tp2 == pytest.approx(0.563e-3, abs=0.001e-3) and tp4 == pytest.approx(1.618e-3, abs=0.001e-3)


def test_four_a100s_over_pcie_decode_no_faster_than_two(gptoss):
    # users of vLLM saw gpt-oss-120b on A100s go 90 -> 77 -> 77 tok/s at TP 1/2/4: the link time
    # grows faster than the reading shrinks. The ceiling now turns down at 4 (it rose to 760 before)
    m = load_machine("a100-pcie-80gb")
    w = Workload(prompt=512, answer=128)
    step = {n: float(parallel_decode(gptoss, m, w, Parallel.on(m, n, "tensor"), context=512).seconds)
            for n in (2, 4)}
    assert step[4] > step[2]


def test_the_engine_of_each_mode():
    assert engine_of("tensor") == "vllm"
    assert engine_of("layer") == engine_of(None) == "llama.cpp"


@pytest.mark.parametrize("tokens, ubatch, devices, share", [
    (4096, 512, 4, (4 + 7) / (8 * 4)),             # k = 8 ubatches: fill 4 stages, then one a stage
    (4096, 512, 2, (2 + 7) / (8 * 2)),
    (4096, 512, 8, (8 + 7 * 8 / SCHED_COPIES) / (8 * 8)),   # 4 in flight: one ubatch every 2 stages
    (512, 512, 4, 1.0),                            # one ubatch: nothing to overlap
    (100, 512, 4, 1.0),
    (768, 512, 2, (2 + 0.5) / (1.5 * 2)),          # a last half ubatch is half a stage
    (4096, 512, 1, 1.0),
])
def test_pipeline_share(tokens, ubatch, devices, share):
    assert float(pipeline_share(tokens, ubatch, devices)) == pytest.approx(share, rel=1e-12)


def test_pipelining_needs_every_layer_on_the_devices_and_no_override(gptoss):
    every = Placement.all_on_device(gptoss)
    assert pipelines(gptoss, dataclasses.replace(every, devices=2))
    assert not pipelines(gptoss, every)                                              # one device
    assert not pipelines(gptoss, Placement(gpu_layers=gptoss.layers, devices=2))     # the output on the host
    assert not pipelines(gptoss, dataclasses.replace(every, devices=2, cpu_moe=3))   # --n-cpu-moe is an -ot
    assert not pipelines(gptoss, dataclasses.replace(every, devices=2, kv_on_device=False))


def test_a_layer_split_pipelines_its_prefill_not_its_decode(qwen8b):
    m = load_machine("rtx-4090")
    w = Workload(prompt=4096, answer=128, ubatch=512)
    four = Parallel(devices=4, mode="layer", link_bandwidth=32e9)
    piped = parallel_prefill(qwen8b, m, w, four)
    whole = parallel_prefill(qwen8b, m, dataclasses.replace(w, ubatch=4096), four)    # one ubatch: in turn
    assert float(piped.device.seconds) == pytest.approx(float(whole.device.seconds) * 11 / 32, rel=1e-12)
    assert float(piped.communication) == pytest.approx(float(whole.communication) * 11 / 32, rel=1e-12)
    # decode: the one-device step plus three hops of one token's hidden state, whatever -ub is
    one = parallel_decode(qwen8b, m, w, Parallel(devices=1), context=4096)
    step = parallel_decode(qwen8b, m, w, four, context=4096)
    hop = qwen8b.hidden * 2 / 32e9 + LINKS["pcie"].step
    assert float(step.seconds) == pytest.approx(float(one.seconds) + 3 * hop, rel=1e-9)


def test_a_placed_layer_split_pipelines_only_as_llama_cpp_does(gptoss):
    m = load_machine("rtx-pro-6000-blackwell")
    w = Workload(prompt=4096, answer=128, ubatch=512)
    on_two = dataclasses.replace(Placement.all_on_device(gptoss), devices=2)
    piped = placed_prefill(gptoss, m, w, on_two)
    whole = placed_prefill(gptoss, m, dataclasses.replace(w, ubatch=4096), on_two)
    assert float(piped.device.seconds) == pytest.approx(float(whole.device.seconds) * 9 / 16, rel=1e-12)
    # experts of 3 layers on the host: an override, so the devices run strictly in turn
    moe = Placement(gpu_layers=gptoss.layers + 1, cpu_moe=3, devices=2)
    base = placed_prefill(gptoss, m, dataclasses.replace(w, ubatch=4096), moe)
    again = placed_prefill(gptoss, m, w, moe)
    assert float(again.device.seconds) == pytest.approx(float(base.device.seconds), rel=1e-12)
    # decode is never pipelined
    assert float(placed_decode(gptoss, m, w, on_two).seconds) == pytest.approx(
        float(placed_decode(gptoss, m, dataclasses.replace(w, ubatch=4096), on_two).seconds), rel=1e-12)


def test_the_prefill_attention_is_shared_like_the_rest(qwen8b):
    # a long prompt's n^2 arithmetic is in the devices' compute clock, each device its share
    m = load_machine("rtx-4090")
    w = Workload(prompt=8192, answer=1, ubatch=8192)
    two = Parallel(devices=2, mode="tensor", link_bandwidth=32e9)
    flops = float(work.prefill_flops(qwen8b, 8192, 0, 1))
    assert float(parallel_prefill(qwen8b, m, w, two).device.compute_seconds) == pytest.approx(
        flops / 2 / m.flops(w.compute_dtype), rel=1e-9)
    assert np.isfinite(float(parallel_prefill(qwen8b, m, w, two, context=4096).seconds))


def test_an_expected_prefill_keeps_more_of_the_pipelines_saving_the_more_devices(gptoss):
    """Published runs of one model at one ubatch and at 4,096-8,192 tokens on the same devices: two
    devices keep a small share of the ideal saving, eight several times more; a ceiling keeps all of it."""
    from rooflab.core.predict.layer_split import pipeline_kept
    from rooflab.core.values.efficiency import Efficiency

    assert pipeline_kept(1) == 0.0
    assert 0.0 < pipeline_kept(2) < 0.35 and pipeline_kept(2) < pipeline_kept(4) < pipeline_kept(8) < 1.0
    assert pipeline_kept(8) > 2 * pipeline_kept(2)
    m = load_machine("rtx-pro-6000-blackwell")
    expected = dataclasses.replace(m, efficiency=Efficiency(bandwidth=0.8, compute=0.6))
    w = Workload(prompt=4096, answer=128, ubatch=512)
    for devices in (2, 4, 8):
        on = dataclasses.replace(Placement.all_on_device(gptoss), devices=devices)
        ideal = float(pipeline_share(4096, 512, devices))
        for machine, kept in ((m, 1.0), (expected, pipeline_kept(devices))):
            piped = placed_prefill(gptoss, machine, w, on)
            whole = placed_prefill(gptoss, machine, dataclasses.replace(w, ubatch=4096), on)
            assert float(piped.device.seconds) == pytest.approx(
                float(whole.device.seconds) * (1 - kept * (1 - ideal)), rel=1e-9), (devices, kept)
