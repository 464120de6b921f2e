"""Run one slow job (opening a model file, a measurement) off the GUI thread.

A job is a core generator (``rooflab.core.jobs``): no Qt inside, each ``yield`` a ``Progress``
and a chance to stop, its ``return`` value the result. ``JobController.start`` takes the
generator itself, or a callable that makes it from the run's ``CancelToken`` (for a job that
checks the token inside a long step: ``start(functools.partial(measure_model, ref, plan))``).

The signals of one run, modelled on superqt's ``thread_worker``:

- ``started()`` when the run starts (inside ``start``);
- ``yielded(progress)`` for each ``Progress``, in order;
- then exactly one of ``returned(result)`` (the generator's return value),
  ``errored(exception)`` (the exception object, traceback attached and logged) or
  ``aborted()`` (``cancel()`` was called, or a newer run superseded this one);
- ``finished()`` always last, exactly once.

Once ``cancel()`` was called for a run, nothing but ``aborted`` and ``finished`` reach the
listeners. ``start`` never blocks: a run still going is cancelled and ends with ``aborted`` and
``finished`` before the new run's ``started``; its thread is kept referenced until it really
ends and whatever it still sends is dropped (each run has a number). Only ``shutdown()``, on
closing the window, waits for the threads.

Connect these signals to bound methods of objects that live in the GUI thread."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Generator
from typing import Any, Union

from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal

from rooflab.core.errors import Cancelled, RooflabError
from rooflab.core.jobs import CancelToken, Progress

log = logging.getLogger(__name__)

JobGenerator = Generator[Progress, None, Any]
Job = Union[JobGenerator, Callable[[CancelToken], JobGenerator]]  # noqa: UP007 - a runtime alias on 3.10

RETURNED, ERRORED, ABORTED = "returned", "errored", "aborted"


def report_unexpected(exc: BaseException) -> None:
    """What an ``errored`` slot does with an exception that is not a RooflabError (a bug): hand
    it to the excepthook, which logs the traceback and shows the dialog."""
    sys.excepthook(type(exc), exc, exc.__traceback__)


class _WorkerThread(QThread):
    """Drives one generator. Its signals are emitted in the worker thread and reach the
    controller (a GUI-thread object) queued, in the order they were sent."""

    progressed = Signal(int, object)           # run, Progress
    ended = Signal(int, str, object)           # run, outcome, result or exception: sent last, once

    def __init__(self, run: int, job: Job, token: CancelToken, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.run_id = run
        self._job = job
        self._token = token

    def run(self) -> None:  # noqa: D401 - QThread API
        generator: JobGenerator | None = None
        outcome, payload = ABORTED, None
        try:
            generator = self._job(self._token) if callable(self._job) else self._job
            while not self._token.is_set():
                try:
                    item = next(generator)
                except StopIteration as stop:
                    outcome, payload = RETURNED, stop.value
                    break
                self.progressed.emit(self.run_id, item)
        except Cancelled:
            pass
        except RooflabError as exc:          # a user's mistake or the machine's limit: one line
            outcome, payload = ERRORED, exc
        except Exception as exc:  # noqa: BLE001 - a job's bug must reach the user, not end the thread
            log.exception("job failed")
            outcome, payload = ERRORED, exc
        finally:
            if generator is not None:
                try:
                    generator.close()         # runs the job's finally blocks when it stopped early
                except Exception:  # noqa: BLE001
                    log.exception("job failed while closing")
            self.ended.emit(self.run_id, outcome, payload)


class JobController(QObject):
    """Runs at most one job at a time on a worker thread; see the module docstring."""

    started = Signal()
    yielded = Signal(object)        # a Progress
    returned = Signal(object)       # the job's return value
    errored = Signal(object)        # the exception the job raised
    aborted = Signal()
    finished = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._run = 0
        self._token = CancelToken()
        self._busy = False
        self._threads: list[_WorkerThread] = []     # each kept until it has really ended
        self.last_error: BaseException | None = None

    @property
    def busy(self) -> bool:
        """A run has started and not yet finished."""
        return self._busy

    @property
    def threads_alive(self) -> int:
        """Worker threads not yet ended (a superseded run's may outlive it for a while)."""
        return len(self._threads)

    def start(self, job: Job) -> None:
        """Run ``job`` (a generator, or a callable taking the run's CancelToken and returning
        one). A run still going is cancelled, not waited for: its ``aborted`` and ``finished``
        come first."""
        if self._busy:
            self._end(ABORTED, None)
        self._run += 1
        self._token = CancelToken()
        self._busy = True
        self.last_error = None
        thread = _WorkerThread(self._run, job, self._token, self)
        thread.progressed.connect(self._on_thread_progressed)
        thread.ended.connect(self._on_thread_ended)
        thread.finished.connect(self._on_thread_finished)
        self._threads.append(thread)
        self.started.emit()
        thread.start()

    def cancel(self) -> None:
        """Ask the running job to stop at its next yield or cancel check (no-op when idle)."""
        self._token.cancel()

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """On close: cancel, then wait for every worker thread; the running job's ``aborted``
        and ``finished`` are delivered before this returns. False if a thread outlived
        ``timeout_ms`` (its job ignores cancel)."""
        self.cancel()
        ended = all([thread.wait(timeout_ms) for thread in list(self._threads)])
        QCoreApplication.sendPostedEvents(self)     # deliver what the threads sent while we waited
        if self._busy:                              # a job that would not stop: finish it by hand
            self._end(ABORTED, None)
        return ended

    # -- the worker's signals (GUI thread) ----------------------------------------------------
    def _on_thread_progressed(self, run: int, progress: object) -> None:
        if run == self._run and self._busy and not self._token.is_set():
            self.yielded.emit(progress)

    def _on_thread_ended(self, run: int, outcome: str, payload: object) -> None:
        if run != self._run or not self._busy:
            return                                   # superseded, or finished by hand
        if self._token.is_set():
            outcome = ABORTED                        # the user's cancel wins over a late result
        self._end(outcome, payload)

    def _on_thread_finished(self) -> None:
        thread = self.sender()
        if thread in self._threads:
            self._threads.remove(thread)
            thread.deleteLater()

    def _end(self, outcome: str, payload: object) -> None:
        """The current run's last signals: its outcome, then ``finished``."""
        self._token.cancel()                 # a superseded job stops; a finished one is unaffected
        self._run += 1                       # whatever the old thread still sends is dropped
        self._busy = False
        if outcome == RETURNED:
            self.returned.emit(payload)
        elif outcome == ERRORED:
            self.last_error = payload if isinstance(payload, BaseException) else None
            self.errored.emit(payload)
        else:
            self.aborted.emit()
        self.finished.emit()
