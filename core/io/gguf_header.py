"""GGUF's binary header, read fast and defensively: metadata keys, tensor infos, data layout.

Layout (v2 and v3): magic "GGUF", u32 version, u64 tensor count, u64 key count, the key/value
pairs, the tensor infos (name, n_dims, dims, ggml type, offset), padding to the alignment,
then tensor data. Every string is a u64 length and UTF-8 bytes.

Nothing is materialised that is not needed: the file is memory-mapped, arrays longer than
``SMALL_ARRAY`` are skipped and kept as ``LargeArray(type, count)`` (a 262,144-entry tokenizer
is walked length by length, never decoded), and every count and length is checked against
the bytes left before anything is read or allocated. Any fault is a ``ModelFileError``.
"""

from __future__ import annotations

import itertools
import math
import mmap
import os
import stat
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NoReturn

from gguf.constants import GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType, GGUFValueType

from rooflab.core.errors import ModelFileError, SpecError
from rooflab.core.values.quant import tensor_bytes

SUPPORTED_VERSIONS: tuple[int, ...] = (2, 3)
GGML_MAX_DIMS = 4               # ggml.h; gguf-py has no constant for it
SMALL_ARRAY = 4096              # arrays up to this many items are kept as values
MAX_NAME_BYTES = 1024           # keys and tensor names (llama.cpp itself caps names at 63)
MAX_STRING_BYTES = 16 << 20     # one string value (chat templates are tens of kB)
MAX_KEYS = 1 << 16              # real files have well under 100
MAX_TENSORS = 1 << 18           # the largest models have a few thousand
MAX_ARRAY_STRINGS = 1 << 23     # bounds the skip loop (about 0.5 s); tokenizers hold ~0.3 M
_INT64_MAX = (1 << 63) - 1

_FORMATS: dict[int, str] = {
    GGUFValueType.UINT8: "B", GGUFValueType.INT8: "b", GGUFValueType.UINT16: "H",
    GGUFValueType.INT16: "h", GGUFValueType.UINT32: "I", GGUFValueType.INT32: "i",
    GGUFValueType.FLOAT32: "f", GGUFValueType.BOOL: "?", GGUFValueType.UINT64: "Q",
    GGUFValueType.INT64: "q", GGUFValueType.FLOAT64: "d",
}
# smallest encodings, to refuse counts the file cannot hold before looping over them
_MIN_KEY_RECORD = 8 + 4 + 1          # empty key, value type, one-byte value
_MIN_TENSOR_RECORD = 8 + 4 + 4 + 8   # empty name, n_dims 0, type, offset

Scalar = int | float | bool | str


@dataclass(frozen=True, slots=True)
class LargeArray:
    """A metadata array too long to keep (a tokenizer's tokens): its item type and length."""

    item_type: GGUFValueType
    count: int


Value = Scalar | tuple[Scalar, ...] | LargeArray


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorInfo:
    """One tensor's entry in the header; ``shape`` in ggml order (row length first)."""

    name: str
    shape: tuple[int, ...]
    type: GGMLQuantizationType
    offset: int         # bytes from the start of the data section
    nbytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GGUFHeader:
    """Everything before a GGUF file's tensor data, checked for consistency."""

    path: str
    version: int
    byte_order: str                 # "little" or "big"
    alignment: int                  # bytes
    data_start: int                 # file offset of the data section, bytes
    file_bytes: int
    metadata: Mapping[str, Value]   # read-only, in file order
    tensors: tuple[TensorInfo, ...]


class HeaderIncomplete(Exception):
    """The first bytes of a file handed to ``parse_header_prefix`` end inside its header:
    ``needed`` bytes from the start are the least that could hold it (more may be asked
    for after those are read). Not an error the user sees: the remote reader fetches more."""

    def __init__(self, needed: int) -> None:
        super().__init__(f"the header needs at least {needed} bytes")
        self.needed = needed


def parse_header_prefix(name: str, prefix: bytes, file_bytes: int) -> GGUFHeader:
    """Parse the header of a ``file_bytes``-byte GGUF file of which only the first bytes,
    ``prefix``, are at hand (a file read by HTTP range requests). Every check is made against
    the whole file's size, as ``read_header`` makes it; ``HeaderIncomplete`` when the header
    runs past ``prefix`` but not past the file."""
    if len(prefix) > file_bytes:
        raise ModelFileError(name, f"{len(prefix)} bytes read from a file said to hold {file_bytes}")
    return _Parser(name, prefix, file_bytes).parse()


