"""Placement in llama.cpp's terms: which tensors and caches each memory holds, and the placed
clocks (the lessons' offload example: GPU time plus CPU time)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.errors import SpecError
from rooflab.core.predict import work
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.offload import (
    DEFAULT_HOST_FLOPS,
    OP_OFFLOAD_MIN_TOKENS,
    host_flops,
    host_link_bandwidth,
    placed_decode,
    placed_prefill,
    placed_request,
)
from rooflab.core.predict.placement import (
    Placement,
    describe,
    device_layer_start,
    experts_kept_on_host,
    split,
)
from rooflab.core.predict.request import request
from rooflab.core.values.machine import INT8_PATH, MachineProfile
from rooflab.core.values.model import AttentionLayout, ModelSpec, Role, Tensor
from rooflab.core.values.workload import Workload

GB = 1e9


def layered_spec(layers: int = 70, params_per_layer: float = 1e9, bits: float = 4.5, *, experts: int = 0,
                 expert_share: float = 0.0, kv_values: int = 0, tied: bool = False, head_bytes: int = 0) -> ModelSpec:
    """``layers`` equal layers of ``params_per_layer`` at ``bits`` per weight; with ``experts``,
    ``expert_share`` of each layer is routed experts (4 of them used per token). Zero-byte
    embedding and head unless ``head_bytes``; ``kv_values`` cached values per token per layer."""
    tensors = []
    for i in range(layers):
        dense = round(params_per_layer * (1 - expert_share))
        tensors.append(Tensor(name=f"blk.{i}.attn_q.weight", shape=(dense, 1), type_name="mix",
                              nbytes=round(dense * bits / 8), role=Role.ATTENTION, layer=i))
        if experts:
            moe = round(params_per_layer * expert_share)
            tensors.append(Tensor(name=f"blk.{i}.ffn_up_exps.weight", shape=(moe, 1), type_name="mix",
                                  nbytes=round(moe * bits / 8), role=Role.EXPERTS, layer=i))
    tensors.append(Tensor(name="token_embd.weight", shape=(1, max(head_bytes, 1)), type_name="I8",
                          nbytes=head_bytes, role=Role.EMBEDDING))
    if not tied:
        tensors.append(Tensor(name="output.weight", shape=(1, max(head_bytes, 1)), type_name="I8",
                              nbytes=head_bytes, role=Role.OUTPUT))
    layout = AttentionLayout(heads=(1,) * layers, kv_heads=(1 if kv_values else 0,) * layers,
                             head_dim_k=kv_values // 2, head_dim_v=kv_values - kv_values // 2)
    return ModelSpec(name="layered", architecture="test", source="test", tensors=tuple(tensors), attention=layout,
                     hidden=4096, vocab=1, file_bytes=sum(t.nbytes for t in tensors),
                     experts=128 if experts else 0, experts_used=4 if experts else 0)


def gpu(**changes: object) -> MachineProfile:
    """The lesson's RTX 4090 (1,008 GB/s, 165.2 TFLOP/s, 24 GiB) with 64 GB of DDR5 at 89.6 GB/s."""
    base = MachineProfile(name="RTX 4090", bandwidth=1008e9, peak_flops={"fp16": 165.2e12}, memory=24 * 2**30,
                          offload_bandwidth=89.6e9, offload_memory=64e9, offload_name="DDR5")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_placement_validates_and_clamps():
    spec = layered_spec(layers=10)
    with pytest.raises(SpecError, match="gpu_layers"):
        Placement(gpu_layers=-1)
    with pytest.raises(SpecError, match="cpu_moe"):
        Placement(gpu_layers=1, cpu_moe=True)  # type: ignore[arg-type]
    assert Placement(gpu_layers=999, cpu_moe=5).clamp(spec) == Placement(gpu_layers=11, cpu_moe=0)  # dense: no experts
    assert Placement(gpu_layers=37, cpu_moe=23, kv_on_device=False).flags() == "-ngl 37 --n-cpu-moe 23 --no-kv-offload"


def test_ngl_counts_the_output_layer_like_llama_cpp():
    # llama-model.cpp: i_gpu_start = max(n_layer + 1 - ngl, 0); the output layer (il = n_layer) is on the GPU
    # from ngl = 1; ngl = n_layer + 1 puts everything there
    spec = layered_spec(layers=10)
    assert device_layer_start(spec, Placement(gpu_layers=0)) == 11
    assert device_layer_start(spec, Placement(gpu_layers=1)) == 10
    s = split(spec, Placement(gpu_layers=1))
    assert (s.device.layers, s.device.output, s.host.layers) == (0, True, 10)
    s = split(spec, Placement(gpu_layers=11))
    assert (s.device.layers, s.host.layers, s.host.output) == (10, 0, False)


