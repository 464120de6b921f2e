"""Number boxes that take what is typed whole: a number within the box's range (written with
thousands separators, decimals or an exponent, "1e3"), else refused aloud and the box back at its
value. Left to Qt, a keystroke the box could not take vanished ("1e9" GB/s became 19: the "e"
dropped) and a number out of range reverted without a word (0 GB/s, an answer of 0 tokens)."""

from __future__ import annotations

import math

from PySide6.QtCore import Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QAbstractSpinBox, QDoubleSpinBox, QSpinBox


def typed_number(text: str, prefix: str = "", suffix: str = "") -> float | None:
    """The number in ``text`` less the box's ``prefix`` and ``suffix`` and any thousands
    separators, or None: ``typed_number("1,008 GB/s", suffix=" GB/s") == 1008.0``."""
    body = text.strip()
    if prefix.strip() and body.startswith(prefix.strip()):
        body = body[len(prefix.strip()):]
    if suffix.strip() and body.endswith(suffix.strip()):
        body = body[:-len(suffix.strip())]
    body = body.replace(",", "").replace(" ", "").replace("\u00a0", "")
    try:
        value = float(body)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def refusal(box: CheckedSpin | CheckedDoubleSpin, typed: str, whole: bool) -> str:
    """The one line a refused entry gets: what was typed, what the box takes, what it keeps."""
    unit = box.suffix()
    entry = typed.strip().removesuffix(unit.strip()).strip()
    kind = "a whole number" if whole else "a number"
    low, high, kept = (box.textFromValue(v) for v in (box.minimum(), box.maximum(), box.value()))  # type: ignore[arg-type]
    return f"'{entry}' is not {kind} from {low} to {high}{unit}: the field keeps {kept}{unit}."


def _state(box: QAbstractSpinBox, text: str, whole: bool) -> QValidator.State:
    value = typed_number(text, box.prefix(), box.suffix())                  # type: ignore[attr-defined]
    if value is None or (whole and not value.is_integer()):
        return QValidator.State.Intermediate                                # refused once the edit ends
    low, high = box.minimum(), box.maximum()                                # type: ignore[attr-defined]
    return QValidator.State.Acceptable if low <= value <= high else QValidator.State.Intermediate


class CheckedSpin(QSpinBox):
    """A whole-number box that refuses aloud (``refused``: the one line) what it cannot take."""

    refused = Signal(str)

    def validate(self, text: str, pos: int) -> object:  # type: ignore[override]  # PySide6 takes the state alone too
        return _state(self, text, True), text, pos

    def valueFromText(self, text: str) -> int:  # noqa: N802 - Qt API
        value = typed_number(text, self.prefix(), self.suffix())
        return int(value) if value is not None and value.is_integer() else self.value()

    def fixup(self, text: str) -> None:  # type: ignore[override]  # the box goes back to its value
        if text.strip() and text.strip() != self.suffix().strip():
            self.refused.emit(refusal(self, text, True))


class CheckedDoubleSpin(QDoubleSpinBox):
    """A box of decimals that refuses aloud (``refused``: the one line) what it cannot take."""

    refused = Signal(str)

    def validate(self, text: str, pos: int) -> object:  # type: ignore[override]  # PySide6 takes the state alone too
        return _state(self, text, False), text, pos

    def valueFromText(self, text: str) -> float:  # noqa: N802 - Qt API
        value = typed_number(text, self.prefix(), self.suffix())
        return value if value is not None else self.value()

    def fixup(self, text: str) -> None:  # type: ignore[override]  # the box goes back to its value
        if text.strip() and text.strip() != self.suffix().strip():
            self.refused.emit(refusal(self, text, False))
