"""The Measure tab's jobs that core does not already provide as one (measuring the machine and
the model are core jobs as they are), and the parsing of its number lists. No Qt here."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

from rooflab.core.errors import MeasurementError
from rooflab.core.io.llamabench import BenchImport
from rooflab.core.jobs import CancelToken, Progress


def import_job(path: str, cancel: CancelToken) -> Generator[Progress, None, BenchImport]:
    """Read llama.cpp benchmark output off the GUI thread; returns what it holds."""
    from rooflab.core.io.llamabench import read_benchmark

    yield Progress(step="import", message=f"reading {Path(path).name}")
    return read_benchmark(path)


def positive_ints(text: str, what: str) -> tuple[int, ...]:
    """"1, 16, 64" as (1, 16, 64); MeasurementError naming ``what`` otherwise."""
    try:
        values = tuple(int(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise MeasurementError(f"{what}: expected comma-separated whole numbers, got {text!r}") from None
    if not values or min(values) < 1:
        raise MeasurementError(f"{what}: expected positive whole numbers, got {text!r}")
    return values
