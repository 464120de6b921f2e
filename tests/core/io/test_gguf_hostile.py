"""read_gguf on broken and hostile files: always a one-line ModelFileError naming the file,
never another exception, a hang, or an allocation the file could not back."""

from __future__ import annotations

import os
import random
import struct
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from rooflab.core.errors import ModelFileError
from rooflab.core.io import gguf_header
from rooflab.core.io.gguf import read_gguf, read_header
from tests.factories.gguf_files import Patcher, Spec, T, llama_tensors, llm_meta, write_gguf

Q = "blk.0.attn_q.weight"          # Q4_K [256, 256]; its name is as long as K's
K = "blk.0.attn_k.weight"          # Q4_K [256, 128]


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A two-layer llama with a 5,000-token vocabulary (a skipped array) and a tags array."""
    meta = llm_meta("llama", layers=2, hidden=256, heads=2, kv_heads=1)
    meta["general.tags"] = ["x", "y"]
    meta["tokenizer.ggml.tokens"] = [f"tok{i}" for i in range(5000)]
    return write_gguf(tmp_path / "base.gguf", "llama", llama_tensors(layers=2), meta)


def expect_error(path: Path, *words: str) -> ModelFileError:
    with pytest.raises(ModelFileError) as info:
        read_gguf(path)
    message = str(info.value)
    assert path.name in message and "\n" not in message
    for word in words:
        assert word in message, message
    return info.value


def test_base_is_valid(base: Path) -> None:
    assert read_gguf(base).layers == 2


# --- the file itself -------------------------------------------------------------------------

def test_missing_file(tmp_path: Path) -> None:
    expect_error(tmp_path / "nope.gguf", "no such file")


def test_directory(tmp_path: Path) -> None:
    (tmp_path / "dir.gguf").mkdir()
    expect_error(tmp_path / "dir.gguf", "folder")


def test_empty(tmp_path: Path) -> None:
    (tmp_path / "empty.gguf").write_bytes(b"")
    expect_error(tmp_path / "empty.gguf", "empty")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_named_pipe_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.gguf")
    expect_error(tmp_path / "pipe.gguf", "regular file")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
def test_unreadable(base: Path) -> None:
    base.chmod(0)
    try:
        expect_error(base, "permission")
    finally:
        base.chmod(0o644)


def test_permission_error_is_wrapped(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(gguf_header, "open", refuse, raising=False)
    expect_error(base, "permission denied")


# --- header fields -----------------------------------------------------------------------------

def _truncate_at(n: int) -> Callable[[Patcher], None]:
    def cut(p: Patcher) -> None:
        del p.data[n:]
    return cut


def _tensor_field(name: str, field: int, fmt: str, *values: int) -> Callable[[Patcher], None]:
    def patch(p: Patcher) -> None:
        p.put(fmt, p.tensor_fields(name)[field], *values)
    return patch


HOSTILE: dict[str, tuple[Callable[[Patcher], None], str]] = {
    "wrong magic": (lambda p: p.put("4s", 0, b"GGML"), "not a GGUF file"),
    "version 1": (lambda p: p.put("I", 4, 1), "version 1"),
    "version 4": (lambda p: p.put("I", 4, 4), "version 4"),
    "truncated in preamble": (_truncate_at(10), "truncated"),
    "truncated in metadata": (_truncate_at(200), "truncated"),
    "absurd tensor count": (lambda p: p.put("Q", 8, 1 << 40), "tensors"),
    "absurd key count": (lambda p: p.put("Q", 16, 1 << 40), "metadata keys"),
    "count a little too big": (lambda p: p.put("Q", 16, len(p.data) // 13), "metadata keys"),
    "key length past eof": (lambda p: p.put("Q", p.length_of("general.name"), 1 << 62), "limit"),
    "key length over cap": (lambda p: p.put("Q", p.length_of("general.name"), 5000), "limit"),
    "value length past eof": (
        lambda p: p.put("Q", p.after("general.name") + 4, 1 << 23), "truncated"),
    "unknown value type": (lambda p: p.put("I", p.after("general.name"), 13), "unknown value type 13"),
    "unknown array item type": (lambda p: p.put("I", p.after("general.tags") + 4, 77), "unknown"),
    "nested array": (lambda p: p.put("I", p.after("general.tags") + 4, 9), "nested"),
    "string array past eof": (
        lambda p: p.put("Q", p.after("tokenizer.ggml.tokens") + 8, 1 << 40), "strings"),
    "string in big array past eof": (lambda p: p.put("Q", p.length_of("tok2500"), 1 << 50), "strings"),
    "duplicated key": (lambda p: p.put("12s", p.after("general.tags") - 12, b"general.name"), "twice"),
    "invalid utf-8 key": (lambda p: p.put("2s", p.after("general.name") - 4, b"\xff\xfe"), "UTF-8"),
    "too many dims": (_tensor_field(Q, 0, "I", 9), "9 dimensions"),
    "five dims": (_tensor_field(Q, 0, "I", 5), "at most 4"),
    "zero dim": (_tensor_field(Q, 1, "Q", 0), "shape"),
    "negative dim": (_tensor_field(Q, 1, "Q", (1 << 64) - 256), "shape"),
    "dims overflow": (_tensor_field(Q, 1, "QQ", 1 << 62, 1 << 62), "2**63"),
    "unknown tensor type": (_tensor_field(Q, 2, "I", 4), "unknown tensor type id 4"),
    "huge tensor type": (_tensor_field(Q, 2, "I", 0xFFFFFFFF), "unknown tensor type"),
    "row not a block multiple": (_tensor_field(Q, 1, "Q", 128), "not a multiple of 256"),
    "offset not aligned": (_tensor_field(K, 3, "Q", 36_864 + 1), "alignment"),
    "data past eof": (_tensor_field(K, 3, "Q", 1 << 40), "past the end"),
    "truncated data": (lambda p: p.data.__delitem__(slice(-1000, None)), "past the end"),
    "overlapping tensors": (_tensor_field(K, 3, "Q", 0), "overlaps"),
    "duplicated tensor name": (
        lambda p: p.put(f"{len(Q)}s", p.after(K) - len(K), Q.encode()), "twice"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_header(base: Path, case: str) -> None:
    patch, word = HOSTILE[case]
    p = Patcher(base)
    patch(p)
    bad = p.save(base.with_name(f"bad-{case.replace(' ', '_')}.gguf"))
    expect_error(bad, word)


def _with_alignment(tmp_path: Path, value: int) -> Path:
    writer = GGUFWriter(tmp_path / "align.gguf", "llama")
    writer.add_custom_alignment(64)
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((2, 4), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    p = Patcher(tmp_path / "align.gguf")
    return p.put("I", p.after("general.alignment") + 4, value).save()


@pytest.mark.parametrize("value", [0, 48, 3])
def test_alignment_not_a_power_of_two(tmp_path: Path, value: int) -> None:
    expect_error(_with_alignment(tmp_path, value), "power of two")


# --- metadata that contradicts itself ----------------------------------------------------------

@pytest.mark.parametrize(("meta", "word"), [
    ({"llama.block_count": 1 << 30}, "layers"),
    ({"llama.block_count": "two"}, "whole number"),
    ({"llama.attention.head_count": [2, 2, 2]}, "3 entries for 2 layers"),
    ({"llama.attention.head_count_kv": [-1, 1]}, "whole numbers"),
    ({"llama.expert_count": 4, "llama.expert_used_count": 8}, "experts_used"),
    ({"llama.expert_count": 4}, "expert_used_count"),
    ({"llama.attention.sliding_window": 8,
      "llama.attention.sliding_window_pattern": [True]}, "1 entries for 2 layers"),
])
def test_inconsistent_metadata(tmp_path: Path, meta: dict[str, object], word: str) -> None:
    full = llm_meta("llama", layers=2, hidden=256, heads=2) | meta
    expect_error(write_gguf(tmp_path / "meta.gguf", "llama", llama_tensors(layers=2), full), word)


@pytest.mark.parametrize(("arch", "meta", "word"), [
    ("llama", {"general.type": "adapter"}, "LoRA adapter"),
    ("clip", {}, "projector"),
])
def test_not_a_language_model(tmp_path: Path, arch: str, meta: dict[str, object], word: str) -> None:
    expect_error(write_gguf(tmp_path / "other.gguf", arch, llama_tensors(layers=1), meta), word)


def test_layer_index_beyond_the_file(tmp_path: Path) -> None:
    tensors = [Spec("blk.0.attn_q.weight", (32,), T.F32), Spec("blk.4000000000.attn_q.weight", (32,), T.F32)]
    expect_error(write_gguf(tmp_path / "far.gguf", "mystery", tensors), "layer 4000000000")


def test_no_tensors(tmp_path: Path) -> None:
    expect_error(write_gguf(tmp_path / "vocab-only.gguf", "llama", [], {"llama.block_count": 0}),
                 "no tensors")


# --- (i) fuzz: mutate a real header, 300 times ------------------------------------------------

def test_fuzz_mutations_only_raise_model_file_error(tmp_path: Path) -> None:
    meta = llm_meta("gemma3", layers=1, hidden=256, heads=[2], kv_heads=[1],
                    expert_count=4, expert_used_count=2, **{"attention.sliding_window": 16})
    meta["tokenizer.ggml.tokens"] = [f"t{i}" for i in range(4100)]     # just over the keep limit
    meta["general.file_type"] = 15
    tensors = [Spec("token_embd.weight", (256, 2), T.Q4_K), Spec("blk.0.attn_norm.weight", (8,), T.F32),
               Spec("blk.0.ffn_up_exps.weight", (32, 2, 4), T.Q8_0), Spec("output.weight", (8, 4), T.F16)]
    original = write_gguf(tmp_path / "seed.gguf", "gemma3", tensors, meta).read_bytes()
    header_end = read_header(tmp_path / "seed.gguf").data_start
    rng = random.Random(20240601)
    extremes = [0, 1, 2, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 32, 1 << 62, (1 << 63) - 1,
                1 << 63, (1 << 64) - 1, len(original), len(original) + 1]
    target = tmp_path / "fuzz.gguf"
    outcomes = {"ok": 0, "error": 0}
    slowest, largest = 0.0, 0
    tracemalloc.start()
    for _ in range(300):
        data = bytearray(original)
        region = rng.choice([(0, 400), (0, header_end), (max(0, header_end - 400), header_end)])
        at = rng.randrange(*region)
        kind = rng.randrange(5)
        if kind == 0:
            data[at] = rng.randrange(256)
        elif kind == 1:
            struct.pack_into("<Q", data, min(at, len(data) - 8), rng.choice(extremes))
        elif kind == 2:
            struct.pack_into("<I", data, min(at, len(data) - 4), rng.choice(extremes) & 0xFFFFFFFF)
        elif kind == 3:
            del data[at:]
        else:
            del data[at:at + rng.randrange(1, 64)]
        target.write_bytes(bytes(data))
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        start = time.perf_counter()
        try:
            read_gguf(target)
            outcomes["ok"] += 1
        except ModelFileError as exc:
            assert target.name in str(exc) and "\n" not in str(exc)
            outcomes["error"] += 1
        slowest = max(slowest, time.perf_counter() - start)
        largest = max(largest, tracemalloc.get_traced_memory()[1] - before)
    tracemalloc.stop()
    # What a forged count would cause is an allocation or a loop sized by the count (2**62),
    # not by the file. The allocation bound is exact whatever the load: every read here peaks
    # under 70 kB of Python heap (the file is mapped, not copied) for a 54 kB file. The time
    # bound only catches a runaway loop: honest reads take milliseconds and a runaway one hours,
    # so 10 s leaves a margin of a thousand no shared machine's load comes near.
    assert largest < 16 * len(original) + (256 << 10)
    assert slowest < 10.0
    assert outcomes["error"] > 100 and outcomes["ok"] > 0    # both paths exercised


def test_terminal_escapes_in_name_and_architecture_are_stripped(tmp_path: Path) -> None:
    evil = "\x1b]0;pwned\x07\x1b[2J\x9b31m\n"
    meta = llm_meta("llama", layers=1, hidden=256, heads=2) | {"general.name": f"tiny{evil}model"}
    spec = read_gguf(write_gguf(tmp_path / "named.gguf", "llama", llama_tensors(layers=1), meta))
    assert spec.name == "tiny]0;pwned[2J31m model"
    spec = read_gguf(write_gguf(tmp_path / "arch.gguf", f"mystery{evil}", llama_tensors(layers=1)))
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in spec.architecture + "".join(spec.warnings))
