"""The Compare view's rows are the pinned series: one set, whether pinned with Ctrl+P, the
Compare panel's "Pin current" or the table's buttons. Each row is ``report.compare``'s row for
its pinned scenario (model, machine, workload and placement, as its curves are drawn on every
chart), so the table and the charts tell one story.

A row prices a placement search (a few ms to tens of ms): rows are worked out once per pin
(a pinned scenario never changes) and only while the view is on screen."""

from __future__ import annotations

import functools
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from rooflab.core.errors import RooflabError
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.report.chart_types import Scenario, distinguishing_labels
from rooflab.core.report.compare import CompareRow, compare_row
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.gui.state.app_state import AppState, Pinned

#: (model, machine, choice=) -> the machine as the calibration for the engine that runs ``choice``
#: expects it (``app.resolve.expected_machine``), None without one
PinExpectedHook = Callable[..., MachineProfile | None]


class CompareController(QObject):
    """The pinned series as Compare rows (``rows_computed``, with ``pins`` and ``labels`` in the
    same order; ``failed`` with one line on an error). Adding, removing and clearing rows pins
    and unpins."""

    rows_computed = Signal(object)       # list[CompareRow]
    failed = Signal(str)

    def __init__(self, state: AppState, parent: QObject | None = None,
                 expected: PinExpectedHook | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._expected = expected
        self.pins: list[Pinned] = []
        self.rows: list[CompareRow] = []
        self.labels: list[str] = []          # as the charts' legends name each series
        self._done: dict[int, CompareRow] = {}
        self.active = True                   # False while off screen: work the rows out when shown
        self._stale = False
        state.pinned_changed.connect(self._on_state_pinned_changed)
        if state.pinned:
            self.recompute_now()

    def add_current(self) -> None:
        """Pin what is on screen (as Ctrl+P does)."""
        self._state.pin_current()

    def add(self, spec: ModelSpec, machine: MachineProfile, *, choice: PlacementChoice | None = None) -> None:
        """Pin ``spec`` on ``machine`` at the workload on screen, placed as ``choice`` asks (None:
        auto placement); a series already pinned is not pinned twice."""
        self._state.pin(Scenario(model=spec, machine=machine, workload=self._state.workload,
                                 placement=AUTO if choice is None else choice))

    def remove(self, index: int) -> None:
        """Unpin the series of row ``index``."""
        if 0 <= index < len(self.pins):
            self._state.unpin(self.pins[index].pin_id)

    def clear(self) -> None:
        self._state.clear_pinned()

    def set_active(self, active: bool) -> None:
        self.active = active
        if active and self._stale:
            self.recompute_now()

    def forget(self) -> None:
        """Work every row out again (a calibration changed what is expected)."""
        self._done.clear()
        self.recompute_now()

    def recompute_now(self) -> None:
        self._stale = False
        pins = list(self._state.pinned)
        try:
            rows = [self._row(p) for p in pins]
        except RooflabError as exc:
            self.failed.emit(str(exc))
            return
        self._done = {p.pin_id: r for p, r in zip(pins, rows, strict=True)}
        self.pins, self.rows = pins, rows
        self.labels = distinguishing_labels([p.scenario.description for p in pins])
        self.rows_computed.emit(self.rows)

    def _row(self, pin: Pinned) -> CompareRow:
        done = self._done.get(pin.pin_id)
        if done is not None:
            return done
        sc = pin.scenario
        # the calibration for the engine that runs the pin (tensor parallel is vLLM's: app.resolve.engine_for)
        hook = None if self._expected is None else functools.partial(self._expected, choice=sc.placement)
        return compare_row(sc.model, sc.machine, sc.workload, expected=hook, choice=sc.placement)

    def _on_state_pinned_changed(self) -> None:
        if self.active:
            self.recompute_now()
        else:
            self._stale = True
