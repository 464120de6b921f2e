"""A calibration timed in rounds: each test's rounds merged into one point (``rounds``)."""

from __future__ import annotations

import statistics

import pytest

from rooflab.core.errors import MeasurementError
from rooflab.core.measure.engines.engine import EngineRun
from rooflab.core.measure.engines.rounds import merge_points, merge_rounds
from rooflab.core.values.measured import EngineSettings, MeasuredPoint
from tests.factories.llm_configs import llama_config

SETTINGS = EngineSettings(engine="llama.cpp", version="b6000", threads=2)


def _point(seconds: float, *, kind: str = "decode", context: int = 3, disturbed: str = "") -> MeasuredPoint:
    return MeasuredPoint(kind=kind, prompt=1 if kind != "prefill" else 512, context=context, batch=1,
                         seconds=seconds, median=seconds, best=seconds, repeats=1, settings=SETTINGS,
                         disturbed=disturbed, test="tg8" if kind != "prefill" else "pp512")


def test_a_points_rounds_give_their_mean_median_spread_and_best():
    merged = merge_points([_point(0.030), _point(0.040), _point(0.032)])
    assert merged.seconds == pytest.approx(statistics.fmean([0.030, 0.040, 0.032]))
    assert merged.median == pytest.approx(0.032) and merged.best == pytest.approx(0.030)
    assert merged.stdev == pytest.approx(statistics.stdev([0.030, 0.040, 0.032]))
    assert merged.repeats == 3 and not merged.disturbed and merged.test == "tg8"


def test_a_disturbed_round_is_left_out_and_every_round_disturbed_stays_disturbed():
    merged = merge_points([_point(0.030), _point(0.090, disturbed="load average rose"), _point(0.034)])
    assert merged.seconds == pytest.approx(0.032) and merged.repeats == 2
    gone = merge_points([_point(0.09, disturbed="load average rose from 0.5 to 2.1"), _point(0.08, disturbed="x")])
    assert gone.disturbed.startswith("every round disturbed (load average rose")


def test_rounds_of_different_tests_are_refused():
    with pytest.raises(MeasurementError, match="different tests"):
        merge_points([_point(0.03, context=3), _point(0.03, context=259)])


def _run(points: tuple[MeasuredPoint, ...], settings: EngineSettings = SETTINGS) -> EngineRun:
    from rooflab.core.io.hf import spec_from_config

    spec = spec_from_config(llama_config(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=2, intermediate_size=256, vocab_size=500))
    return EngineRun(engine="llamacpp", label="tiny", spec=spec, points=points, settings=settings, kv_type="f16",
                     notes=("measured on a random-weight GGUF",))


def test_a_models_rounds_become_one_run_in_the_first_rounds_order():
    first = _run((_point(0.5, kind="prefill"), _point(0.030), _point(0.050, context=259)))
    second = _run((_point(0.7, kind="prefill"), _point(0.034), _point(0.060, context=259, disturbed="spread")))
    merged = merge_rounds([first, second])
    assert [p.kind for p in merged.points] == ["prefill", "decode", "decode"]
    assert [p.seconds for p in merged.points] == pytest.approx([0.6, 0.032, 0.050])
    assert [p.repeats for p in merged.points] == [2, 2, 1]
    assert merged.notes[0] == "measured on a random-weight GGUF"
    assert "2 rounds" in merged.notes[-1] and "1 disturbed round of a point left out" in merged.notes[-1]
    assert merge_rounds([first]) is first
    clean = merge_rounds([first, _run((_point(0.7, kind="prefill"), _point(0.034), _point(0.060, context=259)))])
    assert clean.notes[-1].endswith("a point is the mean of its rounds")


def test_rounds_with_different_settings_are_refused():
    other = EngineSettings(engine="llama.cpp", version="b6000", threads=1)
    with pytest.raises(MeasurementError, match="different settings"):
        merge_rounds([_run((_point(0.03),)), _run((_point(0.03),), other)])