def test_bytes_are_conserved_and_the_input_embedding_stays_on_the_host():
    spec = layered_spec(layers=8, head_bytes=1000)
    for g in range(0, 10):
        s = split(spec, Placement(gpu_layers=g))
        assert s.device.weight_bytes + s.host.weight_bytes == spec.weight_bytes
        assert s.host.embedding_bytes == 1000 and s.device.embedding_rows      # rows priced with the device


def test_tied_head_is_a_copy_on_the_output_device():
    # llama.cpp loads a tied head as TENSOR_DUPLICATED: the input copy stays on the host
    spec = layered_spec(layers=4, head_bytes=1000, tied=True)
    on_gpu = split(spec, Placement(gpu_layers=5))
    assert on_gpu.device.weight_bytes + on_gpu.host.weight_bytes == spec.weight_bytes + 1000
    on_cpu = split(spec, Placement(gpu_layers=0))
    assert on_cpu.host.weight_bytes == spec.weight_bytes and on_cpu.device.weight_bytes == 0


def test_cpu_moe_keeps_the_first_layers_experts_on_the_host():
    spec = layered_spec(layers=10, params_per_layer=1e9, bits=8, experts=128, expert_share=0.9)
    p = Placement(gpu_layers=11, cpu_moe=4)
    s = split(spec, p)
    assert s.host.spec is not None and s.device.spec is not None
    assert s.host.spec.expert_bytes == 4 * 0.9e9 and s.host.spec.dense_block_bytes == 0
    assert s.device.spec.expert_bytes == 6 * 0.9e9 and s.device.spec.dense_block_bytes == 10 * 0.1e9
    assert experts_kept_on_host(spec, p) == 4 and s.host.expert_layers == 4
    assert describe(spec, p) == "all 11 layers on the GPU, the experts of 4 of them on the CPU"
    # layers already on the CPU do not count twice
    assert experts_kept_on_host(spec, Placement(gpu_layers=8, cpu_moe=4)) == 1


def test_cache_follows_its_layer_or_stays_on_the_host():
    spec = layered_spec(layers=10, kv_values=1000)
    s = split(spec, Placement(gpu_layers=6))          # layers 5..9 on the GPU
    assert s.device.spec is not None and s.host.spec is not None
    assert (s.device.spec.attention.layers, s.host.spec.attention.layers) == (5, 5)
    s = split(spec, Placement(gpu_layers=11, kv_on_device=False))
    assert s.device.spec is not None and s.host.spec is not None
    assert (s.device.spec.attention.layers, s.host.spec.attention.layers) == (0, 10)


def test_everything_on_the_device_is_the_one_memory_clock(gptoss, qwen8b):
    # the input lookup's rows are priced with the device, as work prices them: the same bytes, FLOPs, time
    machine = gpu()
    w = Workload(prompt=2048, answer=256)
    for spec in (gptoss, qwen8b):
        full = Placement.all_on_device(spec)
        t = np.array([0, 4096, 32768])
        placed = placed_decode(spec, machine, w, full, context=t, batch=4)
        plain = decode_pass(spec, machine, w, context=t, batch=4)
        np.testing.assert_allclose(placed.bytes, plain.bytes, rtol=1e-12)
        np.testing.assert_allclose(placed.flops, plain.flops, rtol=1e-12)
        np.testing.assert_allclose(placed.seconds, plain.seconds, rtol=1e-12)
        assert float(np.max(placed.host.seconds)) == 0.0
        pre, plain_pre = placed_prefill(spec, machine, w, full), prefill_pass(spec, machine, w)
        assert float(pre.seconds) == pytest.approx(float(plain_pre.seconds), rel=1e-12)
        assert placed_request(spec, machine, w, full) == request(spec, machine, w)      # exactly


@pytest.mark.parametrize("gpu_layers, rate", [(0, 2.28), (71, 25.60)])
def test_lesson_example12_ends(gpu_layers, rate):
    # roofline lesson, example 12: 70B at 4.5 bpw (39.4 GB); 0 GB on the GPU -> 2.28 tok/s (39.375 / 89.6),
    # all of it -> 25.60 tok/s (39.375 / 1,008)
    spec = layered_spec()
    p = placed_decode(spec, gpu(), Workload(), Placement(gpu_layers=gpu_layers), context=0)
    assert 1 / float(p.seconds) == pytest.approx(rate, abs=0.006)


