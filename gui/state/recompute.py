"""Turn state changes into drawn curves: debounced, on the GUI thread (it is cheap).

Each change restarts a short timer; when it fires, the current scenario's one answer
(``app.figures``: placed once, summarised once) and its charts are built (pinned series' once,
when pinned, from their own answer) and handed over in one ``Frame`` by the ``recomputed``
signal. A prediction that fails (a workload the machine
cannot run) reports ``failed`` and the last good frame stays on screen."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from rooflab.core.app.figures import Figures, figures
from rooflab.core.app.resolve import engine_for, expected_for_choice, missing_for_choice
from rooflab.core.calibration.expectations import Missing
from rooflab.core.errors import RooflabError
from rooflab.core.predict.expected import Expected
from rooflab.core.predict.parallel import Parallel
from rooflab.core.predict.placement import Placement
from rooflab.core.report.chart_types import Chart, Scenario
from rooflab.core.report.explain import Line
from rooflab.core.report.overlays import Overlay, expected_curves
from rooflab.core.report.summary import Summary
from rooflab.gui.state.app_state import AppState, Pinned

DEBOUNCE_MS = 8
BAND_DELAY_MS = 150        # the expected curves' band is drawn once edits pause this long


@dataclass(frozen=True, slots=True)
class Frame:
    """Everything one redraw needs: the scenario's one answer (``figures``), its charts, the
    pinned series' charts and the expected curves."""

    figures: Figures
    charts: dict[str, Chart]
    pinned: tuple[tuple[Pinned, dict[str, Chart]], ...]
    expected_curves: Overlay | None = None
    pinned_figures: tuple[Figures, ...] = ()      # each pinned series' one answer, as ``pinned``

    @property
    def scenario(self) -> Scenario:
        return self.figures.scenario

    @property
    def summary(self) -> Summary:
        return self.figures.summary

    @property
    def expected(self) -> Expected | None:
        """What the machine's calibration expects, None without one."""
        return self.figures.expected

    @property
    def lines(self) -> list[Line]:
        """The numbers panel's rows (``Figures.lines``): what the panel and the report sheet show."""
        return self.figures.lines()

    @property
    def runs_on(self) -> Placement | None:
        """The placement the headline stands on (None: nothing fits, or several devices)."""
        return self.figures.placed.runs_on

    @property
    def stands_on(self) -> Placement | Parallel | None:
        """Where the headline's request runs (``PlacedSummary.stands_on``; None: nowhere)."""
        return self.figures.stands_on

    @property
    def expected_figures(self) -> Expected | None:
        """``expected`` when there are figures to stand beside (none for a model that cannot
        run here)."""
        return self.figures.expected_figures


class RecomputeController(QObject):
    recomputed = Signal(object)       # Frame
    failed = Signal(str)

    def __init__(self, state: AppState, parent: QObject | None = None, delay_ms: int = DEBOUNCE_MS) -> None:
        super().__init__(parent)
        self._state = state
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(delay_ms)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._band_timer = QTimer(self)
        self._band_timer.setSingleShot(True)
        self._band_timer.setInterval(BAND_DELAY_MS)
        self._band_timer.timeout.connect(self._on_band_timer_timeout)
        self._pinned_charts: dict[int, dict[str, Chart]] = {}
        self._pinned_figures: dict[int, Figures] = {}
        self._last_expected: tuple[tuple[object, ...], Expected | None, Missing | None] | None = None
        self.frame: Frame | None = None
        state.changed.connect(self._on_state_changed)

    def schedule(self) -> None:
        self._timer.start()

    def recompute_now(self) -> Frame | None:
        """Build and hand over a frame now (also what the timer does)."""
        self._timer.stop()
        state = self._state
        try:
            sc = state.scenario
            answer = figures(sc)
            # a model that cannot run here has no expected figure, in the numbers or on the charts
            if answer.placed.fits:
                found, missing = self._expected(sc)
                answer = dataclasses.replace(answer, expected=found, missing=missing)
            summary = answer.summary
            charts = answer.charts()
            expected = answer.expected
            # the band (a chart set per replicate) waits until the edits pause: see _on_band_timeout
            curves = None if expected is None else expected_curves(
                sc.model, expected, sc.workload, replicas=0, n_star=summary.headline_prefill_crossover,
                placement=summary.drawn_on)
            pinned = []
            for p in state.pinned:
                if p.pin_id not in self._pinned_charts:
                    self._pinned_figures[p.pin_id] = figures(p.scenario)
                    self._pinned_charts[p.pin_id] = self._pinned_figures[p.pin_id].charts()
                pinned.append((p, self._pinned_charts[p.pin_id]))
        except RooflabError as exc:
            self.failed.emit(str(exc))
            return None
        live = {p.pin_id for p in state.pinned}
        self._pinned_charts = {k: v for k, v in self._pinned_charts.items() if k in live}
        self._pinned_figures = {k: v for k, v in self._pinned_figures.items() if k in live}
        self.frame = Frame(figures=answer, charts=charts, pinned=tuple(pinned), expected_curves=curves,
                           pinned_figures=tuple(self._pinned_figures[p.pin_id] for p, _ in pinned))
        self.recomputed.emit(self.frame)
        if expected is not None:
            self._band_timer.start()
        return self.frame

    def add_band(self) -> Frame | None:
        """The last frame again with its expected curves' band, handed over (what the band
        timer does once edits pause)."""
        self._band_timer.stop()
        frame = self.frame
        if frame is None or frame.expected_figures is None or self._timer.isActive():
            return None
        sc = frame.scenario
        try:
            curves = expected_curves(sc.model, frame.expected_figures, sc.workload,
                                     n_star=frame.summary.headline_prefill_crossover,
                                     placement=frame.summary.drawn_on)
        except RooflabError:
            return None
        self.frame = dataclasses.replace(frame, expected_curves=curves)
        self.recomputed.emit(self.frame)
        return self.frame

    def _on_band_timer_timeout(self) -> None:
        self.add_band()

    def forget_calibrations(self) -> None:
        """Look the machines' calibrations up again (one was made or removed), and redraw."""
        self._last_expected = None
        self.schedule()

    def _expected(self, sc: Scenario) -> tuple[Expected | None, Missing | None]:
        """What the calibration of the scenario's machine expects of its model, for the engine
        that runs it (``app.resolve.engine_for``: tensor parallel is vLLM's, as ``rooflab predict``
        takes it), with why there is none where the reason is not the usual one
        (``missing_for_choice``); a machine whose efficiency was set by hand or by a model's own
        fit shows that instead. Looked up again only when the model, the machine, the engine or the dtype
        change, so a slider's drag does not re-mix the rates."""
        machine = sc.machine
        if not machine.efficiency.is_identity:
            return None, None
        # vLLM's published calibration holds over NVLink only, so its figure also turns on the device count
        key = (sc.model, machine, engine_for(sc.placement), sc.workload.compute_dtype, sc.placement.devices)
        last = self._last_expected
        if last is None or last[0][0] is not sc.model or last[0][1] != machine or last[0][2:] != key[2:]:
            dtype = sc.workload.compute_dtype
            found = expected_for_choice(sc.model, machine, sc.placement, dtype)
            missing = None if found is not None else missing_for_choice(sc.model, machine, sc.placement, dtype)
            last = (key, found, missing)
            self._last_expected = last
        return last[1], last[2]

    @property
    def pending(self) -> bool:
        return self._timer.isActive()

    def _on_state_changed(self) -> None:
        self.schedule()

    def _on_timer_timeout(self) -> None:
        self.recompute_now()
