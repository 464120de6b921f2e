"""The time a torch model measurement should take, said before it starts (no torch needed)."""

from __future__ import annotations

import json

from rooflab.core.io import load_model
from rooflab.core.measure.engines.torch.timing import ModelPlan, estimate_seconds

#: Gemma 3 270M's shape: the model a user found the default sweep estimated at about 700 s for.
GEMMA_270M = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "_name_or_path": "gemma-270m",
              "hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
              "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144, "max_position_embeddings": 32768,
              "sliding_window": 512, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}

#: The Measure tab's quick torch sweep (gui/panels/measure_panel.py SWEEPS["torch"])
QUICK = ModelPlan(prompts=(1, 16, 128), contexts=(64,), batches=(1, 4))


def _spec(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA_270M))
    return load_model(path, weights="fp32")


def test_the_quick_sweep_is_estimated_under_a_minute_and_the_full_one_far_over(tmp_path):
    spec = _spec(tmp_path)
    quick, full = estimate_seconds(spec, QUICK), estimate_seconds(spec, ModelPlan())
    assert 10 < quick < 60
    assert full > 2.5 * quick


def test_the_estimate_grows_with_the_plan(tmp_path):
    spec = _spec(tmp_path)
    base = estimate_seconds(spec, QUICK)
    assert estimate_seconds(spec, ModelPlan(prompts=(1, 16, 128, 512), contexts=(64,), batches=(1, 4))) > base
    assert estimate_seconds(spec, ModelPlan(prompts=(1, 16, 128), contexts=(64,), batches=(1, 4, 8))) > base
    assert estimate_seconds(spec, ModelPlan(prompts=(1, 16, 128), contexts=(64,), batches=(1, 4),
                                            repeats=6, max_repeats=18)) > base
    bf16 = ModelPlan(prompts=(1, 16, 128), contexts=(64,), batches=(1, 4), dtype="bf16")
    assert estimate_seconds(spec, bf16) < base                       # half the bytes to build and stream
    assert estimate_seconds(spec, ModelPlan(device="cuda", prompts=(1,), experiments=("prefill",))) > 0
