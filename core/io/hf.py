"""Hugging Face models: a config.json, or a folder with config.json and *.safetensors.

Shapes come from the config. Bytes come either from a weight format applied per tensor (a
GGUF-style recipe such as q4_k_m, or fp32/bf16/fp16), or, for a folder with safetensors,
exactly from the safetensors headers (no weights are loaded)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rooflab.core.errors import ModelFileError, SpecError
from rooflab.core.files.capped import MissingFileError
from rooflab.core.files.safe_json import JsonError, dumps_json, parse_json, read_json
from rooflab.core.io.arch import default_sliding
from rooflab.core.io.hf_tables import HFShape, normalise, tensor_shapes
from rooflab.core.io.roles import classify, layer_of, unread_kv_projections
from rooflab.core.io.safetensors import StoredTensor as StoredTensor  # re-exported: measure.torch.models builds them
from rooflab.core.io.safetensors import read_safetensors
from rooflab.core.io.textfile import printable, shown
from rooflab.core.values.model import AttentionLayout, ModelSpec, Role, Tensor
from rooflab.core.values.quant import TensorSlot, kept_as_converted, recipe, tensor_bytes, with_mxfp4_experts

MAX_CONFIG_BYTES = 4 << 20          # a config.json is a few KB; refuse anything absurd
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")
CONFIG_KEY = "hf.config_json"       # ModelSpec.metadata entry holding the raw config


def read_config(path: Path) -> dict[str, Any]:
    """Parse a config.json with a size cap; ModelFileError on any problem."""
    data = read_json(path, max_bytes=MAX_CONFIG_BYTES, what="a config.json")
    if not isinstance(data, dict):
        raise ModelFileError(path, "must hold a JSON object")
    return data


def folder_config(folder: Path) -> dict[str, Any]:
    """The config.json of a model folder; ModelFileError when it has none."""
    try:
        return read_config(folder / "config.json")
    except MissingFileError:
        raise ModelFileError(folder, "folder has no config.json") from None


def has_weight_files(folder: Path) -> bool:
    """Whether a model folder holds weights (safetensors, or torch's .bin/.pt)."""
    return any(any(folder.glob(pattern)) for pattern in WEIGHT_FILES)


def stored_config(spec: ModelSpec) -> dict[str, Any] | None:
    """The config.json a spec was read from (kept in its metadata), None when it came from a
    GGUF file or anything else without one."""
    raw = dict(spec.metadata).get(CONFIG_KEY)
    if not raw:
        return None
    try:
        data = parse_json(raw)
    except JsonError:
        return None
    return data if isinstance(data, dict) else None


def _sliding(s: HFShape) -> tuple[tuple[bool, ...], int, list[str]]:
    """(per-layer sliding flags, window, warnings)."""
    if not s.sliding_window or not s.use_sliding:
        return (), 0, []
    if s.layer_types:
        flags = tuple(t in ("sliding_attention", "local_attention", "chunked_attention") for t in s.layer_types)
        return (flags if any(flags) else ()), (s.sliding_window if any(flags) else 0), []
    flags, known = default_sliding(s.model_type, s.layers, s.sliding_window)
    if not known:
        return (), 0, [f"sliding_window {s.sliding_window} given but {s.model_type} has no known "
                       "layer pattern: all layers treated as full attention"]
    return flags, (s.sliding_window if any(flags) else 0), []


def attention_layout(s: HFShape) -> tuple[AttentionLayout, list[str]]:
    flags, window, warnings = _sliding(s)
    # Gemma 3n's last kv_shared_layers layers attend to an earlier layer's cache and hold none
    owners = s.layers - s.kv_shared_layers
    layout = AttentionLayout(
        heads=(s.heads,) * s.layers, kv_heads=tuple(s.kv_heads if i < owners else 0 for i in range(s.layers)),
        read_kv_heads=(s.kv_heads,) * s.layers if s.kv_shared_layers else (),
        head_dim_k=(s.nope_dim + s.rope_dim) if s.kv_lora_rank else s.head_dim,
        head_dim_v=s.v_head_dim, sliding=flags, sliding_window=window,
        kv_lora_rank=s.kv_lora_rank, rope_dim=s.rope_dim,
    )
    return layout, warnings


def display_name(config: Mapping[str, Any], fallback: str = "") -> str:
    """A short name for a config: the last part of its ``_name_or_path``, else ``fallback``,
    else its model type."""
    fallback = printable(fallback or config.get("model_type") or "config")
    name = config.get("_name_or_path") or fallback
    return printable(str(name).rstrip("/").split("/")[-1]) or fallback


def published_mxfp4_experts(config: Mapping[str, Any]) -> bool:
    """Whether the checkpoint's routed experts are published in MXFP4 (its
    ``quantization_config.quant_method``, or gpt-oss, whose every release is)."""
    quant = config.get("quantization_config")
    if isinstance(quant, Mapping) and str(quant.get("quant_method", "")).lower() == "mxfp4":
        return True
    return str(config.get("model_type", "")).lower() == "gpt_oss"


def spec_from_config(config: Mapping[str, Any], *, weights: str = "bf16", name: str = "",
                     source: str = "", header_bytes: int = 0, provenance: str = "") -> ModelSpec:
    """The tensor table a conversion of ``config`` to ``weights`` would have.

    ``weights`` is a recipe name (fp32, bf16, fp16, q8_0, q4_k_m, mxfp4, ...). ``header_bytes``
    is added to the file size (a GGUF's metadata and tokenizer)."""
    s = normalise(config)
    pick = kept_as_converted(recipe(weights))
    if published_mxfp4_experts(config):
        pick = with_mxfp4_experts(pick)
    tensors = []
    shapes = tensor_shapes(s)
    # llama.cpp quantises a tied embedding as the output head it also is (Q6_K in the *_K mixes)
    head_role = "output" if not any(shape.name == "output.weight" for shape in shapes) else None
    for shape in shapes:
        role = classify(shape.name)
        layer = layer_of(shape.name)
        picked_as = head_role if head_role and shape.name == "token_embd.weight" else role.value
        slot = TensorSlot(name=shape.name, role=picked_as, n_dims=len(shape.shape), layer=layer,
                          n_layers=s.layers, row_length=shape.shape[0])
        type_name = pick(slot)
        n = math.prod(shape.shape)
        tensors.append(Tensor(name=shape.name, shape=shape.shape, type_name=type_name,
                              nbytes=tensor_bytes(type_name, n), role=role, layer=layer))
    layout, warnings = attention_layout(s)
    if s.kv_shared_layers:
        tensors = list(unread_kv_projections(tensors, s.layers - s.kv_shared_layers))
    weight_bytes = sum(t.nbytes for t in tensors)
    return ModelSpec(
        name=name or display_name(config, s.model_type), architecture=s.model_type,
        source=source, tensors=tuple(tensors), attention=layout, hidden=s.hidden, vocab=s.vocab,
        file_bytes=weight_bytes + header_bytes, experts=s.experts, experts_used=s.experts_used,
        shared_experts=1 if s.shared_ffn else 0, context_length=s.context_length,
        weights_format=weights.upper(), warnings=tuple(warnings), provenance=provenance or source,
        metadata=_config_metadata(config),
    )


def _config_metadata(config: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Small scalar fields for display, plus the raw config (JSON) for builders of torch models."""
    items = [(printable(k), shown(v, 200)) for k, v in config.items() if isinstance(v, (int, float, str, bool))]
    items.append((CONFIG_KEY, dumps_json(config, sort_keys=True)))
    return tuple(items)


# --- safetensors ------------------------------------------------------------------------------

_HF_ROLE_HINTS: tuple[tuple[str, Role], ...] = (
    ("embed_tokens_per_layer", Role.PER_LAYER_EMBEDDING),
    ("embed_tokens", Role.EMBEDDING), ("wte", Role.EMBEDDING), ("word_embeddings", Role.EMBEDDING),
    ("lm_head", Role.OUTPUT), ("norm", Role.NORMS), ("shared_expert", Role.SHARED_EXPERTS),
    (".experts.", Role.EXPERTS), ("mlp.gate.", Role.ROUTER), ("router", Role.ROUTER),
    ("self_attn", Role.ATTENTION), ("attention", Role.ATTENTION), ("attn", Role.ATTENTION),
    ("mlp", Role.FEED_FORWARD), ("feed_forward", Role.FEED_FORWARD),
)


def classify_hf(name: str) -> Role:
    """Role of a tensor from its Hugging Face name (model.layers.3.self_attn.q_proj.weight)."""
    for hint, role in _HF_ROLE_HINTS:
        if hint in name:
            return role
    return Role.OTHER


def spec_from_folder(folder: Path, *, weights: str | None = None) -> ModelSpec:
    """A model folder: config.json for shapes; exact bytes from *.safetensors headers when
    present and no ``weights`` format is asked for, else the format's recipe."""
    config = folder_config(folder)
    files = sorted(folder.glob("*.safetensors"))
    try:
        if weights or not files:
            return spec_from_config(config, weights=weights or config_weights(config), source=str(folder),
                                    name=folder.name)
        return _spec_from_safetensors(folder, config, files)
    except SpecError as exc:
        raise ModelFileError(folder / "config.json", str(exc)) from exc


def config_weights(config: Mapping[str, Any]) -> str:
    """The weight format a config's own ``torch_dtype`` names (fp32, fp16, bf16)."""
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    return {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(dtype, "bf16")


def spec_from_stored(config: Mapping[str, Any], stored: Iterable[StoredTensor], *, name: str, source: str,
                     weights_format: str, file_bytes: int | None = None, warnings: Iterable[str] = (),
                     provenance: str = "", metadata: tuple[tuple[str, str], ...] = ()) -> ModelSpec:
    """The ModelSpec of a stored tensor table (safetensors headers, or a torch model's
    parameters): roles and blocks from the names, attention and experts from ``config``.
    ``file_bytes`` defaults to the tensors' bytes."""
    s = normalise(config)
    tensors = tuple(Tensor(name=t.name, shape=tuple(reversed(t.shape)) or (1,), type_name=t.type_name,
                           nbytes=t.nbytes, role=classify_hf(t.name), layer=layer_of(t.name)) for t in stored)
    layout, more = attention_layout(s)
    return ModelSpec(
        name=name, architecture=s.model_type, source=source, tensors=tensors, attention=layout, hidden=s.hidden,
        vocab=s.vocab, file_bytes=sum(t.nbytes for t in tensors) if file_bytes is None else file_bytes,
        experts=s.experts, experts_used=s.experts_used, shared_experts=1 if s.shared_ffn else 0,
        context_length=s.context_length, weights_format=weights_format, warnings=(*warnings, *more),
        provenance=provenance or source, metadata=metadata,
    )


def _spec_from_safetensors(folder: Path, config: Mapping[str, Any], files: list[Path]) -> ModelSpec:
    return spec_from_safetensors_tables(config, [read_safetensors(path) for path in files], name=folder.name,
                                        source=str(folder), file_bytes=sum(p.stat().st_size for p in files))


def spec_from_safetensors_tables(config: Mapping[str, Any], tables: Iterable[list[StoredTensor]], *, name: str,
                                 source: str, file_bytes: int) -> ModelSpec:
    """A model stored as safetensors files, from each file's tensor table (read from disk or by
    range requests): exact bytes per tensor, shapes of attention and experts from ``config``."""
    stored: list[StoredTensor] = []
    seen: set[str] = set()
    for table in tables:
        for tensor in table:
            if tensor.name not in seen:
                seen.add(tensor.name)
                stored.append(tensor)
    if not stored:
        raise ModelFileError(source, "safetensors files hold no tensors")
    dtypes = sorted({t.type_name for t in stored})
    warnings = []
    if set(dtypes) & {"U8", "I8", "U32", "I32"} and any(classify_hf(t.name) is Role.EXPERTS for t in stored):
        warnings.append("packed quantised tensors: parameter counts are of stored elements, bytes are exact")
    return spec_from_stored(config, stored, name=name, source=source,
                            weights_format="safetensors (" + ", ".join(dtypes) + ")",
                            file_bytes=file_bytes, warnings=warnings, metadata=_config_metadata(config))


def load_config_file(path: Path, *, weights: str | None = None) -> ModelSpec:
    """A bare config.json: shapes from it, bytes from ``weights`` (default: its torch_dtype)."""
    config = read_config(path)
    try:
        return spec_from_config(config, weights=weights or config_weights(config), source=str(path),
                                name=display_name(config, path.parent.name or path.stem))
    except SpecError as exc:
        raise ModelFileError(path, str(exc)) from exc
