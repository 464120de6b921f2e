"""``benchmarks/accuracy/bench_cache_shapes.py``'s pure parts: a model's cache cost from llama-bench's two
rates, and each model left out priced by the others' fit. No llama-bench, no timing."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.factories.scripts import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_cache_shapes")


def test_a_models_cost_per_byte_and_per_pair(bench):
    """Llama-3.2-1B's cache: 32 KiB a token read by 512 query heads. tg32 at 25 tokens/s, and
    at 1,024 cached tokens 12.5: 40 ms more a step for 32 MiB (0.84 GB/s) and 524,288 pairs."""
    llama = bench.spec_for("llama-3.2-1b")
    cost = bench.cost_of(llama, 32, 1024, 25.0, 12.5)
    assert cost.seconds == pytest.approx(0.04)
    assert cost.extra_bytes == pytest.approx(1024 * 32768)
    assert cost.per_pair == pytest.approx(0.04 / 524288)
    assert cost.walk == pytest.approx((1 / 64, 2.0))         # 128 values a pair, two bytes a value
    assert cost.per_value == pytest.approx(0.04 / (524288 * 128))


def test_costs_made_by_the_walk_are_priced_exactly_only_by_it(bench):
    """Caches priced at 0.1 ns a byte, 30 ns a pair and 0.2 ns a value: left out, each model's
    cost comes back from the others' fit; one rate a byte misses by 30 % or more."""
    keys = ("wide-q4_k_m", "deep-q4_k_m", "qwen3-0.6b-q4_k_m", "llama-3.2-1b", "qwen2.5-0.5b", "qwen3-1.7b-q4_k_m")
    costs = []
    for key in keys:
        spec = bench.spec_for(key)
        shallow = 0.02
        probe = bench.cost_of(spec, 32, 1024, 1.0 / shallow, 1.0 / (shallow + 1e-3))
        seconds = probe.extra_bytes * (1e-10 + 3e-8 * probe.walk[0] + 2e-10 * probe.walk[1])
        costs.append(bench.cost_of(spec, 32, 1024, 1.0 / shallow, 1.0 / (shallow + seconds)))
    held = bench.leave_one_out(costs)
    for h in held:
        assert h.walked == pytest.approx(h.cost.per_byte, rel=1e-3), h.cost.name
        assert abs(h.step_error(h.walked)) < 1e-3
    assert max(abs(h.one_rate / h.cost.per_byte - 1) for h in held) > 0.3
    lines = bench.report(costs, 1024)
    assert lines[-2].startswith("median |error| of the deep step: one rate a byte ")
    assert lines[-2].endswith("the walk 0.0%")
    assert lines[-1] == "fitted to every model: 0.100 ns a byte, 30.0 ns a pair, 0.200 ns a value"
    with pytest.raises(ValueError, match="no model"):
        bench.spec_for("no-such-model")


def test_a_model_it_does_not_know_is_one_line_and_exit_2(bench, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["bench_cache_shapes.py", "--models", "wide-q4_k_m,no-such-model"])
    assert bench.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("--models: no model 'no-such-model'") and err.count("\n") == 1
