"""Writing GGUF: the metadata llama.cpp needs to load a model of a ``ModelSpec``'s shape, a
minimal vocabulary, and the binary header (keys, tensor infos, alignment) in front of the
tensor data. The writer's twin of ``gguf.py``: the only other module that spells GGUF keys.

Tensor data is not written here: ``header_bytes`` returns the header and ``data_layout`` the
offset of each tensor, so the caller can stream the data after it (``core.measure.engines.gguf_synth``
writes random weights that way, never holding the file in memory)."""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gguf.constants import (
    GGUF_DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    GGUF_VERSION,
    MODEL_ARCH_NAMES,
    GGUFValueType,
    Keys,
    LlamaFileType,
)

from rooflab.core.errors import SpecError
from rooflab.core.io.arch import llama_cpp_name
from rooflab.core.values.model import ModelSpec, Tensor
from rooflab.core.values.quant import type_by_name

ALIGNMENT = GGUF_DEFAULT_ALIGNMENT          # bytes; what llama.cpp expects when no key says otherwise
MIN_VOCAB = 5                               # <unk>, <s>, </s>, <|endoftext|> and one ordinary token

_LLAMA_CPP_ARCHITECTURES: frozenset[str] = frozenset(MODEL_ARCH_NAMES.values())

_SCALAR_FORMATS: dict[GGUFValueType, str] = {
    GGUFValueType.UINT8: "B", GGUFValueType.INT8: "b", GGUFValueType.UINT16: "H",
    GGUFValueType.INT16: "h", GGUFValueType.UINT32: "I", GGUFValueType.INT32: "i",
    GGUFValueType.FLOAT32: "f", GGUFValueType.BOOL: "?", GGUFValueType.UINT64: "Q",
    GGUFValueType.INT64: "q", GGUFValueType.FLOAT64: "d",
}


@dataclass(frozen=True, slots=True)
class Field:
    """One metadata key with its GGUF value type (llama.cpp checks types strictly: a count
    written as INT64 where it reads UINT32 fails to load). Arrays name their ``item_type``."""

    key: str
    type: GGUFValueType
    value: Any
    item_type: GGUFValueType | None = None


def _u32(key: str, value: int) -> Field:
    return Field(key, GGUFValueType.UINT32, int(value))


def _f32(key: str, value: float) -> Field:
    return Field(key, GGUFValueType.FLOAT32, float(value))


def _per_layer(key: str, values: Sequence[int]) -> Field:
    """One number when every layer agrees, else one INT32 per layer (llama.cpp's
    get_key_or_arr reads either)."""
    if len(set(values)) <= 1:
        return _u32(key, values[0] if values else 0)
    return Field(key, GGUFValueType.ARRAY, [int(v) for v in values], GGUFValueType.INT32)


# --- what llama.cpp needs to know about the model --------------------------------------------

def llama_cpp_architecture(spec: ModelSpec) -> str:
    """The llama.cpp architecture name for ``spec`` ("qwen3_moe" -> "qwen3moe")."""
    arch = llama_cpp_name(spec.architecture)
    if arch not in _LLAMA_CPP_ARCHITECTURES:
        raise SpecError(f"{spec.name}: architecture {spec.architecture!r} is not one llama.cpp knows")
    return arch


def _leaf(name: str) -> str:
    """"ffn_down" from "blk.3.ffn_down.weight"."""
    parts = name.split(".")
    return parts[-2] if len(parts) >= 2 else name


def _widths(spec: ModelSpec, leaf: str) -> dict[int, int]:
    """Per layer, the input width of the ``leaf`` down-projection (its first ggml dimension):
    the feed-forward width, whatever fusing the gate and up projections do."""
    return {t.layer: t.shape[0] for t in spec.tensors if t.layer is not None and _leaf(t.name) == leaf}


