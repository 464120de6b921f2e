"""Random-weight GGUFs of a model's tensor table: the same table and bytes come back through
rooflab's own reader, every block is valid (finite, normal fp16 scales), the writer refuses
what would not fit before writing, leaves nothing behind when cancelled, and llama.cpp loads
what it writes (when llama-cpp-python is installed)."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import threading
from collections import namedtuple
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader
from gguf.constants import GGMLQuantizationType
from gguf.quants import dequantize

from rooflab.core.errors import Cancelled, MeasurementError
from rooflab.core.io.catalogue import get_entry, load_entry
from rooflab.core.io.gguf import read_gguf
from rooflab.core.measure.engines import gguf_synth
from rooflab.core.measure.engines.gguf_synth import (
    BLOCKS,
    SUPPORTED_TYPES,
    random_data,
    synthetic_gguf_bytes,
    write_synthetic_gguf,
)
from rooflab.core.values.model import Tensor
from rooflab.core.values.quant import block_size
from tests.factories.gguf_files import llama_tensors, llm_meta, write_gguf
from tests.factories.llm_configs import llama_config, qwen3_moe_config, small_configs, spec_of, weights_for
from tests.factories.synthetic import write_synthetic_gguf_blocking

HAS_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None


def _table(tensors: tuple[Tensor, ...]) -> list[tuple[str, tuple[int, ...], str, int, str, int | None]]:
    return [(t.name, t.shape, t.type_name, t.nbytes, t.role.value, t.layer) for t in tensors]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


SMALL = llama_config(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                     intermediate_size=512, vocab_size=1000)


# --- round trip through rooflab's reader -------------------------------------------------------

@pytest.mark.parametrize("config, weights", [(SMALL, "q4_k_m"), (SMALL, "q8_0"), (SMALL, "bf16"),
                                             (qwen3_moe_config(num_hidden_layers=2), "q4_k_m")])
def test_round_trip_keeps_the_table_and_its_bytes(tmp_path: Path, config: dict, weights: str) -> None:
    spec = spec_of(config, weights)
    path = write_synthetic_gguf_blocking(spec, tmp_path / "model.gguf")
    back = read_gguf(path)
    assert _table(back.tensors) == _table(spec.tensors)
    assert back.weight_bytes == spec.weight_bytes
    assert path.stat().st_size == synthetic_gguf_bytes(spec) == back.file_bytes
    assert (back.layers, back.hidden, back.vocab) == (spec.layers, spec.hidden, spec.vocab)
    assert back.attention.heads == spec.attention.heads and back.attention.kv_heads == spec.attention.kv_heads
    assert (back.attention.head_dim_k, back.attention.head_dim_v) == (spec.attention.head_dim_k,
                                                                       spec.attention.head_dim_v)
    assert (back.experts, back.experts_used) == (spec.experts, spec.experts_used)
    assert back.weights_format == weights.upper()
    assert back.kv_bytes_per_token() == spec.kv_bytes_per_token()
    assert not back.warnings


def test_q4_k_m_keeps_q6_k_where_llama_cpp_does(tmp_path: Path) -> None:
    """llama.cpp's Q4_K_M: Q6_K for the head and for attn_v / ffn_down on the use_more_bits
    layers (tests/factories/gguf_files.llama_tensors writes that layout out by hand)."""
    spec = spec_of(SMALL, "q4_k_m")
    back = read_gguf(write_synthetic_gguf_blocking(spec, tmp_path / "model.gguf"))
    expected = {t.name: t.type.name for t in llama_tensors(layers=4, hidden=256, ff=512, heads=4, kv_heads=2,
                                                           vocab=1000)}
    assert {t.name: t.type_name for t in back.tensors} == expected


def test_sliding_window_layers_survive(tmp_path: Path) -> None:
    spec = spec_of(small_configs()["gemma3"], "q8_0")
    back = read_gguf(write_synthetic_gguf_blocking(spec, tmp_path / "model.gguf"))
    assert back.attention.sliding == spec.attention.sliding and any(back.attention.sliding)
    assert back.attention.sliding_window == spec.attention.sliding_window == 64


def test_a_header_only_gguf_becomes_a_full_one(tmp_path: Path) -> None:
    """A header whose tensor data was never written (a sparse file) is enough to write a
    loadable file of the same table."""
    meta = llm_meta("llama", layers=8, hidden=256, heads=2, kv_heads=1, context=2048)
    meta["general.file_type"] = 15
    source = read_gguf(write_gguf(tmp_path / "header.gguf", "llama", llama_tensors(), meta, data=False))
    back = read_gguf(write_synthetic_gguf_blocking(source, tmp_path / "full.gguf"))
    assert _table(back.tensors) == _table(source.tensors)
    assert back.weights_format == "Q4_K_M" and back.context_length == 2048


def test_the_vocabulary_has_one_token_per_embedding_row(tmp_path: Path) -> None:
    path = write_synthetic_gguf_blocking(spec_of(SMALL, "q8_0"), tmp_path / "model.gguf")
    fields = GGUFReader(path).fields
    assert len(fields["tokenizer.ggml.tokens"].data) == 1000
    assert bytes(fields["tokenizer.ggml.model"].parts[-1]).decode() == "llama"


def test_a_catalogue_entry_is_sized_before_anything_is_written() -> None:
    """The file of a real shape is its weights plus a header of a few MB (the vocabulary)."""
    entry = get_entry("qwen3-8b-q4_k_m")
    assert entry is not None
    spec = load_entry(entry)
    extra = synthetic_gguf_bytes(spec) - spec.weight_bytes
    assert 0 < extra < 16e6


# --- valid blocks ------------------------------------------------------------------------------

@pytest.mark.parametrize("type_name", SUPPORTED_TYPES)
def test_every_block_is_finite_with_a_plausible_magnitude(type_name: str) -> None:
    rng = np.random.default_rng(1)
    raw = np.frombuffer(random_data(type_name, 256 * 64, rng), dtype=np.uint8)
    values = dequantize(raw, GGMLQuantizationType[type_name]).astype(np.float64)
    assert values.shape == (256 * 64,)
    assert np.isfinite(values).all()
    assert 1e-3 < np.sqrt(np.mean(values**2)) < 0.5


@pytest.mark.parametrize("type_name", [t for t, layout in BLOCKS.items() if layout.f16_scales])
def test_fp16_scales_are_normal_numbers(type_name: str) -> None:
    """No NaN, inf, zero or denormal scale: each would send the kernels down another path."""
    _, block_bytes = block_size(type_name)
    blocks = np.frombuffer(random_data(type_name, 256 * 64, np.random.default_rng(2)), dtype=np.uint8)
    blocks = blocks.reshape(-1, block_bytes)
    for offset in BLOCKS[type_name].f16_scales:
        scales = blocks[:, offset:offset + 2].copy().view("<f2").astype(np.float64).ravel()
        assert np.isfinite(scales).all() and (scales >= 2.0**-14).all() and (scales < 1).all()


def test_mxfp4_exponents_are_ordinary() -> None:
    blocks = np.frombuffer(random_data("MXFP4", 32 * 100, np.random.default_rng(3)), dtype=np.uint8)
    exponents = blocks.reshape(-1, 17)[:, 0]
    assert ((exponents > 100) & (exponents < 127)).all()      # 2**-27 .. 2**-1, never NaN (0xFF)


def test_norms_are_one_and_matrices_random(tmp_path: Path) -> None:
    path = write_synthetic_gguf_blocking(spec_of(SMALL, "q8_0"), tmp_path / "model.gguf")
    tensors = {t.name: t for t in GGUFReader(path).tensors}
    assert np.all(tensors["blk.0.attn_norm.weight"].data == 1.0)
    q = dequantize(np.asarray(tensors["blk.0.attn_q.weight"].data), GGMLQuantizationType.Q8_0)
    assert np.isfinite(q).all() and np.std(q) > 1e-3


def test_the_same_seed_writes_the_same_file(tmp_path: Path) -> None:
    spec = spec_of(SMALL, "q4_k_m")
    one = write_synthetic_gguf_blocking(spec, tmp_path / "one.gguf", seed=7)
    two = write_synthetic_gguf_blocking(spec, tmp_path / "two.gguf", seed=7)
    three = write_synthetic_gguf_blocking(spec, tmp_path / "three.gguf", seed=8)
    assert _sha(one) == _sha(two) != _sha(three)


# --- refusals, progress and cancel -------------------------------------------------------------

def test_a_file_over_the_cap_is_refused_before_writing(tmp_path: Path) -> None:
    spec = spec_of(SMALL, "q8_0")
    with pytest.raises(MeasurementError, match="over the cap"):
        write_synthetic_gguf_blocking(spec, tmp_path / "model.gguf", max_bytes=1 << 20)
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_refused_before_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(10**9, 10**9 - 10**6, 10**6))
    with pytest.raises(MeasurementError, match="free"):
        write_synthetic_gguf_blocking(spec_of(SMALL, "q8_0"), tmp_path / "model.gguf")
    assert list(tmp_path.iterdir()) == []


def test_types_without_a_valid_random_block_are_refused(tmp_path: Path) -> None:
    spec = spec_of(SMALL, "q8_0")
    odd = tuple(Tensor(name=t.name, shape=t.shape, type_name="IQ1_M" if t.name == "output.weight" else t.type_name,
                       nbytes=t.nbytes, role=t.role, layer=t.layer) for t in spec.tensors)
    with pytest.raises(MeasurementError, match="IQ1_M"):
        write_synthetic_gguf_blocking(replace(spec, tensors=odd), tmp_path / "model.gguf")


def test_tables_not_named_as_llama_cpp_names_them_are_refused(tmp_path: Path) -> None:
    spec = spec_of(SMALL, "q8_0")
    hf = tuple(replace(t, name=t.name.replace("token_embd", "model.embed_tokens")) for t in spec.tensors)
    with pytest.raises(MeasurementError, match="token_embd"):
        write_synthetic_gguf_blocking(replace(spec, tensors=hf), tmp_path / "model.gguf")


def test_an_mla_table_with_a_fused_kv_b_is_refused(tmp_path: Path) -> None:
    """rooflab's config tables for DeepSeek-V2/V3 keep attn_kv_b fused; current llama.cpp
    asserts (aborts the process) on such a file, so it is never written."""
    config = dict(model_type="deepseek_v2", hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=512, vocab_size=1000, kv_lora_rank=64, q_lora_rank=0, qk_rope_head_dim=32,
                  qk_nope_head_dim=64, v_head_dim=64, n_routed_experts=8, num_experts_per_tok=2,
                  moe_intermediate_size=128, first_k_dense_replace=1, n_shared_experts=1)
    with pytest.raises(MeasurementError, match="attn_kv_b"):
        write_synthetic_gguf_blocking(spec_of(config, "q8_0"), tmp_path / "model.gguf")


def test_progress_rises_to_one(tmp_path: Path) -> None:
    job = write_synthetic_gguf(spec_of(SMALL, "q8_0"), tmp_path / "model.gguf")
    fractions = [p.fraction for p in job]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)


def test_cancel_stops_and_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gguf_synth, "CHUNK_BYTES", 4096)           # many chunks, many checks
    cancel = threading.Event()
    job = write_synthetic_gguf(spec_of(SMALL, "q8_0"), tmp_path / "model.gguf", cancel=cancel)
    next(job)
    cancel.set()
    with pytest.raises(Cancelled):
        for _ in job:
            pass
    assert list(tmp_path.iterdir()) == []


# --- llama.cpp loads what is written -----------------------------------------------------------

@pytest.mark.skipif(not HAS_LLAMA_CPP, reason="llama-cpp-python is not installed")
@pytest.mark.parametrize("name", sorted(small_configs()))
def test_llama_cpp_loads_and_runs_it(tmp_path: Path, name: str, llama_cpp_decodes) -> None:
    """Each architecture family loads, and a prompt gives finite logits (in this process, once
    llama.cpp has run the file in a child process: conftest.py)."""
    spec = spec_of(small_configs()[name], weights_for(name), name=name)
    path = write_synthetic_gguf_blocking(spec, tmp_path / f"{name}.gguf")
    llama_cpp_decodes(spec, path)
