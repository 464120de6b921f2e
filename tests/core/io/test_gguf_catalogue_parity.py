"""A GGUF file with a catalogue model's exact tensor table gives the same W, KV and predictions
as the catalogue entry. The files are sparse: a real header and tensor table, then a hole as
long as the tensor data, so a 63 GB model costs a few MB of disk."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest

from rooflab.core.cli.main import main
from rooflab.core.io import load_model
from rooflab.core.predict.work import weight_bytes_read_per_token
from rooflab.core.report.tables import grouped_rows
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.quant import type_by_name

ALIGN = 32


def write_sparse_gguf(path, spec: ModelSpec, arch: str, meta: dict) -> None:
    """Header + tensor infos of ``spec`` under ``arch``; tensor data left as a sparse hole."""
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(spec.name)
    writer.add_block_count(spec.layers)
    writer.add_embedding_length(spec.hidden)
    writer.add_head_count(spec.attention.heads[0])
    writer.add_head_count_kv(spec.attention.kv_heads[0])
    writer.add_key_length(spec.attention.head_dim_k)
    writer.add_value_length(spec.attention.head_dim_v)
    writer.add_context_length(spec.context_length or 4096)
    if spec.experts:
        writer.add_expert_count(spec.experts)
        writer.add_expert_used_count(spec.experts_used)
    for key, value in meta.items():
        writer.add_uint32(key, value)
    for t in spec.tensors:
        writer.add_tensor_info(t.name, tuple(reversed(t.shape)), np.dtype(np.float32), t.nbytes,
                               raw_dtype=type_by_name(t.type_name))
    writer.write_header_to_file(path)
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    size = path.stat().st_size
    data = -(-size // ALIGN) * ALIGN
    for t in spec.tensors:
        data += -(-t.nbytes // ALIGN) * ALIGN
    with path.open("r+b") as handle:
        handle.truncate(data)


CASES = [
    ("qwen3-8b-q4_k_m", "qwen3", {}),
    ("qwen3-30b-a3b-q4_k_m", "qwen3moe", {}),
    ("gpt-oss-120b-mxfp4", "gpt-oss", {"gpt-oss.attention.sliding_window": 128}),
]


@pytest.mark.parametrize("key, arch, meta", CASES)
def test_same_table_same_numbers(tmp_path, key, arch, meta):
    entry = load_model(key)
    path = tmp_path / f"{key}.gguf"
    write_sparse_gguf(path, entry, arch, meta)
    spec = load_model(path)
    assert spec.weight_bytes == entry.weight_bytes
    assert weight_bytes_read_per_token(spec) == weight_bytes_read_per_token(entry)
    assert spec.kv_bytes_per_token("f16") == entry.kv_bytes_per_token("f16")
    assert spec.attention.sliding == entry.attention.sliding
    assert [(g.group.name, g.group.bytes, g.bytes_read_per_token) for g in grouped_rows(spec)] == \
           [(g.group.name, g.group.bytes, g.bytes_read_per_token) for g in grouped_rows(entry)]


def test_predict_from_gguf_matches_lesson(tmp_path, capsys):
    path = tmp_path / "Qwen3-8B-Q4_K_M.gguf"
    write_sparse_gguf(path, load_model("qwen3-8b-q4_k_m"), "qwen3", {})
    assert main(["predict", "--model", str(path), "--machine", "dgx-spark", "--contexts", "0,4096,32768",
                 "--batches", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"]["weight_bytes_read_per_token"] == 4_671_768_832
    assert [round(r["tokens_per_second_per_sequence"], 1) for r in d["decode"]] == [58.4, 51.7, 28.7]