def _file_type(weights_format: str) -> int | None:
    """llama.cpp's general.file_type for a weights format name ("Q4_K_M", "bf16", "MXFP4")."""
    name = weights_format.split(" (")[0].upper().removeprefix("MOSTLY ").strip()
    name = {"FP16": "F16", "FP32": "F32", "MXFP4": "MXFP4_MOE"}.get(name, name)
    for candidate in (f"MOSTLY_{name}", f"ALL_{name}"):
        if candidate in LlamaFileType.__members__:
            return int(LlamaFileType[candidate])
    return None


def model_fields(spec: ModelSpec, *, name: str = "") -> list[Field]:
    """The general and ``{arch}.*`` keys llama.cpp's loader reads for ``spec``'s architecture.

    Everything that sizes the work is taken from the spec (widths, heads, head sizes, experts,
    sliding layers); what only changes the numbers computed (rope base, norm epsilon) gets a
    common default. The vocabulary is separate (``vocabulary_fields``)."""
    arch = llama_cpp_architecture(spec)
    att = spec.attention
    if att.kv_lora_rank and any(_leaf(t.name) == "attn_kv_b" for t in spec.tensors):
        raise SpecError("the table has MLA's fused attn_kv_b; llama.cpp now runs only files with it "
                        "split into attn_k_b and attn_v_b")
    llm, attn = Keys.LLM, Keys.Attention
    fields = [
        Field(Keys.General.ARCHITECTURE, GGUFValueType.STRING, arch),
        Field(Keys.General.NAME, GGUFValueType.STRING, name or spec.name),
        _u32(Keys.General.QUANTIZATION_VERSION, 2),
        _u32(llm.CONTEXT_LENGTH.format(arch=arch), spec.context_length or 4096),
        _u32(llm.EMBEDDING_LENGTH.format(arch=arch), spec.hidden),
        _u32(llm.BLOCK_COUNT.format(arch=arch), spec.layers),
        _per_layer(attn.HEAD_COUNT.format(arch=arch), att.heads),
        _per_layer(attn.HEAD_COUNT_KV.format(arch=arch), _kv_heads_written(spec)),
        _f32(attn.LAYERNORM_RMS_EPS.format(arch=arch), 1e-6),
        _f32(attn.LAYERNORM_EPS.format(arch=arch), 1e-5),
        _f32(Keys.Rope.FREQ_BASE.format(arch=arch), 10000.0),
    ]
    file_type = _file_type(spec.weights_format)
    if file_type is not None:
        fields.append(_u32(Keys.General.FILE_TYPE, file_type))
    if att.kv_lora_rank:
        q_rank = next((t.shape[1] for t in spec.tensors if _leaf(t.name) == "attn_q_a" and len(t.shape) > 1), 0)
        fields += [_u32(attn.Q_LORA_RANK.format(arch=arch), q_rank),
                   _u32(attn.KV_LORA_RANK.format(arch=arch), att.kv_lora_rank),
                   _u32(Keys.Rope.DIMENSION_COUNT.format(arch=arch), att.rope_dim),
                   _u32(attn.KEY_LENGTH_MLA.format(arch=arch), att.head_dim_k),
                   _u32(attn.VALUE_LENGTH_MLA.format(arch=arch), att.head_dim_v),
                   _u32(attn.KEY_LENGTH.format(arch=arch), att.kv_lora_rank + att.rope_dim),
                   _u32(attn.VALUE_LENGTH.format(arch=arch), att.kv_lora_rank)]
    else:
        fields += [_u32(attn.KEY_LENGTH.format(arch=arch), att.head_dim_k),
                   _u32(attn.VALUE_LENGTH.format(arch=arch), att.head_dim_v),
                   _u32(Keys.Rope.DIMENSION_COUNT.format(arch=arch), att.head_dim_k)]
    fields += _feed_forward_fields(spec, arch)
    if any(att.sliding):
        fields += [_u32(attn.SLIDING_WINDOW.format(arch=arch), att.sliding_window),
                   Field(attn.SLIDING_WINDOW_PATTERN.format(arch=arch), GGUFValueType.ARRAY,
                         list(att.sliding), GGUFValueType.BOOL)]
    if arch == "gemma3n":
        fields += _gemma3n_fields(spec, arch)
    return fields


