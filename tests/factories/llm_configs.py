"""Tiny model configs (config.json dicts, as Hugging Face writes them) and random-weight GGUFs
of them, for tests that run llama.cpp: tens of MB at most, seconds to write and to time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rooflab.core.io.hf import spec_from_config
from rooflab.core.values.model import ModelSpec
from tests.factories.synthetic import write_synthetic_gguf_blocking


def llama_config(**overrides: Any) -> dict[str, Any]:
    """A llama-shaped dense model: 8 layers, hidden 768, 12 heads of 64 (3 KV heads), FFN 2048,
    vocab 8000 (about 64 MB in Q8_0, 38 MB in Q4_K_M)."""
    config: dict[str, Any] = dict(model_type="llama", hidden_size=768, num_hidden_layers=8, num_attention_heads=12,
                                  num_key_value_heads=3, intermediate_size=2048, vocab_size=8000,
                                  max_position_embeddings=4096, tie_word_embeddings=False)
    config.update(overrides)
    return config


def qwen3_moe_config(**overrides: Any) -> dict[str, Any]:
    """A qwen3-moe-shaped mixture of experts: 6 layers, hidden 512, 8 heads of 64 (4 KV heads),
    16 experts of width 256 with 4 used per token, vocab 8000 (about 31 MB in Q4_K_M)."""
    config: dict[str, Any] = dict(model_type="qwen3_moe", hidden_size=512, num_hidden_layers=6, num_attention_heads=8,
                                  num_key_value_heads=4, head_dim=64, intermediate_size=1536,
                                  moe_intermediate_size=256, num_experts=16, num_experts_per_tok=4, vocab_size=8000,
                                  max_position_embeddings=4096, tie_word_embeddings=False)
    config.update(overrides)
    return config


def small_configs() -> dict[str, dict[str, Any]]:
    """One small config per architecture family the GGUF writer is checked against in llama.cpp
    (a few MB each), with the weight format each is written in."""
    base = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=512, vocab_size=1000, max_position_embeddings=2048)
    moe = dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=128)
    extra: dict[str, dict[str, Any]] = {
        "llama": dict(model_type="llama"),
        "mixtral": dict(model_type="mixtral", num_local_experts=8, num_experts_per_tok=2),
        "qwen2": dict(model_type="qwen2"),
        "qwen3": dict(model_type="qwen3", head_dim=128),
        "qwen3_moe": dict(model_type="qwen3_moe", **moe),
        "qwen2_moe": dict(model_type="qwen2_moe", shared_expert_intermediate_size=256, **moe),
        "gemma2": dict(model_type="gemma2", sliding_window=64, head_dim=64),
        "gemma3": dict(model_type="gemma3_text", sliding_window=64, head_dim=64, num_hidden_layers=6),
        "gpt_oss": dict(model_type="gpt_oss", num_local_experts=8, experts_per_token=2, intermediate_size=256,
                        sliding_window=64, attention_bias=True, head_dim=64),
        "phi3": dict(model_type="phi3"),
    }
    return {name: {**base, **more} for name, more in extra.items()}


def weights_for(name: str) -> str:
    """The weight format a small config is written in: gpt-oss as published (MXFP4), others Q4_K_M."""
    return "mxfp4" if name == "gpt_oss" else "q4_k_m"


def spec_of(config: dict[str, Any], weights: str, name: str = "tiny") -> ModelSpec:
    return spec_from_config(config, weights=weights, name=name)


def random_gguf(path: Path, config: dict[str, Any], weights: str, *, seed: int = 0) -> Path:
    """A random-weight GGUF of ``config`` in ``weights`` at ``path``."""
    return write_synthetic_gguf_blocking(spec_of(config, weights, name=path.stem), path, seed=seed)


def gemma3n_layer_types(layers: int) -> list[str]:
    """Gemma 3n's pattern: every fifth layer attends to the whole context, the others slide."""
    return ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(layers)]


def gemma3n_config(*, layers: int, hidden: int, ffn: int, shared: int, heads: int = 8, kv_heads: int = 2,
                   head_dim: int = 256, vocab: int = 262144, window: int = 512,
                   name: str = "google/gemma-3n-E2B-it") -> dict[str, Any]:
    """A config.json as Google publishes Gemma 3n's: a multimodal wrapper whose text_config
    carries the decoder (intermediate_size one width a layer, as the published files list it)."""
    return {
        "model_type": "gemma3n", "architectures": ["Gemma3nForConditionalGeneration"],
        "text_config": {
            "model_type": "gemma3n_text", "hidden_size": hidden, "num_hidden_layers": layers,
            "intermediate_size": [ffn] * layers, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "head_dim": head_dim, "vocab_size": vocab + 256, "vocab_size_per_layer_input": vocab,
            "hidden_size_per_layer_input": 256, "altup_num_inputs": 4, "altup_active_idx": 0, "laurel_rank": 64,
            "num_kv_shared_layers": shared, "sliding_window": window, "layer_types": gemma3n_layer_types(layers),
            "activation_sparsity_pattern": [0.95] * min(10, layers) + [0.0] * max(layers - 10, 0),
            "final_logit_softcapping": 30.0, "max_position_embeddings": 32768,
        },
        "torch_dtype": "bfloat16", "_name_or_path": name,
    }
