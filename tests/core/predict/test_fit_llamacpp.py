"""Auto-fit as llama.cpp's fit does it (common/fit.cpp, ``common_params_fit_impl``), one rule at a
time on hand-sized models whose answer can be worked out on paper.

The models (``tests.factories.hand_specs``) have layers of a round number of GiB and compute
buffers of a few MB; the card has 16 GiB and 64 GB of host memory. llama.cpp fits against free
memory (16 GiB less the CUDA context, 0.45 GiB) less its 1 GiB margin: 14.55 GiB."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.predict.autofit import FIT_MIN_CONTEXT, fit_context, fit_placement, placement_path
from rooflab.core.predict.footprint import compute_buffer_bytes, fit_margin, plan_memory
from rooflab.core.predict.placement import Placement, experts_kept_on_host
from rooflab.core.values.workload import Workload
from tests.factories.hand_specs import BUFFER, ROOM, SHORT, GiB, card, dense, moe


def test_the_buffers_here_are_small():
    for spec in (dense(kv_values=16384), moe()):
        assert float(compute_buffer_bytes(spec, 512, 8192, attention_scores=False)) < BUFFER * GiB


def test_the_target_is_free_memory_after_the_backend_context_less_the_margin():
    # fit.cpp: targets[id] = dmds_full[id].free - margins[id], free read once the CUDA context exists.
    # 40 layers of 0.5 GiB and a 0.25 GiB head: n layers and the head fit while
    # n x 0.5 + 0.25 + buffer <= 14.55, n = 28 (14.25 GiB): -ngl 29. Counting total memory less the
    # margin alone (15 GiB) would give n = 29, -ngl 30, one layer more than llama.cpp.
    spec, machine = dense(), card()
    fit = fit_placement(spec, machine, SHORT)
    assert fit.placement == Placement(gpu_layers=29)
    assert 28 * 0.5 + 0.25 + BUFFER <= ROOM < 29 * 0.5 + 0.25
    # the bill's reserve is the context alone: the margin is the search's target, not a need
    assert fit.memory.device.reserve == pytest.approx(0.45 * GiB)
    assert fit.memory.device.free >= fit_margin(machine) == GiB


def test_it_fits_at_the_context_llama_cpp_allocates():
    # 16,384 f16 values (32 KiB) per token per layer. An unset -c is shrunk to fit, never below
    # --fit-ctx 4,096 (fit.cpp step 2): a 1,024-token workload is fitted at 4,096 tokens, 0.125 GiB of
    # KV per layer: n x 0.625 + 0.25 + buffer <= 14.55, n = 22 (-ngl 23). At its own 1,024 tokens
    # (1/32 GiB per layer) 26 layers would fit (-ngl 27), the over-count llama.cpp users saw.
    spec, machine = dense(kv_values=16384), card()
    assert fit_context(spec, SHORT) == FIT_MIN_CONTEXT == 4096
    assert fit_placement(spec, machine, SHORT).placement == Placement(gpu_layers=23)
    assert fit_placement(spec, machine, SHORT, context_length=1024).placement == Placement(gpu_layers=27)
    # the bill shown is the workload's own (1,024 tokens), as a placement by hand is billed
    assert fit_placement(spec, machine, SHORT).memory.length == 1024
    # a longer workload is its own -c: 8,192 tokens are 0.25 GiB of KV per layer, 0.75 GiB a layer:
    # n = 19 (14.25 + 0.25 = 14.5 GiB), -ngl 20
    long = Workload(prompt=8192 - 256, answer=256)
    assert fit_context(spec, long) == 8192
    assert fit_placement(spec, machine, long).placement == Placement(gpu_layers=20)
    # a model trained on less than 4,096 tokens is fitted at its trained context (fit.cpp: "default
    # model context size is ... <= the min. context size ... no change")
    assert fit_context(dense(trained=2048), SHORT) == 2048


def test_a_moe_moves_experts_then_fits_part_of_one_more_layer():
    # 10 layers of 0.25 GiB attention and 3 x 0.5 GiB experts, a 0.25 GiB head: 17.75 GiB. With the
    # experts of k layers on the host the card holds 17.75 - 1.5 k: k = 2 leaves 14.75 (over 14.55),
    # k = 3 leaves 13.25. Then fit.cpp tries LAYER_FRACTION_UP on the last of those layers (its up
    # experts back on the card, 13.75: under), then LAYER_FRACTION_GATE (up and gate, 14.25: still
    # under): layer 2 keeps up and gate, only its down experts move.
    spec, machine = moe(), card()
    fit = fit_placement(spec, machine, SHORT)
    assert fit.placement == Placement(gpu_layers=11, cpu_moe=3, partial="gate")
    assert fit.placement.flags() == "-ngl 11 --n-cpu-moe 2 -ot blk.2.ffn_down=CPU"
    assert fit.memory.device.weights == pytest.approx(14.25 * GiB)
    # two layers' experts on the host do not fit (14.75 GiB): three is the least
    assert plan_memory(spec, machine, SHORT, Placement(gpu_layers=11, cpu_moe=2)).device.free < fit_margin(machine)
    # a 15.4 GiB card (target 13.95): 13.25 + 0.5 = 13.75 is under it, 14.25 is not: up only
    assert fit_placement(spec, card(15.4), SHORT).placement == Placement(gpu_layers=11, cpu_moe=3, partial="up")


def test_when_not_even_the_up_experts_fit_the_layer_keeps_attention_alone():
    # fit.cpp: UP does not fit, so it tries LAYER_FRACTION_ATTN, which sends every ffn_* tensor of
    # that layer to the host, its shared expert too. With 0.1 GiB shared experts the card holds
    # 18.75 - 1.5 k GiB: k = 3 leaves 14.25; 14.55 - 14.25 = 0.3 GiB cannot take 0.5 GiB of up experts,
    # so layer 2 moves its shared expert as well (14.15 GiB on the card)
    spec, machine = moe(shared_gib=0.1), card()
    fit = fit_placement(spec, machine, SHORT)
    assert fit.placement == Placement(gpu_layers=11, cpu_moe=3, partial="attn")
    assert fit.memory.device.weights == pytest.approx(14.15 * GiB)
    assert fit.placement.flags() == "-ngl 11 --n-cpu-moe 2 -ot 'blk.2.ffn_(gate|up|down)=CPU'"


def test_a_moe_whose_dense_part_does_not_fit_sheds_layers_keeping_one_layers_experts():
    # fit.cpp step 3 gives the device n_layer layers, n_part = n_layer - 1 of them "partial"; they are
    # the last n_part of its layers, the output among them, so one device layer keeps its experts.
    # 10 layers of 2 GiB attention: even dense-only, 20.25 GiB do not fit. With -ngl g the card
    # holds g - 1 layers' attention, one layer's 1.5 GiB of experts and the head:
    # (g - 1) x 2 + 1.5 + 0.25 <= 14.55 gives g - 1 = 6: -ngl 7, five of those layers' experts on the host
    spec, machine = moe(attention_gib=2.0), card()
    path = placement_path(spec, machine)
    assert max(p.cpu_moe for p in path) == spec.layers - 1
    fit = fit_placement(spec, machine, SHORT)
    assert fit.placement == Placement(gpu_layers=7, cpu_moe=9)
    assert experts_kept_on_host(spec, fit.placement) == 5
    assert fit.memory.device.weights == pytest.approx((6 * 2 + 1.5 + 0.25) * GiB)


def test_a_dense_model_gets_no_partial_layer():
    # fit.cpp returns after step 3 for a dense model (hp_nex == 0): whole layers only
    fit = fit_placement(dense(), card(), SHORT)
    assert fit.placement.partial == "" and fit.placement.cpu_moe == 0


def test_flags_the_user_gave_are_kept_and_get_no_partial_layer():
    spec, machine = moe(), card()
    fit = fit_placement(spec, machine, SHORT, cpu_moe=4)
    assert fit.placement == Placement(gpu_layers=11, cpu_moe=4) and fit.kept == "--n-cpu-moe 4"
    assert dataclasses.replace(fit.placement, partial="up").flags().startswith("-ngl 11 --n-cpu-moe 3 -ot")
