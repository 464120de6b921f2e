"""The measurements on the plots: the runs kept for the model and machine on screen, the points
of the run timing now, this machine's measured multiplies and the fit of the newest series,
handed to the plots as layers over the predicted curves (``measure_overlays`` says which plot
and layer gets which).

Points are drawn one series per engine and settings (the newest run of each), the series
fitted last first. Every change of the scenario redraws them, debounced; what was kept is
brought back from the store when the ``MeasureController`` finds the model or machine on
screen moved."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from PySide6.QtCore import QObject, QTimer, Signal

from rooflab.core.calibration import store
from rooflab.core.calibration.calibrate import Calibration
from rooflab.core.errors import RooflabError
from rooflab.core.io.presets import MEASURED_KEY as MEASURED_MACHINE
from rooflab.core.report.overlays import MeasuredSeries, series_by_engine
from rooflab.core.values.machine_run import RooflineSample
from rooflab.core.values.measured import MeasuredPoint
from rooflab.gui.controllers import measure_jobs
from rooflab.gui.controllers.measure_text import results_html
from rooflab.gui.panels.measure_panel import MeasurePanel
from rooflab.gui.plots import ChartPlot
from rooflab.gui.plots import measure_overlays as overlays
from rooflab.gui.state.app_state import AppState


class MeasureDisplayController(QObject):
    """Keeps and draws what is measured; see the module docstring."""

    message = Signal(str, str)              # text, level: the points cannot be drawn
    calibrated = Signal(object)             # a Calibration, once it is the fit on screen

    def __init__(self, state: AppState, plots: Mapping[str, ChartPlot], view: MeasurePanel, *,
                 measuring_machine: Callable[[], bool], parent: QObject | None = None) -> None:
        """``measuring_machine``: whether this machine is being measured now (its multiplies
        are drawn as they arrive, whatever machine is on screen)."""
        super().__init__(parent)
        self._state = state
        self._plots = plots
        self._view = view
        self._measuring_machine = measuring_machine
        self.samples: list[RooflineSample] = []
        self.calibration: Calibration | None = None  # the fit of ``series[0]``
        self.measured_name = ""                    # the measured machine's name, while it is kept
        self._stored: list[list[MeasuredPoint]] = []  # runs kept for the model and machine, oldest first
        self._live: list[MeasuredPoint] = []       # the points of the model job running
        self._drawn: dict[str, overlays.OverlayShape] = {}
        self._shown_for: tuple[str, str] = ("", "")  # (model key, machine name) the points belong to
        self._redraw = QTimer(self)
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(80)
        self._redraw.timeout.connect(self._on_redraw_timeout)
        state.changed.connect(self._on_state_changed)

    # -- what is measured -------------------------------------------------------------------------
    @property
    def series(self) -> list[MeasuredSeries]:
        """One series per engine and settings, the newest run of each; the running job's first."""
        return series_by_engine([*self._stored, self._live])

    @property
    def points(self) -> list[MeasuredPoint]:
        """The points of the newest series (the one ``calibration`` was fitted to)."""
        found = self.series
        return list(found[0].points) if found else []

    def begin_run(self) -> None:
        """A model run started: none of its points yet, and no fit on screen until it is fitted."""
        self._live = []
        self.calibration = None
        self.draw_points()

    def add_live(self, point: MeasuredPoint) -> None:
        """One point of the model run, as it arrives (drawn by the next ``draw_points``)."""
        self._live.append(point)

    def drop_live(self) -> None:
        """A run that did not finish leaves no point behind: none is kept, fitted or drawn."""
        if self._live:
            self._live = []
            self.draw_points()

    def keep(self, points: Iterable[MeasuredPoint]) -> None:
        """A run kept in the store for the model and machine on screen: drawn with the others."""
        self._stored.append(list(points))

    def end_live(self) -> None:
        """The model run ended: its points are drawn from the store now (when kept), not live."""
        self._live = []
        self.draw_points()

    def set_calibration(self, cal: Calibration, *, html: str) -> None:
        """``cal`` is the fit on screen, of the points on screen; ``html`` its read-out."""
        self.calibration = cal
        self._shown_for = self._where()          # these points belong to what is on screen now
        self._view.show_results(html, can_apply=not cal.refusal)    # a fit on too few points, or on a wrong
        self.calibrated.emit(cal)                                    # profile, is shown but not offered
        self.draw_points()

    # -- what was kept ----------------------------------------------------------------------------
    def load_stored(self) -> None:
        """Earlier measurements of the model on screen, on this machine, drawn again: the newest
        run of each engine and settings, and the fit of the newest of them."""
        from rooflab.core.report.gaps import explain_gaps

        spec, machine = self._state.model, self._state.machine
        key, mkey = store.model_key(spec), store.machine_key(machine)
        self._stored = [list(run["points"]) for run in store.load_measurements(key, mkey)]
        self._live = []
        series = self.series
        record = store.load_calibration_record(key, mkey, engine=series[0].key) if series else None
        self.samples, self.measured_name = measure_jobs.stored_machine_samples(self.samples)
        if record is not None:
            settings = series[0].settings
            self.set_calibration(record, html=results_html(record, explain_gaps(spec, record), (),
                                                           settings.label if settings else ""))
        else:
            self.calibration = None
            self._view.show_results("Earlier measurement shown." if series else "No measurement yet.",
                                    can_apply=False)
            self.draw_points()
        self.draw_samples()
        self._shown_for = self._where()

    def moved(self) -> bool:
        """Whether the model or machine on screen is not the one the points shown belong to."""
        return self._where() != self._shown_for

    def _where(self) -> tuple[str, str]:
        """What the points on screen belong to: the model's key and the machine's name (a field
        edited on the Machine tab keeps the name, so tweaking a peak keeps the points)."""
        return store.model_key(self._state.model), self._state.machine.name

    def _on_state_changed(self) -> None:
        self._redraw.start()

    def _on_redraw_timeout(self) -> None:
        self.draw_points()
        self.draw_samples()

    # -- drawing ----------------------------------------------------------------------------------
    def draw_points(self) -> None:
        try:
            self._drawn = overlays.draw_series(self._plots, self._state, self.series, self.calibration, self._drawn)
        except RooflabError as exc:
            self.message.emit(f"Cannot draw the measured points: {exc}", "warning")

    def _samples_belong_on_screen(self) -> bool:
        """This machine's measured multiplies go beside its own roof (and live while it is being
        measured), never on another machine's: a CPU's 10 GFLOP/s under an RTX 4090's roof."""
        m = self._state.machine
        return (self._measuring_machine() or m.key == MEASURED_MACHINE
                or bool(self.measured_name and m.name == self.measured_name))

    def draw_samples(self) -> None:
        overlays.draw_samples(self._plots, self.samples, show=self._samples_belong_on_screen())
