"""config.json and safetensors headers on broken and hostile input: a one-line ModelFileError
naming the file, never a traceback, a hang, a huge allocation or an impossible model accepted
silently. Ends with mutation fuzz of both, like test_gguf_hostile's."""

from __future__ import annotations

import json
import os
import struct
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from rooflab.core.errors import ModelFileError
from rooflab.core.io import load_model
from tests.factories.fuzz import (
    QWEN3,
    ST_CONFIG,
    config_surface,
    one_line_error,
    run_surface,
    safetensors_bytes,
    safetensors_surface,
)

MOE = {**QWEN3, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128}
GPT_OSS = {"model_type": "gpt_oss", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 256, "vocab_size": 1024,
           "num_local_experts": 8, "experts_per_token": 2, "sliding_window": 128}


def write_config(tmp_path: Path, text: str | bytes, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def expect_error(path: Path, *words: str) -> str:
    return one_line_error(load_model, path, *words)


def raw_config(base: dict[str, Any], **fields: str) -> str:
    """``base`` as JSON with ``fields`` spliced in as raw JSON text (NaN, 10**400, ...)."""
    text = json.dumps({k: v for k, v in base.items() if k not in fields})[:-1]
    return text + "".join(f', "{k}": {v}' for k, v in fields.items()) + "}"


# --- config.json: crashes that were tracebacks -------------------------------------------------

@pytest.mark.parametrize(("base", "fields", "word"), [
    (QWEN3, {"hidden_size": "NaN"}, "NaN"),
    (QWEN3, {"sliding_window": "Infinity"}, "Infinity"),
    (QWEN3, {"hidden_size": "1e400"}, "1e400"),
    ({k: v for k, v in QWEN3.items() if k != "model_type"}, {"architectures": '{"Qwen3ForCausalLM": 1}'},
     "architectures"),
    ({k: v for k, v in QWEN3.items() if k != "model_type"}, {"architectures": "5"}, "architectures"),
    (QWEN3, {"model_type": "5"}, "model_type"),
    (MOE, {"mlp_only_layers": "5"}, "mlp_only_layers"),
    (MOE, {"mlp_only_layers": '["a"]'}, "mlp_only_layers"),
    (MOE, {"mlp_only_layers": "[99]"}, "mlp_only_layers"),
    (GPT_OSS, {"layer_types": "24"}, "layer_types"),
    (GPT_OSS, {"layer_types": "[1, 2, 3, 4]"}, "layer_types"),
    (QWEN3, {"sliding_window": "1e300"}, "sliding_window"),
    (QWEN3, {"hidden_size": "1" * 5000}, "5,000 digits"),
    (QWEN3, {"vocab_size": "[" * 100_000 + "]" * 100_000}, "deeper"),
])
def test_config_crashes_are_one_line(tmp_path, base, fields, word):
    expect_error(write_config(tmp_path, raw_config(base, **fields)), word)


# --- config.json: impossible shapes that were accepted silently --------------------------------

@pytest.mark.parametrize(("fields", "word"), [
    ({"num_key_value_heads": 0}, "num_key_value_heads"),
    ({"num_attention_heads": 32, "num_key_value_heads": 7, "head_dim": 8}, "divide"),
    ({"num_attention_heads": 4, "num_key_value_heads": 8}, "num_key_value_heads"),
    ({"head_dim": 0}, "head_dim"),
    ({"head_dim": None, "num_attention_heads": 512, "num_key_value_heads": 512}, "head_dim"),   # 256 // 512
    ({"vocab_size": 0}, "vocab_size"),
    ({"num_experts": 8, "num_experts_per_tok": 9, "moe_intermediate_size": 64}, "num_experts_per_tok"),
    ({"intermediate_size": 1 << 40}, "intermediate_size"),
])
def test_impossible_shapes_are_refused(tmp_path, fields, word):
    expect_error(write_config(tmp_path, json.dumps({**QWEN3, **fields})), word)


def test_first_k_dense_replace_is_bounded_by_the_layer_count(tmp_path):
    config = {**MOE, "first_k_dense_replace": 10**12, "decoder_sparse_step": 10**12}
    path = write_config(tmp_path, json.dumps(config))
    tracemalloc.start()
    start = time.perf_counter()
    try:
        spec = load_model(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 5 and peak < 16 << 20       # was a set of 10^12 layer numbers
    assert not any(t.role.value == "experts" for t in spec.tensors)     # every layer dense


def test_utf8_byte_order_mark_is_read(tmp_path):
    assert load_model(write_config(tmp_path, b"\xef\xbb\xbf" + json.dumps(QWEN3).encode())).layers == 2


def test_terminal_escapes_in_names_are_stripped(tmp_path):
    config = {**QWEN3, "model_type": "qwen3\x1b]0;pwned\x07\x1b[2J", "_name_or_path": "x/\x1b[31mred\x9b1m\n"}
    spec = load_model(write_config(tmp_path, json.dumps(config)))
    for text in (spec.name, spec.architecture):
        assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text), repr(text)
    assert spec.architecture == "qwen3]0;pwned[2j" and spec.name == "[31mred1m"


# --- special files named config.json ------------------------------------------------------------

@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_named_config_json_is_refused_not_read(tmp_path):
    os.symlink("/dev/zero", tmp_path / "config.json")
    expect_error(tmp_path / "config.json", "character device")
    expect_error(tmp_path, "character device")            # the folder's config.json
    expect_error(Path("/dev/zero"), "character device")    # said "no such file or folder"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_fifo_named_config_json_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "config.json")
    expect_error(tmp_path / "config.json", "named pipe")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_fifo_named_safetensors_does_not_hang(tmp_path):
    write_config(tmp_path, json.dumps(ST_CONFIG))
    os.mkfifo(tmp_path / "model.safetensors")
    expect_error(tmp_path, "named pipe")


# --- safetensors headers --------------------------------------------------------------------------

GOOD_TENSOR = {"dtype": "F16", "shape": [4, 2], "data_offsets": [0, 16]}


def write_folder(tmp_path: Path, tensor: dict[str, Any], data: int = 16) -> Path:
    write_config(tmp_path, json.dumps(ST_CONFIG))
    text = json.dumps({"model.layers.0.mlp.up_proj.weight": tensor}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + bytes(data))
    return tmp_path


@pytest.mark.parametrize(("change", "word"), [
    ({"data_offsets": [0, 32, 64]}, "data_offsets"),
    ({"data_offsets": 64}, "data_offsets"),
    ({"data_offsets": [0, True]}, "data_offsets"),
    ({"data_offsets": [8, 4]}, "outside"),
    ({"data_offsets": [0, 1 << 40]}, "outside"),
    ({"shape": "ab"}, "shape"),
    ({"shape": [None]}, "shape"),
    ({"shape": [-4, 2]}, "shape"),
    ({"shape": [2.5, 2]}, "shape"),
    ({"shape": [1 << 62, 1 << 62]}, "shape"),
    ({"shape": [4, 4]}, "needs 32 bytes"),
    ({"dtype": 5}, "dtype"),
])
def test_bad_safetensors_entries_are_one_line(tmp_path, change, word):
    folder = write_folder(tmp_path, {**GOOD_TENSOR, **change})
    message = expect_error(folder, word)
    assert "model.safetensors" in message


def test_negative_shape_no_longer_gives_negative_parameters(tmp_path):
    assert load_model(write_folder(tmp_path, GOOD_TENSOR)).params_total == 8
    with pytest.raises(ModelFileError, match="shape"):
        load_model(write_folder(tmp_path, {**GOOD_TENSOR, "shape": [-4, -2]}))


def test_safetensors_header_nesting_and_numbers(tmp_path):
    write_config(tmp_path, json.dumps(ST_CONFIG))
    for text in (b"[" * 100_000, b'{"t": {"shape": [' + b"9" * 5000 + b"]}}", b'{"t": NaN}'):
        (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text)
        expect_error(tmp_path, "safetensors header")


def test_packed_and_sub_byte_types_are_sized_exactly(tmp_path):
    write_config(tmp_path, json.dumps(ST_CONFIG))
    tensors = {"model.layers.0.mlp.up_proj.weight": ("U8", [8, 4])}
    (tmp_path / "model.safetensors").write_bytes(safetensors_bytes(tensors))
    assert load_model(tmp_path).weight_bytes == 32


# --- fuzz: a few hundred mutations of each --------------------------------------------------------


@pytest.mark.parametrize("make", [config_surface, safetensors_surface], ids=["config.json", "safetensors"])
def test_fuzz_mutations_only_raise_clean_errors(tmp_path, make):
    tally = run_surface(make(), 300, tmp_path, seed=20250101)
    assert not tally.crashes, "\n".join(tally.crashes[:5])
    assert not tally.hangs, tally.hangs[:5]
    # a mutated config is a few kB; reading it, building its tensor table and the CLI's JSON take
    # a few MB at most (1,000 layers about 6 MB). The time bound only catches a runaway loop:
    # honest cases take milliseconds, and a count the file does not bound (10^12 dense layers)
    # minutes.
    assert tally.peak < 64 << 20
    assert tally.slowest < 10.0
    assert tally.errors > 50 and tally.accepted > 20          # both paths exercised
