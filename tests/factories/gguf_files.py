"""Builders of small GGUF files for the reader's tests and benchmark.

Real files go through ``gguf.GGUFWriter`` with raw bytes of the exact quantised size;
hostile ones are made by patching the bytes of a real one (``Patcher``).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import quant_shape_to_byte_shape

T = GGMLQuantizationType


@dataclass(frozen=True)
class Spec:
    """One tensor to write: llama.cpp name, ggml shape (row length first), type."""

    name: str
    shape: tuple[int, ...]
    type: GGMLQuantizationType

    @property
    def nbytes(self) -> int:
        per_block, block_bytes = GGML_QUANT_SIZES[self.type]
        n = int(np.prod(self.shape))
        return n // per_block * block_bytes


def _vtype(value: Any) -> GGUFValueType:
    if isinstance(value, bool):
        return GGUFValueType.BOOL
    if isinstance(value, int):
        return GGUFValueType.UINT32
    if isinstance(value, float):
        return GGUFValueType.FLOAT32
    if isinstance(value, str):
        return GGUFValueType.STRING
    raise TypeError(value)


def add_meta(writer: GGUFWriter, meta: Mapping[str, Any]) -> None:
    """Keys by Python type: int -> UINT32, bool -> BOOL, float -> FLOAT32, str -> STRING,
    list -> ARRAY of the first item's type (ints as INT32, as convert_hf_to_gguf writes them)."""
    for key, value in meta.items():
        if isinstance(value, list):
            sub = _vtype(value[0])
            sub = GGUFValueType.INT32 if sub is GGUFValueType.UINT32 else sub
            writer.add_key_value(key, value, GGUFValueType.ARRAY, sub_type=sub)
        else:
            writer.add_key_value(key, value, _vtype(value))


def write_gguf(path: Path, arch: str, tensors: Sequence[Spec], meta: Mapping[str, Any] = {},
               *, data: bool = True) -> Path:
    """Write a GGUF file; ``data=False`` writes only the header and extends the file sparsely
    to its full size (for large tables whose bytes never matter)."""
    writer = GGUFWriter(path, arch)
    add_meta(writer, meta)
    for t in tensors:
        np_shape = tuple(reversed(t.shape))
        if data:
            raw = np.zeros(quant_shape_to_byte_shape(np_shape, t.type), dtype=np.uint8)
            writer.add_tensor(t.name, raw, raw_dtype=t.type)
        else:
            writer.add_tensor_info(t.name, np_shape, np.dtype(np.float32), t.nbytes, raw_dtype=t.type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    if data:
        writer.write_tensors_to_file()
        writer.close()
        return path
    writer.write_ti_data_to_file()
    writer.close()
    align = writer.data_alignment
    with open(path, "r+b") as file:
        start = -(-file.seek(0, 2) // align) * align
        end = start + sum(-(-t.nbytes // align) * align for t in tensors)
        file.truncate(end)
    return path


# --- a llama-like model in llama.cpp's Q4_K_M layout -----------------------------------------

def more_bits_layers(n_layers: int) -> set[int]:
    """llama.cpp's use_more_bits, written out: first and last eighth, every third between."""
    eighth = n_layers // 8
    return {i for i in range(n_layers)
            if i < eighth or i >= 7 * n_layers // 8 or (i - eighth) % 3 == 2}


def llama_tensors(*, layers: int = 8, hidden: int = 256, ff: int = 512, heads: int = 2,
                  kv_heads: int = 1, vocab: int = 512, tied: bool = False) -> list[Spec]:
    """A llama block stack as llama.cpp's Q4_K_M writes it: Q4_K matrices, Q6_K for attn_v and
    ffn_down on the use_more_bits layers and for the output head, F32 norms."""
    head_dim = hidden // heads
    more = more_bits_layers(layers)
    out = [Spec("token_embd.weight", (hidden, vocab), T.Q4_K)]
    for i in range(layers):
        big = T.Q6_K if i in more else T.Q4_K
        out += [
            Spec(f"blk.{i}.attn_norm.weight", (hidden,), T.F32),
            Spec(f"blk.{i}.attn_q.weight", (hidden, heads * head_dim), T.Q4_K),
            Spec(f"blk.{i}.attn_k.weight", (hidden, kv_heads * head_dim), T.Q4_K),
            Spec(f"blk.{i}.attn_v.weight", (hidden, kv_heads * head_dim), big),
            Spec(f"blk.{i}.attn_output.weight", (heads * head_dim, hidden), T.Q4_K),
            Spec(f"blk.{i}.ffn_norm.weight", (hidden,), T.F32),
            Spec(f"blk.{i}.ffn_gate.weight", (hidden, ff), T.Q4_K),
            Spec(f"blk.{i}.ffn_up.weight", (hidden, ff), T.Q4_K),
            Spec(f"blk.{i}.ffn_down.weight", (ff, hidden), big),
        ]
    out.append(Spec("output_norm.weight", (hidden,), T.F32))
    if not tied:
        out.append(Spec("output.weight", (hidden, vocab), T.Q6_K))
    return out


def llm_meta(arch: str, *, layers: int, hidden: int, heads: int | list[int],
             kv_heads: int | list[int] | None = None, context: int = 4096,
             **extra: Any) -> dict[str, Any]:
    """The usual ``{arch}.*`` keys; ``extra`` keys are relative to ``{arch}.``."""
    meta: dict[str, Any] = {
        "general.name": f"tiny-{arch}",
        f"{arch}.block_count": layers,
        f"{arch}.embedding_length": hidden,
        f"{arch}.context_length": context,
        f"{arch}.attention.head_count": heads,
    }
    if kv_heads is not None:
        meta[f"{arch}.attention.head_count_kv"] = kv_heads
    meta.update({f"{arch}.{key}": value for key, value in extra.items()})
    return meta


def tiny_llama(path: Path, *, tied: bool = False, meta: Mapping[str, Any] = {}) -> Path:
    """8 layers, hidden 256, 2 heads of 128 (1 KV head), vocab 512, Q4_K_M (file_type 15)."""
    full = llm_meta("llama", layers=8, hidden=256, heads=2, kv_heads=1)
    full["general.file_type"] = 15
    full.update(meta)
    return write_gguf(path, "llama", llama_tensors(tied=tied), full)


# --- hostile files: patch a real one ----------------------------------------------------------

class Patcher:
    """The bytes of a GGUF file with helpers to find and overwrite header fields."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = bytearray(path.read_bytes())

    def after(self, name: str) -> int:
        """Offset just after the first length-prefixed string ``name`` (a key or tensor name)."""
        raw = name.encode()
        return self.data.index(struct.pack("<Q", len(raw)) + raw) + 8 + len(raw)

    def length_of(self, name: str) -> int:
        """Offset of the u64 length in front of the string ``name``."""
        return self.after(name) - 8 - len(name.encode())

    def put(self, fmt: str, offset: int, *values: Any) -> Patcher:
        struct.pack_into("<" + fmt, self.data, offset, *values)
        return self

    def tensor_fields(self, name: str) -> tuple[int, int, int, int]:
        """(offset of n_dims, of dims[0], of the type id, of the data offset) for a tensor."""
        at = self.after(name)
        (n_dims,) = struct.unpack_from("<I", self.data, at)
        return at, at + 4, at + 4 + 8 * n_dims, at + 4 + 8 * n_dims + 4

    def save(self, path: Path | None = None) -> Path:
        target = path or self.path
        target.write_bytes(bytes(self.data))
        return target
