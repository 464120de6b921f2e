"""config.json and model folders: shapes from the config, bytes from a recipe or the
safetensors headers, and one-line errors for bad files."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from rooflab.core.errors import ModelFileError, RooflabError
from rooflab.core.io import load_model
from rooflab.core.predict.work import weight_bytes_read_per_token
from rooflab.core.report.tables import grouped_rows
from rooflab.core.values.model import Role

QWEN3_TINY = {"model_type": "qwen3", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512, "vocab_size": 1024,
              "tie_word_embeddings": True, "torch_dtype": "bfloat16"}


def write(tmp_path, config, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


def test_config_json_with_formats(tmp_path):
    path = write(tmp_path, QWEN3_TINY)
    bf16 = load_model(path)
    assert bf16.weights_format == "BF16"
    # embedding 256x1024, per layer q 256x256, k,v 256x128, o 256x256, mlp 3x256x512, norms
    layer = 256 * 256 * 2 + 256 * 128 * 2 + 3 * 256 * 512 + 2 * 256 + 2 * 64
    assert bf16.params_total == 256 * 1024 + 2 * layer + 256
    assert bf16.tied_embeddings
    fp32 = load_model(path, weights="fp32")
    assert fp32.weight_bytes == 4 * fp32.params_total
    q8 = load_model(path, weights="q8_0")
    assert {g.name: g.types for g in q8.groups}[Role.ATTENTION] == ("Q8_0",)
    assert q8.kv_bytes_per_token("f16") == (2 * 2 * 2 * 64 * 2, 0)


def test_qwen3_moe_experts(tmp_path):
    cfg = {**QWEN3_TINY, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2,
           "moe_intermediate_size": 256, "tie_word_embeddings": False}
    spec = load_model(write(tmp_path, cfg), weights="q4_k_m")
    assert spec.experts == 8 and spec.experts_used == 2
    experts = next(r for r in grouped_rows(spec) if r.group.name is Role.EXPERTS)
    assert experts.bytes_read_per_token == experts.group.bytes / 4
    assert Role.ROUTER in {g.name for g in spec.groups}


def test_gemma3_sliding_pattern_from_text_config(tmp_path):
    cfg = {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_size": 256,
           "num_hidden_layers": 12, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64,
           "intermediate_size": 512, "vocab_size": 1024, "sliding_window": 512}}
    spec = load_model(write(tmp_path, cfg))
    assert spec.attention.sliding == tuple(i % 6 != 5 for i in range(12))
    full, window = spec.kv_bytes_per_token()
    assert (full, window) == (2 * 1 * 128 * 2, 10 * 1 * 128 * 2)
    assert spec.tied_embeddings                      # gemma ties by default


def test_qwen2_window_ignored_when_disabled(tmp_path):
    cfg = {**QWEN3_TINY, "model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": False}
    spec = load_model(write(tmp_path, cfg))
    assert spec.attention.sliding_window == 0
    assert any(t.name.endswith("attn_q.bias") for t in spec.tensors)      # qwen2 has q/k/v biases


def test_deepseek_mla_cache(tmp_path):
    cfg = {"model_type": "deepseek_v2", "hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4,
           "kv_lora_rank": 128, "q_lora_rank": None, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64,
           "v_head_dim": 64, "intermediate_size": 512, "moe_intermediate_size": 128, "n_routed_experts": 8,
           "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1, "vocab_size": 512}
    spec = load_model(write(tmp_path, cfg))
    assert spec.kv_bytes_per_token("f16") == (3 * (128 + 32) * 2, 0)
    assert spec.shared_experts == 1
    assert not any(t.role is Role.EXPERTS and t.layer == 0 for t in spec.tensors)   # first layer dense


def test_unknown_architecture_window_warns(tmp_path):
    cfg = {**QWEN3_TINY, "model_type": "mystery", "sliding_window": 128}
    spec = load_model(write(tmp_path, cfg))
    assert spec.warnings and "sliding_window" in spec.warnings[0]


def _write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        raw = array.tobytes()
        header[name] = {"dtype": {"float32": "F32", "float16": "F16"}[str(array.dtype)], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_folder_with_safetensors_exact_bytes(tmp_path):
    write(tmp_path, {**QWEN3_TINY, "num_hidden_layers": 1, "tie_word_embeddings": False})
    tensors = {
        "model.embed_tokens.weight": np.zeros((1024, 256), np.float16),
        "model.layers.0.self_attn.q_proj.weight": np.zeros((256, 256), np.float16),
        "model.layers.0.mlp.up_proj.weight": np.zeros((512, 256), np.float16),
        "model.layers.0.input_layernorm.weight": np.zeros((256,), np.float32),
        "lm_head.weight": np.zeros((1024, 256), np.float16),
    }
    _write_safetensors(tmp_path / "model.safetensors", tensors)
    spec = load_model(tmp_path)
    assert spec.weight_bytes == sum(a.nbytes for a in tensors.values())
    assert spec.file_bytes == (tmp_path / "model.safetensors").stat().st_size
    assert spec.embedding_row_bytes == 256 * 2
    assert weight_bytes_read_per_token(spec) == spec.weight_bytes - 1024 * 256 * 2 + 512
    assert "F16" in spec.weights_format
    # --weights overrides the files with a recipe
    assert load_model(tmp_path, weights="q8_0").weights_format == "Q8_0"


@pytest.mark.parametrize("content, reason", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"model_type": "llama"}', "none of the fields"),
    ('{"hidden_size": 64, "num_hidden_layers": -2, "num_attention_heads": 4, "vocab_size": 10}', "out of range"),
    ('{"hidden_size": 64, "num_hidden_layers": 1e9, "num_attention_heads": 4, "vocab_size": 10}', "implausibly"),
    ('{"hidden_size": "big", "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10}', "integer"),
])
def test_bad_config_is_one_line(tmp_path, content, reason):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(ModelFileError) as info:
        load_model(path)
    message = str(info.value)
    assert str(path) in message and reason in message and "\n" not in message


def test_bad_safetensors_header(tmp_path):
    write(tmp_path, QWEN3_TINY)
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(ModelFileError, match="past the end"):
        load_model(tmp_path)


def test_missing_things(tmp_path):
    with pytest.raises(ModelFileError, match="no config.json"):
        load_model(tmp_path)
    with pytest.raises(ModelFileError, match="no such"):
        load_model(tmp_path / "nope" / "config.json")
    with pytest.raises(RooflabError, match="unknown model"):
        load_model("not-a-model")
    with pytest.raises(RooflabError, match="unknown weight format"):
        load_model("qwen3-0.6b", weights="q3_z")


@pytest.mark.parametrize("weights", ["q4_k_m", "q8_0", "bf16"])
def test_a_weight_format_leaves_experts_published_in_mxfp4_as_they_are(weights):
    # `compare --weights q4_k_m` re-quantised gpt-oss wholesale: gpt-oss-20b (Q4_K_M) at 22.1 GB and
    # gpt-oss-120b at 124 GB, where the converters keep its experts MXFP4 (published Q4_K_M files
    # of the 20b are about 12 GB; its F16 conversion 13.8 GB)
    spec = load_model("gpt-oss-20b-mxfp4", weights=weights)
    matrices = [t for t in spec.tensors if len(t.shape) >= 2 and not t.name.endswith(".bias")]
    experts = [t for t in matrices if t.role.value == "experts"]
    others = [t for t in matrices if t.role.value not in ("experts", "router")]
    assert experts and {t.type_name for t in experts} == {"MXFP4"}
    assert "MXFP4" not in {t.type_name for t in others}               # the format reaches the rest
    published = load_model("gpt-oss-20b-mxfp4")
    assert 0.9 * published.weight_bytes < spec.weight_bytes < 1.2 * published.weight_bytes


def test_a_config_that_says_its_experts_are_mxfp4_keeps_them():
    from rooflab.core.io.hf import spec_from_config

    config = dict(model_type="qwen3_moe", hidden_size=512, num_hidden_layers=2, num_attention_heads=8,
                  num_key_value_heads=4, head_dim=64, intermediate_size=1536, moe_intermediate_size=256,
                  num_experts=8, num_experts_per_tok=2, vocab_size=1000)
    plain = spec_from_config(config, weights="q4_k_m")
    marked = spec_from_config({**config, "quantization_config": {"quant_method": "mxfp4"}}, weights="q4_k_m")
    assert "MXFP4" not in {t.type_name for t in plain.tensors}
    assert {t.type_name for t in marked.tensors
            if t.role.value == "experts" and len(t.shape) >= 2 and not t.name.endswith(".bias")} == {"MXFP4"}