def _kv_heads_written(spec: ModelSpec) -> list[int]:
    """Per layer, the KV heads llama.cpp sizes ``attn_k`` by: those the layer's attention reads
    (Gemma 3n's last layers read an earlier layer's cache, yet keep ``attn_k`` and ``attn_v`` in
    the file: llama.cpp loads them and never multiplies by them)."""
    return list(spec.attention.read_kv_heads or spec.attention.kv_heads)


def _gemma3n_fields(spec: ModelSpec, arch: str) -> list[Field]:
    """Gemma 3n's keys: the per-layer input width, AltUp's streams (of which the first is
    active), the layers that read an earlier layer's cache, and the final logit soft cap."""
    llm = Keys.LLM
    per_layer = next((t.shape[1] for t in spec.tensors if _leaf(t.name) == "inp_gate" and len(t.shape) > 1), 0)
    streams = next((t.shape[1] for t in spec.tensors if _leaf(t.name) == "altup_router" and len(t.shape) > 1), 0)
    shared = len(spec.attention.kv_heads) - len(tuple(h for h in spec.attention.kv_heads if h))   # the last layers
    return [_u32(llm.EMBD_LENGTH_PER_LAYER_INP.format(arch=arch), per_layer),
            _u32(llm.ALTUP_NUM_INPUTS.format(arch=arch), streams),
            _u32(llm.ALTUP_ACTIVE_IDX.format(arch=arch), 0),
            _u32(Keys.Attention.SHARED_KV_LAYERS.format(arch=arch), shared),
            _f32(llm.FINAL_LOGIT_SOFTCAPPING.format(arch=arch), 30.0)]


def _feed_forward_fields(spec: ModelSpec, arch: str) -> list[Field]:
    """Dense and expert feed-forward widths, expert counts, leading dense layers."""
    llm = Keys.LLM
    dense, experts, shared = (_widths(spec, "ffn_down"), _widths(spec, "ffn_down_exps"),
                              _widths(spec, "ffn_down_shexp"))
    # converters write the dense width even for all-MoE models; the loader reads it either way
    width = Counter(dense.values()).most_common(1)[0][0] if dense else max(experts.values(), default=0)
    fields = [_u32(llm.FEED_FORWARD_LENGTH.format(arch=arch), width)]
    if spec.experts:
        fields += [_u32(llm.EXPERT_COUNT.format(arch=arch), spec.experts),
                   _u32(llm.EXPERT_USED_COUNT.format(arch=arch), spec.experts_used)]
        if experts:
            fields.append(_u32(llm.EXPERT_FEED_FORWARD_LENGTH.format(arch=arch), max(experts.values())))
        leading = next((i for i in range(spec.layers) if i in experts), 0)
        if leading:
            fields.append(_u32(llm.LEADING_DENSE_BLOCK_COUNT.format(arch=arch), leading))
    if shared:
        fields += [_u32(llm.EXPERT_SHARED_COUNT.format(arch=arch), max(spec.shared_experts, 1)),
                   _u32(llm.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=arch), max(shared.values()))]
    return fields


def vocabulary_rows(spec: ModelSpec) -> int:
    """Tokens the vocabulary must hold: the embedding matrix's rows (llama.cpp checks them)."""
    for t in spec.tensors:
        if t.name == "token_embd.weight" and len(t.shape) >= 2:
            return int(t.shape[1])
    return spec.vocab


