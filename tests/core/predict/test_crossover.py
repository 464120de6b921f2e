"""Crossovers: the bisection every crossover uses, and n* at the workload's batch and context."""

from __future__ import annotations

import dataclasses
import math

import pytest

from rooflab.core.io.presets import load_machine
from rooflab.core.predict.clocks import prefill_pass
from rooflab.core.predict.crossover import crossing, prefill_crossover
from rooflab.core.values.defaults import DEFAULT_WORKLOAD


def test_crossing_finds_the_first_point_where_excess_turns_non_negative():
    assert crossing(lambda x: x - 37.5, 1.0, 1000.0) == pytest.approx(37.5, rel=1e-6)
    assert crossing(lambda x: x - 37.5, 37.5, 1000.0) == 37.5
    assert crossing(lambda x: 1.0, 1.0, 1000.0) == 1.0                # already past it at low
    assert math.isinf(crossing(lambda x: -1.0, 1.0, 1000.0))           # never reached


def test_n_star_follows_batch_and_context(qwen8b):
    """The lessons' n* at batch 1 with nothing cached; a batch of b prompts shares one read of
    the weights, so it turns compute-bound about b times sooner; a cached context adds bytes to
    read, so later. qwen3-8b-q4_k_m on dgx-spark (peak figures)."""
    spark = load_machine("dgx-spark")
    alone = prefill_crossover(qwen8b, spark, DEFAULT_WORKLOAD)
    four = prefill_crossover(qwen8b, spark, dataclasses.replace(DEFAULT_WORKLOAD, batch=4))
    cached = prefill_crossover(qwen8b, spark, dataclasses.replace(DEFAULT_WORKLOAD, batch=4, context=4096))
    assert alone == pytest.approx(154.1, abs=0.05)       # what `predict` once printed for every workload
    assert alone / 4 < four < alone / 3.5
    assert cached == pytest.approx(49.8, abs=0.05)       # the report's and the window's figure
    assert cached > four
    for n, workload in ((four, dataclasses.replace(DEFAULT_WORKLOAD, batch=4)),
                        (cached, dataclasses.replace(DEFAULT_WORKLOAD, batch=4, context=4096))):
        below = prefill_pass(qwen8b, spark, workload, prompt=n * 0.99)
        above = prefill_pass(qwen8b, spark, workload, prompt=n * 1.01)
        assert below.compute_seconds < below.memory_seconds and above.compute_seconds > above.memory_seconds
