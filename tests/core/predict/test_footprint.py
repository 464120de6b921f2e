"""Each memory's bill: weights placed + KV + compute buffer + the runtime reserve."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan, compute_bytes
from rooflab.core.predict import work
from rooflab.core.predict.footprint import (
    BACKEND_CONTEXT,
    BACKEND_CONTEXT_LEAST,
    DEVICE_MARGIN,
    OS_RESERVE,
    compute_buffer_bytes,
    fit_margin,
    memory_grid,
    padded,
    plan_memory,
    runtime_reserve,
)
from rooflab.core.predict.placement import Placement
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

GiB = 2**30


def machine(**changes: object) -> MachineProfile:
    base = MachineProfile(name="GPU", bandwidth=1e12, peak_flops={"fp16": 1e14}, memory=24 * GiB,
                          offload_bandwidth=89.6e9, offload_memory=64e9, offload_name="DDR5")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_reserves_per_backend():
    # what is gone before llama.cpp reads free memory: on a discrete GPU the back end's context
    # (0.45 GiB); a Mac's GPU may wire ~75 % of its memory; the OS share on a CPU; both on unified
    # memory without Metal. The fit's --fit-target margin (1024 MiB per GPU) is the search's target,
    # apart from the bill.
    assert DEVICE_MARGIN == GiB and BACKEND_CONTEXT == 0.45 * GiB
    assert runtime_reserve(machine()) == 0.45 * GiB
    assert runtime_reserve(machine(backend="rocm")) == 0.45 * GiB
    assert runtime_reserve(machine(kind="unified", backend="metal", memory=128 * GiB)) == 32 * GiB
    assert runtime_reserve(machine(kind="cpu")) == OS_RESERVE == 4 * GiB
    assert runtime_reserve(machine(kind="unified", backend="cuda")) == 4.45 * GiB
    assert fit_margin(machine()) == fit_margin(machine(kind="unified", backend="metal")) == GiB
    assert fit_margin(machine(kind="cpu")) == 0.0


def test_compute_buffer_is_the_peak_of_the_graph(qwen8b):
    # ggml's allocator reuses memory: the peak is the largest of the output's live set (logits and
    # the normed hidden state), a layer's (4 hidden-wide tensors and 3 ffn-wide ones) and, without
    # flash attention, attention's (the scores, cells x heads, beside 7 hidden-wide tensors), fp32 per
    # token. Qwen3-8B: vocab 151,936, hidden 4,096, ffn 12,288, 32 heads:
    # max(151,936 + 8,192, 16,384 + 36,864, 1,024 x 32 + 28,672) = 160,128
    plan = LlamaCppPlan(ubatch_size=512)
    assert compute_bytes(qwen8b, plan, 1000) == 4.0 * 512 * 160128
    # flash attention adds only its f16 mask of ubatch x context
    assert float(compute_buffer_bytes(qwen8b, 512, 1024, attention_scores=False)) == 512 * (4.0 * 160128 + 2 * 1024)
    # a memory without the output layer holds no logits: the layer's live set, 53,248 floats a token
    assert float(compute_buffer_bytes(qwen8b, 512, 1024, attention_scores=False, output=False)) == \
        512 * (4.0 * 53248 + 2 * 1024)
    # at 32,768 cells without flash attention the scores dominate: 32,768 x 32 + 28,672 floats a token
    assert float(compute_buffer_bytes(qwen8b, 512, 32768, attention_scores=True)) == 512 * 4.0 * (32768 * 32 + 28672)
    assert float(padded(1)) == 256 and float(padded(257)) == 512


# llama.cpp's "CPU compute buffer size" (MiB) for real-size random-weight GGUFs at -ub 512, printed by
# benchmarks/accuracy/bench_compute_buffer.py on 2026-12-06 (llama-cpp-python 0.3.36, CPU back end):
# (catalogue key, weights, cells, flash attention) -> logged MiB
LOGGED_MIB = {("llama-2-7b", "q4_0", 1024, True): 97.51, ("llama-2-7b", "q4_0", 1024, False): 122.01,
              ("llama-2-7b", "q4_0", 4096, True): 100.51, ("llama-2-7b", "q4_0", 4096, False): 320.01,
              ("qwen3-0.6b", "bf16", 1024, True): 309.76, ("qwen3-0.6b", "bf16", 1024, False): 300.75,
              ("qwen3-0.6b", "bf16", 4096, True): 312.76, ("qwen3-0.6b", "bf16", 4096, False): 302.75}


def test_the_buffer_is_what_llama_cpp_logs():
    # each of the eight within 3 %; the old sum of every intermediate (vocab + 8 hidden + 3 ffn, plus
    # the scores) said 192 MiB for Llama-2-7B with flash attention, twice the 97.5 logged
    for (key, weights, cells, flash), mib in LOGGED_MIB.items():
        spec = load_model(key, weights=weights)
        got = float(compute_buffer_bytes(spec, 512, cells, attention_scores=not flash)) / 2**20
        assert got == pytest.approx(mib, rel=0.03), (key, cells, flash)


def test_a_large_vocabulary_buffer_is_its_logits():
    # llama.cpp's Gemma pull request (ggml-org/llama.cpp#5631) logs "CUDA0 compute buffer size =
    # 2025.00 MiB" for Gemma-7B at a 2,048-token ubatch (vocab 256,000, hidden 3,072, ffn 24,576): its
    # logits alone are 2,048 x 256,000 x 4 B = 2,000 MiB. The peak rule gives 2,048 x 4 x (256,000 + 2 x
    # 3,072) B = 2,048 MiB (1 % high); the old sum of every intermediate, vocab + 8 hidden + 3 ffn, gave
    # 2,768 MiB, and Gemma-3-12B's 0.70 GB instead of 0.55 refused it on 8 GB cards.
    gemma = load_model("gemma-3-12b-q4_k_m")        # vocab 262,208, hidden 3,840
    assert (gemma.vocab, gemma.hidden) == (262208, 3840)
    got = float(compute_buffer_bytes(gemma, 512, 768, attention_scores=False))
    assert got == 512 * (4.0 * (262208 + 2 * 3840) + 2 * 768)
    assert got / 2**20 == pytest.approx(527.9, abs=0.1)


def test_the_five_setups_llama_cpp_ran_now_place():
    # shapes of set-ups users ran with llama.cpp and rooflab refused (llama-bench's pp512 + tg128):
    pp = Workload(prompt=512, answer=128)
    # gpt-oss-120b with every expert on the host at -ub 8192 beside a 24 GiB card: the host's bill had
    # the logits' buffer (8.5 GB) and needed its 61.7 GB of weights resident in 64 GB; they are mmap'd
    gptoss, r4090 = load_model("gpt-oss-120b-mxfp4"), load_machine("rtx-4090")
    every = Placement(gpu_layers=37, cpu_moe=36)
    big = plan_memory(gptoss, r4090, dataclasses.replace(pp, ubatch=8192), every)
    assert big.fits and big.host.paged > 0 and big.host.compute_buffer < 2e9
    # the same beside a 16 GB card with 64 GB of host memory (Radeons run it the same way)
    r16 = dataclasses.replace(load_machine("rtx-4060-ti-16gb"), offload_memory=64e9)
    assert plan_memory(gptoss, r16, pp, every).fits
    # Gemma-3-12B wholly on an 8 GiB card: 7.29 GB of weights (its published Q4_K_M file is 7.3 GB:
    # the tied embedding is the Q6_K output head on the card), 0.30 KV, 0.55 buffer, 0.48 context.
    # That bills 43 MB over the card llama.cpp ran it on: its context took less than the 0.45 GiB
    # billed, and the verdict allows the least a CUDA context takes (BACKEND_CONTEXT_LEAST, 0.3 GiB)
    gemma, r8 = load_model("gemma-3-12b-q4_k_m"), dataclasses.replace(load_machine("rtx-3060-12gb"), memory=8 * GiB)
    g = plan_memory(gemma, r8, pp, Placement.all_on_device(gemma))
    assert g.device.used == pytest.approx(8.63e9, rel=0.01) and g.device.weights == pytest.approx(7.3e9, rel=0.01)
    assert g.device.used > r8.memory and g.fits
    assert g.device.slack == pytest.approx(BACKEND_CONTEXT - BACKEND_CONTEXT_LEAST)
    # a card 0.2 GiB smaller is refused: no context is that light
    assert not plan_memory(gemma, dataclasses.replace(r8, memory=7.8 * GiB), pp, Placement.all_on_device(gemma)).fits
    # two 32B models wholly on a 20 GiB card (the fit's 1 GiB margin is its target, not a need)
    r20 = dataclasses.replace(r4090, memory=20 * GiB)
    for key in ("qwen2.5-32b-q4_k_m", "qwen3-32b-q4_k_m"):
        spec = load_model(key)
        assert plan_memory(spec, r20, pp, Placement.all_on_device(spec)).fits, key


def test_bill_adds_up_and_fits(qwen8b):
    w = Workload(prompt=2048, answer=256, batch=2)
    plan = plan_memory(qwen8b, machine(), w, Placement.all_on_device(qwen8b))
    dev = plan.device
    assert dev.kv == pytest.approx(2 * float(work.kv_bytes(qwen8b, 2304)))
    assert dev.used == dev.weights + dev.kv + dev.compute_buffer + dev.reserve
    assert dev.weights + plan.host.weights == qwen8b.weight_bytes
    assert plan.fits and plan.kv_location == "device" and plan.host.kv == 0
    assert plan.host.reserve == OS_RESERVE            # the input embedding lives in host memory
    small = plan_memory(qwen8b, machine(memory=5 * GiB), w, Placement.all_on_device(qwen8b))
    assert not small.fits and not small.device.fits and small.host.fits


def test_kv_location_follows_the_placement(qwen8b):
    w = Workload()
    assert plan_memory(qwen8b, machine(), w, Placement(gpu_layers=20)).kv_location == "split"
    off = plan_memory(qwen8b, machine(), w, Placement(gpu_layers=37, kv_on_device=False))
    assert off.kv_location == "host" and off.device.kv == 0


def test_no_host_tier_holds_nothing(qwen8b):
    bare = machine(offload_bandwidth=0.0, offload_memory=0.0)
    plan = plan_memory(qwen8b, bare, Workload(), Placement.all_on_device(qwen8b))
    assert plan.host.used == 0 and plan.device.weights == qwen8b.weight_bytes and plan.fits
    assert not plan_memory(qwen8b, bare, Workload(), Placement(gpu_layers=10)).fits


def test_grid_is_the_same_bill(gptoss):
    m, w, p = machine(), Workload(), Placement(gpu_layers=37, cpu_moe=23)
    lengths = np.array([[100], [5000], [60000]])
    batches = np.array([[1, 3, 16]])
    device, host, fits = memory_grid(gptoss, m, w, p, lengths, batches)
    for i, length in enumerate(lengths.ravel()):
        for j, b in enumerate(batches.ravel()):
            plan = plan_memory(gptoss, m, w, p, context_length=int(length), batch=int(b))
            assert device[i, j] == pytest.approx(plan.device.used) and host[i, j] == pytest.approx(plan.host.used)
            assert bool(fits[i, j]) == plan.fits
