"""The Compare view's rows: which (model, machine, weights, placement) they are and, after each
change of the workload, their figures from ``report.compare``. Debounced, and only while the
view is on screen: a row prices a placement search (a few ms to tens of ms).

A row added from the current scenario keeps the placement on screen (by hand, or several
devices) as its model and machine: its figures are the headline's. Rows added from the pickers
are placed by auto-fit."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from rooflab.core.errors import RooflabError
from rooflab.core.predict.choice import PlacementChoice
from rooflab.core.report.compare import CompareRow, compare_row
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.gui.state.app_state import AppState

DEBOUNCE_MS = 250
Entry = tuple[ModelSpec, MachineProfile, str, PlacementChoice | None]     # None: auto-fit


class CompareController(QObject):
    """The rows of the Compare view: their (model, machine, weights, placement) and, after each
    change of the workload, their figures (``rows_computed``; ``failed`` with one line on an
    error)."""

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
        """Add what is on screen, placed as the Workload tab's Placement group places it."""
        s = self._state
        self.add(s.model, s.machine, s.model_weights, choice=s.placement)

    def add(self, spec: ModelSpec, machine: MachineProfile, weights: str = "", *,
            choice: PlacementChoice | None = None) -> None:
        """Add a row placed as ``choice`` asks (None or auto: by auto-fit); a row already there
        is not added twice."""
        placed = None if choice is None or choice.is_auto else choice
        entry = (spec, machine, (weights or spec.weights_format).upper(), placed)
        if any(e[0] is spec and e[1:] == entry[1:] for e in self.entries):
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
            workload = self._state.workload
            self.rows = [compare_row(spec, machine, workload, weights=weights, expected=self._expected, choice=choice)
                         for spec, machine, weights, choice in self.entries]
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
