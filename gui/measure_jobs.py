"""The Measure tab's jobs that core does not already provide as one (measuring the machine and
timing a model in llama.cpp or torch are core jobs as they are), and the parsing of its number
lists. No Qt here."""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

from rooflab.core.errors import MeasurementError
from rooflab.core.io.llamabench import BenchImport
from rooflab.core.jobs import CancelToken, Progress
from rooflab.core.values.model import ModelSpec


def import_job(path: str, cancel: CancelToken) -> Generator[Progress, None, BenchImport]:
    """Read llama.cpp benchmark output off the GUI thread; returns what it holds."""
    from rooflab.core.io.llamabench import read_benchmark

    yield Progress(step="import", message=f"reading {Path(path).name}")
    return read_benchmark(path)


def llamabench_job(spec: ModelSpec, ref: object, bench: Any, batched: Any, *, bench_path: str,
                   synthetic: bool) -> tuple[Callable[[CancelToken], Generator[Progress, None, Any]], list[str]]:
    """(job, warnings): the job runs ``measure_in_llamabench`` with the user's llama-bench
    (``bench_path``, its folder, or "" for the one on PATH) and the llama-batched-bench beside
    it. MeasurementError, before anything starts, when there is no llama-bench; without a
    llama-batched-bench the batched sweep is left out, with a warning."""
    from rooflab.core.measure.engine import measure_in_llamabench
    from rooflab.core.measure.llamabench_plan import find_tools

    if bench is None:
        raise MeasurementError("llama-bench times prompts and generation: tick the prompt sweep or the "
                               "generation at each depth too (batched decode runs after them)")
    binary, batched_binary, warning = find_tools(bench_path or None, batched=batched is not None)
    warnings = [warning[0].upper() + warning[1:]] if warning else []
    if batched_binary is None:
        batched = None

    def job(cancel: CancelToken) -> Generator[Progress, None, Any]:
        return measure_in_llamabench(spec, ref, bench, batched, binary=str(binary),
                                     batched_binary=str(batched_binary) if batched_binary else None,
                                     synthetic=synthetic, cancel=cancel)

    return job, warnings


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
