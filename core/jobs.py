"""The job contract every slow job follows (opening a model file, a measurement), in the window
and on the command line alike.

A job is a plain generator with no Qt inside. Each ``yield`` hands out one ``Progress`` (which
may carry a ``sample``: a point measured just now, to draw while the job runs) and is a chance
to stop; between small chunks of work the job calls ``check_cancel(cancel)`` with the
``CancelToken`` it was given; its ``return`` value is the job's result.

The GUI runs these generators on its worker (``rooflab.gui.workers.jobs``); the command line and the
benchmarks drain them with ``run_job``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import TypeVar

from rooflab.core.errors import Cancelled

T = TypeVar("T")


class CancelToken(threading.Event):
    """One job's stop request, shared by whoever may ask (a Cancel button, a newer job that
    supersedes it, Ctrl+C) and the job that checks it. Set once; never cleared.

    It is a ``threading.Event`` (so ``set``/``is_set``/``wait`` work) with the job's words."""

    def cancel(self) -> None:
        """Ask the job to stop at its next check."""
        self.set()

    @property
    def cancelled(self) -> bool:
        return self.is_set()


#: What a job accepts as its stop signal: the job's ``CancelToken`` (any ``threading.Event``
#: serves), or None (never stops).
CancelFlag = threading.Event | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """A progress point of a running job.

    step: the stage ("open", "bandwidth", "matmul", "roofline", "prefill", "batch", ...).
    message: what is happening now, for a status line. fraction: of the whole job, in [0, 1]
    (None when the job cannot tell). eta_seconds: estimated seconds left, None until there is
    a basis for one. sample: a result finished at this point (a ``MeasuredPoint``, a
    ``RooflineSample``, ...), so it can be shown before the job returns; None for most."""

    step: str
    message: str
    fraction: float | None = None
    eta_seconds: float | None = None
    sample: object | None = None


#: What runs a job: called with the job's cancel token, returns the generator.
JobFactory = Callable[[CancelToken], Generator[Progress, None, T]]


def check_cancel(cancel: CancelFlag) -> None:
    """Raise ``Cancelled`` when ``cancel`` asks the job to stop; call between small chunks."""
    if cancel is not None and cancel.is_set():
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

    def progress(self, step: str, message: str, sample: object | None = None) -> Progress:
        return Progress(step=step, message=message, fraction=self.fraction, eta_seconds=self.eta_seconds,
                        sample=sample)


def run_job(job: Generator[Progress, None, T], on_progress: Callable[[Progress], None] | None = None) -> T:
    """Drive a job to its end in this thread; hand every ``Progress`` to ``on_progress``.

    Returns the generator's return value. A ``Cancelled`` or other error propagates; whatever
    ends the drive (Ctrl+C in ``on_progress`` too), the job is closed, so its ``finally`` blocks
    free what it holds (a llama.cpp model, a child process) at once."""
    try:
        while True:
            try:
                item = next(job)
            except StopIteration as stop:
                return stop.value
            if on_progress is not None:
                on_progress(item)
    finally:
        job.close()
