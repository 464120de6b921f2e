"""``--offload F`` (``Workload.offload_fraction``) is modelled once: as llama.cpp's layers
(``autofit.placement_for_offload``), priced by ``offload``. The one-memory passes never read it."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.io.presets import load_machine
from rooflab.core.predict.autofit import placement_for_offload
from rooflab.core.predict.batching import batch_crossover
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.crossover import prefill_crossover
from rooflab.core.predict.offload import placed_request
from rooflab.core.predict.placed import placed_summary
from rooflab.core.values.workload import Workload

W = Workload(prompt=2048, answer=256, compute_dtype="bf16")      # the RTX 4090's 165.2 TFLOP/s, the lesson's


def test_the_one_memory_passes_ignore_the_offload_share(qwen8b):
    # on main a share of 0.5 also slowed every unplaced pass (n* 338.7 instead of 55.1 tokens)
    machine = load_machine("rtx-4090")
    half = dataclasses.replace(W, offload_fraction=0.5)
    assert float(decode_pass(qwen8b, machine, half).seconds) == float(decode_pass(qwen8b, machine, W).seconds)
    assert float(prefill_pass(qwen8b, machine, half).seconds) == float(prefill_pass(qwen8b, machine, W).seconds)
    assert prefill_crossover(qwen8b, machine, half) == pytest.approx(prefill_crossover(qwen8b, machine, W))
    assert prefill_crossover(qwen8b, machine, W) == pytest.approx(55.06, abs=0.01)
    assert batch_crossover(qwen8b, machine, half) == batch_crossover(qwen8b, machine, W)


def test_the_offload_share_is_a_placement(qwen8b):
    machine = load_machine("rtx-4090")
    half = dataclasses.replace(W, offload_fraction=0.5)
    placed = placed_summary(qwen8b, machine, half)
    layers = placement_for_offload(qwen8b, machine, 0.5)
    assert placed.how == "offload" and placed.placement == layers
    # the request is that placement's and nothing else: the same as the layers given by hand
    assert placed.estimate == placed_request(qwen8b, machine, W, layers)
    assert placed.estimate == placed_summary(qwen8b, machine, W, placement=layers).estimate
