"""A random-weight GGUF of any model's tensor table, so llama.cpp can time that shape in that
format without the real weights: a config.json or catalogue entry in a recipe (Q4_K_M keeps
Q6_K where llama.cpp does), or a header-only GGUF, becomes a file llama.cpp loads.

Every tensor is written in the type its spec names, as valid blocks: quant bytes random (the
kernels do the same work whatever the bits), every scale field an ordinary fp16 (or E8M0)
number chosen so weights have a plausible magnitude, never NaN, inf or a denormal, which
would change what the hardware does. Norm weights are 1, biases 0, float matrices N(0, 0.02).

The file is streamed tensor by tensor in chunks of ``CHUNK_BYTES``; ``write_synthetic_gguf``
is a job generator (``Progress``, cancel between chunks) that refuses, before writing a byte,
a file larger than the cap or the free disk space, and leaves no partial file behind."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from rooflab.core.errors import MeasurementError, SpecError
from rooflab.core.io.gguf_write import (
    ALIGNMENT,
    data_layout,
    header_bytes,
    model_fields,
    vocabulary_fields,
    vocabulary_rows,
)
from rooflab.core.jobs import CancelFlag, Progress, check_cancel
from rooflab.core.values.model import ModelSpec, Tensor
from rooflab.core.values.quant import block_size

CHUNK_BYTES = 8 << 20               # written (and cancel checked) this many bytes at a time
DEFAULT_MAX_BYTES = 64 << 30        # refuse larger files unless the caller raises the cap
DISK_MARGIN_BYTES = 256 << 20       # leave this much of the disk free after writing
WEIGHT_RMS = 0.02                   # target root-mean-square of a random weight
_F16_MIN_NORMAL = 2.0 ** -14


@dataclass(frozen=True, slots=True)
class BlockLayout:
    """Where a quantised block keeps its scales: byte offsets of its fp16 fields (``d``,
    ``dmin``/``m``), of an E8M0 exponent, and the rough RMS of the integer part one unit of
    ``d`` multiplies (to give weights about ``WEIGHT_RMS``)."""

    f16_scales: tuple[int, ...] = ()
    e8m0_scale: int | None = None
    unit: float = 1.0


# ggml-common.h's block structs; types not here are refused rather than written with
# random scale bits (IQ1_M and NVFP4 pack their scales across fields).
BLOCKS: dict[str, BlockLayout] = {
    "Q4_0": BlockLayout((0,), unit=4.6), "Q4_1": BlockLayout((0, 2), unit=8.8),
    "Q5_0": BlockLayout((0,), unit=9.2), "Q5_1": BlockLayout((0, 2), unit=18.0),
    "Q8_0": BlockLayout((0,), unit=74.0),
    "Q2_K": BlockLayout((80, 82), unit=15.0), "Q3_K": BlockLayout((108,), unit=42.0),
    "Q4_K": BlockLayout((0, 2), unit=280.0), "Q5_K": BlockLayout((0, 2), unit=580.0),
    "Q6_K": BlockLayout((208,), unit=1330.0),
    "IQ2_XXS": BlockLayout((0,), unit=100.0), "IQ2_XS": BlockLayout((0,), unit=100.0),
    "IQ2_S": BlockLayout((0,), unit=100.0), "IQ3_XXS": BlockLayout((0,), unit=100.0),
    "IQ3_S": BlockLayout((0,), unit=100.0), "IQ1_S": BlockLayout((0,), unit=10.0),
    "IQ4_NL": BlockLayout((0,), unit=60.0), "IQ4_XS": BlockLayout((0,), unit=600.0),
    "TQ1_0": BlockLayout((52,), unit=1.0), "TQ2_0": BlockLayout((64,), unit=1.0),
    "MXFP4": BlockLayout(e8m0_scale=0, unit=6.0),
}
FLOAT_TYPES: dict[str, np.dtype[np.generic]] = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2")}
SUPPORTED_TYPES: tuple[str, ...] = ("F32", "F16", "BF16", *BLOCKS)


def synthetic_gguf_bytes(spec: ModelSpec) -> int:
    """Exact bytes of the file ``write_synthetic_gguf`` writes for ``spec``."""
    tensors = _checked_tensors(spec)
    return len(_header(spec, tensors)) + data_layout(tensors)[1]


def _checked_tensors(spec: ModelSpec) -> tuple[Tensor, ...]:
    """The spec's tensors, refused when one cannot be written as valid llama.cpp data."""
    if not any(t.name == "token_embd.weight" for t in spec.tensors):
        raise MeasurementError(f"{spec.name}: the tensor table has no token_embd.weight; rooflab "
                               "writes GGUFs only from llama.cpp-named tables (a config.json, a "
                               "catalogue entry or a GGUF), not from safetensors names")
    for t in spec.tensors:
        if t.type_name.upper() not in SUPPORTED_TYPES:
            raise MeasurementError(f"{spec.name}: tensor {t.name} is {t.type_name}, which rooflab cannot "
                                   f"write as random blocks (it writes {', '.join(SUPPORTED_TYPES)})")
    return spec.tensors


def _header(spec: ModelSpec, tensors: tuple[Tensor, ...]) -> bytes:
    try:
        fields = model_fields(spec, name=f"{spec.name} (random weights)")
        fields += vocabulary_fields(vocabulary_rows(spec))
        return header_bytes(fields, tensors)
    except SpecError as exc:
        raise MeasurementError(f"{spec.name}: cannot write a GGUF: {exc}") from exc


