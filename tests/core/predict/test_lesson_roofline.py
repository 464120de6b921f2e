"""Golden figures from the lesson 'FLOPs, Bandwidth, and the Roofline Model'
(shared/reference/lesson-flops-bandwidth-roofline.txt), example by example."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.io.presets import load_machine
from rooflab.core.predict import roofline
from rooflab.core.predict.batching import batch_crossover, batch_sweep
from rooflab.core.predict.clocks import decode_pass, memory_seconds, prefill_pass
from rooflab.core.predict.roofline import attainable, phase_points
from rooflab.core.predict.speculative import expected_tokens, speculative
from rooflab.core.predict.work import weight_bytes_read_per_token
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload
from tests.factories.specs import machine, synthetic_spec

GB = 1e9
CPU = MachineProfile(name="8-core desktop CPU, DDR5", bandwidth=89.6e9, peak_flops={"fp32": 1.024e12},
                     default_dtype="fp32", memory=64e9)
H100 = MachineProfile(name="H100", bandwidth=3350e9, peak_flops={"bf16": 989e12}, default_dtype="bf16", memory=80e9)
RTX4090 = MachineProfile(name="RTX 4090", bandwidth=1008e9, peak_flops={"fp16": 165.2e12}, memory=24e9)
M4MAX = MachineProfile(name="M4 Max", bandwidth=546e9, peak_flops={"fp16": 30e12}, memory=128e9)
EIGHT_B = synthetic_spec(8.03e9, 4.5, kv_bytes_per_token=131_072)


def test_example3_decode_intensity():
    # a batch-1 decode step with no cache, where the roofline chart places it: 2 x N / W
    def intensity(bits: float) -> float:
        decode = phase_points(synthetic_spec(7e9, bits), RTX4090, Workload(prompt=1))[1]
        return decode.intensity

    assert intensity(16) == pytest.approx(1.0)
    assert intensity(4.5) == pytest.approx(3.56, abs=0.01)


@pytest.mark.parametrize("key, balance", [("desktop-ddr5", 11), ("rtx-4090", 164), ("a100-sxm-80gb", 153),
                                          ("h100-sxm", 295)])
def test_example5_machine_balance(key, balance):
    # the lesson's balance is of the FP32 (a CPU) or FP16 (a GPU) peak; a CPU's default is now its
    # int8 path, four times its FP32 arithmetic, so its balance there is four times the lesson's; a
    # GeForce card's fp16 is now its FP16-accumulate rate, twice the lesson's FP32-accumulate one,
    # which its bf16 keeps
    m = load_machine(key)
    lesson = "fp32" if m.kind == "cpu" else "bf16" if key == "rtx-4090" else None
    assert round(roofline.balance(m, lesson)) == balance
    if m.kind == "cpu":
        assert roofline.balance(m) == pytest.approx(4 * roofline.balance(m, "fp32"))
    if key == "rtx-4090":
        assert roofline.balance(m) == pytest.approx(2 * roofline.balance(m, "bf16"), rel=1e-3)


def test_example6_attainable():
    intensity = np.array([0.5, 1, 3.6, 11.4, 64, 295, 1024])
    cpu = attainable(intensity, CPU.flops(), CPU.bandwidth) / 1e9
    np.testing.assert_allclose(cpu, [44.8, 89.6, 322.6, 1021.4, 1024, 1024, 1024], atol=0.06)
    gpu = attainable(intensity, H100.flops(), H100.bandwidth) / 1e12
    np.testing.assert_allclose(gpu, [1.7, 3.4, 12.1, 38.2, 214.4, 988.3, 989.0], atol=0.06)


def test_example7_decode_estimate():
    fp16, q4 = synthetic_spec(7e9, 16), synthetic_spec(7e9, 4.5)
    wl = Workload()
    rows = {12.8: (0.9, 3.3), 89.6: (6.4, 22.8), 273: (19.5, 69.3), 546: (39.0, 138.7), 1008: (72.0, 256.0),
            3350: (239.3, 850.8)}
    for bandwidth, (a, b) in rows.items():
        m = dataclasses.replace(RTX4090, bandwidth=bandwidth * GB)
        assert 1 / float(decode_pass(fp16, m, wl, context=0).seconds) == pytest.approx(a, abs=0.051)
        assert 1 / float(decode_pass(q4, m, wl, context=0).seconds) == pytest.approx(b, abs=0.051)


def test_example8_kv_reads():
    wl = Workload()
    rows = [(0, 223.2), (1024, 216.7), (4096, 199.5), (16384, 151.3), (32768, 114.4), (131072, 46.5)]
    for context, rate in rows:
        assert 1 / float(decode_pass(EIGHT_B, RTX4090, wl, context=context).seconds) == pytest.approx(rate, abs=0.051)


def test_example10_batched_decode_and_crossover():
    spec = synthetic_spec(8.03e9, 4.5)
    sweep = batch_sweep(spec, RTX4090, Workload(), [1, 4, 16, 64, 128, 256, 512], context=0)
    np.testing.assert_allclose(sweep.step_seconds * 1e3, [4.48, 4.48, 4.48, 6.22, 12.44, 24.89, 49.77], atol=0.006)
    np.testing.assert_allclose(sweep.total, [223, 893, 3571, 10286, 10286, 10286, 10286], atol=0.6)
    assert list(sweep.compute_bound) == [False, False, False, True, True, True, True]
    assert batch_crossover(spec, RTX4090, Workload(), context=0) == pytest.approx(46.1, abs=0.05)


def test_example10_cache_moves_crossover_later():
    base = batch_crossover(EIGHT_B, RTX4090, Workload(), context=0)
    assert batch_crossover(EIGHT_B, RTX4090, Workload(), context=512) > base
    slow = dataclasses.replace(RTX4090, efficiency=Efficiency(compute=0.5))
    assert batch_crossover(EIGHT_B, slow, Workload(), context=0) < base


def test_example12_partial_offload():
    # 70B at 4.5 bits on an RTX 4090 with the rest in DDR5 at 89.6 GB/s: GB kept on the GPU -> tokens/s
    spec = synthetic_spec(70e9, 4.5)
    gpu = dataclasses.replace(RTX4090, offload_bandwidth=89.6e9, offload_memory=64e9)
    w = weight_bytes_read_per_token(spec)
    assert w == 70e9 * 4.5 / 8
    rows = [(0.0, 2.28), (10.0, 2.96), (22.0, 4.64), (w / GB, 25.60)]
    for on_gpu, rate in rows:
        # the lesson's offload time, GPU time plus CPU time, has its one home in memory_seconds (a
        # placed model's passes price each part with it); a share f of the bytes on the slow tier
        f = (w - on_gpu * GB) / w
        assert 1 / float(memory_seconds(gpu, w, f)) == pytest.approx(rate, abs=0.006)


@pytest.mark.parametrize("f, r, slowdown", [(0.05, 5, 1.20), (0.05, 10, 1.45), (0.05, 20, 1.95),
                                            (0.10, 5, 1.40), (0.10, 10, 1.90), (0.10, 20, 2.90),
                                            (0.25, 5, 2.00), (0.25, 10, 3.25), (0.25, 20, 5.75),
                                            (0.50, 5, 3.00), (0.50, 10, 5.50), (0.50, 20, 10.50)])
def test_offload_slowdown_table(f, r, slowdown):
    # prefill/decode lesson, 'Share of the bytes read per token that sit on the slower memory':
    # (1 - f) + f x r, here the decode step with a share f on a second tier r times slower
    split = machine(100.0, offload_gb_s=100.0 / r)
    w = weight_bytes_read_per_token(synthetic_spec(8.03e9, 4.5))
    assert float(memory_seconds(split, w, f) / memory_seconds(split, w)) == pytest.approx(slowdown)


def test_example13_speculative_verify_cost():
    spec = synthetic_spec(8.03e9, 4.5)
    for k in (1, 4, 8, 16):
        est = speculative(spec, RTX4090, Workload(draft_tokens=k, acceptance=1.0), context=0)
        assert est.step_seconds * 1e3 == pytest.approx(4.48, abs=0.006)
        assert est.verify_cost == pytest.approx(1.0, abs=0.005)
        assert est.expected_tokens == k + 1


def test_expected_tokens():
    assert expected_tokens(4, 0.0) == 1.0
    assert expected_tokens(4, 0.5) == pytest.approx(1 + 0.5 + 0.25 + 0.125 + 0.0625)


def test_example14_estimator():
    eff = Efficiency(bandwidth=0.7, compute=0.5)
    rows = [(CPU, 32, 11.3, 295.3), (M4MAX, 934, 68.7, 15.8), (RTX4090, 5143, 126.8, 5.5), (H100, 30791, 421.3, 1.4)]
    for m, prefill_rate, decode_rate, turn in rows:
        real = dataclasses.replace(m, efficiency=eff)
        wl = Workload(prompt=8000, answer=500)
        pre = float(prefill_pass(EIGHT_B, real, wl, prompt=8000, context=0).seconds)
        dec = 1 / float(decode_pass(EIGHT_B, real, wl, context=8000).seconds)
        assert 8000 / pre == pytest.approx(prefill_rate, rel=0.005)
        assert dec == pytest.approx(decode_rate, abs=0.051)
        assert pre + 500 / dec == pytest.approx(turn, abs=0.051)


def test_example11_moe_active(qwen30b):
    # 30.53 B total; 3.35 B active counting the input embedding as the lesson does
    assert qwen30b.params_total / 1e9 == pytest.approx(30.53, abs=0.005)
    assert (qwen30b.params_per_token + qwen30b.embedding_params) / 1e9 == pytest.approx(3.35, abs=0.01)
