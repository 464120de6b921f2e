"""The calibration models: the toys for a first look, and (thorough) models at the sizes and
vocabularies people run, so the fit has seen an output head that is a large share of a small
model's bytes (issue 18)."""

from __future__ import annotations

import pytest

from rooflab.core.calibration.models import LLAMACPP_MODELS, REAL_SIZE_MODELS, calibration_models
from rooflab.core.errors import MeasurementError
from rooflab.core.measure.calibration_run import CalibrationPlan
from rooflab.core.predict.expected import byte_shares


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


def test_the_thorough_set_has_wide_k_quant_multiplies_and_real_size_q8():
    """Issue 18 (bench_unseen_gguf, 2026-12-02): with every K-quant model at most 1,024 wide, a
    2,048-wide Llama-3.2-1B ran its prompts 25 % faster than the calibration expected, relative to
    the calibration's own Qwen3-0.6B. The thorough set has a dense K-quant model as wide as the
    1-4 B models people run, and a real-size model mostly in Q8_0 (Gemma 3 1B's widths fall back
    from K-quants), so neither class rests on toys alone."""
    main = {}
    for m in calibration_models("llamacpp", thorough=True):
        shares = byte_shares(m.spec())
        main[m.key] = (max(shares, key=lambda k: shares[k]), m.spec())
    assert any(c == "k-quant" and not s.is_moe and s.hidden >= 2048 and s.params_total > 1e9 for c, s in main.values())
    assert any(c == "q8" and s.params_total > 0.5e9 for c, s in main.values())


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