def read_header(path: str | os.PathLike[str]) -> GGUFHeader:
    """Parse and check the header of the GGUF file at ``path`` (tensor data is not read)."""
    name = os.fspath(path)
    try:
        info = os.stat(name)
        if stat.S_ISDIR(info.st_mode):
            raise ModelFileError(name, "is a folder, not a GGUF file")
        if not stat.S_ISREG(info.st_mode):
            raise ModelFileError(name, "is not a regular file")
        if info.st_size == 0:
            raise ModelFileError(name, "is empty")
        with open(name, "rb") as file:
            try:
                buf = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError as exc:   # what mmap raises for some special files
                raise ModelFileError(name, f"cannot map: {exc}") from exc
            with buf:
                return _Parser(name, buf).parse()
    except FileNotFoundError:
        raise ModelFileError(name, "no such file") from None
    except PermissionError as exc:
        raise ModelFileError(name, "permission denied") from exc
    except OSError as exc:
        raise ModelFileError(name, f"cannot read: {exc.strerror or exc}") from exc


class _Parser:
    """A cursor over the mapped file; ``where`` names the part being read, for messages."""

    def __init__(self, path: str, buf: mmap.mmap | bytes, file_bytes: int | None = None) -> None:
        self.path = path
        self.buf = buf
        self.avail = len(buf)           # bytes at hand: the whole file, or its first bytes
        self.size = len(buf) if file_bytes is None else file_bytes
        self.off = 0
        self.where = "header"
        self.order = "<"

    def fail(self, reason: str) -> NoReturn:
        raise ModelFileError(self.path, f"{self.where}: {reason}")

    # -- primitives --------------------------------------------------------------------------
    def need(self, n: int) -> None:
        if n > self.avail - self.off:
            self.short(self.off + n)
        if n > self.size - self.off:
            self.fail(f"the file ends after {self.size} bytes, inside the header (truncated?)")

    def short(self, needed: int) -> None:
        """Ask for more of the file when only its first bytes are at hand and it goes on."""
        if self.avail < self.size:
            raise HeaderIncomplete(min(needed, self.size))

    def unpack(self, fmt: str, n: int) -> tuple[Scalar, ...]:
        self.need(n)
        values = struct.unpack_from(self.order + fmt, self.buf, self.off)
        self.off += n
        return values

    def u32(self) -> int:
        return int(self.unpack("I", 4)[0])

    def u64(self) -> int:
        return int(self.unpack("Q", 8)[0])

    def string(self, limit: int, strict: bool) -> str:
        n = self.u64()
        if n > limit:
            self.fail(f"string of {n} bytes (the limit is {limit})")
        self.need(n)
        raw = self.buf[self.off:self.off + n]
        self.off += n
        try:
            return raw.decode("utf-8", errors="strict" if strict else "replace")
        except UnicodeDecodeError:
            self.fail("name is not valid UTF-8")

    # -- sections ----------------------------------------------------------------------------
    def parse(self) -> GGUFHeader:
        version = self.preamble()
        n_tensors, n_keys = self.u64(), self.u64()
        room = self.size - self.off
        if n_keys > MAX_KEYS or n_tensors > MAX_TENSORS or (
            n_keys * _MIN_KEY_RECORD + n_tensors * _MIN_TENSOR_RECORD > room
        ):
            self.fail(f"claims {n_tensors} tensors and {n_keys} metadata keys, "
                      f"more than a {self.size}-byte file can hold")
        metadata = self.key_values(n_keys)
        alignment = self.alignment(metadata)
        tensors = self.tensor_infos(n_tensors, alignment)
        data_start = -(-self.off // alignment) * alignment
        self.check_data(tensors, data_start)
        return GGUFHeader(path=self.path, version=version,
                          byte_order="little" if self.order == "<" else "big",
                          alignment=alignment, data_start=data_start, file_bytes=self.size,
                          metadata=MappingProxyType(metadata), tensors=tensors)

    def preamble(self) -> int:
        magic = self.buf[:4]
        if magic != b"GGUF"[:len(magic)]:
            # in hex, not as a Python bytes literal (b'\xf6C_\xb7'), which means nothing to a user
            raise ModelFileError(self.path, f"not a GGUF file (it starts with bytes {magic.hex(' ')}, "
                                            'not "GGUF")')
        self.off = 4
        version = self.u32()
        if version & 0xFFFF == 0 and version:   # written on a big-endian machine
            self.order = ">"
            version = int.from_bytes(version.to_bytes(4, "little"), "big")
        if version not in SUPPORTED_VERSIONS:
            hint = " (from 2023: convert the model again)" if version == 1 else ""
            self.fail(f"GGUF version {version} is not supported{hint}; rooflab reads versions 2 and 3")
        return version

    def key_values(self, count: int) -> dict[str, Value]:
        metadata: dict[str, Value] = {}
        for index in range(count):
            self.where = f"metadata key {index}"
            key = self.string(MAX_NAME_BYTES, strict=True)
            self.where = f"metadata key {key!r}"
            if key in metadata:
                self.fail("appears twice")
            metadata[key] = self.value(self.u32())
        self.where = "header"
        return metadata

    def value(self, vtype: int) -> Value:
        fmt = _FORMATS.get(vtype)
        if fmt is not None:
            return self.unpack(fmt, struct.calcsize(fmt))[0]
        if vtype == GGUFValueType.STRING:
            return self.string(MAX_STRING_BYTES, strict=False)
        if vtype == GGUFValueType.ARRAY:
            return self.array()
        self.fail(f"unknown value type {vtype}")

    def array(self) -> tuple[Scalar, ...] | LargeArray:
        item, count = self.u32(), self.u64()
        if item == GGUFValueType.ARRAY:
            self.fail("nested arrays are not supported")
        if item == GGUFValueType.STRING:
            return self.string_array(count)
        fmt = _FORMATS.get(item)
        if fmt is None:
            self.fail(f"array of unknown value type {item}")
        size = struct.calcsize(fmt)
        if count > (self.size - self.off) // size:
            self.fail(f"array of {count} items runs past the end of the file")
        if count > SMALL_ARRAY:
            self.off += count * size
            return LargeArray(GGUFValueType(item), count)
        return self.unpack(f"{count}{fmt}", count * size)

    def string_array(self, count: int) -> tuple[Scalar, ...] | LargeArray:
        if count > (self.size - self.off) // 8 or count > MAX_ARRAY_STRINGS:
            self.fail(f"array of {count} strings is more than the file can hold")
        if count <= SMALL_ARRAY:
            return tuple(self.string(MAX_STRING_BYTES, strict=False) for _ in range(count))
        end = _skip_strings(self.buf, self.off, count, struct.Struct(self.order + "Q"))
        if end > self.avail:
            self.short(max(end, self.avail + 1))
        if end > self.size:
            self.fail(f"array of {count} strings runs past the end of the file")
        self.off = end
        return LargeArray(GGUFValueType.STRING, count)

    def alignment(self, metadata: Mapping[str, Value]) -> int:
        value = metadata.get("general.alignment", GGUF_DEFAULT_ALIGNMENT)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value & (value - 1):
            self.where = "metadata key 'general.alignment'"
            self.fail(f"{value!r} is not a power of two")
        return value

    def tensor_infos(self, count: int, alignment: int) -> tuple[TensorInfo, ...]:
        tensors: list[TensorInfo] = []
        seen: set[str] = set()
        for index in range(count):
            self.where = f"tensor {index}"
            name = self.string(MAX_NAME_BYTES, strict=True)
            self.where = f"tensor {name!r}"
            if name in seen:
                self.fail("appears twice")
            seen.add(name)
            n_dims = self.u32()
            if n_dims > GGML_MAX_DIMS:
                self.fail(f"{n_dims} dimensions (ggml allows at most {GGML_MAX_DIMS})")
            shape = tuple(int(d) for d in self.unpack(f"{n_dims}Q", 8 * n_dims))
            type_id, offset = self.u32(), self.u64()
            tensors.append(self.tensor(name, shape, type_id, offset, alignment))
        self.where = "header"
        return tuple(tensors)

    def tensor(self, name: str, shape: tuple[int, ...], type_id: int, offset: int,
               alignment: int) -> TensorInfo:
        if any(d == 0 or d > _INT64_MAX for d in shape):
            self.fail(f"invalid shape {shape} (every dimension must be 1 to 2**63-1)")
        n_values = math.prod(shape)
        if n_values > _INT64_MAX:
            self.fail(f"shape {shape} holds more than 2**63 values")
        try:
            qtype = GGMLQuantizationType(type_id)
        except ValueError:
            self.fail(f"unknown tensor type id {type_id}")
        try:
            nbytes = tensor_bytes(qtype.name, n_values, row_length=shape[0] if shape else None)
        except SpecError as exc:
            self.fail(str(exc))
        if offset % alignment:
            self.fail(f"data offset {offset} is not a multiple of the alignment {alignment}")
        return TensorInfo(name=name, shape=shape, type=qtype, offset=offset, nbytes=nbytes)

    def check_data(self, tensors: tuple[TensorInfo, ...], data_start: int) -> None:
        """Each tensor's data lies inside the file and no two overlap."""
        previous: TensorInfo | None = None
        for t in sorted(tensors, key=lambda t: t.offset):
            self.where = f"tensor {t.name!r}"
            if data_start + t.offset + t.nbytes > self.size:
                self.fail(f"data ({t.nbytes} bytes at {data_start + t.offset}) runs past the end "
                          f"of the {self.size}-byte file (truncated?)")
            if previous is not None and t.offset < previous.offset + previous.nbytes:
                self.fail(f"data overlaps tensor {previous.name!r}")
            previous = t
        self.where = "header"


def _skip_strings(buf: mmap.mmap | bytes, off: int, count: int, u64: struct.Struct) -> int:
    """Offset after ``count`` length-prefixed strings from ``off``, or past the end of ``buf``
    when a length runs out of it. Lengths only: no string is sliced or decoded."""
    unpack = u64.unpack_from
    try:
        for _ in itertools.repeat(None, count):   # the cheapest loop CPython has
            off += 8 + unpack(buf, off)[0]
    except (struct.error, OverflowError):
        return len(buf) + 1
    return off
