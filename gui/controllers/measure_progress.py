"""What the Measure tab's bar and status line show while a job runs: the job's ``Progress``,
with the fraction and the seconds left weighted by the points' predicted times for a model run
(``core.measure.engines.plan_times``), moving between two points (the bar sat at 42 % for 90 s) and
counting down; reset when the job ends without a result."""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, QTimer

from rooflab.core.jobs import Progress
from rooflab.core.measure.engines.plan_times import PlannedPoint, RunClock
from rooflab.core.values.measured import MeasuredPoint
from rooflab.gui.panels.measure_panel import MeasurePanel

TICK_MS = 1000                           # the bar and the seconds left move once a second
UNTIMED = ("prepare", "load", "write")   # steps before the first timed point


class RunProgressController(QObject):
    """Shows one job's progress on ``view``; ``begin`` for each job, ``end`` when it ends."""

    def __init__(self, view: MeasurePanel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._view = view
        self._clock: RunClock | None = None
        self._last: Progress | None = None
        self._last_at = 0.0
        self._timer = QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._on_timer_timeout)

    def begin(self, points: tuple[PlannedPoint, ...] = ()) -> None:
        """A job starts; ``points``: its planned units (a model run), () for the job's own figures."""
        self._clock = RunClock(points) if points else None
        self._last = None
        self._timer.start()

    def show(self, progress: Progress) -> None:
        """A ``Progress`` the job yielded."""
        now = time.monotonic()
        clock = self._clock
        if clock is not None and progress.step not in UNTIMED:
            # the first timed unit began when the job last spoke (after loading), not when its point arrived
            clock.started(self._last_at if self._last is not None else now)
            if isinstance(progress.sample, MeasuredPoint):
                clock.measured(progress.sample.kind, now)
        self._last, self._last_at = progress, now
        self._draw(now)

    def end(self, status: str | None = None) -> None:
        """The job ended: ``status`` when it gave no result ("Cancelled"), the bar back to empty."""
        self._timer.stop()
        self._clock = None
        if status is not None:
            self._view.show_stopped(status)

    def _draw(self, now: float) -> None:
        progress = self._last
        if progress is None:
            return
        clock = self._clock
        if clock is not None and clock.planned:
            self._view.show_progress(progress, fraction=clock.fraction(now), eta=clock.eta_seconds(now))
            return
        eta = progress.eta_seconds
        # the job's own estimate, counting down until its next word
        self._view.show_progress(progress, eta=None if eta is None else max(1.0, eta - (now - self._last_at)))

    def _on_timer_timeout(self) -> None:
        self._draw(time.monotonic())
