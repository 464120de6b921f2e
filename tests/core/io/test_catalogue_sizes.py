"""Catalogue entries: the parameter counts rooflab computes from each config.json against the
sizes the model's makers state, and the config spellings of the architectures they need
(deepseek_v3's latent attention, glm4_moe's routing bias).

Counts come from the tensor table ``spec_from_config`` builds, never from the entry itself.
"Active" means what one token multiplies; makers differ on whether they count the embedding
lookup and the output head, so each row says which of rooflab's two figures it compares:
``params_per_token`` (blocks at used/count experts, plus the head) or
``block_params_per_token`` (blocks only)."""

from __future__ import annotations

import pytest

from rooflab.core.io import load_model
from rooflab.core.io.hf import spec_from_config

B = 1e9

# key: (stated total, tolerance, stated active or None, rooflab figure for active, tolerance, source)
STATED: dict[str, tuple[float, float, float | None, str, float, str]] = {
    "qwen3-32b-q4_k_m": (32.8 * B, 0.01, 31.2 * B, "block_params_per_token", 0.01,
                         "Qwen3-32B model card: 32.8B parameters, 31.2B non-embedding"),
    "qwen3-235b-a22b-q4_k_m": (235 * B, 0.01, 22 * B, "params_per_token", 0.05,
                               "Qwen3-235B-A22B model card: 235B total, 22B activated"),
    "llama-3.3-70b-q4_k_m": (70_553_706_496, 1e-6, None, "", 0.0,
                             "Llama-3.3-70B-Instruct model.safetensors.index.json: total_size 141,107,412,992 bytes "
                             "of BF16 = 70,553,706,496 parameters (rooflab adds llama.cpp's 64-value rope_freqs)"),
    "gpt-oss-20b-mxfp4": (20.9 * B, 0.01, 3.6 * B, "params_per_token", 0.02,
                          "OpenAI gpt-oss model card: 20.9B total, 3.6B active per token"),
    "deepseek-v3-q4_k_m": (671 * B, 0.005, 37 * B, "params_per_token", 0.05,
                           "DeepSeek-V3 technical report: 671B total, 37B activated (multi-token-prediction "
                           "module not counted)"),
    "gemma-3-27b-q4_k_m": ((1416 + 25600) * 1e6, 0.005, 25_600e6, "block_params_per_token", 0.005,
                           "Gemma 3 technical report, table 1: 27B = 1,416M embedding + 25,600M non-embedding "
                           "(the 417M vision encoder is not in the text decoder)"),
    "mistral-small-24b-q4_k_m": (23_572_403_200, 1e-6, None, "", 0.0,
                                 "Mistral Small 3 (24B): text decoder 23,572,403,200 parameters"),
    "glm-4.5-air-q4_k_m": (106 * B, 0.01, 12 * B, "block_params_per_token", 0.05,
                           "GLM-4.5 model card: GLM-4.5-Air 106B total, 12B active (NextN block not counted)"),
}


@pytest.mark.parametrize("key", sorted(STATED))
def test_computed_parameters_match_the_stated_size(key):
    total, rel_total, active, figure, rel_active, source = STATED[key]
    spec = load_model(key)
    rope_freqs = sum(t.params for t in spec.tensors if t.name == "rope_freqs.weight")
    assert spec.params_total - rope_freqs == pytest.approx(total, rel=rel_total), source
    if active is not None:
        assert getattr(spec, figure) == pytest.approx(active, rel=rel_active), source
    if spec.is_moe:                                  # a mixture reads a small part of itself per token
        assert spec.params_per_token < spec.params_total / 4


def test_deepseek_v3_latent_cache_and_routing():
    """MLA: one latent of kv_lora_rank + rope dims per layer (no per-head K/V); noaux_tc routing
    keeps a score-correction bias per MoE layer; the first three layers are dense."""
    spec = load_model("deepseek-v3-q4_k_m")
    assert spec.kv_bytes_per_token("f16") == ((512 + 64) * 61 * 2, 0.0)
    names = {t.name for t in spec.tensors}
    assert {"blk.0.attn_q_a.weight", "blk.0.attn_q_b.weight", "blk.0.attn_kv_a_mqa.weight"} <= names
    assert "blk.2.ffn_up.weight" in names and "blk.2.ffn_up_exps.weight" not in names
    assert {"blk.3.ffn_up_exps.weight", "blk.3.ffn_up_shexp.weight", "blk.3.exp_probs_b.bias"} <= names
    assert "blk.61.attn_norm.weight" not in names           # the MTP layer stays out, as llama.cpp does


def _glm4_moe(**extra: object) -> dict[str, object]:
    return {"model_type": "glm4_moe", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 96, "moe_intermediate_size": 32,
            "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
            "attention_bias": True, "vocab_size": 256, "tie_word_embeddings": False, **extra}


def test_glm4_moe_config_gives_routing_bias_qkv_bias_and_shared_expert():
    names = {t.name for t in spec_from_config(_glm4_moe(use_qk_norm=False)).tensors}
    assert {"blk.1.exp_probs_b.bias", "blk.1.ffn_up_shexp.weight", "blk.1.attn_q.bias"} <= names
    assert "blk.0.exp_probs_b.bias" not in names and "blk.0.ffn_up.weight" in names       # dense first layer
    assert "blk.1.attn_output.bias" not in names and "blk.1.attn_q_norm.weight" not in names


def test_glm4_moe_qk_norm_follows_use_qk_norm():
    spec = spec_from_config(_glm4_moe(use_qk_norm=True))
    norms = [t for t in spec.tensors if t.name.endswith(("attn_q_norm.weight", "attn_k_norm.weight"))]
    assert len(norms) == 2 * 3 and all(t.shape == (32,) for t in norms)
