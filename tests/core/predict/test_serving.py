"""The serving simulation: one request alone is ``rooflab predict``'s request, a single slot is
a textbook queue, batching and chunked prefill do what the schedulers do, draws are seeded, and
the statistics are the plain percentiles of the raw times."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooflab.core.errors import SpecError
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.offload import placed_request
from rooflab.core.predict.placement import Placement
from rooflab.core.predict.request import request
from rooflab.core.predict.serving import (
    Lengths,
    Load,
    ServingPlan,
    clock_for,
    default_requests,
    draw_requests,
    level_of,
    serve,
    simulate,
)
from rooflab.core.predict.serving_stats import Bounds, level_stats, summarize, sustained_rate
from rooflab.core.values.workload import Workload
from tests.factories.specs import machine

GPU = machine(1000.0, peak_tflops=100.0, memory_gb=80.0)
WORK = Workload(prompt=1024, answer=128)


def plan(**kw) -> ServingPlan:
    base = dict(prompt=Lengths(mean=WORK.prompt), answer=Lengths(mean=WORK.answer), slots=8, step_tokens=2048)
    return ServingPlan(**{**base, **kw})


def run(spec, p: ServingPlan, load: Load, work: Workload = WORK):
    clock = clock_for(spec, GPU, work, p)
    timeline = simulate(clock, p, load, context=work.context)
    return timeline, level_of(timeline, load, p.bounds)


def test_one_request_alone_is_predicts_request(qwen8b):
    est = request(qwen8b, GPU, WORK)
    _, lv = run(qwen8b, plan(requests=4), Load(mode="concurrency", level=1))
    # the same clocks: TTFT is the prefill pass, TPOT the mean decode step over the answer;
    # the grid interpolation and the segment's straight line stay within 0.1 %
    assert lv.ttft.p50 == pytest.approx(est.ttft, rel=1e-3)
    assert lv.tpot.p50 == pytest.approx(est.tpot, rel=1e-3)
    assert lv.e2e.p50 == pytest.approx(est.end_to_end, rel=1e-3)
    assert lv.ttft.p99 == pytest.approx(lv.ttft.p50, rel=1e-9)          # alone, every request alike


def test_placed_model_uses_the_placed_clocks(qwen8b):
    cpu = machine(1000.0, peak_tflops=100.0, memory_gb=4.0, offload_gb_s=50.0)
    placement = Placement(gpu_layers=10)
    est = placed_request(qwen8b, cpu, WORK, placement)
    p = plan(requests=2, slots=1)
    timeline = simulate(clock_for(qwen8b, cpu, WORK, p, placement), p, Load(mode="concurrency", level=1))
    lv = level_of(timeline, Load(mode="concurrency", level=1))
    assert lv.ttft.p50 == pytest.approx(est.ttft, rel=2e-3)
    assert lv.tpot.p50 == pytest.approx(est.tpot, rel=2e-3)
    assert est.tpot > request(qwen8b, cpu, WORK).tpot * 2      # the host's layers do slow it


def test_one_slot_is_a_queue(qwen8b):
    """One slot: requests are served one after another, so C clients see the service time S
    C times over: throughput 1/S, TTFT (C - 1) S + prefill once the loop is steady."""
    est = request(qwen8b, GPU, WORK)
    service = est.end_to_end
    p = plan(slots=1, requests=24)
    for c in (1, 3):
        timeline, lv = run(qwen8b, p, Load(mode="concurrency", level=c))
        assert lv.sustained_requests_per_second == pytest.approx(1 / service, rel=2e-3)
        steady = (timeline.first - timeline.arrival)[c:]
        assert np.allclose(steady, (c - 1) * service + est.ttft, rtol=2e-3)


def test_batching_raises_throughput_and_per_sequence_speed_falls(qwen8b):
    p = plan(slots=16)
    levels = [run(qwen8b, p, Load(mode="concurrency", level=c))[1] for c in (1, 2, 4, 8, 16)]
    rates = [lv.output_tokens_per_second for lv in levels]
    per_seq = [lv.tokens_per_second_per_sequence for lv in levels]
    assert rates == sorted(rates) and rates[-1] > 3 * rates[0]
    assert per_seq == sorted(per_seq, reverse=True)
    # a prompt entering the batch shares its step with the decoders: the worst gap is a prefill
    assert levels[-1].itl.p99 > 5 * levels[-1].itl.p50


def test_more_clients_than_slots_queue(qwen8b):
    p = plan(slots=4, requests=96)
    at_slots = run(qwen8b, p, Load(mode="concurrency", level=4))[1]
    beyond = run(qwen8b, p, Load(mode="concurrency", level=16))[1]
    assert beyond.ttft.p50 > 3 * at_slots.ttft.p50
    assert beyond.sustained_requests_per_second == pytest.approx(at_slots.sustained_requests_per_second, rel=0.1)
    assert beyond.tpot.p50 == pytest.approx(at_slots.tpot.p50, rel=0.1)


def test_chunked_prefill_costs_a_weight_read_per_chunk(qwen8b):
    """A prompt longer than the step's budget is prefilled in chunks, each after the chunks
    before it: the sum of the chunks' passes, not one pass (which reads the weights once)."""
    work = Workload(prompt=4096, answer=2)
    p = ServingPlan(prompt=Lengths(mean=4096), answer=Lengths(mean=2), slots=1, step_tokens=1024, requests=1)
    _, lv = run(qwen8b, p, Load(mode="concurrency", level=1), work)
    chunks = sum(float(prefill_pass(qwen8b, GPU, work, prompt=1024, context=c).seconds) for c in (0, 1024, 2048, 3072))
    assert lv.ttft.p50 == pytest.approx(chunks, rel=5e-3)
    assert lv.ttft.p50 > float(prefill_pass(qwen8b, GPU, work).seconds)


