"""From a Hugging Face config.json to the tensor table a conversion to GGUF would produce,
named as llama.cpp names tensors and shaped in ggml order (row length first).

Only the readers (this module, hf.py and hf_build.py) know config.json spellings."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rooflab.core.errors import SpecError
from rooflab.core.io.textfile import printable, shown


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """One tensor to be: llama.cpp name and ggml shape."""

    name: str
    shape: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HFShape:
    """The normalised hyper-parameters rooflab needs from a config."""

    model_type: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    ffn: int
    vocab: int
    tied: bool
    experts: int = 0
    experts_used: int = 0
    expert_ffn: int = 0
    shared_ffn: int = 0            # total width of shared experts (0 = none)
    dense_layers: frozenset[int] = frozenset()   # MoE models: layers with a dense FFN
    sliding_window: int = 0
    layer_types: tuple[str, ...] = ()
    use_sliding: bool = True
    context_length: int = 0
    attention_bias: bool = False
    qk_norm: bool = False
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    rope_dim: int = 0
    nope_dim: int = 0
    post_norms: bool = False       # gemma: norms after attention and FFN as well
    fused_qkv: bool = False        # phi3
    expert_bias: bool = False      # gpt-oss
    attention_sinks: bool = False  # gpt-oss
    router_bias: bool = False      # gpt-oss router bias, deepseek-v3 / glm4_moe exp_probs_b
    rope_freqs: bool = False       # llama 3 rope scaling stores its frequencies
    ffn_widths: tuple[int, ...] = ()   # one FFN width a layer, when the config lists them (gemma3n)
    per_layer_input: int = 0       # gemma3n: width of a layer's per-layer embedding input (0: none)
    altup_inputs: int = 0          # gemma3n: AltUp's parallel streams of the hidden state
    laurel_rank: int = 0           # gemma3n: rank of LAuReL's low-rank residual
    kv_shared_layers: int = 0      # gemma3n: the last layers, which attend to an earlier layer's cache


MAX_LAYERS = 10_000
MAX_WIDTH = 1 << 24          # hidden, FFN and vocabulary sizes: the largest real ones are near 2**18
MAX_HEADS = 1 << 14
MAX_EXPERTS = 1 << 16
MAX_FIELD = 1 << 40          # any other count (context length, window)


def _int(cfg: Mapping[str, Any], *keys: str, default: int | None = None, low: int = 0,
         high: int = MAX_FIELD) -> int:
    """The first of ``keys`` present (not null) as a whole number in [low, high]."""
    for key in keys:
        value = cfg.get(key)
        if value is not None:
            if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or value != int(value)):
                raise SpecError(f"config field {key!r} must be an integer, got {shown(value)}")
            if not low <= value <= high:
                raise SpecError(f"config field {key!r} is out of range: {shown(value)} (expected {low:,} to {high:,})")
            return int(value)
    if default is None:
        raise SpecError(f"config has none of the fields {', '.join(keys)}")
    return default


def _model_type(cfg: Mapping[str, Any]) -> str:
    """model_type, else the first of ``architectures`` ("Qwen3ForCausalLM"), lower-cased."""
    model_type = cfg.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise SpecError(f"config field 'model_type' must be a name, got {shown(model_type)}")
    if model_type:
        return printable(model_type.lower(), 100)
    archs = cfg.get("architectures")
    if archs is None:
        return "unknown"
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise SpecError(f"config field 'architectures' must be a list of names, got {shown(archs)}")
    return printable(archs[0].lower(), 100) if archs else "unknown"


def _layer_list(cfg: Mapping[str, Any], key: str, layers: int) -> list[int]:
    """A list of layer numbers (mlp_only_layers), each in [0, layers)."""
    value = cfg.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(_is_int(x) and 0 <= x < layers for x in value):
        raise SpecError(f"config field {key!r} must be a list of layer numbers below {layers}, got {shown(value)}")
    return [int(x) for x in value]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _layer_types(cfg: Mapping[str, Any], layers: int) -> tuple[str, ...]:
    value = cfg.get("layer_types")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise SpecError(f"config field 'layer_types' must be a list of names, got {shown(value)}")
    if value and len(value) != layers:
        raise SpecError(f"config: layer_types has {len(value)} entries for {layers} layers")
    return tuple(value)


def _window(cfg: Mapping[str, Any]) -> int:
    """sliding_window in tokens; 0 when absent, null, false or not a number (configs use all
    of these for "none")."""
    value = cfg.get("sliding_window")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return 0
    return _int(cfg, "sliding_window")


def _dense_layers(cfg: Mapping[str, Any], layers: int, step_key: str = "decoder_sparse_step") -> frozenset[int]:
    """MoE layers with a dense FFN: the first k (first_k_dense_replace), mlp_only_layers, and
    those off the ``step_key`` step (qwen's decoder_sparse_step, Llama 4's
    interleave_moe_layer_step). Counts are capped by the layer count, so a huge k costs nothing."""
    first_dense = min(_int(cfg, "first_k_dense_replace", default=0), layers)
    dense = set(range(first_dense))
    dense.update(_layer_list(cfg, "mlp_only_layers", layers))
    step = _int(cfg, step_key, default=1) or 1
    if step > 1:
        dense.update(i for i in range(layers) if (i + 1) % step)
    return frozenset(dense)


def _attention_counts(cfg: Mapping[str, Any], hidden: int, heads: int) -> tuple[int, int]:
    """(kv_heads, head_dim), checked: 1 <= kv_heads <= heads, kv_heads divides heads (grouped
    query attention shares each KV head among heads / kv_heads query heads), head_dim >= 1."""
    kv_heads = _int(cfg, "num_key_value_heads", "n_head_kv", default=heads, high=MAX_HEADS)
    if not 1 <= kv_heads <= heads or heads % kv_heads:
        raise SpecError(f"config: num_key_value_heads {kv_heads} must be between 1 and num_attention_heads "
                        f"{heads} and divide it")
    head_dim = _int(cfg, "head_dim", default=hidden // heads, high=MAX_WIDTH)
    if head_dim < 1:
        raise SpecError(f"config: head_dim must be >= 1, got {head_dim} (hidden_size {hidden}, {heads} heads)")
    return kv_heads, head_dim


def normalise(raw: Mapping[str, Any]) -> HFShape:
    """Read the fields that decide tensor shapes, whatever the architecture calls them."""
    cfg: dict[str, Any] = dict(raw)
    if isinstance(cfg.get("text_config"), Mapping):       # multimodal wrappers (gemma3, ...)
        merged = dict(cfg["text_config"])
        merged.setdefault("model_type", cfg.get("model_type", ""))
        merged.setdefault("tie_word_embeddings", cfg.get("tie_word_embeddings"))
        cfg = merged
    model_type = _model_type(cfg)
    hidden = _int(cfg, "hidden_size", "n_embd", "d_model")
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(cfg, "num_attention_heads", "n_head")
    if not hidden or not layers or not heads:
        raise SpecError("config: hidden_size, num_hidden_layers and num_attention_heads must be > 0")
    if layers > MAX_LAYERS or hidden > MAX_WIDTH or heads > MAX_HEADS:
        raise SpecError("config: layer, hidden or head count is implausibly large")
    kv_heads, head_dim = _attention_counts(cfg, hidden, heads)
    is_deepseek = model_type.startswith("deepseek")
    experts = _int(cfg, "num_experts", "num_local_experts", "n_routed_experts", default=0, high=MAX_EXPERTS)
    experts_used = _int(cfg, "num_experts_per_tok", "experts_per_token", "num_experts_per_token",
                        default=0, high=experts) if experts else 0
    ffn_widths = _ffn_widths(cfg, layers)
    ffn = max(ffn_widths) if ffn_widths else _int(cfg, "intermediate_size", "n_inner", "ffn_dim", default=4 * hidden,
                                                  high=MAX_WIDTH)
    expert_ffn = _int(cfg, "moe_intermediate_size", default=ffn, high=MAX_WIDTH) if experts else 0
    shared_ffn = 0
    llama4 = model_type.startswith("llama4") and experts > 0
    if llama4:
        # Llama 4: intermediate_size is each expert's (and the one shared expert's) width, the
        # dense layers between MoE layers (interleave_moe_layer_step) are intermediate_size_mlp wide
        expert_ffn = shared_ffn = ffn
        ffn = _int(cfg, "intermediate_size_mlp", default=ffn, high=MAX_WIDTH)
    elif experts:
        shared_ffn = _int(cfg, "shared_expert_intermediate_size", default=0, high=MAX_WIDTH)
        if not shared_ffn and cfg.get("n_shared_experts"):
            shared_ffn = _int(cfg, "n_shared_experts", high=MAX_EXPERTS) * expert_ffn
    vocab = _int(cfg, "vocab_size", "n_vocab", low=1, high=MAX_WIDTH)
    gemma3n = _gemma3n_fields(cfg, layers) if model_type.startswith("gemma3n") else {}
    if gemma3n:
        # the GGUF's token_embd and per_layer_token_embd share one row count, the tokenizer's
        # 262,144 tokens (vocab_size's 256 more are audio and image soft tokens)
        vocab = _int(cfg, "vocab_size_per_layer_input", default=vocab, low=1, high=MAX_WIDTH)
    rope = cfg.get("rope_scaling") or {}
    rope_type = str(rope.get("rope_type") or rope.get("type") or "") if isinstance(rope, Mapping) else ""
    tied_default = model_type.startswith("gemma")
    tied = cfg.get("tie_word_embeddings")
    use_sliding = cfg.get("use_sliding_window")
    return HFShape(
        model_type=model_type, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=head_dim, v_head_dim=_int(cfg, "v_head_dim", default=head_dim, high=MAX_WIDTH),
        ffn=ffn, vocab=vocab,
        tied=tied_default if tied is None else bool(tied),
        experts=experts, experts_used=experts_used, expert_ffn=expert_ffn, shared_ffn=shared_ffn,
        dense_layers=_dense_layers(cfg, layers, "interleave_moe_layer_step" if llama4 else "decoder_sparse_step")
        if experts else frozenset(),
        sliding_window=_window(cfg), layer_types=_layer_types(cfg, layers),
        use_sliding=True if use_sliding is None else bool(use_sliding),
        context_length=_int(cfg, "max_position_embeddings", "n_positions", "seq_length", default=0),
        attention_bias=bool(cfg.get("attention_bias", model_type in ("qwen2", "qwen2_moe"))),
        qk_norm=model_type in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text", "gemma3n", "gemma3n_text", "olmo2")
        or (model_type == "glm4_moe" and bool(cfg.get("use_qk_norm"))),
        kv_lora_rank=_int(cfg, "kv_lora_rank", default=0, high=MAX_WIDTH) if is_deepseek else 0,
        q_lora_rank=_int(cfg, "q_lora_rank", default=0, high=MAX_WIDTH) if is_deepseek else 0,
        rope_dim=_int(cfg, "qk_rope_head_dim", default=0, high=MAX_WIDTH) if is_deepseek else 0,
        nope_dim=_int(cfg, "qk_nope_head_dim", default=0, high=MAX_WIDTH) if is_deepseek else 0,
        post_norms=model_type.startswith("gemma2") or model_type.startswith("gemma3"),
        fused_qkv=model_type == "phi3",
        expert_bias=model_type == "gpt_oss", attention_sinks=model_type == "gpt_oss",
        # glm4_moe routes like deepseek-v3 (a score-correction bias) without saying so
        router_bias=model_type in ("gpt_oss", "glm4_moe") or cfg.get("topk_method") == "noaux_tc",
        rope_freqs=rope_type == "llama3",
        ffn_widths=ffn_widths,
        **gemma3n,
    )


def _ffn_widths(cfg: Mapping[str, Any], layers: int) -> tuple[int, ...]:
    """One feed-forward width a layer when ``intermediate_size`` is a list (Gemma 3n's configs,
    MatFormer slices of it), else ()."""
    value = cfg.get("intermediate_size")
    if not isinstance(value, list):
        return ()
    if len(value) != layers or not all(_is_int(x) and 1 <= x <= MAX_WIDTH for x in value):
        raise SpecError(f"config field 'intermediate_size' must be one width from 1 to {MAX_WIDTH:,} for each "
                        f"of the {layers} layers, got {shown(value)}")
    return tuple(int(x) for x in value)


def _gemma3n_fields(cfg: Mapping[str, Any], layers: int) -> dict[str, int]:
    """Gemma 3n's per-layer embedding width, AltUp streams, LAuReL rank and KV-shared layers
    (Gemma3nTextConfig's defaults where a field is absent: 256, 4, 64, 0)."""
    shared = _int(cfg, "num_kv_shared_layers", default=0, high=max(layers - 1, 0))
    return {"per_layer_input": _int(cfg, "hidden_size_per_layer_input", default=256, low=1, high=MAX_WIDTH),
            "altup_inputs": _int(cfg, "altup_num_inputs", default=4, low=2, high=MAX_HEADS),
            "laurel_rank": _int(cfg, "laurel_rank", default=64, low=1, high=MAX_WIDTH),
            "kv_shared_layers": shared}


def _linear(name: str, n_in: int, n_out: int, bias: bool = False) -> list[Shape]:
    out = [Shape(name=f"{name}.weight", shape=(n_in, n_out))]
    if bias:
        out.append(Shape(name=f"{name}.bias", shape=(n_out,)))
    return out


def _vector(name: str, n: int) -> Shape:
    return Shape(name=name, shape=(n,))


def _attention(s: HFShape, p: str) -> list[Shape]:
    h = s.hidden
    if s.kv_lora_rank:          # MLA (deepseek2/3)
        qk = s.nope_dim + s.rope_dim
        out: list[Shape] = []
        if s.q_lora_rank:
            out += _linear(f"{p}.attn_q_a", h, s.q_lora_rank)
            out.append(_vector(f"{p}.attn_q_a_norm.weight", s.q_lora_rank))
            out += _linear(f"{p}.attn_q_b", s.q_lora_rank, s.heads * qk)
        else:
            out += _linear(f"{p}.attn_q", h, s.heads * qk)
        out += _linear(f"{p}.attn_kv_a_mqa", h, s.kv_lora_rank + s.rope_dim)
        out.append(_vector(f"{p}.attn_kv_a_norm.weight", s.kv_lora_rank))
        out += _linear(f"{p}.attn_kv_b", s.kv_lora_rank, s.heads * (s.nope_dim + s.v_head_dim))
        out += _linear(f"{p}.attn_output", s.heads * s.v_head_dim, h)
        return out
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    b = s.attention_bias
    if s.fused_qkv:
        out = _linear(f"{p}.attn_qkv", h, q + 2 * kv, b)
    else:
        out = _linear(f"{p}.attn_q", h, q, b) + _linear(f"{p}.attn_k", h, kv, b) + _linear(f"{p}.attn_v", h, kv, b)
    out += _linear(f"{p}.attn_output", q, h, s.attention_bias and s.model_type == "gpt_oss")
    if s.qk_norm:
        out += [_vector(f"{p}.attn_q_norm.weight", s.head_dim), _vector(f"{p}.attn_k_norm.weight", s.head_dim)]
    if s.attention_sinks:
        out.append(_vector(f"{p}.attn_sinks.weight", s.heads))
    return out


def _feed_forward(s: HFShape, p: str, layer: int) -> list[Shape]:
    h = s.hidden
    if not s.experts or layer in s.dense_layers:
        if s.fused_qkv:         # phi3 fuses gate and up as well
            return _linear(f"{p}.ffn_up", h, 2 * s.ffn) + _linear(f"{p}.ffn_down", s.ffn, h)
        f = s.ffn_widths[layer] if s.ffn_widths else s.ffn
        return _linear(f"{p}.ffn_gate", h, f) + _linear(f"{p}.ffn_up", h, f) + _linear(f"{p}.ffn_down", f, h)
    e, f = s.experts, s.expert_ffn
    out = [Shape(name=f"{p}.ffn_gate_inp.weight", shape=(h, e))]
    if s.router_bias:
        name = f"{p}.ffn_gate_inp.bias" if s.model_type == "gpt_oss" else f"{p}.exp_probs_b.bias"
        out.append(_vector(name, e))
    for part, n_in, n_out in (("gate", h, f), ("up", h, f), ("down", f, h)):
        out.append(Shape(name=f"{p}.ffn_{part}_exps.weight", shape=(n_in, n_out, e)))
        if s.expert_bias:
            out.append(Shape(name=f"{p}.ffn_{part}_exps.bias", shape=(n_out, e)))
    if s.shared_ffn:
        sf = s.shared_ffn
        out += (_linear(f"{p}.ffn_gate_shexp", h, sf) + _linear(f"{p}.ffn_up_shexp", h, sf)
                + _linear(f"{p}.ffn_down_shexp", sf, h))
        if s.model_type == "qwen2_moe":
            out.append(Shape(name=f"{p}.ffn_gate_inp_shexp.weight", shape=(h, 1)))
    return out


def tensor_shapes(s: HFShape) -> list[Shape]:
    """Every tensor of the model, llama.cpp names, ggml shapes."""
    out = [Shape(name="token_embd.weight", shape=(s.hidden, s.vocab))]
    if s.per_layer_input:
        out += _per_layer_inputs(s)
    if s.rope_freqs:
        out.append(_vector("rope_freqs.weight", s.head_dim // 2))
    for layer in range(s.layers):
        p = f"blk.{layer}"
        out.append(_vector(f"{p}.attn_norm.weight", s.hidden))
        out += _attention(s, p)
        if s.post_norms:
            out.append(_vector(f"{p}.post_attention_norm.weight", s.hidden))
        if s.model_type == "gpt_oss":
            out.append(_vector(f"{p}.post_attention_norm.weight", s.hidden))
        else:
            out.append(_vector(f"{p}.ffn_norm.weight", s.hidden))
        out += _feed_forward(s, p, layer)
        if s.post_norms:
            out.append(_vector(f"{p}.post_ffw_norm.weight", s.hidden))
        if s.per_layer_input:
            out += _altup_laurel(s, p)
    out.append(_vector("output_norm.weight", s.hidden))
    if not s.tied:
        out.append(Shape(name="output.weight", shape=(s.hidden, s.vocab)))
    return out


def _per_layer_inputs(s: HFShape) -> list[Shape]:
    """Gemma 3n's model-wide tensors (llama.cpp's LLM_ARCH_GEMMA3N): the per-layer embedding
    (a token's row holds its input to every layer), its projection from the hidden state and
    norm, and AltUp's projections into and out of its extra streams."""
    h, width, streams = s.hidden, s.per_layer_input * s.layers, s.altup_inputs - 1
    return [Shape(name="per_layer_token_embd.weight", shape=(width, s.vocab)),
            *_linear("per_layer_model_proj", h, width), _vector("per_layer_proj_norm.weight", s.per_layer_input),
            Shape(name="altup_proj.weight", shape=(h, h, streams)),
            Shape(name="altup_unembd_proj.weight", shape=(h, h, streams))]


def _altup_laurel(s: HFShape, p: str) -> list[Shape]:
    """A Gemma 3n block's own tensors beside attention and FFN: the per-layer input's gate and
    projection, AltUp's router and coefficients, LAuReL's low-rank pair, and their norms."""
    h, n = s.hidden, s.altup_inputs
    return [*_linear(f"{p}.inp_gate", h, s.per_layer_input), *_linear(f"{p}.proj", s.per_layer_input, h),
            _vector(f"{p}.post_norm.weight", h),
            Shape(name=f"{p}.altup_correct_coef.weight", shape=(n, n)), _vector(f"{p}.altup_correct_scale.weight", h),
            Shape(name=f"{p}.altup_predict_coef.weight", shape=(n, n * n)), *_linear(f"{p}.altup_router", h, n),
            _vector(f"{p}.altup_router_norm.weight", h),
            *_linear(f"{p}.laurel_l", h, s.laurel_rank), *_linear(f"{p}.laurel_r", s.laurel_rank, h),
            _vector(f"{p}.laurel_post_norm.weight", h)]