def test_lesson_example12_split_is_gpu_time_plus_cpu_time():
    # 40 of 71 layers on the GPU: 39 repeating layers of 0.5625 GB (21.94 GB) at 1,008 GB/s plus 31 on the
    # CPU (17.44 GB) at 89.6 GB/s: 21.8 ms + 194.6 ms = 216.4 ms, 4.62 tok/s (the lesson's 22 GB row: 4.64)
    spec = layered_spec()
    p = placed_decode(spec, gpu(), Workload(), Placement(gpu_layers=40), context=0)
    layer = 1e9 * 4.5 / 8
    expected = 39 * layer / 1008e9 + 31 * layer / 89.6e9
    assert float(p.seconds) == pytest.approx(expected, rel=1e-9)
    assert float(p.device.seconds) == pytest.approx(39 * layer / 1008e9)
    assert 1 / float(p.seconds) == pytest.approx(4.62, abs=0.01)
    assert placed_request(spec, gpu(), Workload(answer=2), Placement(gpu_layers=40)).tpot == pytest.approx(expected)


def test_host_computes_at_its_own_flops():
    # a prompt of 16 tokens (below llama.cpp's 32-token op_offload) on host layers: 2 x N x n / 4.096 TOP/s,
    # the int8 path (4x) of the 1.024 TFLOP/s desktop CPU assumed behind a GPU
    spec = layered_spec(layers=10, params_per_layer=1e9)
    p = placed_prefill(spec, gpu(), Workload(), Placement(gpu_layers=1), prompt=16)
    assert DEFAULT_HOST_FLOPS == 1.024e12 and INT8_PATH == 4.0
    assert host_flops(gpu()) == DEFAULT_HOST_FLOPS * INT8_PATH
    assert float(p.host.compute_seconds) == pytest.approx(2 * 10e9 * 16 / 4.096e12)
    cpu = gpu(kind="cpu", peak_flops={"fp32": 2e12}, default_dtype="fp32")
    assert host_flops(cpu) == 8e12                  # a CPU's second tier is read by the CPU itself, on its int8 path
    # a profile that states its host CPU (offload.flops: a 16-core Zen 4, 16 x 5 GHz x 32 FLOP) is used
    zen4 = gpu(offload_flops=2.56e12)
    assert host_flops(zen4) == 4 * 2.56e12
    faster = placed_prefill(spec, zen4, Workload(), Placement(gpu_layers=1), prompt=16)
    assert float(faster.host.compute_seconds) == pytest.approx(2 * 10e9 * 16 / (4 * 2.56e12))


def test_a_profiles_host_flops_is_read_kept_and_checked():
    from rooflab.core.errors import SpecError as Refused

    data = gpu(offload_flops=2.56e12).to_dict()
    assert data["offload"]["flops"] == 2.56e12
    assert MachineProfile.from_dict(data).offload_flops == 2.56e12
    del data["offload"]["flops"]                                  # a profile that does not state it
    assert host_flops(MachineProfile.from_dict(data)) == DEFAULT_HOST_FLOPS * INT8_PATH
    with pytest.raises(Refused, match="offload_flops"):
        gpu(offload_flops=-1.0)
    data["offload"]["flops"] = "fast"
    with pytest.raises(Refused, match="offload.flops"):
        MachineProfile.from_dict(data)


def test_large_passes_stream_host_weights_to_the_gpu_when_faster():
    # llama.cpp's op_offload: from 32 tokens on, host weights cross PCIe (32 GB/s) and the GPU multiplies
    # them, once per ubatch of 512 tokens: 2048 tokens are 4 copies of the host's 5.625 GB
    spec = layered_spec(layers=10, params_per_layer=1e9)
    machine = gpu(interconnect_bandwidth=32e9, interconnect_name="PCIe 4.0 x16")   # a profile without host_link
    assert host_link_bandwidth(machine) == 32e9
    assert host_link_bandwidth(gpu()) == 89.6e9        # no PCIe link named: the host memory's rate
    host_bytes = 10 * 1e9 * 4.5 / 8
    big = placed_prefill(spec, machine, Workload(), Placement(gpu_layers=1), prompt=2048)
    streamed = 4 * max(host_bytes / 32e9, 2 * 10e9 * 512 / 165.2e12)      # 4 x 0.176 s = 0.703 s
    assert float(big.host.seconds) == pytest.approx(streamed)
    small = placed_prefill(spec, machine, Workload(), Placement(gpu_layers=1), prompt=OP_OFFLOAD_MIN_TOKENS - 1)
    cpu_time = max(host_bytes / 89.6e9, 2 * 10e9 * 31 / 4.096e12)
    assert float(small.host.seconds) == pytest.approx(cpu_time)


