"""Checks and readers of a machine profile's fields: a number in a range, and the preset file's
objects, numbers, whole numbers and text, each raising SpecError that names the bad field."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rooflab.core.errors import SpecError


def in_range(value: object, bounds: tuple[float, float]) -> bool:
    """Whether ``value`` is a finite number in [low, high] (NaN and booleans are not)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and bounds[0] <= value <= bounds[1])


def read_section(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """An object field (an empty one when absent)."""
    value = data.get(name) or {}
    if not isinstance(value, Mapping):
        raise SpecError(f"machine profile field {name!r} must be an object")
    return value


def read_number(data: Mapping[str, Any], name: str, default: float | None, label: str = "") -> float:
    """A number field (an int or float, not a bool or text), ``default`` when absent."""
    value = data.get(name)
    if value is None:
        if default is None:
            raise SpecError(f"machine profile is missing field {label or name!r}")
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"machine profile field {label or name!r} must be a number, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise SpecError(f"machine profile field {label or name!r} is out of range") from None


def whole_field(data: Mapping[str, Any], name: str, label: str) -> int:
    """A whole-number field, 0 when absent; SpecError naming ``label`` otherwise."""
    value = data.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"machine profile field {label!r} must be a whole number, got {value!r}")
    return value


def read_text(data: Mapping[str, Any], name: str, default: str | None, label: str = "") -> str:
    """A text field, ``default`` when absent (None: required)."""
    value = data.get(name)
    if value is None:
        if default is None:
            raise SpecError(f"machine profile is missing field {label or name!r}")
        return default
    return str(value)
