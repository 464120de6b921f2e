"""The terms an expected figure adds when weights sit in host memory behind a GPU
(``offload_terms``): crossings per graph pass, the host's batch-1 expert decode share, and a
prompt's PCIe streaming of only the routed experts; each 0 (or the hardware's bound) in a ceiling."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict import offload_terms as terms
from rooflab.core.predict.offload import placed_decode, placed_prefill
from rooflab.core.predict.placement import Placement, input_on_host, split
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import INT8_PATH
from rooflab.core.values.workload import Workload

W = Workload(prompt=512, answer=128)


def engine(machine, **factors):
    """``machine`` as an engine's expected figure prices it: any efficiency but the identity."""
    return dataclasses.replace(machine, efficiency=Efficiency(bandwidth=0.8, compute=0.6, **factors))


def test_crossings_count_each_change_of_side(gptoss):
    # gpt-oss-120b has 36 layers; with the experts of the first 24 on the host and every layer on
    # the GPU, each of those 24 layers goes GPU -> host -> GPU: 48 crossings
    assert terms.crossings(gptoss, Placement(gpu_layers=37, cpu_moe=24)) == 48
    assert terms.crossings(gptoss, Placement.all_on_device(gptoss)) == 0
    # a dense model with its first 41 layers on the host: one crossing, host block to GPU block
    llama = load_model("llama-3.3-70b-q4_k_m")
    assert terms.crossings(llama, Placement(gpu_layers=40)) == 1
    # everything on the host, the output too: no crossing at all
    assert terms.crossings(llama, Placement(gpu_layers=0)) == 0


def test_crossings_cost_an_expected_figure_only(gptoss):
    m = load_machine("rtx-4090")
    p = Placement(gpu_layers=37, cpu_moe=24)
    assert float(terms.crossing_seconds(m, gptoss, p, 1)) == 0.0               # a ceiling
    # 48 crossings x 25 us = 1.2 ms a decode step; a prompt of 4 ubatches pays it 4 times
    assert float(terms.crossing_seconds(engine(m), gptoss, p, 1)) == pytest.approx(48 * 25e-6)
    assert float(terms.crossing_seconds(engine(m), gptoss, p, 4)) == pytest.approx(4 * 48 * 25e-6)
    ceiling = placed_decode(gptoss, m, W, p)
    expected = placed_decode(gptoss, engine(m), W, p)
    assert float(ceiling.communication) == 0.0
    assert float(expected.communication) == pytest.approx(48 * 25e-6)


def test_the_host_decode_share_applies_to_routed_experts_behind_a_gpu(gptoss, qwen8b):
    m = load_machine("rtx-4090")
    host = split(gptoss, Placement(gpu_layers=37, cpu_moe=24), embedding_on_host=input_on_host(m)).host.spec
    assert terms.host_decode_share(m, host) == 1.0                              # a ceiling
    assert terms.host_decode_share(engine(m), host) == terms.HOST_EXPERT_DECODE_SHARE == 0.74
    dense_host = split(qwen8b, Placement(gpu_layers=20), embedding_on_host=True).host.spec
    assert terms.host_decode_share(engine(m), dense_host) == 1.0                # no routed experts there
    # the host part of a decode step reads its 1.24 GB of experts at 0.74 of the host factor 1 x 89.6 GB/s
    p = Placement(gpu_layers=37, cpu_moe=24)
    step = placed_decode(gptoss, engine(m), W, p, context=0)
    read = float(step.host.weight_bytes)
    assert float(step.host.memory_seconds) == pytest.approx(read / (89.6e9 * 1.0 * 0.74), rel=1e-9)


def test_the_host_multiplies_its_experts_at_a_share_of_its_cpus_peak(gptoss, qwen8b):
    """Behind a GPU a decode step's routed experts on the host are multiplied at
    HOST_EXPERT_DECODE_COMPUTE of the CPU's compute factor times its peak (the profile's offload
    flops, else the lessons' 8-core desktop): a host with 8 channels and few cores is bound by
    its arithmetic. A ceiling and a host without routed experts keep the whole factor."""
    m = load_machine("rtx-4090")
    host = split(gptoss, Placement(gpu_layers=37, cpu_moe=24), embedding_on_host=input_on_host(m)).host.spec
    assert terms.host_decode_compute(m, host, 0.5) == 0.5                        # a ceiling
    assert terms.host_decode_compute(engine(m), host, 0.5) == 0.5 * terms.HOST_EXPERT_DECODE_COMPUTE
    assert terms.HOST_EXPERT_DECODE_COMPUTE < 1.0
    dense_host = split(qwen8b, Placement(gpu_layers=20), embedding_on_host=True).host.spec
    assert terms.host_decode_compute(engine(m), dense_host, 0.5) == 0.5
    # a band's replicate states the experts' factor itself
    spread = engine(m, host_expert_compute=0.3)
    assert terms.host_decode_compute(spread, host, 0.5) == 0.3
    p = Placement(gpu_layers=37, cpu_moe=24)
    # a Threadripper's eight channels and 32 cores, at the CPU back end's compute factor (~0.085 of
    # its int8 path, 4 x 4.6 TFLOP/s: 0.34 of its FP32 peak)
    wide = dataclasses.replace(m, offload_bandwidth=204.8e9, offload_flops=4.6e12,
                               efficiency=Efficiency(bandwidth=0.8, compute=0.6, host_compute=0.085))
    step = placed_decode(gptoss, wide, W, p, context=0)
    flops = float(step.host.flops)
    share = terms.HOST_EXPERT_DECODE_COMPUTE
    assert float(step.host.compute_seconds) == pytest.approx(flops / (INT8_PATH * 4.6e12 * 0.085 * share), rel=1e-9)
    assert float(step.host.compute_seconds) > float(step.host.memory_seconds)    # its cores, not its DRAM
    # four times the cores: the arithmetic takes a quarter as long
    more = placed_decode(gptoss, dataclasses.replace(wide, offload_flops=4 * 4.6e12), W, p, context=0)
    assert float(more.host.compute_seconds) == pytest.approx(float(step.host.compute_seconds) / 4, rel=1e-9)