def test_host_layers_need_a_host_tier():
    spec = layered_spec(layers=4)
    bare = gpu(offload_bandwidth=0.0, offload_memory=0.0)
    assert float(placed_decode(spec, bare, Workload(), Placement(gpu_layers=5)).seconds) > 0
    with pytest.raises(SpecError, match="no host memory"):
        placed_decode(spec, bare, Workload(), Placement(gpu_layers=2))


def test_expert_union_on_the_host_grows_with_the_batch():
    # MoE experts read 1 - (1 - 4/128)^b of their bytes: the host's share of a batch-16 step
    spec = layered_spec(layers=10, bits=8, experts=128, expert_share=0.9)
    p = placed_decode(spec, gpu(), Workload(), Placement(gpu_layers=11, cpu_moe=10), context=0, batch=16)
    union = float(work.experts_touched_fraction(spec, 16))
    assert float(p.host.weight_bytes) == pytest.approx(10 * 0.9e9 * union)


def test_a_placed_batch_sweep_is_the_placed_step_and_each_memorys_bill():
    from rooflab.core.predict.batching import batch_crossover, batch_sweep
    from rooflab.core.predict.footprint import plan_memory
    from rooflab.core.predict.offload import placed_batch_crossover, placed_batch_sweep

    spec = layered_spec(kv_values=1024)
    machine, w = gpu(), Workload(prompt=2048, answer=256)
    batches = np.array([1.0, 4.0, 16.0])
    at40 = Placement(gpu_layers=40)
    placed = placed_batch_sweep(spec, machine, w, at40, batches, context=2048, context_length=2304)
    step = placed_decode(spec, machine, w, at40, context=2048, batch=batches)
    np.testing.assert_allclose(placed.sweep.step_seconds, step.seconds, rtol=1e-12)
    np.testing.assert_allclose(placed.sweep.total, batches / step.seconds, rtol=1e-12)
    for k, b in enumerate(batches):
        bill = plan_memory(spec, machine, w, at40, context_length=2304, batch=int(b))
        assert placed.device_memory[k] == pytest.approx(bill.device.used)
        assert placed.host_memory[k] == pytest.approx(bill.host.used)
        assert bool(placed.sweep.fits[k]) == bill.fits
    # 31 layers on a 89.6 GB/s host: far slower per step than the card alone would be
    alone = batch_sweep(spec, machine, w, batches, context=2048)
    assert np.all(placed.sweep.per_sequence < alone.per_sequence / 5)
    # the host computes its 31 layers at 4.096 TOP/s (the desktop's int8 path): the step turns
    # compute-bound at 15 sequences, long before the card alone would (70), even though from 32
    # sequences on the host layers stream to the GPU and the step is memory-bound again (the first
    # crossing is the one)
    cross = placed_batch_crossover(spec, machine, w, at40, context=2048)
    assert 8 < cross < 32 and batch_crossover(spec, machine, w, 2048) == pytest.approx(70.0, abs=0.5)
    at = placed_decode(spec, machine, w, at40, context=2048, batch=cross)
    assert float(at.compute_seconds) == pytest.approx(float(at.memory_seconds), rel=1e-5)
    late = placed_decode(spec, machine, w, at40, context=2048, batch=4096)
    assert float(late.compute_seconds) < float(late.memory_seconds)
    # everything on the card: the one-memory crossover
    assert placed_batch_crossover(spec, machine, w, Placement(gpu_layers=71), context=2048) == pytest.approx(
        batch_crossover(spec, machine, w, 2048), rel=1e-5)


def test_placed_n_star_is_the_hosts_own_balance_when_the_host_computes_everything():
    # every layer in host memory: n* = (W / B_host) / (2 N / C_host) = 0.5625 B x 4.096 TOP/s / (2 x 89.6 GB/s)
    # = 12.9 tokens (C_host: the desktop's int8 path), where the card alone crosses at
    # 0.5625 x 165.2 T / (2 x 1,008 G) = 46 tokens
    from rooflab.core.predict.crossover import prefill_crossover
    from rooflab.core.predict.offload import placed_prefill_crossover

    spec = layered_spec(layers=10)
    w = Workload(prompt=512, answer=2)
    assert placed_prefill_crossover(spec, gpu(), w, Placement(gpu_layers=0)) == pytest.approx(
        0.5625 * DEFAULT_HOST_FLOPS * INT8_PATH / (2 * 89.6e9), rel=1e-4)
    machine = gpu(peak_flops={"fp16": 165.2e12})
    assert prefill_crossover(spec, machine, w) == pytest.approx(0.5625 * 165.2e12 / (2 * 1008e9), rel=1e-3)
    assert placed_prefill_crossover(spec, machine, w, Placement(gpu_layers=11)) == pytest.approx(
        prefill_crossover(spec, machine, w), rel=1e-5)
