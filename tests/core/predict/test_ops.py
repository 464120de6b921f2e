"""The pass broken into operations (predict.ops, predict.ops_clocks): the rows sum to the pass's
own figures for every catalogue model and a real GGUF file, and each row sits where the lesson
'FLOPs, Bandwidth, and the Roofline Model' puts it (shared/reference)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.io import load_model
from rooflab.core.io.catalogue import catalogue_keys, get_entry, load_entry
from rooflab.core.io.presets import load_machine
from rooflab.core.predict import ops, work
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.ops_clocks import timed_operations
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.quant import bytes_per_value
from rooflab.core.values.workload import Workload
from tests.factories import hand_specs
from tests.factories.gguf_files import tiny_llama
from tests.factories.specs import synthetic_spec

RTOL = 1e-9          # the rows and the pass add the same terms in another order: rounding only
WORKLOADS = (Workload(prompt=2048), Workload(prompt=300, context=5000, batch=4, flash_attention=False),
             Workload(prompt=1, context=40_000, batch=16, kv_type="q8_0"))


def _catalogue(key: str):
    entry = get_entry(key)
    assert entry is not None
    return load_entry(entry)


def _check_sums(spec, w: Workload) -> None:
    flops, weights, cache = ops.totals(ops.prefill_operations(spec, w))
    pw, pc = work.prefill_weight_and_cache_bytes(spec, w.prompt, w.context, w.kv_type, w.batch)
    assert flops == pytest.approx(float(work.prefill_flops(spec, w.prompt, w.context, w.batch)), rel=RTOL)
    assert (weights, cache) == pytest.approx((float(pw), float(pc)), rel=RTOL)
    t = w.context + w.prompt
    flops, weights, cache = ops.totals(ops.decode_operations(spec, w))
    dw, dc = work.decode_bytes(spec, t, w.batch, w.kv_type)
    assert flops == pytest.approx(float(work.decode_flops(spec, t, w.batch)), rel=RTOL)
    assert (weights, cache) == pytest.approx((float(dw), float(dc)), rel=RTOL)


@pytest.mark.parametrize("key", catalogue_keys())
def test_rows_sum_to_the_pass_for_every_catalogue_model(key):
    spec = _catalogue(key)
    for w in WORKLOADS:
        _check_sums(spec, w)


@pytest.mark.parametrize("tied", [False, True])
def test_rows_sum_to_the_pass_for_a_real_gguf(tmp_path, tied):
    spec = load_model(str(tiny_llama(tmp_path / "tiny.gguf", tied=tied)))
    for w in WORKLOADS:
        _check_sums(spec, w)
    names = {o.name for o in ops.decode_operations(spec, WORKLOADS[0])}
    assert {"q_proj", "k_proj", "v_proj", "o_proj", "attn_scores", "softmax", "attn_weighted_sum", "rope",
            "attn_norm", "ffn_gate", "ffn_up", "ffn_down", "output_head", "embedding", "sampling"} <= names


@pytest.mark.parametrize("spec", [synthetic_spec(8.03e9, 4.5, kv_bytes_per_token=131_072),
                                  hand_specs.dense(kv_values=1024), hand_specs.moe()],
                         ids=["no query heads", "hand dense", "hand moe"])
def test_rows_sum_to_the_pass_for_hand_sized_tables(spec):
    # tables with odd names, a layer with a cache and no query heads, tensors of role OTHER
    for w in WORKLOADS:
        _check_sums(spec, w)
    assert all(o.flops >= 0 and o.bytes >= 0 for o in ops.decode_operations(spec, WORKLOADS[1]))


def test_what_the_pass_leaves_out_is_small_ops_and_activations():
    spec = _catalogue("qwen3-8b-q4_k_m")
    rows = ops.decode_operations(spec, Workload(prompt=2048))
    for o in rows:
        if o.kind == ops.MATMUL:
            assert o.flops_left_out == 0.0
        if o.name in ("rope", "softmax", "sampling", "ffn_act"):
            assert o.flops_left_out == o.flops > 0        # the pass counts none of their arithmetic
    left = sum(o.flops_left_out for o in rows)
    assert 0 < left < 0.01 * sum(o.flops for o in rows)   # small ops: under 1 % of a decode step's FLOPs


def test_a_decode_weight_multiply_sits_at_two_over_bytes_per_weight():
    # lesson, example 3: decode intensity is about 2 / bytes per weight (3.56 at Q4_K's 4.5 bits)
    spec = _catalogue("qwen3-8b-q4_k_m")
    row = {o.name: o for o in ops.decode_operations(spec, Workload(prompt=1))}
    assert row["q_proj"].intensity == pytest.approx(2 / bytes_per_value("q4_k"), rel=0.01)
    assert row["ffn_down"].intensity < row["ffn_up"].intensity        # ffn_down is partly Q6_K: more bytes
    # the same multiply in a 2,048-token prefill reuses each weight 2,048 times
    pre = {o.name: o for o in ops.prefill_operations(spec, Workload(prompt=2048))}
    assert pre["q_proj"].intensity > 200 * row["q_proj"].intensity


def test_attention_follows_the_context():
    spec = _catalogue("qwen3-8b-q4_k_m")
    a = spec.attention

    def scores(phase_ops):
        return next(o for o in phase_ops if o.name == "attn_scores")

    short, long = (scores(ops.decode_operations(spec, Workload(prompt=1, context=t))) for t in (1024, 8191))
    assert long.cache_bytes == pytest.approx(8 * short.cache_bytes, rel=0.01)   # its bytes grow with t
    # a decode step's scores: 2 x heads x d_k FLOPs a cached key over kv_heads x d_k x 2 bytes (f16)
    assert long.intensity == pytest.approx(a.heads[0] / a.kv_heads[0], rel=0.01)
    # a prefill reads the cache once for every query of the prompt: its intensity grows with n
    pre = [scores(ops.prefill_operations(spec, Workload(prompt=n))) for n in (256, 4096)]
    assert pre[1].intensity > 4 * pre[0].intensity


def test_layer_kinds_of_sliding_moe_and_mla_models():
    assert {"sliding moe", "moe"} <= set(ops.layer_kinds(_catalogue("gpt-oss-20b-mxfp4")))
    assert {"mla dense", "mla moe"} <= set(ops.layer_kinds(_catalogue("deepseek-v2-lite-q4_k_m")))
    assert {"sliding dense", "dense"} <= set(ops.layer_kinds(_catalogue("gemma-3-12b-q4_k_m")))
    moe = _catalogue("qwen3-30b-a3b-q4_k_m")
    one, many = ({o.name: o for o in ops.decode_operations(moe, Workload(prompt=16, batch=b))} for b in (1, 16))
    # a batch reads the union of the experts its tokens route to (the pessimistic end)
    ratio = float(work.experts_touched_fraction(moe, 16) / work.experts_touched_fraction(moe, 1))
    assert many["expert_up"].weight_bytes == pytest.approx(ratio * one["expert_up"].weight_bytes)
    assert many["q_proj"].weight_bytes == one["q_proj"].weight_bytes


def test_flash_attention_keeps_the_scores_on_the_chip():
    spec = _catalogue("llama-3.1-8b")
    fused, unfused = ({o.name: o for o in ops.prefill_operations(spec, Workload(prompt=4096, flash_attention=fa))}
                      for fa in (True, False))
    assert fused["softmax"].bytes == 0 and unfused["softmax"].bytes > 0
    assert unfused["attn_scores"].activation_bytes > fused["attn_scores"].activation_bytes
    assert fused["attn_scores"].flops == unfused["attn_scores"].flops


def test_timed_rows_on_the_roof():
    spec, m = _catalogue("qwen3-8b-q4_k_m"), load_machine("rtx-4090")
    w = Workload(prompt=2048)
    timed = timed_operations(spec, m, w)
    for t in timed:
        o = t.op
        assert t.seconds_ceiling == pytest.approx(max(o.bytes / m.bandwidth, o.flops / m.flops()))
        assert t.seconds_expected is None
    by = {(t.op.phase, t.op.name): t for t in timed}
    assert by[("decode", "ffn_up")].bound == "memory" and by[("prefill", "ffn_up")].bound == "compute"
    for phase in ("prefill", "decode"):
        assert sum(t.share for t in timed if t.op.phase == phase) == pytest.approx(1.0)
    # one op's slower clock at a time: the rows' summed ceiling is no less than the pass's
    pre = sum(t.seconds_ceiling for t in timed if t.op.phase == "prefill")
    assert pre >= float(prefill_pass(spec, m, w).seconds)
    dec = sum(t.seconds_ceiling for t in timed if t.op.phase == "decode")
    assert dec >= float(decode_pass(spec, m, w, context=2048).seconds)


def test_expected_rows_run_below_the_ceiling():
    spec, m = _catalogue("qwen3-8b-q4_k_m"), load_machine("rtx-4090")
    slow = dataclasses.replace(m, efficiency=Efficiency(bandwidth=0.5, compute=0.4, kv_read_factor=2.0))
    timed = timed_operations(spec, m, Workload(prompt=512), expected=slow)
    exp = np.array([t.seconds_expected for t in timed], dtype=float)
    ceil = np.array([t.seconds_ceiling for t in timed])
    assert np.all(exp >= ceil) and np.any(exp > 1.9 * ceil)
    # the memory-bound decode multiplies run at half the bandwidth: twice their ceiling
    up = next(t for t in timed if (t.op.phase, t.op.name) == ("decode", "ffn_up"))
    assert up.seconds_expected == pytest.approx(2 * up.seconds_ceiling, rel=0.01)
