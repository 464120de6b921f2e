"""The host's part of a placed model: weights stream over the PCIe host link (never an NVLink
bridge), once per ubatch (llama.cpp's -ub), from 32 tokens on."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rooflab.core.errors import SpecError
from rooflab.core.files.resources import resources_dir
from rooflab.core.io.presets import load_machine, preset_keys
from rooflab.core.predict.host_part import OP_OFFLOAD_MIN_TOKENS, host_link_bandwidth
from rooflab.core.predict.offload import placed_decode, placed_prefill, placed_request
from rooflab.core.predict.placement import Placement
from rooflab.core.values.links import HostLink
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import AttentionLayout, ModelSpec, Role, Tensor
from rooflab.core.values.workload import DEFAULT_UBATCH, Workload

W = Workload(prompt=2048, answer=256)


@pytest.mark.parametrize("key", preset_keys())
def test_every_preset_states_its_host_link_with_a_source(key):
    data = json.loads((resources_dir() / "machines" / f"{key}.json").read_text(encoding="utf-8"))
    assert "host_link" in data and data["sources"].get("host_link")
    machine = load_machine(key)
    if machine.kind == "gpu":        # a discrete card: PCIe generation and lanes, apart from any NVLink
        assert set(data["host_link"]) == {"pcie_generation", "lanes"}
        assert machine.host_link == HostLink(generation=data["host_link"]["pcie_generation"],
                                             lanes=data["host_link"]["lanes"])
        assert "PCI" in data["sources"]["host_link"]
    else:                            # a CPU, or unified memory: no device link to the host
        assert data["host_link"] is None and machine.host_link is None
        assert data["sources"]["host_link"].startswith("none")


def test_host_link_bandwidth_is_pcie_per_direction():
    # PCIe 4.0: 16 GT/s per lane, 2 GB/s per direction (64 GB/s both ways for x16, as vendors quote it)
    assert HostLink(generation=4, lanes=16).bandwidth == 32e9
    gen5 = HostLink(generation=5, lanes=16)
    assert gen5.bandwidth == 64e9 and gen5.name == "PCIe 5.0 x16"
    assert host_link_bandwidth(load_machine("rtx-4060-ti-16gb")) == 16e9        # the card wires 8 lanes
    # the RTX 3090's NVLink bridge joins two cards; its host link is PCIe 4.0 x16, not the DDR4 behind it
    rtx3090 = load_machine("rtx-3090")
    assert "NVLink" in rtx3090.interconnect_name and rtx3090.offload_bandwidth == 51.2e9
    assert host_link_bandwidth(rtx3090) == 32e9
    for bad in ({"pcie_generation": 7, "lanes": 16}, {"pcie_generation": 4, "lanes": 12},
                {"pcie_generation": "4", "lanes": 16}):
        with pytest.raises(SpecError, match="host_link"):
            MachineProfile.from_dict({**load_machine("rtx-4090").to_dict(), "host_link": bad})
    assert MachineProfile.from_dict(rtx3090.to_dict()).host_link == rtx3090.host_link


def test_gpt_oss_prefills_no_faster_on_a_3090_than_on_a_4090_placed_alike(gptoss):
    # the issue: with the same placement the 3090 (71 TFLOP/s, DDR4 host) came out at 0.90 s TTFT
    # against the 4090's 1.28 s, its host weights streaming at the DDR4's 51.2 GB/s as if that were
    # its link. Both stream over PCIe 4.0 x16 now, and the 3090 computes less: it cannot be faster
    placement = Placement(gpu_layers=37, cpu_moe=24)
    on_4090 = placed_request(gptoss, load_machine("rtx-4090"), W, placement)
    on_3090 = placed_request(gptoss, load_machine("rtx-3090"), W, placement)
    assert on_3090.ttft >= on_4090.ttft
    assert on_3090.tpot >= on_4090.tpot                 # DDR4 behind it: decode is slower too


def layered(layers: int = 10, gib_per_layer: float = 0.5) -> ModelSpec:
    tensors = [Tensor(name=f"blk.{i}.ffn_up.weight", shape=(1_000_000, 1000), type_name="mix",
                      nbytes=round(gib_per_layer * 2**30), role=Role.FEED_FORWARD, layer=i) for i in range(layers)]
    tensors += [Tensor(name="token_embd.weight", shape=(1, 1), type_name="F32", nbytes=0, role=Role.EMBEDDING),
                Tensor(name="output.weight", shape=(1, 1), type_name="F32", nbytes=0, role=Role.OUTPUT)]
    layout = AttentionLayout(heads=(0,) * layers, kv_heads=(0,) * layers, head_dim_k=0, head_dim_v=0)
    return ModelSpec(name="layered", architecture="test", source="test", tensors=tuple(tensors), attention=layout,
                     hidden=1, vocab=1, file_bytes=sum(t.nbytes for t in tensors))


def gpu() -> MachineProfile:
    return MachineProfile(name="card", bandwidth=1e12, peak_flops={"fp16": 100e12}, memory=24 * 2**30,
                          offload_bandwidth=80e9, offload_memory=64e9, host_link=HostLink(generation=4, lanes=16))


def test_host_weights_stream_once_per_ubatch():
    # 10 host layers of 0.5 GiB (5 GiB), 1e9 parameters each: 2 x 1e10 FLOP per token there. A ubatch
    # of u tokens streams 5 GiB over PCIe 4.0 x16 (0.168 s) and multiplies on the GPU (2e10 u / 1e14 s):
    # 512 tokens take 0.168 s (the copy), 2,048 tokens 0.41 s (the arithmetic). A 2,048-token prompt is
    # 4 ubatches of 512 (0.671 s) or one of 2,048 (0.41 s): prompt speed grows with -ub
    spec, machine = layered(), gpu()
    host = Placement(gpu_layers=1)                       # the output alone on the GPU
    copy = 5 * 2**30 / 32e9

    def host_seconds(ubatch: int, prompt: int = 2048) -> float:
        w = dataclasses.replace(W, ubatch=ubatch)
        return float(placed_prefill(spec, machine, w, host, prompt=prompt).host.seconds)

    assert host_seconds(512) == pytest.approx(4 * max(copy, 2e10 * 512 / 1e14))
    assert host_seconds(2048) == pytest.approx(max(copy, 2e10 * 2048 / 1e14))
    # at 1,024 tokens a ubatch is already compute-bound (0.205 s > 0.168 s): no faster past it
    assert host_seconds(DEFAULT_UBATCH) > host_seconds(1024) == pytest.approx(host_seconds(2048))
    # 528 tokens: one ubatch of 512 streamed, and 16 (< 32) computed by the host from its own memory
    # (5 GiB at 80 GB/s, the desktop CPU's int8 path, 4 x 1.024 TFLOP/s, for 16 x 2e10 FLOP)
    rest = max(5 * 2**30 / 80e9, 16 * 2e10 / 4.096e12)
    assert host_seconds(512, prompt=528) == pytest.approx(max(copy, 2e10 * 512 / 1e14) + rest)
    assert OP_OFFLOAD_MIN_TOKENS == 32


def test_decode_does_not_depend_on_the_ubatch(gptoss):
    machine = load_machine("rtx-4090")
    placement = Placement(gpu_layers=37, cpu_moe=24)
    steps = {ub: float(placed_decode(gptoss, machine, dataclasses.replace(W, ubatch=ub), placement).seconds)
             for ub in (256, 512, 4096)}
    assert len(set(steps.values())) == 1


def test_gpt_oss_prompt_speed_grows_with_the_ubatch(gptoss):
    # the shape (one user: 380 tok/s at -ub 512, 1,112 at 2048, 1,682 at 4096, a ceiling's
    # worth below these): of the 40.7 GB of host experts a ceiling copies only the experts its tokens
    # route to, spread over LIVE_EXPERT_FLOOR (0.4) of them at least: 16.3 GB over PCIe 4.0 x16
    # (32 GB/s) in 0.51 s per ubatch of 512, ~1,000 tok/s (a skewed router leaves experts idle)
    machine = load_machine("rtx-4090")
    placement = Placement(gpu_layers=37, cpu_moe=24)
    rates = []
    for ub in (512, 2048, 4096):
        w = Workload(prompt=8192, answer=2, ubatch=ub)
        rates.append(w.prompt / placed_request(gptoss, machine, w, placement).ttft)
    assert rates == sorted(rates) and rates[-1] > 5 * rates[0]
    assert 900 < rates[0] < 1050               # 512 tokens per ~0.51 s copy


def test_the_ubatch_is_a_workload_option():
    assert Workload().ubatch == DEFAULT_UBATCH == 512
    for bad in (0, -1, 1.5, True, 1 << 17):
        with pytest.raises(SpecError, match="ubatch"):
            Workload(ubatch=bad)
