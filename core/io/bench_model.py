"""What a benchmark file says about the model it ran: llama-bench's model description, parameter
count and size in any of its formats, and llama.cpp's load log where a tool's output was saved
with it. The workflow checks these against the model on screen before fitting."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rooflab.core.io.textfile import printable


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchModel:
    """What a benchmark file says about the model it ran, to check against the model on screen:
    llama-bench's model description ("qwen3 8B Q4_K - Medium") split into the architecture
    ("qwen3") and the weight format as rooflab writes it ("Q4_K_M"), the parameter count and
    the tensor bytes; empty or None for what the file does not record."""

    description: str = ""
    architecture: str = ""
    weight_format: str = ""
    params: float | None = None
    size: float | None = None           # bytes

    @property
    def named(self) -> bool:
        return bool(self.architecture or self.weight_format or self.params or self.size)



def _positive(row: Mapping[str, Any], key: str) -> float | None:
    try:
        value = float(row.get(key) or 0)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if math.isfinite(value) and value > 0 else None


def row_model(row: Mapping[str, Any]) -> BenchModel:
    """What a llama-bench row records of its model (its model_type, n_params, size)."""
    description = printable(row.get("model_type") or "", 120)
    architecture, weight_format = _described(description)
    return BenchModel(description=description, architecture=architecture, weight_format=weight_format,
                      params=_positive(row, "model_n_params"), size=_positive(row, "model_size"))


_DESCRIPTION = re.compile(r"^([a-z][a-z0-9_.\-]*)\s+(?:\S+\s+)?(.+)$")
_FTYPE = re.compile(r"^(?:all\s+)?([A-Za-z0-9_]+)(?:\s*-\s*(Small|Medium|Large|[\d.]+\s*bpw.*))?(?:\s+MoE)?"
                    r"(?:\s*\(guessed\))?$", re.IGNORECASE)


def weight_format_name(ftype: str) -> str:
    """llama.cpp's file-type name ("Q4_K - Medium", "MXFP4 MoE", "IQ2_XXS - 2.0625 bpw", "all
    F32") as rooflab writes a weight format ("Q4_K_M", "MXFP4", "IQ2_XXS", "F32"); "" if none."""
    match = _FTYPE.match(ftype.strip())
    if not match:
        return ""
    base, size = match.group(1).upper(), (match.group(2) or "").lower()
    return f"{base}_{size[0].upper()}" if size in ("small", "medium", "large") else base


def _described(description: str) -> tuple[str, str]:
    """(architecture, weight format) of llama.cpp's "{arch} {size} {file type}" description."""
    match = _DESCRIPTION.match(description.strip())
    if not match:
        return "", ""
    return match.group(1), weight_format_name(match.group(2))


_LOG = {"architecture": re.compile(r"^\S*:\s+arch\s+=\s+(\S+)\s*$", re.MULTILINE),
        "ftype": re.compile(r"^\S*:\s+file type\s+=\s+(.+?)\s*$", re.MULTILINE),
        "params": re.compile(r"^\S*:\s+model params\s+=\s+([\d.]+)\s*([KMBT])\s*$", re.MULTILINE),
        "size": re.compile(r"^\S*:\s+file size\s+=\s+([\d.]+)\s*([KMG]iB)", re.MULTILINE)}
_UNITS = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12, "KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3}


def _scaled(match: re.Match[str] | None) -> float | None:
    return float(match.group(1)) * _UNITS[match.group(2)] if match else None


def logged_model(text: str) -> BenchModel:
    """The model llama.cpp's load log names (``print_info: arch = qwen3``, ``file type = ...``,
    ``model params = 8.19 B``, ``file size = 4.68 GiB``), as saved with a tool's output."""
    arch, ftype = _LOG["architecture"].search(text), _LOG["ftype"].search(text)
    described = " ".join(m.group(1) for m in (arch, ftype) if m)
    return BenchModel(description=printable(described, 120), architecture=printable(arch.group(1), 40) if arch else "",
                      weight_format=weight_format_name(ftype.group(1)) if ftype else "",
                      params=_scaled(_LOG["params"].search(text)), size=_scaled(_LOG["size"].search(text)))


def cell_quantity(text: str) -> float | None:
    """A markdown cell of llama-bench's size or params column ("4.68 GiB", "596.05 M") as a number."""
    match = re.fullmatch(r"([\d.]+)\s*(KiB|MiB|GiB|K|M|B|T)", text.strip())
    try:
        return _scaled(match) if match else None
    except ValueError:
        return None
