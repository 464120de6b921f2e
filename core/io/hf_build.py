"""The config.json side of building a transformers model to time: the config a ModelSpec's
tensor table implies (a GGUF file has none), the arguments ``AutoConfig.for_model`` takes, and
a tiny same-depth config for the per-pass overhead probe.

Measurement hands these dicts to transformers without reading them; the spellings stay here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rooflab.core.errors import SpecError
from rooflab.core.io.hf import stored_config
from rooflab.core.values.model import AttentionLayout, ModelSpec, Tensor

# ModelSpec.architecture (GGUF or HF spelling) -> transformers model_type for a dense model
DENSE_TYPES: dict[str, str] = {
    "llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "qwen3": "qwen3", "gemma": "gemma",
    "gemma2": "gemma2", "gemma3": "gemma3_text", "gemma3_text": "gemma3_text", "phi3": "phi3",
    "granite": "granite", "olmo2": "olmo2", "starcoder2": "starcoder2",
}
MOE_TYPES: dict[str, str] = {
    "qwen3moe": "qwen3_moe", "qwen3_moe": "qwen3_moe", "qwen2moe": "qwen2_moe", "qwen2_moe": "qwen2_moe",
    "llama": "mixtral", "mixtral": "mixtral",
}
# bookkeeping keys AutoConfig.for_model does not take as model arguments
_NOT_ARGUMENTS = ("architectures", "transformers_version", "torch_dtype", "dtype", "quantization_config",
                  "auto_map", "_name_or_path")


def config_for_spec(spec: ModelSpec) -> tuple[dict[str, Any], list[str]]:
    """(config dict, notes) for a transformers model shaped like ``spec``: the config.json the
    reader kept when there was one, else one derived from the tensor table (GGUF files)."""
    kept = stored_config(spec)
    return (kept, []) if kept is not None else config_from_tensors(spec)


def _tensor(spec: ModelSpec, suffix: str) -> Tensor | None:
    """The first block tensor whose llama.cpp name ends with ``suffix`` ("ffn_up.weight")."""
    for t in spec.tensors:
        if t.name.endswith(suffix) and t.layer is not None:
            return t
    return None


def _layer_types(layout: AttentionLayout) -> list[str] | None:
    if not any(layout.sliding):
        return None
    return ["sliding_attention" if s else "full_attention" for s in layout.sliding]


def config_from_tensors(spec: ModelSpec) -> tuple[dict[str, Any], list[str]]:
    """(config dict, notes) for a transformers model with ``spec``'s shapes.

    Read from the tensor table (ggml order, row length first): ffn width from ffn_up, expert
    width from ffn_up_exps, shared-expert width from ffn_up_shexp, q bias from its presence.
    Architectures transformers has no class for are built llama-shaped (same matrices, so
    nearly the same time), and the notes say so. SpecError for multi-head latent attention,
    which a tensor table does not describe fully."""
    layout = spec.attention
    if layout.kv_lora_rank:
        raise SpecError(f"{spec.name}: multi-head latent attention cannot be rebuilt from a "
                        "tensor table; measure it from its config.json instead")
    notes: list[str] = []
    model_type = (MOE_TYPES if spec.is_moe else DENSE_TYPES).get(spec.architecture.lower())
    if model_type is None:
        model_type = "mixtral" if spec.is_moe else "llama"
        notes.append(f"architecture {spec.architecture!r} has no transformers class here: "
                     f"timed as a {model_type}-shaped model with the same matrices")
    up = _tensor(spec, "ffn_up.weight") or _tensor(spec, "ffn_gate.weight")
    up_exps = _tensor(spec, "ffn_up_exps.weight") or _tensor(spec, "ffn_gate_exps.weight")
    up_shexp = _tensor(spec, "ffn_up_shexp.weight")
    ffn = up.shape[1] if up is not None else (up_exps.shape[1] if up_exps is not None else 4 * spec.hidden)
    config: dict[str, Any] = {
        "model_type": model_type, "hidden_size": spec.hidden, "num_hidden_layers": spec.layers,
        "num_attention_heads": layout.heads[0], "num_key_value_heads": max(layout.kv_heads[0], 1),
        "head_dim": layout.head_dim_k, "intermediate_size": ffn, "vocab_size": spec.vocab,
        "tie_word_embeddings": spec.tied_embeddings, "max_position_embeddings": max(spec.context_length, 4096),
    }
    if layout.sliding_window:
        config["sliding_window"] = layout.sliding_window
        types = _layer_types(layout)
        if types:
            config["layer_types"] = types
    if spec.is_moe and up_exps is not None:
        expert_ffn = up_exps.shape[1]
        config.update({"num_experts": spec.experts, "num_local_experts": spec.experts,
                       "num_experts_per_tok": spec.experts_used, "moe_intermediate_size": expert_ffn,
                       "decoder_sparse_step": 1, "mlp_only_layers": []})
        if model_type == "mixtral":
            config["intermediate_size"] = expert_ffn
        if up_shexp is not None:
            config["shared_expert_intermediate_size"] = up_shexp.shape[1]
    if model_type == "llama" and _tensor(spec, "attn_q.bias") is not None:
        config["attention_bias"] = True
    if len(set(layout.heads)) > 1 or len(set(layout.kv_heads)) > 1:
        notes.append("per-layer head counts differ: every layer timed with the first layer's")
    return config, notes


def transformers_arguments(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(model_type, keyword arguments) for ``AutoConfig.for_model``: bookkeeping keys dropped,
    and a multimodal wrapper's text model taken out of its ``text_config`` (only the text
    decoder is timed)."""
    raw = {k: v for k, v in config.items() if k not in _NOT_ARGUMENTS}
    if isinstance(raw.get("text_config"), Mapping) and raw.get("model_type") not in DENSE_TYPES.values():
        inner = dict(raw["text_config"])
        inner.setdefault("tie_word_embeddings", raw.get("tie_word_embeddings", True))
        raw = inner
    model_type = str(raw.pop("model_type", "") or "")
    return model_type, raw


def tiny_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The same architecture and depth with every width cut to a few values: its passes cost
    dispatch and per-layer bookkeeping, not bytes or arithmetic."""
    heads = int(config.get("num_attention_heads") or 1)
    tiny = dict(config)
    tiny.update(hidden_size=8 * heads, vocab_size=256)
    if "head_dim" in tiny:
        tiny["head_dim"] = 8
    for key in ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size"):
        if tiny.get(key):
            tiny[key] = 16
    if isinstance(tiny.get("text_config"), Mapping):
        tiny["text_config"] = tiny_config(tiny["text_config"])
    return tiny
