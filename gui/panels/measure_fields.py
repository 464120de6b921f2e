"""Small pieces the Measure tab's forms share: a tick box, a wrapped label, and the parsing of
the number lists typed in them (each bad field named in one MeasurementError)."""

from __future__ import annotations

import math

from PySide6.QtWidgets import QCheckBox, QLabel

from rooflab.core.errors import MeasurementError


def check(label: str, checked: bool = True, tip: str = "") -> QCheckBox:
    box = QCheckBox(label)
    box.setChecked(checked)
    box.setToolTip(tip)
    return box


def wrapped(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    return label


def positive_ints(text: str, what: str, *, low: int = 1) -> tuple[int, ...]:
    """"1, 16, 64" as (1, 16, 64); MeasurementError naming ``what`` otherwise (every value
    must be at least ``low``)."""
    try:
        values = tuple(int(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise MeasurementError(f"{what}: expected comma-separated whole numbers, got {text!r}") from None
    if not values or min(values) < low:
        kind = "positive whole numbers" if low == 1 else f"whole numbers >= {low}"
        raise MeasurementError(f"{what}: expected {kind}, got {text!r}")
    return values


def positive_floats(text: str, what: str) -> tuple[float, ...]:
    """"0.5, 1, 2" as (0.5, 1.0, 2.0); () for an empty field; MeasurementError naming ``what``
    for anything but positive finite numbers."""
    try:
        values = tuple(float(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise MeasurementError(f"{what}: expected comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise MeasurementError(f"{what}: expected positive numbers, got {text!r}")
    return values
