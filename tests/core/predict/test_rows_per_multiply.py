"""Rows per multiply (``Efficiency.rows_factor``): a prefill multiply of r rows runs at
r / (r + r0) of its rate, a routed expert with r x used / count rows (at least one), as the
published-benchmark fit priced the rows it read."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.io.catalogue import get_entry, load_entry
from rooflab.core.io.presets import load_machine
from rooflab.core.predict.clocks import prefill_pass
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.workload import Workload


def test_each_class_is_stretched_by_its_own_rows_and_an_expert_gets_at_least_one():
    eff = Efficiency(rows_half=128.0, expert_share=0.8, expert_spread=8 / 128)
    assert float(eff.rows_factor(512)) == pytest.approx(1 / (1 + 128 * (0.2 / 512 + 0.8 / 32)))
    # one token: every multiply, dense or expert, gets one row (not a sixteenth of one)
    assert float(eff.rows_factor(1)) == pytest.approx(1 / 129)
    assert Efficiency().rows_factor(1) == 1.0                       # no r0: every size alike


def test_a_larger_ubatch_shortens_a_moe_prompt_and_never_passes_the_ceiling():
    spec = load_entry(get_entry("qwen3-30b-a3b-q4_k_m"))
    gpu = load_machine("rtx-4090")
    fitted = dataclasses.replace(gpu, efficiency=Efficiency(compute=0.6, rows_half=128.0, expert_share=0.8,
                                                            expert_spread=spec.experts_used / spec.experts))
    seconds = {ub: float(prefill_pass(spec, fitted, Workload(prompt=4096, ubatch=ub)).seconds) for ub in (128, 4096)}
    ceiling = float(prefill_pass(spec, gpu, Workload(prompt=4096, ubatch=128)).seconds)
    assert seconds[4096] < 0.5 * seconds[128]
    assert min(seconds.values()) > ceiling
