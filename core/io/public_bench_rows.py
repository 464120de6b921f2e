"""Field readers for the public llama-bench files (``io.public_bench``): each check raises
ValueError with a message that reads after the file name, so the caller can turn it into one
ResourceError line. Also the optional run settings a row's source may state (batch sizes,
offload, devices, KV cache types, depth) and a machine's optional vendor and core counts."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from rooflab.core.io.textfile import printable, shown

SPLIT_MODES: tuple[str, ...] = ("none", "layer", "row")
KV_TYPES: tuple[str, ...] = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")
_VENDOR = re.compile(r"[a-z][a-z0-9-]{1,30}")


def clean(value: Any, limit: int) -> str:
    """``value`` as one printable line of at most ``limit`` characters (text from a file)."""
    return str(printable(value, limit))


def obj(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object")
    return value


def listed(d: Mapping[str, Any], name: str) -> list[Any]:
    value = d.get(name)
    if not isinstance(value, list):
        raise ValueError(f"field {shown(name)} must be a list")
    return value


def text(d: Mapping[str, Any], name: str, default: str | None = None) -> str:
    value = d.get(name)
    if default is not None and (value is None or isinstance(value, str)):
        return default if value is None else clean(value, 2000)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"field {shown(name)} must be non-empty text, got {shown(value)}")
    return clean(value, 2000)


def maybe_text(d: Mapping[str, Any], name: str) -> str | None:
    value = d.get(name)
    return None if value is None else clean(value, 200)


def url(d: Mapping[str, Any], name: str, where: str = "") -> str:
    value = d.get(name)
    if not isinstance(value, str) or not value.startswith(("https://", "http://")) or len(value) < 12:
        raise ValueError(f"{where + ': ' if where else ''}{name} must be an http(s) URL, got {shown(value)}")
    return clean(value, 500)


def positive(d: Mapping[str, Any], name: str, where: str) -> float:
    value = d.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{where}: {name} must be a positive number, got {shown(value)}")
    return float(value)


def maybe_positive(d: Mapping[str, Any], name: str, where: str) -> float | None:
    return None if d.get(name) is None else positive(d, name, where)


def maybe_nonnegative(d: Mapping[str, Any], name: str, where: str) -> float | None:
    value = d.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{where}: {name} must be a number >= 0 or null, got {shown(value)}")
    return float(value)


def maybe_int(d: Mapping[str, Any], name: str, where: str, low: int = 0) -> int | None:
    value = d.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{where}: {name} must be a whole number >= {low} or null, got {shown(value)}")
    return value


def maybe_flag(d: Mapping[str, Any], name: str, where: str) -> bool | None:
    value = d.get(name)
    if value is None:
        return None
    if value not in (0, 1) or isinstance(value, float):
        raise ValueError(f"{where}: {name} must be 0, 1 or null, got {shown(value)}")
    return bool(value)


def maybe_choice(d: Mapping[str, Any], name: str, where: str, known: tuple[str, ...]) -> str | None:
    value = d.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or value.lower() not in known:
        raise ValueError(f"{where}: {name} must be one of {', '.join(known)} or null, got {shown(value)}")
    return value.lower()


_NAMED = (("nvidia", "nvidia"), ("amd", "amd"), ("intel", "intel"), ("apple", "apple"), ("qualcomm", "qualcomm"))


def vendor(d: Mapping[str, Any], where: str) -> str | None:
    """The machine's ``vendor``; when absent, the maker its name starts with ("NVIDIA GeForce
    RTX 3070" -> "nvidia"), else None."""
    value = d.get("vendor")
    if value is None:
        name = str(d.get("name") or "").lower()
        return next((v for prefix, v in _NAMED if name.startswith(prefix)), None)
    if not isinstance(value, str) or not _VENDOR.fullmatch(value):
        raise ValueError(f"{where}: vendor must be a lower-case name such as nvidia or amd, got {shown(value)}")
    return value


def settings(src: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The optional run settings of a row's source, checked: keyword arguments for RowSource."""
    depth = maybe_int(src, "depth", where)
    return {
        "stddev": maybe_nonnegative(src, "stddev", where),
        "seen": maybe_text(src, "seen"),
        "ubatch": maybe_int(src, "ub", where, low=1),
        "batch": maybe_int(src, "b", where, low=1),
        "n_cpu_moe": maybe_int(src, "n_cpu_moe", where),
        "override_tensors": maybe_text(src, "ot"),
        "type_k": maybe_choice(src, "type_k", where, KV_TYPES),
        "type_v": maybe_choice(src, "type_v", where, KV_TYPES),
        "devices": maybe_int(src, "devices", where, low=1),
        "split_mode": maybe_choice(src, "split_mode", where, SPLIT_MODES),
        "depth": 0 if depth is None else depth,
        "host_bandwidth": maybe_positive(src, "host_bandwidth", where),
    }


def unique(what: str, keys: list[str]) -> None:
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise ValueError(f"{what} {shown(key)} is listed twice")
        seen.add(key)