def test_step_prices_both_parts(qwen8b):
    p = plan()
    clock = clock_for(qwen8b, GPU, WORK, p)
    dec = float(decode_pass(qwen8b, GPU, WORK, context=1100, batch=5).seconds)
    pre = float(prefill_pass(qwen8b, GPU, WORK, prompt=512, context=0).seconds)
    assert clock.step(5, 1100, 0, 0) == pytest.approx(dec, rel=1e-3)
    assert clock.step(0, 0, 512, 0) == pytest.approx(pre, rel=2e-3)
    both = clock.step(5, 1100, 512, 0)
    assert max(dec, pre) <= both <= dec + pre


def test_seeded_and_reproducible(qwen8b):
    p = plan(prompt=Lengths(mean=1024, spread=0.5), answer=Lengths(mean=128, spread=0.5), seed=7)
    load = Load(mode="rate", level=3.0)
    a, b = run(qwen8b, p, load)[0], run(qwen8b, p, load)[0]
    assert np.array_equal(a.end, b.end) and np.array_equal(a.prompts, b.prompts)
    c = run(qwen8b, plan(prompt=p.prompt, answer=p.answer, seed=8), load)[0]
    assert not np.array_equal(a.arrival, c.arrival)
    assert a.prompts.min() >= 512 and a.prompts.max() <= 1536 and len(set(a.prompts.tolist())) > 5


def test_poisson_arrivals():
    p = plan(requests=4000)
    _, _, arrivals = draw_requests(p, Load(mode="rate", level=4.0))
    gaps = np.diff(arrivals)
    assert arrivals[0] == 0 and gaps.mean() == pytest.approx(0.25, rel=0.05)
    assert gaps.std() == pytest.approx(0.25, rel=0.08)            # exponential: std = mean


def test_every_request_accounted_and_times_ordered(qwen8b):
    p = plan(prompt=Lengths(mean=1024, spread=0.9), answer=Lengths(mean=64, spread=0.9), requests=300)
    for load in (Load(mode="concurrency", level=12), Load(mode="rate", level=20.0)):
        t, lv = run(qwen8b, p, load)
        assert lv.completed == 300 and np.all(np.isfinite(t.end))
        assert np.all(t.arrival <= t.first) and np.all(t.first <= t.end)
        assert np.all((t.end > t.first) | (t.answers == 1))
        # every token after the first waited on one step: the gaps the steps stand for
        assert int(t.gap_counts.sum()) == int((t.answers - 1).sum())
        # segments keep the loop short: a few iterations per request, not one per token
        assert t.iterations < 6 * 300


def test_statistics_are_the_raw_percentiles(qwen8b):
    t, lv = run(qwen8b, plan(requests=64, answer=Lengths(mean=128, spread=0.5)), Load(mode="rate", level=10.0))
    ttft = t.first - t.arrival
    assert lv.ttft.p90 == pytest.approx(np.percentile(ttft, 90)) and lv.ttft.mean == pytest.approx(ttft.mean())
    tpot = (t.end - t.first) / (t.answers - 1)
    assert lv.tpot.p99 == pytest.approx(np.percentile(tpot, 99))
    gaps = np.repeat(t.gap_seconds, t.gap_counts)
    assert lv.itl.p50 == pytest.approx(np.percentile(gaps, 50)) and lv.itl.p99 == pytest.approx(np.percentile(gaps, 99))
    assert lv.requests_per_second == pytest.approx(64 / (t.end.max() - t.arrival.min()))
    assert lv.output_tokens_per_second == pytest.approx(t.answers.sum() / (t.end.max() - t.arrival.min()))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10), st.integers(1, 5)), min_size=1, max_size=30))
