"""Auto-fit: the fastest placement that fits, the largest context and batch, what to change."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.autofit import (
    choose,
    fit_placement,
    largest_batch,
    largest_context,
    placement_for_offload,
    placement_path,
    suggestions,
)
from rooflab.core.predict.footprint import fit_margin, plan_memory
from rooflab.core.predict.offload import placed_request
from rooflab.core.predict.placement import Placement, describe
from rooflab.core.values.workload import Workload

W = Workload(prompt=2048, answer=256)


def test_gpt_oss_120b_fits_a_4090_with_experts_on_the_cpu(gptoss):
    # the done-when: 63.4 GB of MXFP4 on 24 GiB of GDDR6X with 64 GB of DDR5. llama.cpp fits
    # against 24 GiB less the CUDA context (0.45 GiB) and its 1 GiB margin, at 4,096 tokens (0.18 GB of
    # KV), with a 0.53 GB compute buffer: 23 layers' experts on the CPU overflow it by 0.24 GB, 24 leave
    # 1.46 GB; of the 24th layer, its up and gate experts (0.565 GB each) then fit, its down ones not
    machine = load_machine("rtx-4090")
    assert machine.offload_memory == 64e9
    fit = fit_placement(gptoss, machine, W)
    assert fit.fits and fit.chosen
    assert fit.placement == Placement(gpu_layers=37, cpu_moe=24, partial="gate")
    assert fit.describe(gptoss, machine) == ("fits with all 37 layers on the GPU, the experts of 24 of them on the "
                                             "CPU (one of them keeps its up and gate projections on the GPU)")
    assert fit.placement.flags() == "-ngl 37 --n-cpu-moe 23 -ot blk.23.ffn_down=CPU"
    # one more layer's experts on the GPU overflows it: the fit is the fastest on the path
    tighter = plan_memory(gptoss, machine, W, Placement(gpu_layers=37, cpu_moe=23), context_length=4096)
    assert tighter.device.free < fit_margin(machine)
    est = placed_request(gptoss, machine, W, fit.placement)
    assert 10e-3 < est.tpot < 25e-3          # 16.2 ms: 12.7 layers' experts at 1 TB/s, 23.3 at 89.6 GB/s


def test_path_moves_experts_before_layers(qwen30b):
    machine = load_machine("rtx-4090")
    path = placement_path(qwen30b, machine)
    layers = qwen30b.layers
    assert path[0] == Placement(gpu_layers=layers + 1)
    # llama.cpp's fit keeps one device layer's experts on the device (its partial layers are the last
    # n_part of the device's, the output among them), so at most L - 1 layers' experts move
    assert path[layers - 1] == Placement(gpu_layers=layers + 1, cpu_moe=layers - 1)
    assert path[layers] == Placement(gpu_layers=layers, cpu_moe=layers - 1)
    assert path[-1] == Placement(gpu_layers=0, cpu_moe=layers - 1)
    bare = dataclasses.replace(machine, offload_bandwidth=0.0, offload_memory=0.0)
    assert placement_path(qwen30b, bare) == [Placement(gpu_layers=layers + 1)]


def test_dense_model_sheds_whole_layers():
    spec = load_model("llama-3.3-70b-q4_k_m")
    fit = fit_placement(spec, load_machine("rtx-4090"), W)
    assert fit.fits and fit.placement.cpu_moe == 0 and 0 < fit.placement.gpu_layers < spec.layers + 1
    more = plan_memory(spec, load_machine("rtx-4090"), W,
                       dataclasses.replace(fit.placement, gpu_layers=fit.placement.gpu_layers + 1), context_length=4096)
    assert more.device.free < fit_margin(load_machine("rtx-4090"))


def test_a_model_that_fits_nowhere_is_marked(gptoss):
    # the host's weights are mmap'd (they need not stay resident), but its cache, buffer and the
    # system's 4 GiB must fit: 4 GB of host memory cannot hold them
    small = dataclasses.replace(load_machine("rtx-4090"), offload_memory=4e9)
    fit = fit_placement(gptoss, small, W)
    assert not fit.fits
    assert fit.describe(gptoss, small).startswith("does NOT fit: needs")
    assert suggestions(gptoss, small, W, fit)[0].startswith("no placement fits")


def test_largest_context_and_batch_are_the_edge(qwen8b):
    machine = load_machine("rtx-4090")
    full = Placement.all_on_device(qwen8b)
    n = largest_context(qwen8b, machine, W, full, batch=8)
    assert 0 < n < qwen8b.context_length
    assert plan_memory(qwen8b, machine, W, full, context_length=n, batch=8).fits
    assert not plan_memory(qwen8b, machine, W, full, context_length=n + 1, batch=8).fits
    b = largest_batch(qwen8b, machine, W, full, context_length=32768)
    assert plan_memory(qwen8b, machine, W, full, context_length=32768, batch=b).fits
    assert not plan_memory(qwen8b, machine, W, full, context_length=32768, batch=b + 1).fits
    # a trained context that all fits: the trained context
    assert largest_context(qwen8b, load_machine("h100-sxm"), W, full) == qwen8b.context_length


def test_hand_placement_that_overflows_gets_suggestions():
    spec = load_model("llama-3.3-70b-q4_k_m")
    machine = load_machine("rtx-4090")
    fit = choose(spec, machine, W, Placement.all_on_device(spec))
    assert not fit.fits and not fit.chosen
    tips = suggestions(spec, machine, W, fit, {"q4_0": load_model("llama-3.3-70b-q4_k_m", weights="q4_0")})
    auto = fit_placement(spec, machine, W).placement
    assert tips[0] == f"put {auto.gpu_layers} of 81 layers on the GPU (-ngl {auto.gpu_layers})"
    assert any("--kv-type q8_0" in t or "--kv-type q4_0" in t for t in tips)
    assert any(t.startswith("q4_0 weights") for t in tips)
    assert suggestions(spec, load_machine("h100-sxm"), W, fit_placement(spec, load_machine("h100-sxm"), W)) == ()


def test_offload_fraction_becomes_layers(qwen8b):
    machine = load_machine("rtx-4090")
    assert placement_for_offload(qwen8b, machine, 0.0) == Placement.all_on_device(qwen8b)
    half = placement_for_offload(qwen8b, machine, 0.5)
    plan = plan_memory(qwen8b, machine, Workload(), half)
    share = plan.host.weights / qwen8b.weight_bytes
    assert share == pytest.approx(0.5, abs=0.03)           # one layer is ~3 % of the bytes


def test_path_keeps_the_flags_given(qwen30b, qwen8b):
    machine = load_machine("rtx-4090")
    top = qwen30b.layers + 1
    # --n-cpu-moe given: exactly that many layers' experts on the host, only -ngl walks
    path = placement_path(qwen30b, machine, cpu_moe=5, kv_on_device=False)
    assert path == [Placement(gpu_layers=g, cpu_moe=5, kv_on_device=False) for g in range(top, -1, -1)]
    # --no-kv-offload alone: auto-fit's own path (experts first, then layers), the cache on the host
    path = placement_path(qwen30b, machine, kv_on_device=False)
    assert path == [dataclasses.replace(p, kv_on_device=False) for p in placement_path(qwen30b, machine)]
    # a dense model has no experts to keep; no host tier leaves only the flags on the device
    assert {p.cpu_moe for p in placement_path(qwen8b, machine, cpu_moe=5)} == {0}
    bare = dataclasses.replace(machine, offload_bandwidth=0.0, offload_memory=0.0)
    assert placement_path(qwen30b, bare, cpu_moe=5) == [Placement(gpu_layers=top, cpu_moe=5)]


def test_kv_off_the_device_is_fitted_around(gptoss):
    # --no-kv-offload with -ngl on auto used to put every layer on the GPU and overflow it (64.4 GB);
    # now the rest is fitted around the cache on the host. With the cache of 4,096 tokens (0.18 GB) off
    # it, the card keeps one more layer's experts than with it (24 on the CPU), but not even the up
    # experts of the next: that layer keeps its attention alone on the GPU
    machine = load_machine("rtx-4090")
    fit = fit_placement(gptoss, machine, W, kv_on_device=False)
    assert fit.fits and fit.chosen and fit.kept == "--no-kv-offload"
    assert fit.placement == Placement(gpu_layers=37, cpu_moe=23, kv_on_device=False, partial="attn")
    assert fit.memory.kv_location == "host" and fit.memory.device.kv == 0
    # the fastest on its path: one more layer's experts on the GPU overflows it
    assert plan_memory(gptoss, machine, W, Placement(gpu_layers=37, cpu_moe=22, kv_on_device=False),
                       context_length=4096).device.free < fit_margin(machine)
    assert fit.placement.flags() == "-ngl 37 --n-cpu-moe 22 -ot 'blk.22.ffn_(gate|up|down)=CPU' --no-kv-offload"


def test_cpu_moe_given_fixes_the_experts_and_fits_the_layers(gptoss):
    # --n-cpu-moe 10 with -ngl on auto used to need 47.5 GB of the 4090's 25.8: 26 layers' experts.
    # Fixed at 10, only -ngl falls: 14 (13 layers and the output, 23.06 GB of weights) is the most
    # that fits; the first 23 layers, experts and all, run from host memory
    machine = load_machine("rtx-4090")
    fit = fit_placement(gptoss, machine, W, cpu_moe=10)
    assert fit.fits and fit.chosen and fit.kept == "--n-cpu-moe 10"
    assert fit.placement == Placement(gpu_layers=14, cpu_moe=10)
    assert fit.placement.flags() == "-ngl 14 --n-cpu-moe 10"
    assert plan_memory(gptoss, machine, W, dataclasses.replace(fit.placement, gpu_layers=15),
                       context_length=4096).device.free < fit_margin(machine)
    # slower than auto-fit's own choice, which moves experts rather than layers; the fit says so
    auto = fit_placement(gptoss, machine, W)
    assert placed_request(gptoss, machine, W, fit.placement).tpot > placed_request(gptoss, machine, W,
                                                                                    auto.placement).tpot
    tips = suggestions(gptoss, machine, W, fit)
    assert tips[0] == ("without --n-cpu-moe 10, auto-fit puts all 37 layers on the GPU, the experts of 24 of "
                       "them on the CPU (one of them keeps its up and gate projections on the GPU) "
                       "(-ngl 37 --n-cpu-moe 23 -ot blk.23.ffn_down=CPU)")
    # a fit passed to choose is taken as it is (what placed_summary is handed)
    assert choose(gptoss, machine, W, fit) is fit


def test_a_fit_around_the_flags_points_to_auto_fit(gptoss):
    # every layer's experts on the CPU: 61.7 GB of them and 4.3 GB of reserve pass the 64 GB host,
    # but llama.cpp maps them (mmap), so it runs with 2 GB of them paged from disk; auto-fit without
    # the flag keeps 12 layers' experts on the GPU, and the suggestion says so
    machine = load_machine("rtx-4090")
    fit = fit_placement(gptoss, machine, W, cpu_moe=36)
    assert fit.fits and fit.chosen and fit.memory.host.paged > 0
    assert fit.describe(gptoss, machine).endswith("GB of its host weights paged from disk: mmap)")
    auto = fit_placement(gptoss, machine, W)
    assert suggestions(gptoss, machine, W, fit)[0] == \
        f"without --n-cpu-moe 36, auto-fit puts {describe(gptoss, auto.placement, machine)} ({auto.placement.flags()})"


def test_cpu_moe_given_for_a_dense_model_is_auto_fit(qwen8b):
    # no routed experts to keep: the same -ngl walk as auto-fit, and nothing of the user's kept
    machine = dataclasses.replace(load_machine("rtx-4090"), memory=4e9)
    fit = fit_placement(qwen8b, machine, W, cpu_moe=10)
    assert fit == fit_placement(qwen8b, machine, W) and fit.kept == "" and fit.fits
    assert 0 < fit.placement.gpu_layers < qwen8b.layers + 1 and fit.placement.cpu_moe == 0
