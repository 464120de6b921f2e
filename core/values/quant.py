"""Storage types: exact bytes of every ggml tensor type, KV-cache element sizes, and
per-tensor quantisation recipes (which type a llama.cpp-style quantiser gives each tensor).

Sizes come from the ``gguf`` package's own table, so a type added there is known here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from rooflab.core.errors import SpecError


@cache
def type_by_name(name: str) -> GGMLQuantizationType:
    """The ggml type called ``name`` (case-insensitive: "q4_k", "Q4_K", "bf16")."""
    try:
        return GGMLQuantizationType[name.upper()]
    except KeyError:
        known = ", ".join(t.name for t in GGMLQuantizationType)
        raise SpecError(f"unknown tensor type {name!r} (known: {known})") from None


def block_size(type_name: str) -> tuple[int, int]:
    """(values per block, bytes per block) of a ggml type."""
    return GGML_QUANT_SIZES[type_by_name(type_name)]


def tensor_bytes(type_name: str, n_values: int, row_length: int | None = None) -> int:
    """Exact bytes of a tensor of ``n_values`` values stored as ``type_name``.

    ggml quantises along rows; a row length that is not a multiple of the block is invalid
    in a real file, so it is rejected rather than rounded.
    """
    per_block, nbytes = block_size(type_name)
    if row_length is not None and row_length % per_block:
        raise SpecError(f"{type_name}: row of {row_length} values is not a multiple of {per_block}")
    if n_values % per_block:
        raise SpecError(f"{type_name}: {n_values} values is not a multiple of {per_block}")
    return n_values // per_block * nbytes


def bytes_per_value(type_name: str) -> float:
    """Average bytes per stored value, scales included (Q4_K: 144/256 = 0.5625)."""
    per_block, nbytes = block_size(type_name)
    return nbytes / per_block


# KV-cache element types llama.cpp accepts for --cache-type-k/-v (plus f32 for torch).
KV_TYPES: tuple[str, ...] = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")


def kv_bytes_per_value(kv_type: str) -> float:
    """Bytes one cached key or value element takes for a KV-cache type name."""
    if kv_type.lower() not in KV_TYPES:
        raise SpecError(f"kv cache type {kv_type!r} is not one of {', '.join(KV_TYPES)}")
    return bytes_per_value(kv_type)


# --- recipes ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class TensorSlot:
    """What a recipe needs to know about one tensor to pick its type."""

    name: str          # llama.cpp-style name, e.g. "blk.3.attn_v.weight"
    role: str          # a Role value
    n_dims: int
    layer: int | None
    n_layers: int
    row_length: int


Recipe = Callable[[TensorSlot], str]


def _use_more_bits(layer: int, n_layers: int) -> bool:
    """llama.cpp's rule for which layers get the larger type in *_M mixes:
    the first and last eighth, and every third layer in between."""
    eighth = n_layers // 8
    return layer < eighth or layer >= 7 * n_layers // 8 or (layer - eighth) % 3 == 2


def _kept_float(slot: TensorSlot) -> bool:
    """1-D tensors (norms, biases, sinks), biases of any shape and the MoE router stay F32."""
    return slot.n_dims < 2 or slot.role == "router" or slot.name.endswith(".bias")


def _uniform(type_name: str) -> Recipe:
    def pick(slot: TensorSlot) -> str:
        if _kept_float(slot):
            return "F32"
        return _fallback(type_name, slot)
    return pick


# llama.cpp's types for a row that a k-quant's 256-value blocks do not divide (llama_tensor_get_type)
_ROW_FALLBACK: dict[str, str] = {"Q2_K": "IQ4_NL", "Q3_K": "IQ4_NL", "IQ4_XS": "IQ4_NL", "Q4_K": "Q5_0",
                                 "Q5_K": "Q5_1", "Q6_K": "Q8_0"}


def _fallback(type_name: str, slot: TensorSlot) -> str:
    """A row that does not divide into the type's blocks falls back as llama.cpp does: a
    k-quant to the 32-value type of about its size (Q4_K -> Q5_0, Q6_K -> Q8_0), anything
    still not dividing to F16. (Gemma 3 1B's 1,152-wide rows: its Q4_K_M file is 806 MB,
    not the 1.0 GB that Q8_0 for every such row would make.)"""
    per_block, _ = block_size(type_name)
    if slot.row_length % per_block == 0:
        return type_name
    alt = _ROW_FALLBACK.get(type_name.upper(), "Q8_0")
    return alt if slot.row_length % block_size(alt)[0] == 0 else "F16"


def _k_mix(base: str, more: str, head: str, qkv: str | None = None) -> Recipe:
    """The *_K_M mixes: base type, ``more`` for attn_v / ffn_down in the use_more_bits layers,
    ``head`` for the output head, ``qkv`` for a fused attn_qkv (llama.cpp gives Phi-3's one
    step more in every layer: Q5_K in Q4_K_M, which makes Phi-4's file 9.05 GB, not 8.85)."""
    def pick(slot: TensorSlot) -> str:
        if _kept_float(slot):
            return "F32"
        if slot.role == "output":
            return _fallback(head, slot)
        leaf = slot.name.split(".")[-2] if "." in slot.name else slot.name
        if leaf == "attn_qkv" and qkv:
            return _fallback(qkv, slot)
        if leaf in ("attn_v", "ffn_down", "ffn_down_exps", "ffn_down_shexp", "attn_kv_b") and (
            slot.layer is not None and _use_more_bits(slot.layer, slot.n_layers)
        ):
            return _fallback(more, slot)
        return _fallback(base, slot)
    return pick


def _mxfp4(slot: TensorSlot) -> str:
    """gpt-oss's published layout: routed experts MXFP4, other matrices Q8_0, vectors F32."""
    if _kept_float(slot):
        return "F32"
    if slot.role == "experts" and slot.n_dims >= 2:
        return _fallback("MXFP4", slot)
    return _fallback("Q8_0", slot)


def with_mxfp4_experts(pick: Recipe) -> Recipe:
    """``pick`` for every tensor but the routed experts, which stay MXFP4: a model published with
    MXFP4 experts (gpt-oss) keeps them so in every GGUF the converters write, whatever the
    target format (its "Q4_K_M" and "F16" files are 11-14 GB, not the 22 and 42 GB that
    re-quantised experts would make); only the other matrices take the format."""
    def keep(slot: TensorSlot) -> str:
        if slot.role == "experts" and slot.n_dims >= 2 and not _kept_float(slot):
            return _fallback("MXFP4", slot)
        return pick(slot)
    return keep


# llama.cpp's quantiser leaves these as the converter wrote them ("very small (e.g. 4x4)", "not
# too big": llama-quant.cpp); the converter writes AltUp's coefficient matrices in F32
_NEVER_QUANTISED: tuple[str, ...] = ("altup", "laurel", "per_layer_model_proj")
_CONVERTED_F32: tuple[str, ...] = ("altup_correct_coef", "altup_predict_coef")
_FLOATS = frozenset({"F32", "F16", "BF16"})


def kept_as_converted(pick: Recipe) -> Recipe:
    """``pick`` but for the tensors llama.cpp never quantises (Gemma 3n's AltUp, LAuReL and
    per-layer projection), which keep the converter's type: F32 for AltUp's coefficients, else
    the recipe's own float type or F16 (a BF16 conversion stores the same bytes)."""
    def keep(slot: TensorSlot) -> str:
        if not any(part in slot.name for part in _NEVER_QUANTISED):
            return pick(slot)
        if any(part in slot.name for part in _CONVERTED_F32):
            return "F32"
        chosen = pick(slot)
        return chosen if chosen in _FLOATS else "F16"
    return keep


def _float(type_name: str) -> Recipe:
    def pick(slot: TensorSlot) -> str:
        return "F32" if slot.n_dims < 2 or slot.name.endswith(".bias") else type_name
    return pick


RECIPES: dict[str, Recipe] = {
    "fp32": lambda slot: "F32",
    "fp16": _float("F16"),
    "bf16": _float("BF16"),
    "q8_0": _uniform("Q8_0"),
    "q6_k": _uniform("Q6_K"),
    "q5_k_m": _k_mix("Q5_K", "Q6_K", "Q6_K", qkv="Q6_K"),
    "q4_k_m": _k_mix("Q4_K", "Q6_K", "Q6_K", qkv="Q5_K"),
    "q4_k_s": _k_mix("Q4_K", "Q4_K", "Q6_K"),
    "q4_0": _uniform("Q4_0"),
    "mxfp4": _mxfp4,
}
"""Weight formats for models defined by a config; names as in ``--weights``."""


def recipe(name: str) -> Recipe:
    """The recipe called ``name`` ("q4_k_m", "bf16", ...)."""
    key = name.lower().replace("-", "_")
    key = {"f32": "fp32", "f16": "fp16", "float32": "fp32", "float16": "fp16",
           "bfloat16": "bf16"}.get(key, key)
    try:
        return RECIPES[key]
    except KeyError:
        raise SpecError(f"unknown weight format {name!r} (known: {', '.join(RECIPES)})") from None
