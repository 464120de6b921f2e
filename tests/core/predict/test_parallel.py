"""N devices: layer split and tensor parallel, each with its link time as a term of its own."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.errors import SpecError
from rooflab.core.io.presets import load_machine
from rooflab.core.predict import work
from rooflab.core.predict.parallel import (
    ALLREDUCES_PER_LAYER,
    DEFAULT_LINK,
    Parallel,
    allreduce_seconds,
    communication_seconds,
    device_memory,
    kv_copies,
    parallel_decode,
    parallel_largest_batch,
    parallel_largest_context,
    parallel_request,
    scaling,
)
from rooflab.core.predict.request import request
from rooflab.core.values.links import LINKS
from rooflab.core.values.workload import Workload

W = Workload(prompt=2048, answer=256)
NVLINK4 = 450e9         # NVLink 4: 900 GB/s total, 450 GB/s per direction (H100 SXM)
PCIE4 = 32e9            # PCIe 4.0 x16, ~32 GB/s per direction (RTX 4090)


def test_ring_allreduce_cost():
    # base + 2 (N - 1) x step + 2 (N - 1) / N x m / B: 8 KiB over 4 devices on NVLink at 450 GB/s,
    # NCCL's NVLink latencies (base 6.6 us, 0.6 us a ring step: values.links)
    p = Parallel(devices=4, link_bandwidth=NVLINK4, link=LINKS["nvlink"])
    m = 8192.0
    assert float(allreduce_seconds(p, m)) == pytest.approx(6.6e-6 + 6 * 0.6e-6 + 1.5 * m / NVLINK4, rel=1e-12)
    assert float(allreduce_seconds(Parallel(devices=1), m)) == 0.0


def test_validation():
    with pytest.raises(SpecError, match="interconnect"):
        Parallel(devices=2)
    with pytest.raises(SpecError, match="mode"):
        Parallel(devices=2, mode="pipeline", link_bandwidth=1e9)
    with pytest.raises(SpecError, match="devices"):
        Parallel(devices=0)
    bare = dataclasses.replace(load_machine("h100-sxm"), interconnect_bandwidth=0.0, interconnect_name="",
                               host_link=None)         # no link at all (with a host link, PCIe stands in)
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
    comm = ALLREDUCES_PER_LAYER * qwen8b.layers * (qwen8b.hidden * 2 / PCIE4 + DEFAULT_LINK.allreduce_latency(2))
    assert float(step.communication) == pytest.approx(comm)
    assert float(step.seconds) == pytest.approx(memory + comm)


def test_layer_split_buys_room_not_speed(qwen8b):
    m = load_machine("rtx-4090")
    one = parallel_request(qwen8b, m, W, Parallel(devices=1))
    two = parallel_request(qwen8b, m, W, Parallel(devices=2, mode="layer", link_bandwidth=PCIE4))
    hop = qwen8b.hidden * 2 / PCIE4 + DEFAULT_LINK.step
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
    # over PCIe the 8-way step is slower than the 4-way one: an all-reduce's latency, 6.6 us +
    # 2 (N - 1) x 2.6 us, grows with N. 72 all-reduces a step: 0.87 / 1.63 / 3.13 ms of link at
    # 2 / 4 / 8 devices against 4.95 ms of reading on one, so at 4 the link already passes the
    # 1.24 ms each device reads (the crossover) though the step is still the fastest there
    grow = scaling(qwen8b, load_machine("rtx-4090"), W, "tensor", (1, 2, 4, 8))
    tpot = [e.tpot for e in grow.estimates]
    assert tpot[1] < tpot[0] and tpot[2] < tpot[1] and tpot[3] > tpot[2]
    assert grow.best_devices == 4 and grow.crossover_devices == 4


def test_kv_heads_are_copied_past_their_count(qwen8b):
    # Qwen3-8B has 8 KV heads: 16-way tensor parallel holds each twice
    assert kv_copies(qwen8b, Parallel(devices=4, link_bandwidth=1e9)) == 1.0
    assert kv_copies(qwen8b, Parallel(devices=16, link_bandwidth=1e9)) == 2.0
    assert kv_copies(qwen8b, Parallel(devices=16, mode="layer", link_bandwidth=1e9)) == 1.0


def test_more_devices_hold_more_sequences(qwen8b):
    m = load_machine("rtx-4090")
    one = parallel_largest_batch(qwen8b, m, W, Parallel(devices=1))
    four = parallel_largest_batch(qwen8b, m, W, Parallel(devices=4, link_bandwidth=PCIE4))
    assert four > 4 * one * 0.9
    assert float(communication_seconds(qwen8b, Parallel(devices=1), 4)) == 0.0


def test_more_devices_hold_longer_sequences(qwen8b):
    # the longest sequence each device's bill holds: it fits, one token more does not
    m = load_machine("rtx-4090")
    batch = dataclasses.replace(W, batch=16)
    one = parallel_largest_context(qwen8b, m, batch, Parallel(devices=1))
    two = parallel_largest_context(qwen8b, m, batch, Parallel(devices=2, link_bandwidth=PCIE4))
    assert 0 < one < two
    p = Parallel(devices=2, link_bandwidth=PCIE4)
    assert device_memory(qwen8b, m, batch, p, length=two).fits
    assert not device_memory(qwen8b, m, batch, p, length=two + 1).fits
