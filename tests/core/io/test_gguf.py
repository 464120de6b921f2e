"""read_gguf on well-formed files: exact tensor bytes, roles, W, attention layouts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter
from gguf.constants import GGUFEndian

from rooflab.core.io.gguf import LargeArray, read_gguf, read_header
from rooflab.core.predict.work import weight_bytes_read_per_token
from rooflab.core.values.model import Role
from tests.factories.gguf_files import (
    Spec,
    T,
    llama_tensors,
    llm_meta,
    more_bits_layers,
    tiny_llama,
    write_gguf,
)

# ggml-common.h block layouts, written out independently of gguf-py's table:
# (values per block, bytes per block)
BLOCKS: dict[str, tuple[int, int]] = {
    "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "F64": (1, 8),
    "I8": (1, 1), "I16": (1, 2), "I32": (1, 4), "I64": (1, 8),
    "Q4_0": (32, 2 + 16), "Q4_1": (32, 2 + 2 + 16), "Q5_0": (32, 2 + 4 + 16),
    "Q5_1": (32, 2 + 2 + 4 + 16), "Q8_0": (32, 2 + 32), "Q8_1": (32, 4 + 4 + 32),
    "Q2_K": (256, 2 + 2 + 16 + 64), "Q3_K": (256, 2 + 64 + 32 + 12),
    "Q4_K": (256, 2 + 2 + 128 + 12), "Q5_K": (256, 2 + 2 + 128 + 32 + 12),
    "Q6_K": (256, 2 + 128 + 64 + 16), "Q8_K": (256, 4 + 256 + 32),
    "IQ2_XXS": (256, 2 + 64), "IQ2_XS": (256, 2 + 64 + 8), "IQ2_S": (256, 2 + 64 + 16),
    "IQ3_XXS": (256, 2 + 64 + 32), "IQ3_S": (256, 2 + 64 + 32 + 8 + 4),
    "IQ1_S": (256, 2 + 32 + 16), "IQ1_M": (256, 32 + 16 + 8),
    "IQ4_NL": (32, 2 + 16), "IQ4_XS": (256, 2 + 2 + 128 + 4),
    "TQ1_0": (256, 2 + 52), "TQ2_0": (256, 2 + 64),
    "MXFP4": (32, 1 + 16), "NVFP4": (64, 4 + 32), "Q1_0": (128, 2 + 16),
}


# --- (a) Q4_K_M llama: W to the byte ------------------------------------------------------------

def test_q4_k_m_llama_weight_bytes_per_token_is_exact(tmp_path: Path) -> None:
    spec = read_gguf(tiny_llama(tmp_path / "tiny-q4km.gguf"))
    # Derivation (Q4_K = 144 B per 256 values, Q6_K = 210 B per 256, F32 = 4 B per value):
    #   attn_q, attn_output [256,256] Q4_K:     256 rows x 144        = 36,864 each
    #   attn_k, attn_v      [256,128] Q4_K:     128 rows x 144        = 18,432 each
    #   attn_v as Q6_K:                         128 rows x 210        = 26,880
    #   ffn_gate/up/down    [256,512]/[512,256] Q4_K: 512 x 144       = 73,728 each
    #   ffn_down as Q6_K:                       256 rows x 2 x 210    = 107,520
    #   two norms [256] F32:                                            1,024 each
    # layer = 2,048 + 2 x 36,864 + 2 x 18,432 + 3 x 73,728           = 333,824
    # use_more_bits layers {0, 3, 6, 7} add 8,448 + 33,792           = 376,064
    # blocks = 4 x 333,824 + 4 x 376,064                              = 2,839,552
    # + output_norm 1,024 + output [256,512] Q6_K 512 x 210 = 107,520
    # + one token_embd row (256 values Q4_K)                          = 144
    # W = 2,839,552 + 1,024 + 107,520 + 144                           = 2,948,240
    assert more_bits_layers(8) == {0, 3, 6, 7}
    assert weight_bytes_read_per_token(spec) == 2_948_240   # exact: integer bytes
    assert spec.weights_format == "Q4_K_M"
    assert spec.layers == 8 and spec.hidden == 256 and spec.vocab == 512
    assert spec.name == "tiny-llama" and spec.architecture == "llama"
    assert spec.context_length == 4096
    assert spec.warnings == ()
    assert not spec.tied_embeddings


def test_tensor_table_keeps_ggml_order_types_roles_and_layers(tmp_path: Path) -> None:
    path = tiny_llama(tmp_path / "m.gguf")
    spec = read_gguf(path)
    by_name = {t.name: t for t in spec.tensors}
    assert len(by_name) == len(llama_tensors()) == 8 * 9 + 3
    down = by_name["blk.3.ffn_down.weight"]
    assert down.shape == (512, 256) and down.type_name == "Q6_K" and down.nbytes == 107_520
    assert down.role is Role.FEED_FORWARD and down.layer == 3
    assert by_name["blk.1.attn_v.weight"].type_name == "Q4_K"
    assert by_name["token_embd.weight"].role is Role.EMBEDDING
    assert by_name["token_embd.weight"].row_bytes == 144
    assert by_name["output.weight"].role is Role.OUTPUT
    assert by_name["output_norm.weight"].role is Role.NORMS and by_name["output_norm.weight"].layer is None
    assert spec.file_bytes == path.stat().st_size
    assert spec.weight_bytes == sum(t.nbytes for t in llama_tensors())
    assert spec.source == spec.provenance == str(path)
    assert ("llama.block_count", "8") in spec.metadata
    assert ("general.file_type", "15") in spec.metadata


def test_attention_of_plain_llama(tmp_path: Path) -> None:
    att = read_gguf(tiny_llama(tmp_path / "m.gguf")).attention
    assert att.heads == (2,) * 8 and att.kv_heads == (1,) * 8
    assert att.head_dim_k == att.head_dim_v == 128        # embedding_length / head_count
    assert att.sliding == () and att.kv_lora_rank == 0
    # 8 layers x 1 KV head x (128 + 128) x 2 bytes (f16)
    assert att.kv_bytes_per_token("f16") == (8 * 256 * 2, 0)


# --- (b) tied embeddings ---------------------------------------------------------------------------

def test_tied_embeddings_read_the_whole_embedding_as_head(tmp_path: Path) -> None:
    spec = read_gguf(tiny_llama(tmp_path / "tied.gguf", tied=True))
    assert spec.tied_embeddings
    # blocks 2,839,552 + output_norm 1,024 + the whole token_embd (512 rows x 144) 73,728;
    # no separate row: the head read covers it
    assert weight_bytes_read_per_token(spec) == 2_839_552 + 1_024 + 73_728
    assert spec.head_bytes == 73_728


# --- (c) MoE ---------------------------------------------------------------------------------------

def _moe_tensors(layers: int, n_expert: int) -> list[Spec]:
    out = [Spec("token_embd.weight", (256, 512), T.Q4_K), Spec("output_norm.weight", (256,), T.F32),
           Spec("output.weight", (256, 512), T.Q6_K)]
    for i in range(layers):
        out += [
            Spec(f"blk.{i}.attn_norm.weight", (256,), T.F32),
            Spec(f"blk.{i}.attn_q.weight", (256, 256), T.Q4_K),
            Spec(f"blk.{i}.attn_k.weight", (256, 128), T.Q4_K),
            Spec(f"blk.{i}.attn_v.weight", (256, 128), T.Q6_K),
            Spec(f"blk.{i}.attn_output.weight", (256, 256), T.Q4_K),
            Spec(f"blk.{i}.ffn_norm.weight", (256,), T.F32),
            Spec(f"blk.{i}.ffn_gate_inp.weight", (256, n_expert), T.F32),
            Spec(f"blk.{i}.ffn_gate_exps.weight", (256, 256, n_expert), T.Q4_K),
            Spec(f"blk.{i}.ffn_up_exps.weight", (256, 256, n_expert), T.Q4_K),
            Spec(f"blk.{i}.ffn_down_exps.weight", (256, 256, n_expert), T.Q6_K),
        ]
    return out


def test_moe_reads_used_over_count_of_the_experts(tmp_path: Path) -> None:
    meta = llm_meta("qwen3moe", layers=2, hidden=256, heads=2, kv_heads=1,
                    expert_count=8, expert_used_count=2)
    spec = read_gguf(write_gguf(tmp_path / "moe.gguf", "qwen3moe", _moe_tensors(2, 8), meta))
    assert (spec.experts, spec.experts_used, spec.shared_experts) == (8, 2, 0)
    # per layer: dense 1,024 + 36,864 + 18,432 + 26,880 + 36,864 + 1,024 + router 256x8x4 8,192
    #            = 129,280; experts 2 x (8 x 256 x 144) + 8 x 256 x 210 = 1,019,904
    # W = 2 x 129,280 + 1,024 + 107,520 + 144 + (2 x 1,019,904) x 2/8 = 877,200
    assert spec.expert_bytes == 2 * 1_019_904
    assert weight_bytes_read_per_token(spec) == 877_200
    roles = {t.name: t.role for t in spec.tensors}
    assert roles["blk.0.ffn_gate_inp.weight"] is Role.ROUTER
    assert roles["blk.1.ffn_down_exps.weight"] is Role.EXPERTS
    assert spec.warnings == ()


def test_shared_expert_without_count_key_counts_one(tmp_path: Path) -> None:
    tensors = _moe_tensors(1, 4) + [Spec("blk.0.ffn_up_shexp.weight", (256, 256), T.Q4_K)]
    meta = llm_meta("qwen2moe", layers=1, hidden=256, heads=2, expert_count=4, expert_used_count=2)
    spec = read_gguf(write_gguf(tmp_path / "q2moe.gguf", "qwen2moe", tensors, meta))
    assert spec.shared_experts == 1
    assert spec.attention.kv_heads == (2,)      # head_count_kv defaults to head_count


# --- (d) per-layer head counts ------------------------------------------------------------------

def test_per_layer_head_count_arrays(tmp_path: Path) -> None:
    meta = llm_meta("llama", layers=4, hidden=256, heads=[4, 4, 2, 2], kv_heads=[2, 0, 1, 1])
    spec = read_gguf(write_gguf(tmp_path / "heads.gguf", "llama", llama_tensors(layers=4), meta))
    att = spec.attention
    assert att.heads == (4, 4, 2, 2) and att.kv_heads == (2, 0, 1, 1)
    assert att.head_dim_k == att.head_dim_v == 64               # 256 / heads of layer 0
    # (2 + 0 + 1 + 1) KV heads x (64 + 64) values x 2 bytes
    assert spec.kv_bytes_per_token("f16") == (4 * 128 * 2, 0)


# --- (e) sliding windows ------------------------------------------------------------------------

def _attn_only(layers: int) -> list[Spec]:
    return [Spec("token_embd.weight", (256, 256), T.Q8_0)] + [
        Spec(f"blk.{i}.attn_q.weight", (256, 256), T.Q8_0) for i in range(layers)]


def test_gemma3_without_pattern_key_slides_five_of_six(tmp_path: Path) -> None:
    meta = llm_meta("gemma3", layers=12, hidden=256, heads=4, kv_heads=2,
                    **{"attention.sliding_window": 512, "attention.key_length": 256,
                       "attention.value_length": 256})
    spec = read_gguf(write_gguf(tmp_path / "g3.gguf", "gemma3", _attn_only(12), meta))
    att = spec.attention
    assert att.sliding == tuple(i % 6 < 5 for i in range(12))
    assert att.sliding_window == 512
    # per layer 2 KV heads x (256 + 256) x 2 bytes = 2,048: 10 sliding, 2 full
    assert spec.kv_bytes_per_token("f16") == (2 * 2_048, 10 * 2_048)
    assert spec.tied_embeddings and spec.warnings == ()


def test_gpt_oss_without_pattern_key_slides_even_layers(tmp_path: Path) -> None:
    meta = llm_meta("gpt-oss", layers=4, hidden=256, heads=8, kv_heads=2,
                    expert_count=4, expert_used_count=2,
                    **{"attention.sliding_window": 128, "attention.key_length": 64,
                       "attention.value_length": 64})
    tensors = _attn_only(4) + [Spec("blk.0.ffn_up_exps.weight", (256, 256, 4), T.MXFP4)]
    spec = read_gguf(write_gguf(tmp_path / "oss.gguf", "gpt-oss", tensors, meta))
    assert spec.attention.sliding == (True, False, True, False)
    assert spec.kv_bytes_per_token("f16") == (2 * 512, 2 * 512)
    assert next(t for t in spec.tensors if t.type_name == "MXFP4").nbytes == 256 * 4 * 8 * 17


@pytest.mark.parametrize(("pattern", "expected"), [
    (3, (True, True, False, True, True, False)),                    # a period
    ([True, False, False, True, False, False], (True, False, False, True, False, False)),
    (0, (True,) * 6),                                               # llama.cpp: 0 = all
])
def test_explicit_sliding_pattern(tmp_path: Path, pattern: object, expected: tuple[bool, ...]) -> None:
    meta = llm_meta("gemma3", layers=6, hidden=256, heads=4,
                    **{"attention.sliding_window": 64, "attention.sliding_window_pattern": pattern})
    spec = read_gguf(write_gguf(tmp_path / "p.gguf", "gemma3", _attn_only(6), meta))
    assert spec.attention.sliding == expected


def test_window_without_known_pattern_warns(tmp_path: Path) -> None:
    meta = llm_meta("qwen2", layers=2, hidden=256, heads=4, **{"attention.sliding_window": 64})
    spec = read_gguf(write_gguf(tmp_path / "w.gguf", "qwen2", _attn_only(2), meta))
    assert spec.attention.sliding == ()
    assert any("sliding_window" in w for w in spec.warnings)


# --- (f) deepseek2 MLA ------------------------------------------------------------------------

def _mla_tensors(layers: int) -> list[Spec]:
    return [Spec("token_embd.weight", (256, 256), T.Q8_0)] + [
        Spec(f"blk.{i}.attn_kv_a_mqa.weight", (256, 576), T.Q8_0) for i in range(layers)]


@pytest.mark.parametrize("style", ["absorbed", "per-head"])
def test_deepseek2_mla_cache_is_latent_plus_rope(tmp_path: Path, style: str) -> None:
    if style == "absorbed":   # llama.cpp since its MLA rework: MQA over the latent
        extra = {"attention.key_length": 576, "attention.value_length": 512,
                 "attention.key_length_mla": 192, "attention.value_length_mla": 128}
        kv_heads = 1
    else:                     # older conversions: per-head sizes, one KV head per head
        extra = {"attention.key_length": 192, "attention.value_length": 128}
        kv_heads = 16
    meta = llm_meta("deepseek2", layers=3, hidden=256, heads=16, kv_heads=kv_heads,
                    **{"attention.kv_lora_rank": 512, "rope.dimension_count": 64, **extra})
    spec = read_gguf(write_gguf(tmp_path / f"ds-{style}.gguf", "deepseek2", _mla_tensors(3), meta))
    att = spec.attention
    assert (att.kv_lora_rank, att.rope_dim) == (512, 64)
    assert (att.head_dim_k, att.head_dim_v) == (192, 128)
    # 3 layers x (512 + 64) latent values x 2 bytes, whatever the head count
    assert spec.kv_bytes_per_token("f16") == (3 * 576 * 2, 0)


# --- (g) every ggml type -------------------------------------------------------------------------

@pytest.mark.parametrize("qtype", list(T), ids=lambda t: t.name)
def test_every_type_gives_exact_bytes(tmp_path: Path, qtype: T) -> None:
    per_block, block_bytes = BLOCKS[qtype.name]
    shape = (per_block * 2, 3)          # two blocks per row, three rows
    path = write_gguf(tmp_path / f"{qtype.name}.gguf", "llama", [Spec("blk.0.w.weight", shape, qtype)])
    (tensor,) = read_gguf(path).tensors
    assert tensor.type_name == qtype.name and tensor.shape == shape
    assert tensor.nbytes == 6 * block_bytes


# --- (j) a 262,144-entry tokenizer -------------------------------------------------------------

def test_large_tokenizer_is_skipped_not_materialised(tmp_path: Path) -> None:
    n = 262_144
    writer = GGUFWriter(tmp_path / "tok.gguf", "llama")
    writer.add_block_count(1)
    writer.add_token_list([f"t{i}" for i in range(n)])
    writer.add_token_types([1] * n)
    writer.add_string("general.name", "after-the-tokenizer")   # keys after it still parse
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((4, 4), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    header = read_header(tmp_path / "tok.gguf")
    assert header.metadata["tokenizer.ggml.tokens"] == LargeArray(8, n)      # STRING
    assert header.metadata["tokenizer.ggml.token_type"] == LargeArray(5, n)  # INT32
    spec = read_gguf(tmp_path / "tok.gguf")
    assert spec.name == "after-the-tokenizer"
    assert spec.vocab == n                           # no vocab_size, no token_embd
    assert ("tokenizer.ggml.tokens", "[262144 × string]") in spec.metadata


def test_small_arrays_are_kept(tmp_path: Path) -> None:
    meta = {"general.tags": ["a", "b"], "x.scores": [0.5, 1.5], "x.flags": [True, False]}
    header = read_header(write_gguf(tmp_path / "s.gguf", "llama", _attn_only(1), meta))
    assert header.metadata["general.tags"] == ("a", "b")
    assert header.metadata["x.scores"] == (0.5, 1.5)
    assert header.metadata["x.flags"] == (True, False)
    assert header.alignment == 32 and header.data_start % 32 == 0 and header.version == 3


# --- other formats and fallbacks -----------------------------------------------------------------

def test_big_endian_file(tmp_path: Path) -> None:
    writer = GGUFWriter(tmp_path / "be.gguf", "llama", endianess=GGUFEndian.BIG)
    writer.add_block_count(1)
    writer.add_head_count(4)
    writer.add_embedding_length(256)
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((2, 144), np.uint8), raw_dtype=T.Q4_K)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    header = read_header(tmp_path / "be.gguf")
    assert header.byte_order == "big"
    spec = read_gguf(tmp_path / "be.gguf")
    assert spec.attention.heads == (4,) and spec.tensors[0].shape == (256, 2)


def test_version_2_reads_like_3(tmp_path: Path) -> None:
    path = tiny_llama(tmp_path / "v2.gguf")
    data = bytearray(path.read_bytes())
    data[4:8] = (2).to_bytes(4, "little")      # v2 and v3 share the layout (v3 added big-endian)
    path.write_bytes(bytes(data))
    assert read_header(path).version == 2
    assert weight_bytes_read_per_token(read_gguf(path)) == 2_948_240


def test_custom_alignment(tmp_path: Path) -> None:
    writer = GGUFWriter(tmp_path / "a.gguf", "llama")
    writer.add_custom_alignment(64)
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((3, 5), np.float32))
    writer.add_tensor("blk.0.attn_k.weight", np.zeros((3, 5), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    header = read_header(tmp_path / "a.gguf")
    assert header.alignment == 64 and [t.offset for t in header.tensors] == [0, 64]


def test_unknown_architecture_still_gives_a_table(tmp_path: Path) -> None:
    tensors = [Spec("token_embd.weight", (256, 16), T.F16), Spec("blk.0.mixer.weight", (256, 256), T.F16),
               Spec("blk.2.mixer.weight", (256, 256), T.F16)]
    spec = read_gguf(write_gguf(tmp_path / "mystery.gguf", "mystery", tensors))
    assert spec.architecture == "mystery" and spec.name == "mystery"   # file stem
    assert spec.layers == 3                                   # from blk.N names
    assert spec.kv_bytes_per_token() == (0, 0)
    assert weight_bytes_read_per_token(spec) == 2 * 256 * 256 * 2 + 256 * 16 * 2   # tied head
    assert spec.weights_format == "mostly F16"
    assert len(spec.warnings) == 3
    assert any("mystery" in w for w in spec.warnings)
    assert any("head_count" in w for w in spec.warnings)


def test_guessed_file_type(tmp_path: Path) -> None:
    spec = read_gguf(tiny_llama(tmp_path / "g.gguf", meta={"general.file_type": 1024 + 7}))
    assert spec.weights_format == "Q8_0 (guessed)"


def test_experts_without_count_warn(tmp_path: Path) -> None:
    meta = llm_meta("qwen3moe", layers=1, hidden=256, heads=2)
    spec = read_gguf(write_gguf(tmp_path / "e.gguf", "qwen3moe", _moe_tensors(1, 4), meta))
    assert spec.experts == 0 and any("expert_count" in w for w in spec.warnings)


def test_split_shard_warns(tmp_path: Path) -> None:
    spec = read_gguf(tiny_llama(tmp_path / "s.gguf", meta={"split.count": 3}))
    assert any("shard" in w for w in spec.warnings)


def test_takes_weights_is_false_only_for_gguf_files(tmp_path: Path) -> None:
    from rooflab.core.io import takes_weights

    renamed = tmp_path / "model.bin"                      # a GGUF by its magic, not its name
    renamed.write_bytes(tiny_llama(tmp_path / "tiny.gguf").read_bytes())
    assert not takes_weights(tmp_path / "tiny.gguf") and not takes_weights(renamed)
    config = tmp_path / "config.json"
    config.write_text("{}", encoding="utf-8")
    assert takes_weights(config) and takes_weights(tmp_path) and takes_weights("qwen3-0.6b")
