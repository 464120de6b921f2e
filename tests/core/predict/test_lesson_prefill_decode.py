"""Golden figures from the lesson 'Prefill, Decode and Why Memory Bandwidth Rules'
(shared/reference/lesson-prefill-decode-bandwidth.txt). Each test names its table."""

from __future__ import annotations

import numpy as np
import pytest

from rooflab.core.predict.batching import batch_sweep, memory_resident
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.crossover import prefill_crossover
from rooflab.core.predict.work import (
    expert_bytes_read,
    experts_touched_per_layer,
    kv_bytes,
    shared_bytes_read,
    weight_bytes_read_per_token,
)
from rooflab.core.report.tables import grouped_rows
from rooflab.core.values.workload import Workload
from tests.factories.specs import machine

GB = 1e9
F16 = Workload()


def ceiling(spec, bandwidth_gb, context, batch=1):
    p = decode_pass(spec, machine(bandwidth_gb), F16, context=context, batch=batch)
    return 1.0 / float(p.seconds), float(p.bytes) / GB


class TestTensorTables:
    """'Qwen3-8B-Q4_K_M.gguf, tensor group' table and the MoE 'At batch 1, bytes' table:
    exact integers, read off the files' tensor tables, through the tensor table the window,
    ``rooflab inspect`` and tensors.csv show (``grouped_rows``)."""

    def test_qwen3_8b_groups(self, qwen8b):
        rows = {r.group.name.value: r for r in grouped_rows(qwen8b)}
        groups = {name: r.group for name, r in rows.items()}
        assert groups["attention"].params == 1_509_949_440
        assert groups["attention"].bytes == 868_810_752
        assert groups["attention"].types == ("Q4_K", "Q6_K")
        assert groups["feed_forward"].params == 5_435_817_984
        assert groups["feed_forward"].bytes == 3_291_217_920
        assert groups["output"].bytes == 510_504_960 and groups["output"].types == ("Q6_K",)
        assert groups["norms"].params == 308_224 and groups["norms"].bytes == 1_232_896
        assert groups["embedding"].bytes == 350_060_544
        assert rows["embedding"].bytes_read_per_token == 2_304        # one row of 4,096 Q4_K values
        assert qwen8b.params_total == 8_190_735_360
        assert qwen8b.file_bytes == 5_027_784_512
        assert weight_bytes_read_per_token(qwen8b) == 4_671_768_832   # 93 per cent of the file
        assert round(100 * weight_bytes_read_per_token(qwen8b) / qwen8b.file_bytes) == 93
        assert sum(r.bytes_read_per_token for r in rows.values()) == weight_bytes_read_per_token(qwen8b)

    def test_qwen3_8b_flops_in_blocks(self, qwen8b):
        # 'FLOPs in the 36 blocks 2 x 6,946,075,648': parameters less embedding and head
        assert qwen8b.block_params_per_token == 6_946_075_648

    def test_qwen3_30b_a3b(self, qwen30b):
        assert shared_bytes_read(qwen30b) == 822_523_904
        assert qwen30b.expert_bytes == 17_553_162_240
        assert expert_bytes_read(qwen30b, 1) == 1_097_072_640
        w = weight_bytes_read_per_token(qwen30b)
        assert w == 822_523_904 + 1_097_072_640 + 1_152                 # plus one Q4_K embedding row
        assert round(w / GB, 2) == 1.92
        assert round(qwen30b.file_bytes / GB, 2) == 18.56
        assert round(100 * w / qwen30b.file_bytes) == 10

    def test_gpt_oss_120b(self, gptoss):
        assert shared_bytes_read(gptoss) == 1_685_668_608
        assert gptoss.expert_bytes == 61_073_326_080
        assert expert_bytes_read(gptoss, 1) == 1_908_541_440
        assert round(weight_bytes_read_per_token(gptoss) / GB, 2) == 3.59
        assert round(gptoss.file_bytes / GB, 1) == 63.4
        assert {g.name.value: g.types for g in gptoss.groups}["experts"] == ("F32", "MXFP4")
        experts = next(r for r in grouped_rows(gptoss) if r.group.name.value == "experts")
        assert experts.bytes_read_per_token == 1_908_541_440            # 4 of 128: the table's figure

    def test_shortcut_misleads(self, qwen8b, gptoss):
        # 'File x active / total' table: the shortcut is high for dense, low for gpt-oss
        assert qwen8b.file_bytes > weight_bytes_read_per_token(qwen8b)
        assert 63.39 * 5.1 / 117 < weight_bytes_read_per_token(gptoss) / GB

    def test_kv_bytes_per_token(self, qwen8b, qwen30b, gptoss, qwen06_fp32):
        assert qwen8b.kv_bytes_per_token("f16") == (147_456, 0)
        assert qwen30b.kv_bytes_per_token("f16") == (98_304, 0)
        assert gptoss.kv_bytes_per_token("f16") == (36_864, 36_864)
        assert gptoss.attention.sliding_window == 128
        assert qwen06_fp32.kv_bytes_per_token("f32") == (229_376, 0)


