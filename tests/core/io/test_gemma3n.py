"""Gemma 3n (llama.cpp's ``gemma3n``): its tensor table from a config.json and from a GGUF in
llama.cpp's layout, the per-layer embedding read one row a token, and the last layers that
attend to an earlier layer's cache and hold none of their own.

The layout is llama.cpp's LLM_ARCH_GEMMA3N (``load_arch_tensors``): per_layer_token_embd
{n_embd_altup x n_layer, n_vocab}, per_layer_model_proj {n_embd, n_embd_altup x n_layer},
altup_proj and altup_unembd_proj {n_embd, n_embd, n_altup - 1}, and in each block inp_gate,
proj, post_norm, altup_*, laurel_* beside attention and the feed-forward. llama-quant.cpp never
quantises tensors named altup*, laurel* or per_layer_model_proj."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rooflab.core.cli.main import main
from rooflab.core.errors import ModelFileError, SpecError
from rooflab.core.io import load_model
from rooflab.core.io.gguf import read_gguf
from rooflab.core.io.hf import spec_from_config
from rooflab.core.predict import work
from rooflab.core.predict.placement import Placement, split
from rooflab.core.values.model import ModelSpec, Role
from tests.factories.gguf_files import Spec, T, llm_meta, more_bits_layers, write_gguf
from tests.factories.llm_configs import gemma3n_config, gemma3n_layer_types
from tests.factories.synthetic import write_synthetic_gguf_blocking

E2B = gemma3n_config(layers=30, hidden=2048, ffn=8192, shared=10)
# a small one in the same layout: 10 layers, the last 5 reading layers 3 and 4's caches
SMALL = gemma3n_config(layers=10, hidden=256, ffn=512, shared=5, heads=4, head_dim=64, vocab=1000, window=64,
                       name="tiny-gemma3n")


def _table(spec: ModelSpec) -> list[tuple[str, tuple[int, ...], str, int, Role]]:
    return sorted((t.name, t.shape, t.type_name, t.nbytes, t.role) for t in spec.tensors)


# --- from a config.json ----------------------------------------------------------------------

def test_the_e2b_config_opens_with_its_real_parameter_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """E2B's text decoder, summed by hand from llama.cpp's tensor list: token_embd 2048 x 262,144
    = 536,870,912; per_layer_token_embd 7,680 x 262,144 = 2,013,265,920; per block q, k, v, o
    10,485,760 + FFN 3 x 2048 x 8192 = 50,331,648 + inp_gate and proj 1,048,576 + LAuReL 262,144
    + AltUp router and coefficients 8,272 + eight 2048-wide norms 16,384 + q/k norms 512 =
    62,153,296, times 30 = 1,864,598,880; per_layer_model_proj 15,728,640, altup_proj and
    altup_unembd_proj 25,165,824, two norms 2,304. 4,455,632,480 in all (Ollama lists its
    gemma3n:e2b at 4.46 B)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(E2B))
    assert main(["inspect", str(path)]) == 0
    assert "per_layer_embd" in capsys.readouterr().out
    spec = load_model(str(path), weights="q4_k_m")
    assert spec.params_total == 4_455_632_480
    table = next(t for t in spec.tensors if t.role is Role.PER_LAYER_EMBEDDING)
    assert (table.name, table.shape, table.type_name) == ("per_layer_token_embd.weight", (7680, 262144), "Q4_K")


def test_a_decode_token_reads_one_row_of_the_per_layer_embedding_not_the_table():
    """One token gathers one 7,680-value row of the 1.13 GB table (4,320 bytes in Q4_K); a tied
    head is read whole, every other tensor in full but the unread K and V projections."""
    spec = spec_from_config(E2B, weights="q4_k_m")
    table = next(t for t in spec.tensors if t.role is Role.PER_LAYER_EMBEDDING)
    unread = [t for t in spec.tensors if t.role is Role.UNREAD]
    assert table.row_bytes == 7680 // 256 * 144 == 4320
    read = work.weight_bytes_read_per_token(spec)
    assert read == spec.weight_bytes - table.nbytes + table.row_bytes - sum(t.nbytes for t in unread)
    assert read < 0.6 * spec.weight_bytes
    # n tokens gather n rows
    assert float(work.weight_bytes_read(spec, 64)) - read == pytest.approx(63 * table.row_bytes)
    # a lookup, not a multiply: no FLOPs for the table
    assert spec.block_params_per_token == (spec.params_total - table.params - spec.embedding_params
                                           - sum(t.params for t in unread))


