"""The Measure tab's jobs: core measurement generators (no Qt) adapted for the JobController,
which runs them in its worker thread."""

from __future__ import annotations

import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

from rooflab.core import jobs as core_progress
from rooflab.core.errors import MeasurementError
from rooflab.gui.jobs import Progress


def _adapt(job: Generator[Any, None, Any]) -> Generator[object, None, object]:
    """A core measurement as a JobController job: core Progress becomes the window's Progress."""
    while True:
        try:
            item = next(job)
        except StopIteration as stop:
            return stop.value
        if isinstance(item, core_progress.Progress):
            yield Progress(f"{item.step}: {item.message}", item.fraction, item.eta_seconds)
        else:
            yield item


def machine_job(plan: Any, cancel: threading.Event) -> Generator[object, None, object]:
    from rooflab.core.measure.machine import measure_machine

    return (yield from _adapt(measure_machine(plan, cancel)))


def model_job(ref: Any, plan: Any, available: float | None, cancel: threading.Event,
              ) -> Generator[object, None, object]:
    from rooflab.core.measure.model import measure_model

    return (yield from _adapt(measure_model(ref, plan, cancel, available)))


def import_job(path: str, cancel: threading.Event) -> Generator[object, None, object]:
    from rooflab.core.io.llamabench import read_benchmark

    yield Progress(f"Reading {Path(path).name}…")
    return read_benchmark(path)


def positive_ints(text: str, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise MeasurementError(f"{what}: expected comma-separated whole numbers, got {text!r}") from None
    if not values or min(values) < 1:
        raise MeasurementError(f"{what}: expected positive whole numbers, got {text!r}")
    return values