def check_room(path: Path, nbytes: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Raise MeasurementError when ``nbytes`` is over the cap or the free space of ``path``'s
    folder (less ``DISK_MARGIN_BYTES``)."""
    gb = 1e9
    if nbytes > max_bytes:
        raise MeasurementError(f"the random-weight GGUF would be {nbytes / gb:.1f} GB, over the cap of "
                               f"{max_bytes / gb:.1f} GB; choose a smaller model or raise the cap")
    folder = path.parent if path.parent.exists() else Path.cwd()
    try:
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        raise MeasurementError(f"{folder}: cannot read the free disk space ({exc.strerror or exc})") from exc
    if nbytes + DISK_MARGIN_BYTES > free:
        raise MeasurementError(f"the random-weight GGUF would be {nbytes / gb:.2f} GB but {folder} has only "
                               f"{free / gb:.2f} GB free")


def write_synthetic_gguf(spec: ModelSpec, path: str | os.PathLike[str], *, seed: int = 0,
                         max_bytes: int = DEFAULT_MAX_BYTES, cancel: CancelFlag = None,
                         ) -> Generator[Progress, None, Path]:
    """Write a random-weight GGUF of ``spec``'s tensor table to ``path``; returns the path.

    Yields ``Progress`` between chunks. Raises MeasurementError before writing when a tensor
    type cannot be written, the architecture is not one llama.cpp knows, or the file would not
    fit (``max_bytes``, free disk); Cancelled when ``cancel`` is set (no file is left)."""
    target = Path(path)
    tensors = _checked_tensors(spec)
    head = _header(spec, tensors)
    offsets, data_bytes = data_layout(tensors)
    total = len(head) + data_bytes
    check_room(target, total, max_bytes)
    target.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    began = time.perf_counter()
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(head)
            done = len(head)
            for index, (tensor, offset) in enumerate(zip(tensors, offsets, strict=True)):
                if done != len(head) + offset:      # a bug here would make llama.cpp read garbage
                    raise MeasurementError(f"{tensor.name} would start at {done}, planned {len(head) + offset}")
                for written in _write_tensor(out, tensor, rng):
                    check_cancel(cancel)
                    done += written
                    yield Progress(step="write", message=f"writing {tensor.name} ({index + 1}/{len(tensors)})",
                                   fraction=done / total, eta_seconds=_eta(began, done, total))
                pad = -tensor.nbytes % ALIGNMENT
                out.write(bytes(pad))
                done += pad
            if out.tell() != total or done != total:
                raise MeasurementError(f"wrote {out.tell()} bytes, planned {total}")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _eta(began: float, done: int, total: int) -> float | None:
    elapsed = time.perf_counter() - began
    return elapsed / done * (total - done) if done and elapsed > 0.05 else None


def _write_tensor(out: BinaryIO, tensor: Tensor, rng: np.random.Generator) -> Generator[int, None, None]:
    """Write ``tensor``'s data in chunks; yields the bytes of each chunk after writing it."""
    type_name = tensor.type_name.upper()
    per_block, block_bytes = block_size(type_name)
    n_values = math.prod(tensor.shape)
    n_blocks = n_values // per_block
    blocks_per_chunk = max(1, CHUNK_BYTES // block_bytes)
    for first in range(0, n_blocks, blocks_per_chunk):
        count = min(blocks_per_chunk, n_blocks - first)
        raw = random_data(type_name, count * per_block, rng, fill=_fill_value(tensor))
        out.write(raw)
        yield len(raw)


def _fill_value(tensor: Tensor) -> float | None:
    """Vectors get a constant: norm weights and rope frequency factors 1, biases, sinks and
    expert-score offsets 0. Matrices (None) get random values."""
    if len(tensor.shape) > 1 and math.prod(tensor.shape[1:]) > 1:
        return None
    stem = tensor.name.rsplit(".", 1)[0]
    return 1.0 if "norm" in stem or stem.startswith("rope_freqs") else 0.0


def random_data(type_name: str, n_values: int, rng: np.random.Generator, *, fill: float | None = None) -> bytes:
    """``n_values`` values of ggml type ``type_name`` as the bytes a GGUF stores.

    Float types: N(0, WEIGHT_RMS), or ``fill`` everywhere. Quantised types: random quant bytes
    with valid scales (``fill`` is ignored: a vector is never quantised by llama.cpp)."""
    type_name = type_name.upper()
    if type_name in FLOAT_TYPES or type_name == "BF16":
        if fill is not None:
            values = np.full(n_values, fill, dtype=np.float32)
        else:
            values = rng.standard_normal(n_values, dtype=np.float32) * np.float32(WEIGHT_RMS)
        if type_name == "BF16":       # round to nearest even on the upper half of the f32 bits
            bits = values.view(np.uint32)
            return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2").tobytes()
        return values.astype(FLOAT_TYPES[type_name]).tobytes()
    layout = BLOCKS.get(type_name)
    if layout is None:
        raise MeasurementError(f"rooflab cannot write random {type_name} blocks")
    per_block, block_bytes = block_size(type_name)
    if n_values % per_block:
        raise MeasurementError(f"{type_name}: {n_values} values is not a whole number of blocks")
    n_blocks = n_values // per_block
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    target = WEIGHT_RMS / layout.unit
    for offset in layout.f16_scales:
        scale = target * rng.uniform(0.5, 1.5, size=n_blocks)
        scale = np.clip(scale, 2 * _F16_MIN_NORMAL, 1.0).astype("<f2")
        blocks[:, offset:offset + 2] = scale.view(np.uint8).reshape(n_blocks, 2)
    if layout.e8m0_scale is not None:
        # E8M0 is 2**(e - 127); 0xFF is NaN. Exponents near log2(target) keep weights ~WEIGHT_RMS.
        centre = 127 + round(math.log2(target))
        blocks[:, layout.e8m0_scale] = rng.integers(centre - 1, centre + 2, size=n_blocks, dtype=np.uint8)
    return blocks.tobytes()
