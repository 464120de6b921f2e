"""Each memory's bill: weights placed + KV + compute buffer + the runtime reserve."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan, compute_bytes
from rooflab.core.predict import work
from rooflab.core.predict.footprint import (
    BACKEND_CONTEXT,
    DEVICE_MARGIN,
    OS_RESERVE,
    compute_buffer_bytes,
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
    # llama.cpp's fit targets free memory less its --fit-target margin (1024 MiB) per device: on a
    # discrete GPU free memory is the total less the back end's context (0.45 GiB); a Mac's GPU may wire
    # ~75 % of its memory; the OS share on a CPU; all of them on unified memory without Metal
    assert DEVICE_MARGIN == GiB and BACKEND_CONTEXT == 0.45 * GiB
    assert runtime_reserve(machine()) == 1.45 * GiB
    assert runtime_reserve(machine(backend="rocm")) == 1.45 * GiB
    assert runtime_reserve(machine(kind="unified", backend="metal", memory=128 * GiB)) == 33 * GiB
    assert runtime_reserve(machine(kind="cpu")) == OS_RESERVE == 4 * GiB
    assert runtime_reserve(machine(kind="unified", backend="cuda")) == 5.45 * GiB


def test_compute_buffer_is_the_measure_modules_formula(qwen8b):
    # moved from core.measure.llamacpp_plan: 4 x ubatch x (vocab + 8 hidden + 3 ffn x used + context x heads)
    plan = LlamaCppPlan(ubatch_size=512)
    ffn, heads = 12288, 32
    per_token = qwen8b.vocab + 8 * qwen8b.hidden + 3 * ffn
    assert compute_bytes(qwen8b, plan, 1000) == 4.0 * 512 * (per_token + 1024 * heads)
    # flash attention keeps only an f16 mask of ubatch x context
    assert float(compute_buffer_bytes(qwen8b, 512, 1024, attention_scores=False)) == 512 * (4.0 * per_token + 2 * 1024)
    assert float(padded(1)) == 256 and float(padded(257)) == 512


def test_bill_adds_up_and_fits(qwen8b):
    w = Workload(prompt=2048, answer=256, batch=2)
    plan = plan_memory(qwen8b, machine(), w, Placement.all_on_device(qwen8b))
    dev = plan.device
    assert dev.kv == pytest.approx(2 * float(work.kv_bytes(qwen8b, 2304)))
    assert dev.used == dev.weights + dev.kv + dev.compute_buffer + dev.reserve
    assert dev.weights + plan.host.weights == qwen8b.weight_bytes
    assert plan.fits and plan.kv_location == "device" and plan.host.kv == 0
    assert plan.host.reserve == OS_RESERVE            # the input embedding lives in host memory
    small = plan_memory(qwen8b, machine(memory=6 * GiB), w, Placement.all_on_device(qwen8b))
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