def test_an_expected_figure_with_a_host_part_carries_the_hosts_spread(gptoss):
    """The replicates of an expected figure behind a GPU with host memory take HOST_SPREAD on
    their host factors (half the low end, half the high, none past 1), so the band of a token
    spent mostly on the host is about that wide; a machine with no host tier is left as it was."""
    from rooflab.core.calibration.expectations import expected_on
    m = load_machine("rtx-4090")
    ex = expected_on(gptoss, m)
    lo, hi = terms.HOST_SPREAD
    central = ex.machine.efficiency.host_bandwidth
    factors = sorted(r.efficiency.host_bandwidth / central for r in ex.replicas)
    assert factors[0] == pytest.approx(lo, rel=0.3) and factors[-1] > 1.0
    assert all(max(r.efficiency.host_bandwidth, r.efficiency.host_compute, r.efficiency.host_expert_compute) <= 1.0
               for r in ex.replicas)
    p = Placement(gpu_layers=37, cpu_moe=24)
    _, low, high = ex.band(lambda mm: float(placed_decode(gptoss, mm, W, p, context=0).seconds))
    assert high / low > 1.35                             # the host's spread, not the calibration's x1.06
    alone = dataclasses.replace(m, offload_bandwidth=0.0, offload_memory=0.0)
    assert terms.spread_host([alone]) == (alone,)


def test_an_offloaded_prompts_band_carries_the_links_spread(gptoss):
    """An offloaded prompt's time is mostly its host weights' copy over PCIe: the replicates take
    LINK_SPREAD on the link's share (half the low end, half the high, none past the whole link),
    so the band is about that wide, not the GPU's spread alone (which held 3 of the 22 published
    offloaded prompts); the ceiling streams at the whole link and stays above the band."""
    from rooflab.core.calibration.expectations import expected_on
    m = load_machine("rtx-4090")
    ex = expected_on(gptoss, m)
    assert terms.link_share(ex.machine) == terms.PCIE_STREAM_SHARE
    shares = sorted(terms.link_share(r) for r in ex.replicas)
    lo, hi = terms.LINK_SPREAD
    assert shares[0] == pytest.approx(terms.PCIE_STREAM_SHARE * lo) and shares[-1] == pytest.approx(
        terms.PCIE_STREAM_SHARE * hi)
    assert terms.link_share(m) == 1.0 and all(s <= 1.0 for s in shares)
    p = Placement(gpu_layers=37, cpu_moe=24)
    w = dataclasses.replace(W, ubatch=2048)

    def ttft(mm):
        return float(placed_prefill(gptoss, mm, w, p, prompt=8192).seconds)

    central, low, high = ex.band(ttft)
    assert high / low > 1.3
    assert ttft(m) < low


def test_a_prompt_streams_only_the_experts_its_tokens_route_to(gptoss):
    m = load_machine("rtx-4090")
    host = split(gptoss, Placement(gpu_layers=37, cpu_moe=24), embedding_on_host=input_on_host(m)).host.spec
    experts = sum(t.nbytes for t in host.tensors if t.role.value == "experts")
    rest = host.weight_bytes - experts
    u = gptoss.experts_used / gptoss.experts                                   # 4 of 128
    # expected: uniform routing's union, 1 - (1 - 4/128)^32 = 0.638 of the experts for 32 tokens
    got = float(terms.streamed_weight_bytes(engine(m), host, np.array(32.0)))
    assert got == pytest.approx(rest + experts * (1 - (1 - u) ** 32), rel=1e-12)
    assert 1 - (1 - u) ** 32 == pytest.approx(0.638, abs=1e-3)
    # a ceiling: tokens spread over 0.4 of the experts only, 0.4 x (1 - (1 - u/0.4)^32) = 0.374
    ceiling = float(terms.streamed_weight_bytes(m, host, np.array(32.0)))
    assert ceiling == pytest.approx(rest + experts * 0.4 * (1 - (1 - u / 0.4) ** 32), rel=1e-12)
    assert ceiling < got
    # and at 4,096 tokens the ceiling's union is its floor, 0.4 of the experts
    assert float(terms.streamed_weight_bytes(m, host, np.array(4096.0))) == pytest.approx(rest + 0.4 * experts)