def test_the_shared_layers_keep_k_and_v_projections_they_never_use():
    """llama.cpp loads attn_k and attn_v in every layer and multiplies by them only where a layer
    writes its own cache: in layers 20-29 they are held (in memory) and never read."""
    spec = spec_from_config(E2B, weights="q4_k_m")
    unread = {t.name for t in spec.tensors if t.role is Role.UNREAD}
    assert unread == {f"blk.{i}.attn_{kv}.weight" for i in range(20, 30) for kv in "kv"}
    parts = split(spec, Placement(gpu_layers=spec.layers + 1), embedding_on_host=True)
    assert parts.device.spec is not None and unread <= {t.name for t in parts.device.spec.tensors}


def test_the_shared_kv_layers_hold_no_cache():
    """E2B: layers 20-29 attend to layers 18 and 19's caches. 20 layers own one, 4 of them full
    (layers 4, 9, 14, 19): 4 x 2 heads x (256 + 256) x 2 bytes = 8,192 bytes a token; 16 sliding:
    32,768 (not 28 layers' 57,344)."""
    spec = spec_from_config(E2B, weights="q4_k_m")
    assert spec.attention.kv_heads == (2,) * 20 + (0,) * 10
    assert spec.kv_bytes_per_token("f16") == (8192.0, 32768.0)
    assert float(work.kv_bytes_held(spec, 4096, ubatch=512)) == 8192 * 4096 + 32768 * 1024
    # they still attend: their queries' pairs are counted
    full, sliding = spec.attention.attention_flops_per_pair()
    assert full == 6 * 2 * 8 * (256 + 256) and sliding == 24 * 2 * 8 * (256 + 256)


def test_the_shared_kv_layers_read_the_cache_they_share():
    """A step's attention reads the cache once per layer that attends: layers 20-29 read layers
    18 and 19's again (separate attention kernels). Read per token of context: 6 full layers x
    2,048 bytes = 12,288, 24 sliding x 2,048 = 49,152; held: 8,192 and 32,768."""
    spec = spec_from_config(E2B, weights="q4_k_m")
    assert spec.attention.kv_read_bytes_per_token("f16") == (12288.0, 49152.0)
    assert float(work.kv_bytes(spec, 32768)) == 12288 * 32768 + 49152 * 512


def test_the_table_sits_with_the_input_embedding_in_host_memory():
    """llama.cpp pins per_layer_token_embd to the CPU with the input layer, whatever -ngl says."""
    spec = spec_from_config(E2B, weights="q4_k_m")
    table = next(t for t in spec.tensors if t.role is Role.PER_LAYER_EMBEDDING)
    parts = split(spec, Placement(gpu_layers=spec.layers + 1), embedding_on_host=True)
    assert parts.device.spec is not None and table.name not in {t.name for t in parts.device.spec.tensors}
    assert parts.host.embedding_bytes >= table.nbytes


def test_never_quantised_tensors_keep_the_converters_type():
    types = {t.name: t.type_name for t in spec_from_config(E2B, weights="q4_k_m").tensors}
    assert types["per_layer_model_proj.weight"] == types["altup_proj.weight"] == "F16"
    assert types["blk.0.laurel_l.weight"] == types["blk.0.altup_router.weight"] == "F16"
    assert types["blk.0.altup_correct_coef.weight"] == types["blk.0.altup_predict_coef.weight"] == "F32"
    assert types["token_embd.weight"] == "Q6_K" and types["blk.0.inp_gate.weight"] == "Q4_K"


@pytest.mark.parametrize("change, words", [
    ({"num_kv_shared_layers": 30}, "num_kv_shared_layers"),
    ({"intermediate_size": [8192] * 29}, "intermediate_size"),
])
def test_a_bad_gemma3n_config_names_its_field(change: dict[str, Any], words: str):
    config = json.loads(json.dumps(E2B))
    config["text_config"].update(change)
    with pytest.raises(SpecError, match=words):
        spec_from_config(config)


# --- from a GGUF in llama.cpp's layout -------------------------------------------------------