def test_weighted_summary_is_the_expanded_percentile(pairs):
    values = np.array([v for v, _ in pairs])
    weights = np.array([w for _, w in pairs])
    s = summarize(values, weights)
    expanded = np.repeat(values, weights)
    for q, got in ((50, s.p50), (90, s.p90), (99, s.p99)):
        assert got == pytest.approx(np.percentile(expanded, q), abs=1e-9)
    assert s.mean == pytest.approx(expanded.mean())


def test_goodput_counts_requests_within_both_bounds():
    lv = level_stats(mode="rate", level=1.0, arrival=[0, 1, 2, 3], first=[0.1, 1.5, 2.1, 3.1], end=[1.1, 2.5, 3.1, 9.1],
                     prompt_tokens=[8] * 4, answer_tokens=[11] * 4, itl=[0.1], bounds=Bounds(ttft=0.2, tpot=0.2))
    # TTFT 0.1, 0.5, 0.1, 0.1; TPOT 0.1, 0.1, 0.1, 0.6: two meet both
    assert lv.goodput_share == 0.5 and lv.goodput == pytest.approx(2 / 9.1)
    assert level_stats(mode="rate", level=1.0, arrival=[0], first=[1], end=[2], prompt_tokens=[1], answer_tokens=[2],
                       itl=[1.0]).goodput is None


def test_saturation_is_the_busy_closed_loop(qwen8b):
    p = plan(slots=4, requests=40)
    served = serve(qwen8b, GPU, WORK, p, (Load(mode="rate", level=0.5), Load(mode="concurrency", level=2)))
    assert served.saturation_level.level == 4
    assert served.saturation_rate == pytest.approx(served.saturation_level.sustained_requests_per_second)
    assert served.levels[0].requests_per_second < served.saturation_rate
    assert sustained_rate("concurrency", 2, [0, 0, 1, 2, 3], [1, 2, 3, 4, 5]) == pytest.approx(2 / 2)
    assert math.isnan(sustained_rate("concurrency", 4, [0, 0], [1, 1]))


@pytest.mark.parametrize("make, says", [
    (lambda: Load(mode="rate", level=0.0), "rate must be"),
    (lambda: Load(mode="concurrency", level=1.5), "whole number"),
    (lambda: Load(mode="burst", level=1), "load mode"),
    (lambda: plan(slots=0), "slots"),
    (lambda: plan(slots=64, step_tokens=32), "at least slots"),
    (lambda: plan(requests=0), "requests"),
    (lambda: Lengths(mean=10, spread=1.0), "spread"),
    (lambda: Bounds(ttft=-1.0), "bounds.ttft"),
])
def test_bad_inputs_name_the_field(make, says):
    with pytest.raises(SpecError, match=says):
        make()


def test_default_request_counts():
    assert default_requests(Load(mode="concurrency", level=1)) == 16
    assert default_requests(Load(mode="concurrency", level=64)) == 256
    assert default_requests(Load(mode="rate", level=4.0)) == 80
    assert default_requests(Load(mode="rate", level=1000.0)) == 1000


def test_server_overheads_add_to_the_engine(qwen8b):
    """The server's own time: per step on every token's step, per request on its first step."""
    est = request(qwen8b, GPU, WORK)
    slow = plan(slots=1, requests=4, step_overhead=0.002, request_overhead=0.05)
    t, lv = run(qwen8b, slow, Load(mode="concurrency", level=1))
    assert lv.ttft.p50 == pytest.approx(est.ttft + 0.002 + 0.05, rel=1e-3)
    assert lv.tpot.p50 == pytest.approx(est.tpot + 0.002, rel=1e-3)
    with pytest.raises(SpecError, match="step_overhead"):
        plan(step_overhead=-1.0)


def test_a_level_survives_json(qwen8b):
    import json

    from rooflab.core.files.safe_json import dumps_json
    from rooflab.core.predict.serving_stats import ServingLevel

    _, lv = run(qwen8b, plan(requests=8, bounds=Bounds(ttft=1.0)), Load(mode="rate", level=2.0))
    assert ServingLevel.from_dict(json.loads(dumps_json(lv.to_dict()))) == lv
    empty = level_stats(mode="concurrency", level=2, arrival=[], first=[], end=[], prompt_tokens=[],
                        answer_tokens=[], itl=[])
    back = ServingLevel.from_dict(json.loads(dumps_json(empty.to_dict())))       # NaN -> null -> NaN
    assert back.completed == 0 and math.isnan(back.ttft.p50)
    with pytest.raises(TypeError):
        ServingLevel.from_dict({**lv.to_dict(), "ttft": None})
