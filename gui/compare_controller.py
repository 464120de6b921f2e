"""The Compare view's rows: which (model, machine, weights) they are and, after each change of
the workload, their figures from ``report.compare``. Debounced, and only while the view is on
screen: a row prices a placement search (a few ms to tens of ms)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from rooflab.core.errors import RooflabError
from rooflab.core.report.compare import CompareRow, compare_rows
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.gui.state import AppState

DEBOUNCE_MS = 250
Entry = tuple[ModelSpec, MachineProfile, str]


class CompareController(QObject):
    """The rows of the Compare view: their (model, machine, weights) and, after each change of
    the workload, their figures (``rows_computed``; ``failed`` with one line on an error)."""

    rows_computed = Signal(object)       # list[CompareRow]
    failed = Signal(str)

    def __init__(self, state: AppState, parent: QObject | None = None,
                 expected: Callable[[ModelSpec, MachineProfile], MachineProfile | None] | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._expected = expected
        self.entries: list[Entry] = []
        self.rows: list[CompareRow] = []
        self.active = True                 # False while off screen: recompute when shown
        self._stale = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        state.workload_changed.connect(self._on_state_workload_changed)

    def add_current(self) -> None:
        s = self._state
        self.add(s.model, s.machine, s.model_weights)

    def add(self, spec: ModelSpec, machine: MachineProfile, weights: str = "") -> None:
        """Add a row (a row already there is not added twice)."""
        entry = (spec, machine, (weights or spec.weights_format).upper())
        if any(e[0] is spec and e[1] == machine and e[2] == entry[2] for e in self.entries):
            return
        self.entries.append(entry)
        self.recompute_now()

    def remove(self, index: int) -> None:
        if 0 <= index < len(self.entries):
            del self.entries[index]
            self.recompute_now()

    def clear(self) -> None:
        self.entries.clear()
        self.recompute_now()

    def set_active(self, active: bool) -> None:
        self.active = active
        if active and self._stale:
            self.recompute_now()

    def recompute_now(self) -> None:
        self._timer.stop()
        self._stale = False
        try:
            self.rows = compare_rows(self.entries, self._state.workload, expected=self._expected)
        except RooflabError as exc:
            self.failed.emit(str(exc))
            return
        self.rows_computed.emit(self.rows)

    def _on_state_workload_changed(self, _workload: object) -> None:
        if not self.entries:
            return
        if self.active:
            self._timer.start()
        else:
            self._stale = True

    def _on_timer_timeout(self) -> None:
        self.recompute_now()