class TestDecodeCeiling:
    """decode-ceiling.py output at 273 GB/s, and the four-track table at 4,096 tokens."""

    @pytest.mark.parametrize("model, expected", [
        ("qwen8b", [(58.4, 4.7), (51.7, 5.3), (28.7, 9.5)]),
        ("qwen30b", [(142.2, 1.9), (117.5, 2.3), (53.1, 5.1)]),
        ("gptoss", [(75.9, 3.6), (72.8, 3.8), (56.8, 4.8)]),
    ])
    def test_batch_one_at_273(self, request, model, expected):
        spec = request.getfixturevalue(model)
        for context, (rate, gb) in zip((0, 4096, 32768), expected, strict=True):
            got_rate, got_gb = ceiling(spec, 273, context)
            assert got_rate == pytest.approx(rate, rel=1.5e-3, abs=0.051)  # the lesson rounds W to MB
            assert got_gb == pytest.approx(gb, abs=0.051)

    @pytest.mark.parametrize("bandwidth, figures", [
        (273, (51.7, 117.5, 72.8)), (256, (48.5, 110.2, 68.3)),
        (546, (103.5, 235.1, 145.6)), (1792, (339.7, 771.5, None)),
    ])
    def test_tracks_at_4096(self, qwen8b, qwen30b, gptoss, bandwidth, figures):
        for spec, rate in zip((qwen8b, qwen30b, gptoss), figures, strict=True):
            if rate is not None:
                # the lesson rounds W to MB
                assert ceiling(spec, bandwidth, 4096)[0] == pytest.approx(rate, rel=1.5e-3, abs=0.051)

    def test_gpt_oss_does_not_fit_in_32_gb(self, gptoss):
        assert memory_resident(gptoss, 4096) > 32e9


class TestBatching:
    """Second block of decode-ceiling.py and 'Sequences / GB read per step' table (4,096 tokens)."""

    @pytest.mark.parametrize("model, rows", [
        ("qwen8b", [(51.7, 52), (38.5, 154), (19.0, 305), (6.3, 403)]),
        ("qwen30b", [(117.5, 118), (42.5, 170), (14.7, 235), (6.2, 398)]),
        ("gptoss", [(72.8, 73), (28.5, 114), (9.6, 153), (4.2, 270)]),
    ])
    def test_per_sequence_and_total(self, request, model, rows):
        spec = request.getfixturevalue(model)
        sweep = batch_sweep(spec, machine(273), F16, [1, 4, 16, 64], context=4096)
        for i, (each, total) in enumerate(rows):
            assert sweep.per_sequence[i] == pytest.approx(each, rel=1.5e-3, abs=0.051)
            assert sweep.total[i] == pytest.approx(total, rel=1.5e-3, abs=0.51)

    def test_qwen8b_bytes_and_memory(self, qwen8b):
        sweep = batch_sweep(qwen8b, machine(273), F16, [1, 4, 16, 64], context=4096)
        np.testing.assert_allclose(sweep.bytes_per_step / GB, [5.28, 7.09, 14.34, 43.33], atol=0.006)
        np.testing.assert_allclose(sweep.memory / GB, [5.6, 7.4, 14.7, 43.7], atol=0.051)

    def test_expert_union(self, qwen30b, gptoss):
        b = np.array([1, 4, 16, 64])
        np.testing.assert_allclose(experts_touched_per_layer(qwen30b, b), [8.0, 29.1, 82.4, 125.9], atol=0.051)
        np.testing.assert_allclose(experts_touched_per_layer(gptoss, b), [4.0, 15.3, 51.0, 111.2], atol=0.051)
        expert_gb = expert_bytes_read(qwen30b, b) / GB
        np.testing.assert_allclose(expert_gb, [1.10, 3.99, 11.30, 17.27], atol=0.006)
        # 'a step for 16 sequences would touch about two thirds of the experts': 64 per cent
        assert experts_touched_per_layer(qwen30b, 16) / 128 == pytest.approx(0.64, abs=0.005)

    def test_moe_falls_below_dense_at_16(self, qwen8b, qwen30b):
        dense = batch_sweep(qwen8b, machine(273), F16, [16], context=4096).per_sequence[0]
        moe = batch_sweep(qwen30b, machine(273), F16, [16], context=4096).per_sequence[0]
        assert moe < dense

    def test_fits_flag(self, qwen8b):
        sweep = batch_sweep(qwen8b, machine(273, memory_gb=12), F16, [1, 2, 64], context=4096)
        assert list(sweep.fits) == [True, True, False]


