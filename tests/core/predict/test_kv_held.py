"""One rule for the cache a sliding-window model holds: the placement's bill, the memory
footprint and the measurement plan all take it from ``work.kv_bytes_held`` (llama.cpp's
llama-kv-cache-iswa.cpp: full layers pad(t, 256) cells, sliding layers min(that, pad(window +
ubatch, 256)))."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.io.presets import load_machine
from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan, kv_cache_bytes
from rooflab.core.predict import work
from rooflab.core.predict.batching import cache_resident, memory_resident
from rooflab.core.predict.footprint import plan_memory
from rooflab.core.predict.placement import Placement
from rooflab.core.values.workload import Workload


@pytest.mark.parametrize("length", [1, 100, 128, 2304, 4097, 32768])
def test_gpt_oss_cache_is_one_figure_everywhere(gptoss, length):
    # gpt-oss-120b: 18 full and 18 sliding layers (window 128), 36,864 bytes per token in each kind
    # at f16. With -ub 512 a sliding layer holds pad(128 + 512) = 768 cells, a full one pad(t)
    k_full, k_window = gptoss.kv_bytes_per_token("f16")
    assert (k_full, k_window, gptoss.attention.sliding_window) == (36864, 36864, 128)
    cells = -(-length // 256) * 256
    expected = k_full * cells + k_window * min(cells, 768)
    w = Workload(prompt=length, answer=1)
    held = float(cache_resident(gptoss, length, 1, "f16"))
    assert held == pytest.approx(expected)
    placed = plan_memory(gptoss, load_machine("h200"), w, Placement.all_on_device(gptoss), context_length=length)
    assert placed.device.kv == pytest.approx(expected)
    assert kv_cache_bytes(gptoss, LlamaCppPlan(ubatch_size=512), length, 1) == pytest.approx(expected)
    assert float(memory_resident(gptoss, length)) == pytest.approx(gptoss.file_bytes + expected)


def test_a_larger_ubatch_holds_more_sliding_cells(gptoss):
    # -ub 2048: pad(128 + 2048) = 2304 cells in each sliding layer, for a 32K-token sequence
    k_full, k_window = gptoss.kv_bytes_per_token("f16")
    big = dataclasses.replace(Workload(), ubatch=2048)
    placed = plan_memory(gptoss, load_machine("h200"), big, Placement.all_on_device(gptoss), context_length=32768)
    assert placed.device.kv == pytest.approx(k_full * 32768 + k_window * 2304)
    assert float(cache_resident(gptoss, 32768, 1, "f16", 2048)) == pytest.approx(placed.device.kv)


def test_what_a_step_reads_is_not_what_the_cache_holds(gptoss):
    # attention reads min(t, window) of a sliding layer, unpadded: the decode step's bytes
    k_full, k_window = gptoss.kv_bytes_per_token("f16")
    assert float(work.kv_bytes(gptoss, 1000)) == pytest.approx(k_full * 1000 + k_window * 128)
    assert float(work.kv_bytes_held(gptoss, 1000)) == pytest.approx(k_full * 1024 + k_window * 768)
