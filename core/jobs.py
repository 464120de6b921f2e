"""The job contract every measurement follows: a plain generator that yields ``Progress`` and
results, checks a cancel flag between small chunks, and returns its final result.

No Qt here: the GUI runs these generators on its worker; the CLI and the benchmarks drain them
with ``run_job``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from rooflab.core.errors import Cancelled

T = TypeVar("T")

#: What a measurement accepts as its stop signal: an Event, a callable returning True to stop,
#: or None (never stops).
CancelFlag = threading.Event | Callable[[], bool] | None


@dataclass(frozen=True, slots=True)
class Progress:
    """A progress point of a running job.

    step: the experiment ("bandwidth", "matmul", "roofline", "prefill", "batch", ...).
    message: what is happening now, for a status line. fraction: of the whole job, in [0, 1].
    eta_seconds: estimated seconds left, None until there is a basis for one."""

    step: str
    message: str
    fraction: float
    eta_seconds: float | None = None


def cancel_requested(cancel: CancelFlag) -> bool:
    """True when the flag asks the job to stop."""
    if cancel is None:
        return False
    if isinstance(cancel, threading.Event):
        return cancel.is_set()
    return bool(cancel())


def check_cancel(cancel: CancelFlag) -> None:
    """Raise ``Cancelled`` when the flag asks the job to stop; call between small chunks."""
    if cancel_requested(cancel):
        raise Cancelled("measurement cancelled")


class EtaTracker:
    """Fraction done and seconds left for a job planned as weighted units of work.

    Each unit's weight is a guess of its relative cost; the ETA rescales the guesses by the
    time the finished units actually took, so it corrects itself as the job runs."""

    def __init__(self, weights: Iterable[float]) -> None:
        self._weights = [max(float(w), 1e-12) for w in weights]
        self._total = sum(self._weights) or 1.0
        self._done = 0.0
        self._index = 0
        self._start = time.perf_counter()

    def advance(self, units: int = 1) -> None:
        """Mark the next ``units`` planned units finished."""
        for _ in range(units):
            if self._index < len(self._weights):
                self._done += self._weights[self._index]
                self._index += 1

    @property
    def fraction(self) -> float:
        return min(1.0, self._done / self._total)

    @property
    def eta_seconds(self) -> float | None:
        if self._done <= 0:
            return None
        elapsed = time.perf_counter() - self._start
        return max(0.0, elapsed / self._done * (self._total - self._done))

    def progress(self, step: str, message: str) -> Progress:
        return Progress(step=step, message=message, fraction=self.fraction, eta_seconds=self.eta_seconds)


def run_job(job: Generator[Any, None, T], on_item: Callable[[Any], None] | None = None) -> T:
    """Drive a measurement generator to its end; hand every yielded item to ``on_item``.

    Returns the generator's return value. A ``Cancelled`` or other error propagates."""
    while True:
        try:
            item = next(job)
        except StopIteration as stop:
            return stop.value
        if on_item is not None:
            on_item(item)
