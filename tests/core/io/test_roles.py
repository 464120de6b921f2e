"""Tensor names to roles and blocks: one parser for the block index, whichever convention
names the tensor (llama.cpp in GGUF files, Hugging Face in safetensors and torch models)."""

from __future__ import annotations

import pytest

from rooflab.core.io.roles import classify, layer_of
from rooflab.core.values.model import Role


@pytest.mark.parametrize("name, layer", [
    ("blk.12.attn_q.weight", 12),                          # llama.cpp
    ("layers.3.ffn_up.weight", 3),
    ("layer.0.attn_norm.weight", 0),
    ("token_embd.weight", None),
    ("output_norm.weight", None),
    ("model.layers.7.self_attn.q_proj.weight", 7),         # Hugging Face / torch
    ("model.language_model.layers.2.mlp.up_proj.weight", 2),
    ("transformer.h.5.attn.c_attn.weight", 5),
    ("blocks.1.attn.weight", 1),
    ("model.layers.4", 4),
    ("model.embed_tokens.weight", None),
    ("lm_head.weight", None),
    ("model.layers.mlp.weight", None),                     # no index after the list
    ("v.blk.3.attn_q.weight", None),                       # a vision tower's blocks are not the decoder's
])
def test_layer_of_either_convention(name, layer):
    assert layer_of(name) == layer


def test_classify_reads_the_stem_past_the_block():
    assert classify("blk.3.ffn_up_exps.weight") is Role.EXPERTS
    assert classify("blk.3.ffn_up_shexp.weight") is Role.SHARED_EXPERTS
    assert classify("blk.0.ffn_gate_inp.weight") is Role.ROUTER
    assert classify("token_embd.weight") is Role.EMBEDDING
