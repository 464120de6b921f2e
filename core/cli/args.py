"""Argument types the commands share: one clear line for a bad value, never a traceback."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def int_list(low: int, high: int) -> Callable[[str], tuple[int, ...]]:
    """A parser of comma-separated whole numbers in [low, high] ("1e3" is 1000; "2.5" is refused)."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            numbers = [float(x) for x in text.replace(" ", "").split(",") if x]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
        if not numbers:
            raise argparse.ArgumentTypeError("expected at least one value, got none")
        if not all(n.is_integer() and low <= n <= high for n in numbers):
            raise argparse.ArgumentTypeError(f"values must be integers in [{low:,}, {high:,}], got {text!r}")
        return tuple(int(n) for n in numbers)

    return parse


def positive(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value
