"""Measuring the host's routed-expert rate (``measure.host_experts``), judged on injected
timings: each layout and its one-expert twin are real catalogue shapes cut to a few layers, the
difference of their steps recovers the rate the timer was given whatever the fixed costs, the
two are timed in alternating order, and a machine too busy to tell them apart is said so."""

from __future__ import annotations

import pytest

from rooflab.core.errors import MeasurementError
from rooflab.core.io.presets import load_machine
from rooflab.core.jobs import CancelToken, run_job
from rooflab.core.measure.host_experts import LAYOUTS, measure_host_experts
from rooflab.core.predict.work import weight_bytes_read_per_token
from rooflab.core.values.model import Role

MACHINE = load_machine("desktop-ddr5")


def fake_timer(rates: dict[str, float], fixed: float, calls: list[str]):
    """Seconds per token: the step's bytes at the layout's format's rate plus a fixed cost."""
    def timer(spec, threads, cancel):
        calls.append(spec.name)
        klass = "mxfp4" if any(t.type_name == "MXFP4" for t in spec.tensors) else "k-quant"
        yield from ()
        return weight_bytes_read_per_token(spec) / rates[klass] + fixed, "fake llama.cpp, 1 thread"
    return timer


def test_the_layouts_are_real_shapes_with_few_layers_and_one_expert_twins():
    qwen, gpt = LAYOUTS
    full, twin = qwen.specs(layers=2)
    assert (full.layers, full.hidden, full.experts, full.experts_used, twin.experts_used) == (2, 2048, 128, 8, 1)
    assert [t.shape for t in full.tensors if t.role is Role.EXPERTS] == \
        [t.shape for t in twin.tensors if t.role is Role.EXPERTS]        # the same tensors, read less
    full, twin = gpt.specs(layers=2)
    assert (full.hidden, full.experts, full.experts_used, twin.experts_used) == (2880, 32, 4, 1)
    assert any(t.type_name == "MXFP4" for t in full.tensors)


def test_the_difference_recovers_the_rate_whatever_the_fixed_cost():
    calls: list[str] = []
    rates = {"k-quant": 6e9, "mxfp4": 9e9}
    cal = run_job(measure_host_experts(MACHINE, rounds=2, timer=fake_timer(rates, 0.004, calls)))
    by = {r.layout: r for r in cal.layouts}
    assert by["qwen3-moe"].rate == pytest.approx(6e9) and by["gpt-oss"].rate == pytest.approx(9e9)
    assert by["qwen3-moe"].format_class == "k-quant" and by["gpt-oss"].format_class == "mxfp4"
    assert cal.factor(by["qwen3-moe"]) == pytest.approx(6e9 / MACHINE.bandwidth)
    assert cal.bandwidth == MACHINE.bandwidth and cal.engine == "fake llama.cpp, 1 thread"
    assert len(by["qwen3-moe"].extra_seconds) == 2 and by["qwen3-moe"].spread == pytest.approx(0.0)
    # the twin first in the second round: a machine slowing down slows both
    assert "8 of its experts" in calls[0] and "1 of its experts" in calls[4]


def test_a_machine_too_busy_to_tell_them_apart_says_so():
    def flat(spec, threads, cancel):
        yield from ()
        return 0.01, "fake"

    with pytest.raises(MeasurementError, match="too busy"):
        run_job(measure_host_experts(MACHINE, rounds=1, layouts=LAYOUTS[:1], timer=flat))


def test_cancel_stops_before_the_next_timing():
    token = CancelToken()
    token.cancel()
    with pytest.raises(Exception, match="cancel"):
        run_job(measure_host_experts(MACHINE, rounds=1, cancel=token, timer=fake_timer({}, 0, [])))