def test_no_term_lifts_an_expected_figure_above_its_ceiling(gptoss):
    m = load_machine("rtx-4090")
    for p in (Placement(gpu_layers=37, cpu_moe=24), Placement(gpu_layers=20, cpu_moe=35)):
        for ub in (256, 512, 4096):
            w = dataclasses.replace(W, ubatch=ub)
            for prompt in (64, 512, 8192):
                assert float(placed_prefill(gptoss, engine(m), w, p, prompt=prompt).seconds) >= \
                    float(placed_prefill(gptoss, m, w, p, prompt=prompt).seconds)
        assert float(placed_decode(gptoss, engine(m), W, p).seconds) > float(placed_decode(gptoss, m, W, p).seconds)


def test_attention_over_a_host_cache_stays_on_the_host(qwen8b):
    # -ngl 0: every layer and its cache in host memory. A 4,096-token prompt streams the weights to the
    # GPU, but attention over the cache (qwen3-8b: 36 layers, 32 heads x 256 dims a pair) runs on the
    # host at its int8 path, 4 x 1.024 TFLOP/s, so the host part takes at least that attention's arithmetic there
    m = load_machine("rtx-4090")
    w = Workload(prompt=4096, answer=1, ubatch=512)
    p = Placement(gpu_layers=0)
    from rooflab.core.predict import work

    attention = float(work.attention_flops(qwen8b, 4096, 0))
    host = placed_prefill(qwen8b, m, w, p).host
    assert float(host.seconds) >= attention / 4.096e12
    assert attention / 4.096e12 > 0.1                    # a large share of the prompt's time


def test_a_host_cpu_not_stated_widens_the_band_up_to_a_sixteen_core(gptoss):
    """A preset naming no host CPU is priced at the 8-core desktop; its band's fast end reaches
    what a 16-core host (UNSTATED_CPU_SPAN x the peak) would give: the experts' arithmetic, a
    share of the compute factor, takes the span (capping the factor itself at 1 had left the
    band no wider than a stated 8-core's). Stating the CPU narrows it."""
    from rooflab.core.calibration.expectations import expected_on
    p = Placement(gpu_layers=37, cpu_moe=24)

    def band(m):
        ex = expected_on(gptoss, m)
        return ex.band(lambda mm: float(placed_decode(gptoss, mm, W, p, context=0).seconds))

    # host memory fast enough that the CPU's arithmetic, not its reading, bounds its experts
    unstated = dataclasses.replace(load_machine("rtx-4090"), offload_bandwidth=400e9)
    stated = dataclasses.replace(unstated, offload_flops=1.024e12)
    sixteen = dataclasses.replace(unstated, offload_flops=16 * 5.7e9 * 32)
    central, low, high = band(unstated)
    central_s, low_s, high_s = band(stated)
    assert central == pytest.approx(central_s)                  # the same figure
    assert high == pytest.approx(high_s)                        # a slower host's end is the stated 8-core's
    assert low < 0.6 * low_s                                    # the fast end: far faster than an 8-core's
    assert low == pytest.approx(band(sixteen)[1], rel=0.02)     # ... as fast as a stated 16-core's
    # and never past the ceiling, priced at the assumed CPU
    assert low >= float(placed_decode(gptoss, unstated, W, p, context=0).seconds) * (1 - 1e-9)
    assert terms.UNSTATED_CPU_SPAN == pytest.approx(16 * 5.7e9 * 32 / 1.024e12, rel=0.01)


def test_an_expected_prompt_streams_from_32_tokens_however_fast_the_host(gptoss):
    """llama.cpp's op offload copies a ubatch's host weights to the GPU from 32 tokens on, whatever
    the host's speed: an expected figure streams them even where a big host would multiply them
    faster (a 12-channel, 64-core host here); the ceiling takes the faster of the two."""
    m = dataclasses.replace(load_machine("rtx-4090"), offload_bandwidth=600e9, offload_flops=40e12)
    p = Placement(gpu_layers=37, cpu_moe=24)
    w = dataclasses.replace(W, ubatch=512)
    expected = placed_prefill(gptoss, engine(m), w, p, prompt=512).host
    ceiling = placed_prefill(gptoss, m, w, p, prompt=512).host
    assert float(expected.link_seconds) > 0                     # streamed
    assert float(ceiling.link_seconds) == 0                     # the host multiplies faster: the ceiling's pick
    # below 32 tokens the host computes in both
    short = placed_prefill(gptoss, engine(m), dataclasses.replace(w, ubatch=16), p, prompt=16).host
    assert float(short.link_seconds) == 0
