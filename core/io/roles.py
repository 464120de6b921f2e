"""Tensor roles from llama.cpp tensor names (the names GGUF files use and the HF reader builds),
and the block a tensor belongs to, whichever convention names it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from rooflab.core.values.model import Role, Tensor

_LAYER = re.compile(r"^(?:blk|layers?)\.(\d+)\.")
_HF_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)(?:\.|$)")
_EMBEDDING_STEMS = frozenset({"token_embd", "position_embd", "token_types"})
_ROUTER_STEMS = frozenset({"ffn_gate_inp", "exp_probs_b"})


def layer_of(name: str) -> int | None:
    """The block index of a tensor, None for global tensors (embeddings, final norm, output).

    llama.cpp names lead with it ("blk.12.attn_q.weight"); Hugging Face and torch names carry
    it after their block list ("model.layers.12.self_attn.q_proj.weight", "transformer.h.12.",
    "blocks.12.")."""
    match = _LAYER.match(name) or _HF_LAYER.search(name)
    return int(match.group(1)) if match else None


def _stem(name: str) -> str:
    base = _LAYER.sub("", name)
    for suffix in (".weight", ".bias", ".scale", ".weight_scale"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def classify(name: str) -> Role:
    """The role of a tensor from its llama.cpp name.

    token_embd: EMBEDDING (a lookup), per_layer_token_embd: PER_LAYER_EMBEDDING, output: OUTPUT,
    *norm*: NORMS, *_exps: EXPERTS, *_shexp: SHARED_EXPERTS, ffn_gate_inp / exp_probs_b: ROUTER, attn_*: ATTENTION,
    ffn_*: FEED_FORWARD, everything else OTHER (read in full)."""
    stem = _stem(name)
    if stem in _EMBEDDING_STEMS:
        return Role.EMBEDDING
    if stem == "per_layer_token_embd":          # Gemma 3n: a row a token holds every layer's input
        return Role.PER_LAYER_EMBEDDING
    if stem == "output":
        return Role.OUTPUT
    if "norm" in stem:
        return Role.NORMS
    if stem.endswith("_exps") or stem.endswith("_exp") and "shexp" not in stem:
        return Role.EXPERTS
    if "shexp" in stem:
        return Role.SHARED_EXPERTS
    if stem in _ROUTER_STEMS:
        return Role.ROUTER
    if stem.startswith("attn_"):
        return Role.ATTENTION
    if stem.startswith("ffn_"):
        return Role.FEED_FORWARD
    return Role.OTHER


_KV_PROJECTIONS = frozenset({"attn_k", "attn_v"})


def unread_kv_projections(tensors: Iterable[Tensor], owners: int) -> tuple[Tensor, ...]:
    """``tensors`` with the K and V projections of layers ``owners`` on made UNREAD: a layer
    that attends to an earlier layer's cache (Gemma 3n's last ``num_kv_shared_layers``) keeps
    them in the file, and llama.cpp loads them and never multiplies by them."""
    return tuple(dataclasses.replace(t, role=Role.UNREAD)
                 if t.layer is not None and t.layer >= owners and _stem(t.name) in _KV_PROJECTIONS else t
                 for t in tensors)