def _hand_table(layers: int = 10, hidden: int = 256, ffn: int = 512, heads: int = 4, kv_heads: int = 2,
                head_dim: int = 64, vocab: int = 1000, per_layer: int = 256) -> list[Spec]:
    """SMALL's Q4_K_M table written out by hand from llama.cpp's create_tensor calls, with the
    types llama.cpp's quantiser gives each (Q6_K for the tied embedding, attn_v and ffn_down of
    the use_more_bits layers; F16 for what it never quantises; F32 vectors and coefficients)."""
    more = more_bits_layers(layers)
    out = [Spec("token_embd.weight", (hidden, vocab), T.Q6_K),
           Spec("per_layer_token_embd.weight", (per_layer * layers, vocab), T.Q4_K),
           Spec("per_layer_model_proj.weight", (hidden, per_layer * layers), T.F16),
           Spec("per_layer_proj_norm.weight", (per_layer,), T.F32),
           Spec("altup_proj.weight", (hidden, hidden, 3), T.F16),
           Spec("altup_unembd_proj.weight", (hidden, hidden, 3), T.F16),
           Spec("output_norm.weight", (hidden,), T.F32)]
    for i in range(layers):
        big = T.Q6_K if i in more else T.Q4_K
        out += [Spec(f"blk.{i}.{name}.weight", shape, kind) for name, shape, kind in (
            ("attn_norm", (hidden,), T.F32), ("attn_q", (hidden, heads * head_dim), T.Q4_K),
            ("attn_k", (hidden, kv_heads * head_dim), T.Q4_K), ("attn_v", (hidden, kv_heads * head_dim), big),
            ("attn_output", (heads * head_dim, hidden), T.Q4_K), ("attn_q_norm", (head_dim,), T.F32),
            ("attn_k_norm", (head_dim,), T.F32), ("post_attention_norm", (hidden,), T.F32),
            ("ffn_norm", (hidden,), T.F32), ("ffn_gate", (hidden, ffn), T.Q4_K), ("ffn_up", (hidden, ffn), T.Q4_K),
            ("ffn_down", (ffn, hidden), big), ("post_ffw_norm", (hidden,), T.F32),
            ("inp_gate", (hidden, per_layer), T.Q4_K), ("proj", (per_layer, hidden), T.Q4_K),
            ("post_norm", (hidden,), T.F32), ("altup_correct_coef", (4, 4), T.F32),
            ("altup_correct_scale", (hidden,), T.F32), ("altup_predict_coef", (4, 16), T.F32),
            ("altup_router", (hidden, 4), T.F16), ("altup_router_norm", (hidden,), T.F32),
            ("laurel_l", (hidden, 64), T.F16), ("laurel_r", (64, hidden), T.F16),
            ("laurel_post_norm", (hidden,), T.F32))]
    return out


def _hand_meta(layers: int = 10, shared: int = 5) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "attention.key_length": 64, "attention.value_length": 64, "embedding_length_per_layer_input": 256,
        "altup.num_inputs": 4, "attention.shared_kv_layers": shared, "attention.sliding_window": 64,
        "attention.sliding_window_pattern": [t == "sliding_attention" for t in gemma3n_layer_types(layers)]}
    return llm_meta("gemma3n", layers=layers, hidden=256, heads=4, kv_heads=2, context=32768,
                    **extra) | {"general.file_type": 15}


def test_a_gguf_in_llama_cpps_layout_has_the_config_layouts_figures(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]):
    """The same model twice: a GGUF whose table is written out by hand from llama.cpp's loader,
    and SMALL's config.json as rooflab lays it out; every tensor, the attention layout and the
    figures that price a token agree."""
    path = write_gguf(tmp_path / "tiny-gemma3n.gguf", "gemma3n", _hand_table(), _hand_meta(), data=False)
    from_file = read_gguf(path)
    from_config = spec_from_config(SMALL, weights="q4_k_m")
    assert _table(from_file) == _table(from_config)
    assert from_file.attention == from_config.attention
    assert from_file.attention.kv_heads == (2,) * 5 + (0,) * 5
    assert from_file.warnings == ()
    for figure in (work.weight_bytes_read_per_token, lambda s: s.params_per_token,
                   lambda s: s.kv_bytes_per_token("f16"), lambda s: float(work.decode_flops(s, 4096))):
        assert figure(from_file) == figure(from_config)
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "gemma3n" in out and "per_layer_embd" in out


def test_rooflabs_random_weight_writer_round_trips_the_layout(tmp_path: Path):
    spec = spec_from_config(SMALL, weights="q4_k_m", name="tiny-gemma3n")
    again = read_gguf(write_synthetic_gguf_blocking(spec, tmp_path / "tiny-gemma3n.gguf"))
    assert _table(again) == _table(spec) and again.attention == spec.attention
    assert work.weight_bytes_read_per_token(again) == work.weight_bytes_read_per_token(spec)


def test_more_shared_layers_than_layers_is_one_clear_error(tmp_path: Path):
    path = write_gguf(tmp_path / "bad.gguf", "gemma3n", _hand_table(), _hand_meta(shared=10), data=False)
    with pytest.raises(ModelFileError, match="shared_kv_layers"):
        read_gguf(path)


def test_the_published_files_are_the_computed_tables():
    """ggml-org's Q8_0 files (plain llama-quantize): 7,353,292,256 bytes for E4B, 4,788,112,064
    for E2B; the catalogue's computed tables are within 0.2 % (the rest is the header)."""
    for key, published in (("gemma-3n-e4b-q4_k_m", 7_353_292_256), ("gemma-3n-e2b-q4_k_m", 4_788_112_064)):
        assert load_model(key, weights="q8_0").file_bytes == pytest.approx(published, rel=0.002)
    assert np.isclose(load_model("gemma-3n-e4b-q4_k_m").params_total, 6_866_172_400)
