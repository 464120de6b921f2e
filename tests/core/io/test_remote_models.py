"""Models on a server: GGUF headers and safetensors headers read by HTTP range requests from a
real server on 127.0.0.1 (``tests/factories/model_server.py``), never the whole file, giving the
same ModelSpec as the same files on disk; the Hub's conventions (HF_ENDPOINT, HF_TOKEN, the HF
cache); the header cache; one line for every bad answer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFValueType, GGUFWriter
from gguf.quants import quant_shape_to_byte_shape
from safetensors.numpy import save_file

from rooflab.core.errors import ModelFileError
from rooflab.core.files.paths import cache_dir
from rooflab.core.io import load_model, takes_weights
from rooflab.core.io.catalogue import get_entry
from rooflab.core.io.hf import spec_from_folder
from rooflab.core.values.quant import type_by_name
from tests.factories.gguf_files import Spec, add_meta, llama_tensors, llm_meta, tiny_llama, write_gguf
from tests.factories.model_server import hub_file, serve_files

MB = 1 << 20


@pytest.fixture(autouse=True)
def no_real_hub(monkeypatch, tmp_path):
    """No test reads the real Hub, token or HF cache: the cache is an empty folder."""
    for var in ("HF_ENDPOINT", "HF_TOKEN", "HF_HOME", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))


def same_model(a, b):
    """Two specs of one model: the same tensor table, layout and figures (sources differ)."""
    assert a.tensors == b.tensors
    assert a.attention == b.attention
    assert (a.hidden, a.vocab, a.layers, a.context_length, a.weights_format, a.experts) == \
           (b.hidden, b.vocab, b.layers, b.context_length, b.weights_format, b.experts)
    assert a.weight_bytes == b.weight_bytes and a.params_total == b.params_total


def qwen3_32b_layout(path: Path) -> Path:
    """A 20 GB file's header: Qwen3-32B's tensor table at Q4_K_M (from the catalogue) and a
    151,936-token vocabulary, the tensor data a sparse hole."""
    spec = load_model("qwen3-32b-q4_k_m")
    tensors = [Spec(t.name, t.shape, type_by_name(t.type_name)) for t in spec.tensors]
    meta = llm_meta("qwen3", layers=64, hidden=5120, heads=64, kv_heads=8, context=40960,
                    **{"attention.key_length": 128, "attention.value_length": 128})
    meta["general.file_type"] = 15
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(path, "qwen3")
    add_meta(writer, meta)
    vocabulary = [f"tok{i:06d}" for i in range(151_936)]
    writer.add_key_value("tokenizer.ggml.tokens", vocabulary, GGUFValueType.ARRAY, sub_type=GGUFValueType.STRING)
    for t in tensors:
        writer.add_tensor_info(t.name, tuple(reversed(t.shape)), np.dtype(np.float32), t.nbytes, raw_dtype=t.type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    align = writer.data_alignment
    with open(path, "r+b") as file:
        start = -(-file.seek(0, 2) // align) * align
        file.truncate(start + sum(-(-t.nbytes // align) * align for t in tensors))
    return path


def test_a_20_gb_gguf_by_url_reads_its_header_only_and_matches_the_file(tmp_path):
    path = qwen3_32b_layout(tmp_path / "files" / "Qwen3-32B-Q4_K_M.gguf")
    size = path.stat().st_size
    assert size > 19e9
    with serve_files(tmp_path / "files") as served:
        remote = load_model(f"{served.url}/x/Qwen3-32B-Q4_K_M.gguf")
    same_model(remote, load_model(path))
    assert remote.file_bytes == size
    assert remote.source == f"{served.url}/x/Qwen3-32B-Q4_K_M.gguf"
    print(f"served {served.bytes_sent:,} bytes of a {size:,}-byte file in {len(served.requests)} requests")
    assert 2 * MB < served.bytes_sent < 16 * MB and served.bytes_sent < 0.05 * size
    assert len(served.requests) >= 2                  # the first megabyte did not hold the vocabulary


def test_a_server_without_ranges_is_one_line_and_no_download(tmp_path):
    path = qwen3_32b_layout(tmp_path / "files" / "big.gguf")
    with serve_files(tmp_path / "files", ranges=False) as served:
        url = f"{served.url}/x/big.gguf"
        with pytest.raises(ModelFileError) as err:
            load_model(url)
    assert str(err.value).startswith(url + ": the server at 127.0.0.1")
    assert "does not answer range requests" in str(err.value) and "\n" not in str(err.value)
    assert f"would send the whole file, {path.stat().st_size:,} bytes)" in str(err.value)
    assert served.bytes_sent < 64 * MB < path.stat().st_size


def write_split(folder: Path) -> tuple[Path, list[Path]]:
    """One tiny llama written whole and split into three parts (gguf's own splitter)."""
    meta = llm_meta("llama", layers=8, hidden=256, heads=2, kv_heads=1)
    tensors = llama_tensors()
    whole = write_gguf(folder / "whole.gguf", "llama", tensors, meta)
    writer = GGUFWriter(folder / "tiny.gguf", "llama", split_max_tensors=30)
    add_meta(writer, meta)
    for t in tensors:
        raw = np.zeros(quant_shape_to_byte_shape(tuple(reversed(t.shape)), t.type), dtype=np.uint8)
        writer.add_tensor(t.name, raw, raw_dtype=t.type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return whole, sorted(folder.glob("tiny-*-of-*.gguf"))


def test_split_gguf_on_the_hub_reads_every_part(tmp_path, monkeypatch):
    root = tmp_path / "hub"
    whole, parts = write_split(tmp_path)
    assert len(parts) == 3
    for p in parts:
        hub_file(root, "org/Tiny-GGUF", p.name).write_bytes(p.read_bytes())
    with serve_files(root) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        spec = load_model("hf:org/Tiny-GGUF/tiny-00002-of-00003.gguf")      # any part names the model
    same_model(spec, load_model(whole))
    assert spec.file_bytes == sum(p.stat().st_size for p in parts)
    assert not any("shard" in w for w in spec.warnings)
    assert {path for _, path, _ in served.requests} == {f"/org/Tiny-GGUF/resolve/main/{p.name}" for p in parts}


def test_a_split_gguf_on_disk_is_read_whole_from_any_part(tmp_path):
    whole, parts = write_split(tmp_path)
    spec = load_model(parts[1])
    same_model(spec, load_model(whole))
    assert spec.file_bytes == sum(p.stat().st_size for p in parts) and spec.source == str(parts[1])
    parts[2].unlink()                       # a part missing: the one named is read alone, and says so
    alone = load_model(parts[0])
    assert len(alone.tensors) < len(spec.tensors) and any("one shard of 3" in w for w in alone.warnings)


def safetensors_repo(root: Path, repo: str, *, shards: int) -> Path:
    """A transformers repository's files: config.json, the weights in ``shards`` files and,
    for more than one, model.safetensors.index.json. Returns the folder."""
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "vocab_size": 256, "tie_word_embeddings": False,
              "max_position_embeddings": 2048, "torch_dtype": "float16"}
    tensors = {"model.embed_tokens.weight": (256, 64), "lm_head.weight": (256, 64), "model.norm.weight": (64,)}
    for i in range(2):
        p = f"model.layers.{i}."
        tensors |= {p + "self_attn.q_proj.weight": (64, 64), p + "self_attn.k_proj.weight": (32, 64),
                    p + "self_attn.v_proj.weight": (32, 64), p + "self_attn.o_proj.weight": (64, 64),
                    p + "mlp.gate_proj.weight": (128, 64), p + "mlp.up_proj.weight": (128, 64),
                    p + "mlp.down_proj.weight": (64, 128), p + "input_layernorm.weight": (64,),
                    p + "post_attention_layernorm.weight": (64,)}
    folder = hub_file(root, repo, "config.json").parent
    (folder / "config.json").write_text(json.dumps(config))
    names = sorted(tensors)
    if shards == 1:
        save_file({n: np.zeros(tensors[n], np.float16) for n in names}, str(folder / "model.safetensors"))
        return folder
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        chunk = names[s::shards]
        save_file({n: np.zeros(tensors[n], np.float16) for n in chunk}, str(folder / file))
        weight_map |= {n: file for n in chunk}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


@pytest.mark.parametrize("shards", [1, 3])
def test_a_transformers_repository_by_hub_name(tmp_path, monkeypatch, shards):
    folder = safetensors_repo(tmp_path / "hub", "org/Tiny-Llama", shards=shards)
    with serve_files(tmp_path / "hub") as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        spec = load_model("hf:org/Tiny-Llama")
        q4 = load_model("hf:org/Tiny-Llama", weights="q4_k_m")
    local = spec_from_folder(folder)
    same_model(spec, local)
    assert spec.file_bytes == local.file_bytes and spec.name == "Tiny-Llama" and spec.source == "hf:org/Tiny-Llama"
    assert q4.weights_format == "Q4_K_M" and q4.weight_bytes < 0.6 * spec.weight_bytes   # rows of 64: no Q4_K
    assert takes_weights("hf:org/Tiny-Llama") and not takes_weights("hf:org/Tiny-GGUF/a.gguf")


def test_a_32b_transformers_repository_reads_headers_only(tmp_path, monkeypatch):
    """Two 33 GB safetensors shards of a Qwen3-32B layout (BF16, sparse on disk), one with a 1.5 MB
    header: the header is read in growing ranges, a few MB of 65 GB in all, and the tensor table
    equals the folder's on disk."""
    config = json.loads(json.dumps(get_entry("qwen3-32b-q4_k_m").config))
    folder = hub_file(tmp_path / "hub", "org/Big", "config.json").parent
    (folder / "config.json").write_text(json.dumps(config))
    shapes = [(t.name, tuple(reversed(t.shape))) for t in load_model("qwen3-32b-q4_k_m", weights="bf16").tensors]
    weight_map = {}
    for shard in (1, 2):
        file = f"model-{shard:05d}-of-00002.safetensors"
        header, offset = {}, 0
        for name, shape in shapes[shard - 1::2]:
            nbytes = 2 * int(np.prod(shape))
            header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
            weight_map[name] = file
        if shard == 2:
            header["__metadata__"] = {"format": "pt", "note": "x" * 1_500_000}
        raw = json.dumps(header).encode()
        with open(folder / file, "wb") as handle:
            handle.write(len(raw).to_bytes(8, "little") + raw)
            handle.truncate(8 + len(raw) + offset)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    with serve_files(tmp_path / "hub") as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        spec = load_model("hf:org/Big")
    same_model(spec, spec_from_folder(folder))
    assert spec.file_bytes == size > 60e9 and spec.weights_format == "safetensors (BF16)"
    assert served.bytes_sent < 8 * MB and served.bytes_sent < 0.05 * size
    shard_two = [p for m, p, _ in served.requests if m == "GET" and p.endswith("00002-of-00002.safetensors")]
    assert len(shard_two) == 2                                  # 1 MB, then the rest of its header


def test_a_revision_goes_into_the_resolve_url(tmp_path, monkeypatch):
    path = tiny_llama(hub_file(tmp_path / "hub", "org/T", "t.gguf", revision="v1.0"))
    with serve_files(tmp_path / "hub") as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        same_model(load_model("hf:org/T/t.gguf@v1.0"), load_model(path))
        with pytest.raises(ModelFileError, match=r"^hf:org/T/t\.gguf: t\.gguf: not found \(404\)$"):
            load_model("hf:org/T/t.gguf")


def test_the_second_look_is_offline_from_the_header_cache(tmp_path, monkeypatch):
    path = tiny_llama(hub_file(tmp_path / "hub", "org/T", "t.gguf"))
    with serve_files(tmp_path / "hub") as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        first = load_model("hf:org/T/t.gguf")
        again = load_model("hf:org/T/t.gguf")             # the ETag still matches: one HEAD, no body
    assert [m for m, _, _ in served.requests] == ["GET", "HEAD"]
    same_model(again, first)
    same_model(load_model("hf:org/T/t.gguf"), first)       # the server is gone: the cache answers
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    same_model(load_model("hf:org/T/t.gguf"), load_model(path))
    with pytest.raises(ModelFileError, match="not in the cache and HF_HUB_OFFLINE is set"):
        load_model("hf:org/T/other.gguf")


def test_the_hugging_face_cache_is_read_before_the_network(tmp_path, monkeypatch):
    cache = tmp_path / "hf-cache" / "models--org--T"
    commit = "a" * 40
    (cache / "refs").mkdir(parents=True)
    (cache / "refs" / "main").write_text(commit)
    (cache / "snapshots" / commit).mkdir(parents=True)
    path = tiny_llama(cache / "snapshots" / commit / "t.gguf")
    with serve_files(tmp_path / "empty") as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        same_model(load_model("hf:org/T/t.gguf"), load_model(path))
    assert served.requests == []


def test_hf_token_opens_a_gated_repository_and_is_never_kept(tmp_path, monkeypatch):
    tiny_llama(hub_file(tmp_path / "hub", "org/private-model", "t.gguf"))
    with serve_files(tmp_path / "hub", token="hf_secret123") as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        with pytest.raises(ModelFileError) as err:
            load_model("hf:org/private-model/t.gguf")
        assert str(err.value) == ("hf:org/private-model/t.gguf: t.gguf: access denied (401); a gated or private "
                                  "repository needs HF_TOKEN set to a token that may read it")
        monkeypatch.setenv("HF_TOKEN", "hf_secret123")
        assert load_model("hf:org/private-model/t.gguf").layers == 8
    assert served.requests[-1][2]["Authorization"] == "Bearer hf_secret123"
    written = [p for p in cache_dir().parent.parent.rglob("*") if p.is_file()]      # every user folder
    assert any("remote" in p.parts for p in written)
    assert not any(b"hf_secret123" in p.read_bytes() for p in written)


def test_a_quant_tag_picks_the_file_and_a_gguf_repository_says_how_to_name_one(tmp_path, monkeypatch):
    for quant in ("Q4_K_M", "Q8_0"):
        tiny_llama(hub_file(tmp_path / "hub", "org/Tiny-GGUF", f"Tiny-{quant}.gguf"))
    with serve_files(tmp_path / "hub") as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        assert load_model("hf:org/Tiny-GGUF:q8_0").layers == 8
        assert ("GET", "/org/Tiny-GGUF/resolve/main/Tiny-Q8_0.gguf") in [(m, p) for m, p, _ in served.requests]
        with pytest.raises(ModelFileError, match=r"^hf:org/Tiny-GGUF: has no config.json but 2 GGUF files: name one, "
                                                 r"e\.g\. hf:org/Tiny-GGUF/Tiny-Q4_K_M\.gguf"):
            load_model("hf:org/Tiny-GGUF")
        with pytest.raises(ModelFileError, match="no GGUF file of type IQ2_XXS"):
            load_model("hf:org/Tiny-GGUF:IQ2_XXS")


def test_a_server_that_caps_ranges_or_refuses_head_still_serves(tmp_path):
    """Fewer bytes than asked for are taken and the rest asked for again; a server that refuses
    HEAD has its header read again on the second look instead of checked."""
    path = qwen3_32b_layout(tmp_path / "files" / "big.gguf")
    with serve_files(tmp_path / "files") as served:
        same_model(load_model(f"{served.url}/capped/big.gguf"), load_model(path))
        assert served.bytes_sent < 16 * MB and len(served.requests) > 8
        for _ in range(2):
            same_model(load_model(f"{served.url}/nohead/big.gguf"), load_model(path))
    assert [m for m, p, _ in served.requests if p.startswith("/nohead/")].count("HEAD") == 1


@pytest.mark.parametrize("prefix, words", [
    ("wrong-range", "the server sent bytes 1-1048575"),
    ("short", "bytes for a range of 1,048,576"),
    ("loop", "too many redirects"),
    ("endless", "not a GGUF file"),
])
def test_hostile_answers_are_one_line(tmp_path, prefix, words):
    (tmp_path / "files").mkdir()
    tiny_llama(tmp_path / "files" / "t.gguf")
    with serve_files(tmp_path / "files") as served:
        url = f"{served.url}/{prefix}/t.gguf"
        with pytest.raises(ModelFileError) as err:
            load_model(url)
    assert str(err.value).startswith(url + ": ") and words in str(err.value) and "\n" not in str(err.value)
    assert served.bytes_sent < 8 * MB


def test_a_truncated_header_and_an_endless_config_are_refused(tmp_path, monkeypatch):
    data = tiny_llama(tmp_path / "t.gguf").read_bytes()
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "cut.gguf").write_bytes(data[:2500])                 # inside its tensor table
    with serve_files(tmp_path / "files") as served:
        with pytest.raises(ModelFileError, match="the file ends after 2500 bytes, inside the header"):
            load_model(f"{served.url}/x/cut.gguf")
        monkeypatch.setenv("HF_ENDPOINT", f"{served.url}/endless")
        with pytest.raises(ModelFileError, match="more than the 16,777,216 bytes read at most"):
            load_model("hf:org/Endless")


def test_offline_and_missing_name_the_model(tmp_path):
    with serve_files(tmp_path) as served:
        url = served.url
    with pytest.raises(ModelFileError, match=rf"^{url}/m\.gguf: cannot reach 127\.0\.0\.1:\d+ \(.*\); offline\?$"):
        load_model(f"{url}/m.gguf")
    with pytest.raises(ModelFileError, match="must end in .gguf"):
        load_model(f"{url}/model.bin")
    with pytest.raises(ModelFileError, match="not a Hugging Face name"):
        load_model("hf:just-a-name")