class TestKVGrowth:
    """'Tokens in context' table: cache read, share of bytes, ceiling at 273 GB/s."""

    @pytest.mark.parametrize("model, rows", [
        ("qwen8b", [(0, 0.0, 0, 58.4), (4096, 0.60, 11, 51.7), (16384, 2.42, 34, 38.5), (32768, 4.83, 51, 28.7)]),
        ("qwen30b", [(0, 0.0, 0, 142.2), (4096, 0.40, 17, 117.5), (16384, 1.61, 46, 77.3), (32768, 3.22, 63, 53.1)]),
    ])
    def test_rows(self, request, model, rows):
        spec = request.getfixturevalue(model)
        for context, cache_gb, share, rate in rows:
            p = decode_pass(spec, machine(273), F16, context=context)
            assert float(p.cache_bytes) / GB == pytest.approx(cache_gb, abs=0.006)
            assert round(100 * float(p.kv_share)) == share
            assert 1 / float(p.seconds) == pytest.approx(rate, rel=1.5e-3, abs=0.051)  # the lesson rounds W to MB

    def test_doubling_context_costs_a_quarter(self, qwen8b):
        # check-your-understanding question 1: 38 -> 29, 'about a quarter'
        a, b = ceiling(qwen8b, 273, 16384)[0], ceiling(qwen8b, 273, 32768)[0]
        assert 1 - b / a == pytest.approx(0.25, abs=0.02)

    def test_gpt_oss_falls_least(self, qwen8b, qwen30b, gptoss):
        falls = [1 - ceiling(s, 273, 32768)[0] / ceiling(s, 273, 0)[0] for s in (qwen8b, qwen30b, gptoss)]
        assert falls[2] < falls[0] < falls[1]
        assert falls[2] == pytest.approx(0.25, abs=0.01)

    def test_12_gb_card(self, qwen8b):
        # 'Qwen3-8B at four-bit weights, filling a 12 GB card': 5 GB + 4.8 GB + 2.2 GB free
        cache = float(kv_bytes(qwen8b, 32768))
        assert cache / GB == pytest.approx(4.83, abs=0.01)
        free = 12 - float(memory_resident(qwen8b, 32768)) / GB
        assert free == pytest.approx(2.2, abs=0.1)  # the lesson rounds W to 5 GB

    def test_cpu_fp32_rows(self, qwen06_fp32):
        # 'Qwen3-0.6B, FP32, the snippet's first and last rows': 2.384 GB, + 0.940 GB at ~4,100
        assert weight_bytes_read_per_token(qwen06_fp32) / GB == pytest.approx(2.384, abs=0.001)
        wl = Workload(kv_type="f32")
        p = decode_pass(qwen06_fp32, machine(27.2), wl, context=4100)
        assert float(p.cache_bytes) / GB == pytest.approx(0.940, abs=0.001)
        assert float(p.bytes) / weight_bytes_read_per_token(qwen06_fp32) == pytest.approx(1.39, abs=0.005)


class TestPrefill:
    def test_two_phases_qwen8b(self, qwen8b):
        # 'One forward pass, Qwen3-8B': 28.5 TFLOP for a 2,048-token prefill, 13.9 GFLOP per decode
        # token in the blocks; weights read once in both
        blocks = 2 * qwen8b.block_params_per_token
        assert blocks * 2048 / 1e12 == pytest.approx(28.5, abs=0.05)
        assert blocks / 1e9 == pytest.approx(13.9, abs=0.05)
        assert float(kv_bytes(qwen8b, 2048)) / 1e6 == pytest.approx(302, abs=0.5)

    def test_crossover_cpu(self, qwen06_fp32):
        # 'The crossover, n*': W = 2.384 GB, B = 27.2 GB/s, C = 741 GFLOP/s, 2N = 0.88 GFLOP -> ~74
        assert 2 * qwen06_fp32.block_params_per_token / 1e9 == pytest.approx(0.88, abs=0.005)
        cpu = machine(27.2, peak_tflops=0.741)
        n_star = prefill_crossover(qwen06_fp32, cpu, Workload(kv_type="f32"))
        assert n_star == pytest.approx(74, abs=1.5)

    def test_prefill_regions(self, qwen06_fp32):
        # one-token prefill costs a decode step; rate climbs, then falls at 4,096 (the n² term)
        cpu = machine(27.2, peak_tflops=0.741)
        wl = Workload(kv_type="f32")
        rates = [n / float(prefill_pass(qwen06_fp32, cpu, wl, prompt=n, context=0).seconds)
                 for n in (1, 16, 64, 256, 1024, 4096)]
        # the ceiling climbs while bandwidth-bound, peaks just past n* (~74), then the n² term bends it
        assert rates[0] < rates[1] < rates[2] < rates[3]
        assert rates[5] < rates[4] < rates[3]
        assert rates[0] == pytest.approx(1 / 0.0876, rel=0.02)   # 'Prompt of 1 ... 12 tokens/s'
        one = float(prefill_pass(qwen06_fp32, cpu, wl, prompt=1, context=0).seconds)
        step = float(decode_pass(qwen06_fp32, cpu, wl, context=1).seconds)
        assert one == pytest.approx(step, rel=0.01)
