"""The one JSON reader: a hard byte cap whatever stat says, only regular files (refused by kind,
never blocking), a nesting limit before json recurses, no absurd or non-finite numbers, a
byte-order mark accepted; and the writer that never emits NaN or Infinity. Every refusal is one
ModelFileError line naming the file."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from rooflab.core.errors import ModelFileError
from rooflab.core.files import capped
from rooflab.core.files.capped import MissingFileError, read_capped
from rooflab.core.files.safe_json import MAX_DEPTH, JsonError, dumps_json, parse_json, read_json

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX special files")


def refused(path: Path | str, *words: str, **options: object) -> ModelFileError:
    with pytest.raises(ModelFileError) as info:
        read_json(path, **options)  # type: ignore[arg-type]
    message = str(info.value)
    assert str(path) in message and "\n" not in message, message
    for word in words:
        assert word in message, message
    return info.value


def write(tmp_path: Path, text: str | bytes, name: str = "x.json") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


# --- what the text may hold ------------------------------------------------------------------

@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000,
                                  "[" * 100_000])
def test_deep_nesting_is_one_line_not_recursion_error(tmp_path, text):
    refused(write(tmp_path, text), f"deeper than {MAX_DEPTH}")


def test_nesting_at_the_limit_is_read_and_brackets_in_strings_do_not_count(tmp_path):
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert parse_json(json.dumps({"name": "[[[{" * 1000})) == {"name": "[[[{" * 1000}
    with pytest.raises(JsonError, match="deeper"):
        parse_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def test_a_5000_digit_integer_is_one_line_not_python_limit(tmp_path):
    error = refused(write(tmp_path, '{"hidden_size": ' + "1" * 5000 + "}"), "5,000 digits")
    assert "sys.set_int_max_str_digits" not in str(error)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
def test_non_finite_numbers_are_refused(tmp_path, literal):
    refused(write(tmp_path, f'{{"bandwidth": {literal}}}'), literal.lstrip("-"))


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    assert read_json(write(tmp_path, b'\xef\xbb\xbf{"model_type": "llama"}')) == {"model_type": "llama"}
    assert parse_json('\ufeff[1]') == [1]


def test_not_utf8_and_not_json(tmp_path):
    refused(write(tmp_path, b'{"a": "\xff"}'), "not UTF-8")
    refused(write(tmp_path, "{oops"), "not valid JSON", "line 1")


def test_huge_but_valid_integers_and_tiny_floats_are_read():
    assert parse_json("[" + "9" * 308 + ", 1e-400]") == [int("9" * 308), 0.0]


# --- what the file may be --------------------------------------------------------------------

def test_missing_file_has_its_own_type(tmp_path):
    with pytest.raises(MissingFileError, match="no such file"):
        read_json(tmp_path / "nope.json")
    write(tmp_path, "{}", "a-file")
    with pytest.raises(MissingFileError):
        read_json(tmp_path / "a-file" / "below.json")


def test_directory_is_refused_by_kind(tmp_path):
    (tmp_path / "dir.json").mkdir()
    refused(tmp_path / "dir.json", "is a folder")


@posix_only
def test_symlink_loop_is_refused_by_kind(tmp_path):
    os.symlink(tmp_path / "b.json", tmp_path / "a.json")
    os.symlink(tmp_path / "a.json", tmp_path / "b.json")
    refused(tmp_path / "a.json", "loop of symbolic links")


@posix_only
def test_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.json")
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_json(tmp_path / "pipe.json")
        except BaseException as exc:    # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():                 # a writer unblocks the reader, so the session can end
        os.close(os.open(tmp_path / "pipe.json", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO blocked")
    assert isinstance(outcome[0], ModelFileError) and "named pipe" in str(outcome[0])


@posix_only
@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_and_a_link_to_it_are_refused_before_reading(tmp_path):
    refused("/dev/zero", "character device")
    os.symlink("/dev/zero", tmp_path / "config.json")
    refused(tmp_path / "config.json", "character device")


@posix_only
@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="no /dev/stdin")
def test_dev_stdin_is_refused_by_kind_unless_it_is_a_file():
    mode = os.fstat(0).st_mode
    if stat.S_ISREG(mode):
        pytest.skip("stdin is a regular file here")
    refused("/dev/stdin", capped.file_kind(mode))


def test_the_cap_holds_whatever_stat_says(tmp_path, monkeypatch):
    big = write(tmp_path, b"[" + b"0," * 5_000_000 + b"0]")        # 10 MB
    tracemalloc.start()
    try:
        refused(big, "larger than 1,024 bytes", max_bytes=1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 << 10
    # a size that lies (a device, a file growing as it is read): only max_bytes + 1 are read
    reads: list[int] = []
    real_read = os.read

    def counting(fd: int, n: int) -> bytes:
        reads.append(n)
        return real_read(fd, n)

    with monkeypatch.context() as patch, pytest.raises(ModelFileError, match="larger than"):
        patch.setattr(capped.os, "read", counting)
        patch.setattr(capped.os, "stat", lambda *a, **k: os.stat_result((stat.S_IFREG | 0o644,) + (0,) * 9))
        read_capped(big, 4096, "a test file")
    assert sum(reads) <= 4097


def test_reading_a_16_mb_bracket_file_is_quick(tmp_path):
    path = write(tmp_path, b"[" * (16 << 20))
    start = time.perf_counter()
    refused(path, "deeper", max_bytes=32 << 20)
    assert time.perf_counter() - start < 10      # linear: about 0.1 s; a quadratic scan takes hours


# --- writing ---------------------------------------------------------------------------------

def test_dumps_json_writes_null_for_non_finite_numbers():
    text = dumps_json({"a": float("inf"), "b": [float("nan"), 1.5, -float("inf")], "c": (2, "x")})
    assert json.loads(text) == {"a": None, "b": [None, 1.5, None], "c": [2, "x"]}
