"""The "What fits" view's rows: every catalogue model ranked on the machine on screen at the
workload on screen (``report.fit_table``, the rows ``rooflab fit`` prints). Reading the
catalogue and pricing some fifty placements takes about a second, so the table is a job on a
worker thread (``JobController``), debounced, and only while the view is on screen; the models
read on the first run are kept for the next. The model on screen, when it is not a catalogue
entry (a file, an ``hf:`` name, a GGUF link), is ranked among them at its own format."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QObject, QTimer, Signal

from rooflab.core.errors import RooflabError
from rooflab.core.jobs import Progress
from rooflab.core.report.compare import ExpectedHook
from rooflab.core.report.fit_table import USABLE_TPS, FitEntry, FitRow, fit_table_job
from rooflab.gui.state.app_state import AppState
from rooflab.gui.workers.jobs import JobController, report_unexpected

DEBOUNCE_MS = 300


class FitController(QObject):
    """Ranks the catalogue for the machine and workload on screen: ``rows_ranked`` with the
    ranked rows, ``progressed`` with a line while it works, ``failed`` with one line."""

    rows_ranked = Signal(object)        # list[FitRow]
    progressed = Signal(str)
    failed = Signal(str)

    def __init__(self, state: AppState, parent: QObject | None = None, *, expected: ExpectedHook | None = None,
                 entries: Sequence[FitEntry] | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._expected = expected
        self._entries: list[FitEntry] | None = list(entries) if entries is not None else None
        self.min_tps = USABLE_TPS         # what fits at a usable speed first, as rooflab fit
        self.rows: list[FitRow] = []
        self._ranked_named: list[tuple[str, object]] = []       # the named models of the last run
        self.active = False                 # off screen until shown: nothing is worked out
        self._stale = True
        self.jobs = JobController(self)
        self.jobs.yielded.connect(self._on_jobs_yielded)
        self.jobs.returned.connect(self._on_jobs_returned)
        self.jobs.errored.connect(self._on_jobs_errored)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        state.machine_changed.connect(self._on_state_changed)
        state.workload_changed.connect(self._on_state_changed)
        state.model_changed.connect(self._on_state_model_changed)

    @property
    def busy(self) -> bool:
        return self.jobs.busy

    def set_active(self, active: bool) -> None:
        """On screen (True): rank now if anything changed while it was not."""
        self.active = active
        if active and self._stale:
            self.rank_now()

    def set_min_tps(self, value: float) -> None:
        """Rank rows slower than ``value`` tokens/s after those that reach it (0: no floor)."""
        if value != self.min_tps:
            self.min_tps = value
            self._on_state_changed(None)

    def rank_now(self) -> None:
        """Start ranking for what is on screen (a run still going is superseded)."""
        self._timer.stop()
        self._stale = False
        s = self._state
        named = self.named()
        self._ranked_named = [(e.key, e.spec) for e in named]
        self.jobs.start(fit_table_job(s.machine, s.workload, entries=self._entries, min_tps=self.min_tps,
                                      expected=self._expected, named=named))

    def named(self) -> list[FitEntry]:
        """The model on screen, when the catalogue does not hold it, as a named entry."""
        s = self._state
        if s.model.source.startswith("catalogue:"):
            return []
        return [FitEntry(key=s.model_ref, weights=None, spec=s.model, named=True)]

    def shutdown(self) -> None:
        self._timer.stop()              # a debounced run must not start after the window closed
        self.active = False
        self.jobs.shutdown()

    def _on_state_changed(self, _value: object) -> None:
        if self.active:
            self._timer.start()
        else:
            self._stale = True

    def _on_state_model_changed(self, _model: object) -> None:
        # only a model the catalogue lacks changes the table: re-rank when the named one changes
        if [(e.key, e.spec) for e in self.named()] != self._ranked_named:
            self._on_state_changed(None)

    def _on_timer_timeout(self) -> None:
        self.rank_now()

    def _on_jobs_yielded(self, progress: Progress) -> None:
        self.progressed.emit(progress.message)

    def _on_jobs_returned(self, rows: list[FitRow]) -> None:
        if self._entries is None:           # the catalogue as read: the next run prices it again
            catalogue = (r.entry for r in rows if not r.entry.named)
            self._entries = sorted(catalogue, key=lambda e: (e.key, e.weights or ""))
        self.rows = rows
        self.rows_ranked.emit(rows)

    def _on_jobs_errored(self, exc: BaseException) -> None:
        if isinstance(exc, RooflabError):
            self.failed.emit(str(exc))
        else:
            report_unexpected(exc)
