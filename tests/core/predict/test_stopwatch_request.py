"""TTFT / TPOT arithmetic: the lesson's worked stopwatch example and the request estimate."""

from __future__ import annotations

import re

import pytest

from rooflab.core.errors import SpecError
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.request import request
from rooflab.core.predict.stopwatch import from_timestamps
from rooflab.core.values.workload import Workload
from tests.factories.specs import machine


def test_worked_example():
    # 'An 8,000-token prompt, a 400-token answer, first token at 12.0 s, last at 30.0 s'
    r = from_timestamps(prompt_tokens=8000, output_tokens=400, first_token=12.0, last_token=30.0)
    assert r.ttft == 12.0
    assert r.prompt_rate == pytest.approx(667, abs=0.5)
    assert r.tpot * 1e3 == pytest.approx(45.1, abs=0.05)
    assert r.decode_rate == pytest.approx(22.2, abs=0.05)
    assert r.naive_rate == pytest.approx(13.3, abs=0.05)


def test_question_two():
    r = from_timestamps(prompt_tokens=6000, output_tokens=300, first_token=8.0, last_token=23.0)
    assert r.decode_rate == pytest.approx(20, abs=0.1)
    assert r.prompt_rate == pytest.approx(750)


@pytest.mark.parametrize("kwargs, says", [
    (dict(prompt_tokens=10, output_tokens=1, first_token=1.0, last_token=2.0), "at least 2 output tokens"),
    (dict(prompt_tokens=10, output_tokens=5, first_token=4.5, last_token=0.5),
     "the last token (0.5 s) must come after the first (4.5 s)"),
    (dict(prompt_tokens=10, output_tokens=5, first_token=1.0, last_token=1.0), "the last token (1 s)"),
    (dict(prompt_tokens=10, output_tokens=5, first_token=0.0, last_token=2.0),
     "the first token (0 s) must come after the request was sent"),
    (dict(prompt_tokens=0, output_tokens=5, first_token=1.0, last_token=2.0), "prompt_tokens"),
])
def test_stopwatch_rejects_nonsense_and_says_which_time_is_wrong(kwargs, says):
    with pytest.raises(SpecError, match=re.escape(says)):
        from_timestamps(**kwargs)


def test_request_composes_phases(qwen8b):
    m = machine(273, peak_tflops=100)
    wl = Workload(prompt=2000, answer=400, context=0)
    est = request(qwen8b, m, wl)
    assert est.ttft == pytest.approx(float(prefill_pass(qwen8b, m, wl).seconds))
    first = float(decode_pass(qwen8b, m, wl, context=2000).seconds)
    last = float(decode_pass(qwen8b, m, wl, context=2398).seconds)
    assert first < est.tpot < last                    # the cache grows during the answer
    assert est.tpot == pytest.approx((first + last) / 2, rel=1e-3)   # linear in t while memory-bound
    assert est.end_to_end == pytest.approx(est.ttft + 399 * est.tpot)
    assert est.prefill_bound == "compute" and est.decode_bound == "memory"


def test_prompt_cut_moves_ttft_not_tpot(qwen8b):
    # 'Change one thing at a time': a shorter prompt cuts TTFT, TPOT barely moves
    m = machine(273, peak_tflops=100)
    long = request(qwen8b, m, Workload(prompt=8000, answer=400))
    short = request(qwen8b, m, Workload(prompt=2000, answer=400))
    assert short.ttft < long.ttft / 3
    assert short.tpot <= long.tpot             # "45.1 ms or slightly less": a smaller cache to read


def test_speculative_drafts_shorten_tpot(qwen8b):
    m = machine(273, peak_tflops=100)
    plain = request(qwen8b, m, Workload(prompt=2000, answer=400))
    drafted = request(qwen8b, m, Workload(prompt=2000, answer=400, draft_tokens=4, acceptance=0.8))
    assert drafted.speculative_speedup > 2                      # memory-bound verify costs ~1 step
    assert drafted.tpot == pytest.approx(plain.tpot / drafted.speculative_speedup)
    assert drafted.end_to_end < plain.end_to_end and drafted.ttft == plain.ttft
    assert drafted.decode_ceiling == plain.decode_ceiling       # the ceiling is of one plain step
    rejected = request(qwen8b, m, Workload(prompt=2000, answer=400, draft_tokens=4, acceptance=0.0,
                                           draft_cost=0.1))
    assert rejected.tpot > plain.tpot                           # drafts that never land cost time
