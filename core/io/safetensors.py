"""The tensor table of a .safetensors file, from its header alone (no weights are read).

The file is an 8-byte little-endian header length, a JSON object naming each tensor's
``dtype``, ``shape`` and ``data_offsets`` (begin and end within the data that follows), then
the data. Every entry is checked as the safetensors library checks it: offsets inside the
file, a shape of whole numbers >= 0 whose elements fill exactly the bytes the offsets give."""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rooflab.core.errors import ModelFileError
from rooflab.core.files.capped import open_regular, os_error
from rooflab.core.files.safe_json import JsonError, parse_json
from rooflab.core.io.textfile import printable, shown

MAX_HEADER = 100_000_000         # the format's own limit
MAX_DIMS = 8
MAX_DIM = 1 << 63
# bits per element (sub-byte types are packed)
ELEMENT_BITS: dict[str, int] = {
    "F64": 64, "F32": 32, "F16": 16, "BF16": 16, "I64": 64, "I32": 32, "I16": 16, "I8": 8, "U8": 8, "BOOL": 8,
    "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "U16": 16, "U32": 32, "U64": 64, "F4": 4, "F6_E2M3": 6,
    "F6_E3M2": 6,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredTensor:
    """One tensor as Hugging Face names and stores it: torch's shape order (row length last),
    its element type (safetensors spelling: F32, BF16, ...) and its bytes."""

    name: str
    shape: tuple[int, ...]
    type_name: str
    nbytes: int


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _read_header_bytes(path: Path) -> tuple[bytes, int]:
    """(the JSON header, bytes of data after it)."""
    name = os.fspath(path)
    fd = open_regular(name, "a safetensors file")
    try:
        size = os.fstat(fd).st_size
        length = header_length(path, os.read(fd, 8), size)
        chunks, got = [], 0
        while got < length:
            chunk = os.read(fd, min(1 << 20, length - got))
            if not chunk:
                raise ModelFileError(path, "truncated inside the safetensors header")
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise os_error(name, exc) from None
    finally:
        os.close(fd)
    return b"".join(chunks), size - 8 - length


def _entry(path: Path | str, key: str, info: Any, data_bytes: int) -> StoredTensor:
    label = shown(key)
    if not isinstance(info, dict):
        raise ModelFileError(path, f"tensor {label} is {shown(info)}, not an object")
    offsets, shape, dtype = info.get("data_offsets"), info.get("shape"), info.get("dtype")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_whole(x) for x in offsets):
        raise ModelFileError(path, f"tensor {label} data_offsets must be two whole numbers, got {shown(offsets)}")
    begin, end = offsets
    if not begin <= end <= data_bytes:
        raise ModelFileError(path, f"tensor {label} data_offsets {shown(offsets)} are outside the file")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(_whole(d) and d < MAX_DIM for d in shape):
        raise ModelFileError(path, f"tensor {label} shape must be a list of at most {MAX_DIMS} whole numbers "
                                   f">= 0, got {shown(shape)}")
    if not isinstance(dtype, str):
        raise ModelFileError(path, f"tensor {label} has no dtype")
    bits = ELEMENT_BITS.get(dtype)
    if bits is not None and math.prod(shape) * bits != 8 * (end - begin):
        raise ModelFileError(path, f"tensor {label}: shape {shown(shape)} of {printable(dtype, 16)} needs "
                                   f"{-(-math.prod(shape) * bits // 8):,} bytes, data_offsets give {end - begin:,}")
    return StoredTensor(name=printable(key, 512), shape=tuple(shape), type_name=printable(dtype, 16) or "?",
                        nbytes=end - begin)


def read_safetensors(path: Path) -> list[StoredTensor]:
    """The tensors listed in the header of the .safetensors file at ``path``; one
    ModelFileError line naming the file for anything malformed."""
    raw, data_bytes = _read_header_bytes(path)
    return parse_safetensors_header(path, raw, data_bytes)


def header_length(path: Path | str, first: bytes, file_bytes: int) -> int:
    """The JSON header's length from a safetensors file's first 8 bytes, checked against the
    file's size and the format's limit (for readers that fetch the header by range)."""
    if len(first) < 8:
        raise ModelFileError(path, "truncated: no safetensors header length")
    (length,) = struct.unpack("<Q", first[:8])
    if length > MAX_HEADER or length > file_bytes - 8:
        raise ModelFileError(path, f"safetensors header of {length:,} bytes is past the end or too large")
    return int(length)


def parse_safetensors_header(path: Path | str, raw: bytes, data_bytes: int) -> list[StoredTensor]:
    """The tensors a safetensors JSON header ``raw`` lists, checked against the ``data_bytes``
    that follow it in the file."""
    try:
        header = parse_json(raw)
    except JsonError as exc:
        raise ModelFileError(path, f"safetensors header {exc}") from None
    if not isinstance(header, dict):
        raise ModelFileError(path, "safetensors header must be a JSON object")
    return [_entry(path, key, info, data_bytes) for key, info in header.items() if key != "__metadata__"]
