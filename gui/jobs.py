"""Run one slow job (opening a model file, a measurement) off the GUI thread.

A job is a plain Python generator with no Qt inside. Each ``yield`` is a progress point and a
chance to stop: a yielded ``Progress`` goes to the ``progress`` signal, anything else to
``result`` (a generator may yield several results, e.g. one per measured point); its return
value, when not None, is one more ``result``. The controller owns at most one QThread.

Contract (the superqt worker contract):
- ``started`` once, then any number of ``progress``/``result``, then ``failed(str)`` if the job
  raised, then ``done`` exactly once, always last (also after a cancel).
- ``cancel()`` sets a ``threading.Event``; the worker checks it after every yield and closes
  the generator (its ``finally`` blocks run). A job that wants to stop inside a long step
  takes the event: ``start(lambda cancel: measure(spec, cancel=cancel))``.
- A ``RooflabError`` reaches ``failed`` as its one-line message; any other exception as
  "Unexpected error: ...", with the traceback logged. A cancelled job reports no ``failed``.
- Signals from a superseded run are dropped (run counter), so a late result never lands.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Union

from PySide6.QtCore import QObject, QThread, Signal

from rooflab.core.errors import Cancelled, RooflabError

log = logging.getLogger(__name__)

Job = Union[Iterable[object], Callable[[threading.Event], Iterable[object]]]  # noqa: UP007 - a runtime alias on 3.10


@dataclass(frozen=True, slots=True)
class Progress:
    """A progress point: ``fraction`` in [0, 1] (None when unknown) and what is happening."""

    message: str
    fraction: float | None = None
    eta_seconds: float | None = None


class _WorkerThread(QThread):
    """Drives one generator; its signals are emitted from the worker thread and arrive queued
    at the controller, which lives in the GUI thread."""

    yielded = Signal(int, object)
    errored = Signal(int, str)
    finished_run = Signal(int)

    def __init__(self, run: int, job: Job, cancel: threading.Event, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._run = run
        self._job = job
        self._cancel = cancel

    def run(self) -> None:  # noqa: D401 - QThread API
        iterator: Iterator[object] | None = None
        try:
            source = self._job(self._cancel) if callable(self._job) else self._job
            iterator = iter(source)
            while not self._cancel.is_set():
                try:
                    item = next(iterator)
                except StopIteration as stop:
                    if stop.value is not None:
                        self.yielded.emit(self._run, stop.value)
                    break
                self.yielded.emit(self._run, item)
        except Cancelled:
            pass
        except RooflabError as exc:
            if not self._cancel.is_set():
                self.errored.emit(self._run, str(exc))
        except Exception as exc:  # noqa: BLE001 - a job's bug must reach the user, not kill the thread
            log.exception("job failed")
            if not self._cancel.is_set():
                self.errored.emit(self._run, f"Unexpected error: {type(exc).__name__}: {exc}")
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                try:
                    close()                      # runs the generator's finally blocks on cancel
                except Exception:  # noqa: BLE001
                    log.exception("job failed while closing")
            self.finished_run.emit(self._run)


class JobController(QObject):
    """Runs at most one job at a time in a QThread; see the module docstring for the contract."""

    started = Signal()
    progress = Signal(object)      # a Progress
    result = Signal(object)        # anything else a job yields or returns
    failed = Signal(str)
    done = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._run = 0
        self._thread: _WorkerThread | None = None
        self._cancel = threading.Event()
        self.last_error: str | None = None

    @property
    def busy(self) -> bool:
        return self._thread is not None

    def start(self, job: Job) -> None:
        """Run ``job``: an iterable, or a callable taking the cancel event and returning one.

        A job still running is cancelled first and waited for (its ``done`` still arrives)."""
        if self._thread is not None:
            self.cancel()
            self.wait()
        self._run += 1
        self._cancel = threading.Event()
        self.last_error = None
        thread = _WorkerThread(self._run, job, self._cancel, self)
        thread.yielded.connect(self._on_thread_yielded)
        thread.errored.connect(self._on_thread_errored)
        thread.finished_run.connect(self._on_thread_finished_run)
        self._thread = thread
        self.started.emit()
        thread.start()

    def cancel(self) -> None:
        """Ask the running job to stop at its next yield (no-op when idle)."""
        self._cancel.set()

    def wait(self, timeout_ms: int = 30_000) -> bool:
        """Block until the worker thread has ended and its signals are delivered."""
        thread = self._thread
        if thread is None:
            return True
        ended = thread.wait(timeout_ms)
        if ended:
            # deliver the queued signals now, so ``done`` is never left pending
            from PySide6.QtCore import QCoreApplication

            QCoreApplication.sendPostedEvents(self)
            if self._thread is thread:        # nothing delivered: finish by hand
                self._on_thread_finished_run(self._run)
        return ended

    def shutdown(self) -> None:
        """On close: cancel, then wait."""
        self.cancel()
        self.wait()

    # -- slots (GUI thread) ---------------------------------------------------------------
    def _on_thread_yielded(self, run: int, item: object) -> None:
        if run != self._run or self._cancel.is_set():
            return
        if isinstance(item, Progress):
            self.progress.emit(item)
        else:
            self.result.emit(item)

    def _on_thread_errored(self, run: int, message: str) -> None:
        if run != self._run:
            return
        self.last_error = message
        self.failed.emit(message)

    def _on_thread_finished_run(self, run: int) -> None:
        if self._thread is None or run != self._run:
            return
        thread, self._thread = self._thread, None
        thread.wait()
        thread.deleteLater()
        self.done.emit()
