"""The calibration models: the toys for a first look, and (thorough) models at the sizes and
vocabularies people run, so the fit has seen an output head that is a large share of a small
model's bytes (issue 18)."""

from __future__ import annotations

import pytest

from rooflab.core.errors import MeasurementError
from rooflab.core.measure.calibration_models import LLAMACPP_MODELS, REAL_SIZE_MODELS, calibration_models
from rooflab.core.measure.calibration_run import CalibrationPlan


def test_real_size_models_span_the_sizes_vocabularies_and_layouts_people_run():
    specs = {m.key: m.spec() for m in REAL_SIZE_MODELS}
    sizes = sorted(s.params_total for s in specs.values())
    assert 0.3e9 <= sizes[0] <= 1e9 and any(1e9 <= x <= 4e9 for x in sizes)        # a 0.3-1 B and a 1-4 B shape
    assert all(150_000 <= s.vocab <= 262_144 for s in specs.values())
    assert max(s.vocab for s in specs.values()) == 262_144                          # Gemma 3's vocabulary
    assert any(s.is_moe for s in specs.values()) and any(not s.is_moe for s in specs.values())
    assert any(s.attention.sliding_window for s in specs.values())
    # the output head is a large share of a small model's bytes, as in the real ones
    assert specs["qwen3-0.6b-q4_k_m"].head_bytes / specs["qwen3-0.6b-q4_k_m"].weight_bytes > 0.2
    assert all(s.weight_bytes > 300e6 for s in specs.values())                     # far beyond the toys' 40-250 MB


def test_real_size_models_only_in_the_thorough_set():
    assert calibration_models("llamacpp") == LLAMACPP_MODELS
    assert calibration_models("llamacpp", thorough=True) == LLAMACPP_MODELS + REAL_SIZE_MODELS
    real = {m.key for m in REAL_SIZE_MODELS}
    assert {m.key for m in CalibrationPlan(thorough=True).models()} >= real
    assert not {m.key for m in CalibrationPlan(quick=True).models()} & real
    assert not {m.key for m in CalibrationPlan().models()} & real                 # the default set stays small
    assert not {m.key for m in CalibrationPlan(engine="torch", thorough=True).models()} & real
    with pytest.raises(MeasurementError, match="quick or thorough"):
        CalibrationPlan(quick=True, thorough=True)
