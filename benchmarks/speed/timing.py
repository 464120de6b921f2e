"""The one timing loop the benchmark scripts share (run them as `python benchmarks/speed/NAME.py`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed(fn: Callable[[], object], repeats: int = 20) -> tuple[float, float]:
    """(best, median) milliseconds of ``repeats`` calls of ``fn``, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return min(samples) * 1e3, statistics.median(samples) * 1e3
