"""The catalogue's published GGUF file sizes: each entry's ``files`` (bytes by format, as a
model card or a Hub file page lists them, with the page in ``sources["files"]``) against the
size rooflab computes for that format from the entry's config, tensor by tensor.

A published file is its tensors and its header (the tokenizer's strings and scores), whatever
the weight format, so the comparison adds the entry's header estimate to the tensors rooflab
prices at that format. The sizes are stated in decimal GB to two or three digits and the header
size is an estimate for most entries, so a size within 1.5 % is the same file; a recipe that
picks the wrong type for one large tensor misses by more (a tied embedding at Q4_K where
llama.cpp writes Q6_K: Gemma 3 4B's Q4_K_M computed 2.31 GB against 2.49 GB, -7 %)."""

from __future__ import annotations

import json

import pytest

from rooflab.core.cli.main import main
from rooflab.core.io import load_model
from rooflab.core.io.catalogue import get_entry, list_catalogue

PUBLISHED = [(e.key, fmt, size) for e in list_catalogue() for fmt, size in sorted(e.files.items())]


def test_published_sizes_name_their_page():
    assert len(PUBLISHED) >= 180
    for e in list_catalogue():
        if e.files:
            assert e.sources["files"].startswith("https://"), e.key
            for fmt in e.files:
                assert fmt in e.sources["files"], (e.key, fmt)


@pytest.mark.parametrize("key, fmt, size", PUBLISHED, ids=[f"{k}:{f}" for k, f, _ in PUBLISHED])
def test_computed_size_is_the_published_file(key, fmt, size):
    assert _file_bytes(key, fmt) == pytest.approx(size, rel=0.015)


def _file_bytes(key: str, fmt: str) -> int:
    """The file a llama.cpp quantisation of the entry at ``fmt`` writes: its tensors, as rooflab
    prices them, and the entry's header."""
    entry = get_entry(key)
    assert entry is not None, key
    return load_model(key, weights=fmt.lower()).file_bytes + entry.header_bytes


def test_the_published_file_holds_the_header():
    """Qwen2.5-0.5B's Q4_K_M is 398 MB on the Hub: its tensors come to 392 MB (1.5 % short) and
    the 152K-token tokenizer's header makes up the rest, so small models are compared with it."""
    entry = get_entry("qwen2.5-0.5b-q4_k_m")
    assert entry is not None and entry.files["Q4_K_M"] == 398_000_000
    tensors = load_model(entry.key, weights="q4_k_m").file_bytes
    assert tensors < 0.986 * 398e6
    assert _file_bytes(entry.key, "Q4_K_M") == pytest.approx(398e6, rel=0.002)


@pytest.mark.parametrize("key, published", [("gemma-3-4b-q4_k_m", 2.49e9), ("qwen3-4b-q4_k_m", 2.50e9)])
def test_a_tied_embedding_is_quantised_as_the_output_head(key, published):
    """No output.weight: llama.cpp gives token_embd the head's type (Q6_K in Q4_K_M)."""
    spec = load_model(key, weights="q4_k_m")
    embedding = next(t for t in spec.tensors if t.name == "token_embd.weight")
    assert "output.weight" not in {t.name for t in spec.tensors}
    assert embedding.type_name == "Q6_K"
    assert spec.file_bytes == pytest.approx(published, rel=0.01)
    untied = load_model("llama-3.1-8b", weights="q4_k_m")
    assert next(t for t in untied.tensors if t.name == "token_embd.weight").type_name == "Q4_K"


def test_models_lists_sizes_and_json_the_published_files(capsys):
    assert main(["models", "--search", "qwen3-4b-q4_k_m"]) == 0
    header, line = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["key", "weights", "GB"]
    assert line.split()[:3] == ["qwen3-4b-q4_k_m", "q4_k_m", "2.50"]       # GB at its own format, with its header
    assert main(["models", "--json", "--search", "qwen3-4b-q4_k_m"]) == 0
    entry = json.loads(capsys.readouterr().out)[0]
    assert entry["files"]["Q4_K_M"] == 2_497_280_256 and entry["file_bytes"] == load_model("qwen3-4b-q4_k_m").file_bytes



def test_rows_the_k_blocks_do_not_divide_fall_back_as_llama_cpp_does():
    """Gemma 3 1B's rows are 1,152 wide, 4.5 blocks of 256: Q4_K falls back to Q5_0 and Q6_K
    (the tied embedding as head) to Q8_0, as llama.cpp's quantiser does; 6,912-wide rows keep
    their k-quant."""
    types = {t.name: t.type_name for t in load_model("gemma-3-1b-q4_k_m", weights="q4_k_m").tensors}
    assert types["blk.0.attn_q.weight"] == types["blk.0.ffn_up.weight"] == "Q5_0"
    assert types["token_embd.weight"] == "Q8_0"
    assert types["blk.3.ffn_down.weight"] == "Q4_K" and types["blk.0.ffn_down.weight"] == "Q6_K"


def test_a_fused_qkv_takes_one_step_more():
    """Phi-4's attn_qkv: Q5_K in Q4_K_M and Q6_K in Q5_K_M, in every layer."""
    for weights, wanted in (("q4_k_m", "Q5_K"), ("q5_k_m", "Q6_K")):
        spec = load_model("phi-4-q4_k_m", weights=weights)
        assert {t.type_name for t in spec.tensors if t.name.endswith("attn_qkv.weight")} == {wanted}
