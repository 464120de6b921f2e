"""What measurement hands transformers, built by the readers: a config.json for a tensor table
(a GGUF has none), the arguments AutoConfig takes, and the tiny probe's config. No torch here:
these are dicts, checked field by field."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.errors import SpecError
from rooflab.core.io.hf import StoredTensor, display_name, spec_from_config, spec_from_stored, stored_config
from rooflab.core.io.hf_build import config_for_spec, config_from_tensors, tiny_config, transformers_arguments
from rooflab.core.values.model import AttentionLayout, Role

QWEN3 = {"model_type": "qwen3", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512, "vocab_size": 1024,
         "tie_word_embeddings": True, "torch_dtype": "bfloat16", "_name_or_path": "Qwen/Qwen3-Tiny",
         "architectures": ["Qwen3ForCausalLM"]}


def test_a_config_read_is_the_config_given_back():
    spec = spec_from_config(QWEN3, weights="bf16")
    assert stored_config(spec) == QWEN3
    assert config_for_spec(spec) == (QWEN3, [])
    assert display_name(QWEN3) == spec.name == "Qwen3-Tiny"
    assert display_name({"model_type": "qwen3"}) == "qwen3" and display_name({}) == "config"


def test_a_tensor_table_becomes_a_config(dense_spec, moe_spec):
    assert stored_config(dense_spec) is None
    config, notes = config_for_spec(dense_spec)          # tests/conftest.py build_spec: qwen3, 4 layers
    assert not notes
    assert config == {"model_type": "qwen3", "hidden_size": 256, "num_hidden_layers": 4,
                      "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
                      "intermediate_size": 768, "vocab_size": 1024, "tie_word_embeddings": False,
                      "max_position_embeddings": 4096}
    moe, _ = config_from_tensors(moe_spec)
    assert moe["model_type"] == "qwen3_moe"
    assert (moe["num_experts"], moe["num_experts_per_tok"], moe["moe_intermediate_size"]) == (8, 2, 768)


def test_unknown_architectures_are_built_llama_shaped_and_say_so(dense_spec):
    config, notes = config_from_tensors(dataclasses.replace(dense_spec, architecture="exotic"))
    assert config["model_type"] == "llama" and "exotic" in notes[0]


def test_latent_attention_cannot_be_rebuilt_from_a_table(dense_spec):
    layout = AttentionLayout(heads=(8,) * 4, kv_heads=(1,) * 4, head_dim_k=96, head_dim_v=64, kv_lora_rank=64,
                             rope_dim=32)
    with pytest.raises(SpecError, match="latent attention"):
        config_from_tensors(dataclasses.replace(dense_spec, attention=layout))


def test_transformers_arguments_drop_bookkeeping_and_unwrap_text_models():
    model_type, arguments = transformers_arguments(QWEN3)
    assert model_type == "qwen3"
    assert "model_type" not in arguments and "architectures" not in arguments and "_name_or_path" not in arguments
    assert arguments["hidden_size"] == 256
    wrapped = {"model_type": "gemma3", "tie_word_embeddings": False,
               "text_config": {"model_type": "gemma3_text", "hidden_size": 64}}
    assert transformers_arguments(wrapped) == ("gemma3_text", {"hidden_size": 64, "tie_word_embeddings": False})


def test_tiny_config_keeps_depth_and_cuts_widths():
    tiny = tiny_config({**QWEN3, "text_config": {"num_attention_heads": 2, "intermediate_size": 99}})
    assert tiny["num_hidden_layers"] == 2 and tiny["model_type"] == "qwen3"
    assert (tiny["hidden_size"], tiny["head_dim"], tiny["intermediate_size"], tiny["vocab_size"]) == (32, 8, 16, 256)
    assert tiny["text_config"]["hidden_size"] == 16 and tiny["text_config"]["intermediate_size"] == 16
    assert QWEN3["hidden_size"] == 256                   # the input is left alone


def test_a_stored_table_gets_roles_and_blocks_from_its_names():
    """The path a torch model's parameters take (and a folder's safetensors headers)."""
    stored = [StoredTensor(name="model.embed_tokens.weight", shape=(1024, 256), type_name="BF16", nbytes=1024 * 512),
              StoredTensor(name="model.layers.1.self_attn.q_proj.weight", shape=(256, 256), type_name="BF16",
                           nbytes=256 * 512),
              StoredTensor(name="model.layers.1.mlp.up_proj.weight", shape=(512, 256), type_name="BF16",
                           nbytes=512 * 512),
              StoredTensor(name="model.norm.weight", shape=(256,), type_name="F32", nbytes=1024)]
    spec = spec_from_stored(QWEN3, stored, name="run", source="torch", weights_format="BF16")
    assert [(t.role, t.layer) for t in spec.tensors] == [(Role.EMBEDDING, None), (Role.ATTENTION, 1),
                                                        (Role.FEED_FORWARD, 1), (Role.NORMS, None)]
    assert spec.tensors[2].shape == (256, 512)           # ggml order: row length first
    assert spec.file_bytes == sum(t.nbytes for t in stored) and spec.provenance == "torch"
    assert spec.architecture == "qwen3" and spec.layers == 2
