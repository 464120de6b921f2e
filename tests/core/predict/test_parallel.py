"""N devices: layer split and tensor parallel, each with its link time as a term of its own."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.errors import SpecError
from rooflab.core.io.presets import load_machine
from rooflab.core.predict import work
from rooflab.core.predict.parallel import (
    ALLREDUCES_PER_LAYER,
    DEFAULT_LINK_LATENCY,
    Parallel,
    allreduce_seconds,
    communication_seconds,
    device_memory,
    kv_copies,
    largest_batch,
    largest_context,
    parallel_decode,
    parallel_request,
    scaling,
)
from rooflab.core.predict.request import request
from rooflab.core.values.workload import Workload

W = Workload(prompt=2048, answer=256)
NVLINK4 = 450e9         # NVLink 4: 900 GB/s total, 450 GB/s per direction (H100 SXM)
PCIE4 = 32e9            # PCIe 4.0 x16, ~32 GB/s per direction (RTX 4090)


def test_ring_allreduce_cost():
    # 2 (N - 1) / N x m / B + 2 (N - 1) x a: 8 KiB over 4 devices at 450 GB/s, a = 2 us
    p = Parallel(devices=4, link_bandwidth=NVLINK4)
    m = 8192.0
    assert float(allreduce_seconds(p, m)) == pytest.approx(1.5 * m / NVLINK4 + 6 * DEFAULT_LINK_LATENCY)
    assert float(allreduce_seconds(Parallel(devices=1), m)) == 0.0


def test_validation():
    with pytest.raises(SpecError, match="interconnect"):
        Parallel(devices=2)
    with pytest.raises(SpecError, match="mode"):
        Parallel(devices=2, mode="pipeline", link_bandwidth=1e9)
    with pytest.raises(SpecError, match="devices"):
        Parallel(devices=0)
    bare = dataclasses.replace(load_machine("h100-sxm"), interconnect_bandwidth=0.0, interconnect_name="")
    with pytest.raises(SpecError, match="--interconnect"):
        Parallel.on(bare, 2)


def test_one_device_is_the_plain_request(qwen8b):
    m = load_machine("rtx-4090")
    one = parallel_request(qwen8b, m, W, Parallel(devices=1))
    plain = request(qwen8b, m, W)
    assert one.tpot == pytest.approx(plain.tpot, rel=1e-12) and one.ttft == pytest.approx(plain.ttft, rel=1e-12)
    assert one.communication_seconds_per_step == 0.0


def test_tensor_parallel_step_by_hand(qwen8b):
    # each of N devices reads W/N + KV/N at B; plus 2 L all-reduces of hidden x b x 2 bytes
    m = load_machine("rtx-4090")
    p = Parallel(devices=2, mode="tensor", link_bandwidth=PCIE4)
    step = parallel_decode(qwen8b, m, W, p, context=2048, batch=1)
    weights, cache = work.decode_bytes(qwen8b, 2048, 1)
    memory = float(weights + cache) / 2 / m.bandwidth
    comm = ALLREDUCES_PER_LAYER * qwen8b.layers * (0.5 * 2 * qwen8b.hidden * 2 / PCIE4 + 2 * DEFAULT_LINK_LATENCY)
    assert float(step.communication) == pytest.approx(comm)
    assert float(step.seconds) == pytest.approx(memory + comm)


def test_layer_split_buys_room_not_speed(qwen8b):
    m = load_machine("rtx-4090")
    one = parallel_request(qwen8b, m, W, Parallel(devices=1))
    two = parallel_request(qwen8b, m, W, Parallel(devices=2, mode="layer", link_bandwidth=PCIE4))
    hop = qwen8b.hidden * 2 / PCIE4 + DEFAULT_LINK_LATENCY
    assert two.communication_seconds_per_step == pytest.approx(hop)
    assert two.tpot == pytest.approx(one.tpot + hop, rel=1e-9)
    assert two.memory.weights == pytest.approx(qwen8b.weight_bytes / 2)


@pytest.mark.parametrize("machine_key, link", [("h100-sxm", NVLINK4), ("rtx-4090", PCIE4)])
def test_two_and_four_way_tensor_parallel_show_their_link(gptoss, qwen8b, machine_key, link):
    m = load_machine(machine_key)
    assert m.interconnect_bandwidth == link           # the presets' per-direction rates
    spec = gptoss if machine_key == "h100-sxm" else qwen8b
    grow = scaling(spec, m, W, "tensor", (1, 2, 4))
    one, two, four = grow.estimates
    for est in (two, four):
        assert est.communication_seconds_per_step > 0
        assert est.communication_seconds_per_token == est.communication_seconds_per_step / W.batch
        assert est.prefill_communication_seconds > 0
    assert four.communication_seconds_per_step > two.communication_seconds_per_step
    assert two.ttft < one.ttft                       # prefill is compute-bound: N-way arithmetic wins
    assert grow.crossover_devices is not None and grow.best_devices <= grow.crossover_devices * 2


def test_communication_eats_the_gain(qwen8b):
    # over PCIe the 8-way step is slower than the 4-way one: latency 2 (N-1) a per all-reduce grows
    grow = scaling(qwen8b, load_machine("rtx-4090"), W, "tensor", (1, 2, 4, 8))
    tpot = [e.tpot for e in grow.estimates]
    assert tpot[1] < tpot[0] and tpot[2] < tpot[1] and tpot[3] > tpot[2]
    assert grow.best_devices == 4 and grow.crossover_devices == 8


def test_kv_heads_are_copied_past_their_count(qwen8b):
    # Qwen3-8B has 8 KV heads: 16-way tensor parallel holds each twice
    assert kv_copies(qwen8b, Parallel(devices=4, link_bandwidth=1e9)) == 1.0
    assert kv_copies(qwen8b, Parallel(devices=16, link_bandwidth=1e9)) == 2.0
    assert kv_copies(qwen8b, Parallel(devices=16, mode="layer", link_bandwidth=1e9)) == 1.0


def test_more_devices_hold_more_sequences(qwen8b):
    m = load_machine("rtx-4090")
    one = largest_batch(qwen8b, m, W, Parallel(devices=1))
    four = largest_batch(qwen8b, m, W, Parallel(devices=4, link_bandwidth=PCIE4))
    assert four > 4 * one * 0.9
    assert float(communication_seconds(qwen8b, Parallel(devices=1), 4)) == 0.0


def test_more_devices_hold_longer_sequences(qwen8b):
    # the longest sequence each device's bill holds: it fits, one token more does not
    m = load_machine("rtx-4090")
    batch = dataclasses.replace(W, batch=16)
    one = largest_context(qwen8b, m, batch, Parallel(devices=1))
    two = largest_context(qwen8b, m, batch, Parallel(devices=2, link_bandwidth=PCIE4))
    assert 0 < one < two
    p = Parallel(devices=2, link_bandwidth=PCIE4)
    assert device_memory(qwen8b, m, batch, p, length=two).fits
    assert not device_memory(qwen8b, m, batch, p, length=two + 1).fits
