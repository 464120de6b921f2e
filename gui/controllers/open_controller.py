"""Open a model file, folder or catalogue key off the GUI thread. The model on screen stays
until the new one has been read, and stays if it cannot be.

The reading is a core-style job (a generator, no Qt) run on this controller's own
JobController; on success the model goes onto the state and into the recent list, and
``opened`` fires; a RooflabError fires ``failed`` with the exception."""

from __future__ import annotations

import functools
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from rooflab.core.errors import RooflabError
from rooflab.core.jobs import CancelToken, Progress
from rooflab.core.values.model import ModelSpec
from rooflab.gui.panels.model_panel import ModelPanel
from rooflab.gui.state.app_state import AppState
from rooflab.gui.state.settings import Settings, settings_path
from rooflab.gui.workers.jobs import JobController, report_unexpected


@dataclass(frozen=True, slots=True)
class Opened:
    """What an open-model job returns."""

    ref: str
    spec: ModelSpec
    weights: str = ""


def open_model_job(ref: str, weights: str | None, cancel: CancelToken) -> Generator[Progress, None, Opened]:
    """Read a model (a job: no Qt inside); a remote one yields a Progress per request."""
    from rooflab.core.io import load_model_job

    yield Progress(step="open", message=f"Opening {Path(ref).name or ref}…")
    spec = yield from load_model_job(ref, weights=weights, cancel=cancel)
    return Opened(ref=ref, spec=spec, weights=weights or "")


class OpenModelController(QObject):
    """Opens models for the window; see the module docstring."""

    opened = Signal(object)        # Opened, after the state and the recent list took it
    failed = Signal(object)        # the RooflabError that stopped it
    progressed = Signal(str)       # what is being opened, for a status line

    def __init__(self, state: AppState, settings: Settings, panel: ModelPanel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._settings = settings
        self._panel = panel
        self._opening = ""             # the ref the job in flight reads
        self.jobs = JobController(self)
        self.jobs.yielded.connect(self._on_jobs_yielded)
        self.jobs.returned.connect(self._on_jobs_returned)
        self.jobs.errored.connect(self._on_jobs_errored)
        self.jobs.finished.connect(self._on_jobs_finished)

    def open(self, ref: str, weights: str | None = None) -> None:
        """Start reading ``ref`` (a newer request supersedes one still reading).

        ``weights``: the format for a config-defined model (None: the Model tab's choice, so a
        dialog, a drop and the recent menu all follow it); a GGUF file keeps its own types."""
        from rooflab.core.io import takes_weights

        if weights is None:
            weights = self._panel.chosen_weights()
        if not takes_weights(ref):
            weights = ""
        self._opening = ref
        self.jobs.start(functools.partial(open_model_job, ref, weights or None))
        self._panel.set_busy(f"Opening {Path(ref).name or ref}…")     # after a superseded run's end

    def shutdown(self) -> None:
        self.jobs.shutdown()

    def _on_jobs_yielded(self, progress: Progress) -> None:
        self._panel.set_busy(progress.message)
        self.progressed.emit(progress.message)

    def _on_jobs_returned(self, opened: Opened) -> None:
        self._state.set_model(opened.spec, opened.ref, opened.weights)
        from rooflab.core.io import is_remote

        if is_remote(opened.ref) or Path(opened.ref).exists():      # a URL or hf: name stays as typed
            self._settings.add_recent(opened.ref if is_remote(opened.ref) else str(Path(opened.ref).resolve()))
            self._panel.set_recent(self._settings.recent)
        self._settings.model = opened.ref
        self._settings.weights = opened.weights
        self.opened.emit(opened)

    def _on_jobs_errored(self, exc: BaseException) -> None:
        if isinstance(exc, RooflabError):
            if self._opening and self._opening == self._settings.model:
                # the last session's model no longer opens: forget it, or every start tries again
                self._settings.model = self._settings.weights = ""
                exc = RooflabError(f"{exc} (the last model in {settings_path()}: set aside)")
            self.failed.emit(exc)
        else:
            report_unexpected(exc)

    def _on_jobs_finished(self) -> None:
        self._panel.set_busy(None)