def vocabulary_fields(n_tokens: int) -> list[Field]:
    """A SentencePiece-style ("llama") vocabulary of exactly ``n_tokens`` tokens that
    llama.cpp accepts: <unk>, <s>, </s>, <|endoftext|>, the 256 byte tokens as far as they fit, then
    ordinary filler tokens. Enough to load and to feed token ids; not a real tokenizer."""
    if n_tokens < MIN_VOCAB:
        raise SpecError(f"a vocabulary needs at least {MIN_VOCAB} tokens, the model has {n_tokens}")
    tok = Keys.Tokenizer
    # <|endoftext|>: llama.cpp looks it up by name in models called phi-3
    tokens = ["<unk>", "<s>", "</s>", "<|endoftext|>"][:n_tokens]
    types = [2, 3, 3, 3][:n_tokens]              # llama.cpp: 1 normal, 2 unknown, 3 control, 6 byte
    for byte in range(min(256, n_tokens - len(tokens))):
        tokens.append(f"<0x{byte:02X}>")
        types.append(6)
    start = len(tokens)
    tokens += [f"t{i}" for i in range(start, n_tokens)]
    types += [1] * (n_tokens - start)
    return [
        Field(tok.MODEL, GGUFValueType.STRING, "llama"),
        Field(tok.LIST, GGUFValueType.ARRAY, tokens, GGUFValueType.STRING),
        Field(tok.SCORES, GGUFValueType.ARRAY, [0.0] * n_tokens, GGUFValueType.FLOAT32),
        Field(tok.TOKEN_TYPE, GGUFValueType.ARRAY, types, GGUFValueType.INT32),
        _u32(tok.UNK_ID, 0), _u32(tok.BOS_ID, 1), _u32(tok.EOS_ID, 2),
        Field(tok.ADD_BOS, GGUFValueType.BOOL, True),
    ]


# --- the binary header ------------------------------------------------------------------------


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _value(vtype: GGUFValueType, value: Any, item_type: GGUFValueType | None) -> bytes:
    if vtype == GGUFValueType.STRING:
        return _string(str(value))
    if vtype == GGUFValueType.ARRAY:
        if item_type is None or item_type == GGUFValueType.ARRAY:
            raise SpecError("a GGUF array needs a scalar or string item type")
        items = list(value)
        head = struct.pack("<IQ", int(item_type), len(items))
        if item_type == GGUFValueType.STRING:
            return head + b"".join(_string(str(v)) for v in items)
        return head + struct.pack(f"<{len(items)}{_SCALAR_FORMATS[item_type]}", *items)
    return struct.pack("<" + _SCALAR_FORMATS[vtype], value)


def _pad(n: int, alignment: int) -> int:
    return -n % alignment


def data_layout(tensors: Iterable[Tensor], alignment: int = ALIGNMENT) -> tuple[list[int], int]:
    """(offset of each tensor from the start of the data section, bytes of the data section):
    tensors in order, each padded to ``alignment``."""
    offsets, at = [], 0
    for t in tensors:
        offsets.append(at)
        at += t.nbytes + _pad(t.nbytes, alignment)
    return offsets, at


def header_bytes(fields: Sequence[Field], tensors: Sequence[Tensor], alignment: int = ALIGNMENT) -> bytes:
    """Everything in front of the tensor data: magic, version, counts, the key/value pairs,
    the tensor infos (name, ggml shape, type, offset), zero padding to ``alignment``."""
    keys = [f.key for f in fields]
    if len(set(keys)) != len(keys):
        raise SpecError("a GGUF key appears twice: " + ", ".join(sorted(k for k in set(keys) if keys.count(k) > 1)))
    if alignment != GGUF_DEFAULT_ALIGNMENT:
        fields = [*fields, _u32(Keys.General.ALIGNMENT, alignment)]
    parts = [struct.pack("<IIQQ", GGUF_MAGIC, GGUF_VERSION, len(tensors), len(fields))]
    for f in fields:
        parts.append(_string(f.key) + struct.pack("<I", int(f.type)) + _value(f.type, f.value, f.item_type))
    offsets, _ = data_layout(tensors, alignment)
    for t, offset in zip(tensors, offsets, strict=True):
        type_id = int(type_by_name(t.type_name))
        parts.append(_string(t.name) + struct.pack(f"<I{len(t.shape)}QIQ", len(t.shape), *t.shape,
                                                   type_id, offset))
    head = b"".join(parts)
    return head + bytes(_pad(len(head), alignment))
