"""The Measure tab's controller: runs the measurements (core jobs, on its own JobController, so
opening a model and measuring never cancel each other), hands the points to the plots as they
arrive, then runs the after-measurement workflow that the command line runs too
(``rooflab.core.measure.workflow``) and shows its result on the ``MeasurePanel``.

It also brings back what was kept for the model and machine on screen, when either changes."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from rooflab.core.errors import RooflabError
from rooflab.core.io import presets
from rooflab.core.io.llamabench import BenchImport
from rooflab.core.io.presets import MEASURED_KEY as MEASURED_MACHINE
from rooflab.core.jobs import Progress
from rooflab.core.measure import store, workflow
from rooflab.core.measure.calibrate import Calibration
from rooflab.core.measure.machine_result import MachineMeasurement, RooflineSample
from rooflab.core.measure.model import ModelMeasurement
from rooflab.core.measure.workflow import Calibrated
from rooflab.core.values.measured import MeasuredPoint
from rooflab.gui import measure_overlays as overlays
from rooflab.gui.jobs import JobController, report_unexpected
from rooflab.gui.measure_jobs import import_job
from rooflab.gui.measure_panel import MeasurePanel
from rooflab.gui.measure_results import results_html
from rooflab.gui.plots import ChartPlot
from rooflab.gui.state import AppState
from rooflab.gui.units import fmt


class MeasureController(QObject):
    """Runs the Measure tab; see the module docstring."""

    message = Signal(str, str)              # text, level ("error", "warning", "info")
    sample_measured = Signal(object)        # a MeasuredPoint or RooflineSample, as it arrives
    calibrated = Signal(object)             # a Calibration
    machine_measured = Signal(object)       # the MachineProfile "this machine, measured", once kept

    def __init__(self, state: AppState, plots: Mapping[str, ChartPlot], view: MeasurePanel,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._plots = plots
        self.view = view
        self.jobs = JobController(self)
        self.memory_limit: float | None = None     # bytes to plan against (None: ask the device)
        self.points: list[MeasuredPoint] = []
        self.samples: list[RooflineSample] = []
        self.calibration: Calibration | None = None
        self._measured_name = ""                   # the measured machine's name, while it is kept
        self._shown_for: tuple[str, str] = ("", "")  # (model key, machine name) the points belong to
        self._source = ""                          # the model's path or key when the job started
        self._kind = ""                            # "machine", "model" or "import": the job running
        self._redraw = QTimer(self)
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(80)
        self._connect()
        self._load_stored()

    def _connect(self) -> None:
        v = self.view
        v.machine_button.clicked.connect(self._on_machine_button_clicked)
        v.model_button.clicked.connect(self._on_model_button_clicked)
        v.import_button.clicked.connect(self._on_import_button_clicked)
        v.cancel_button.clicked.connect(self._on_cancel_button_clicked)
        v.apply_button.clicked.connect(self._on_apply_button_clicked)
        self.jobs.started.connect(self._on_jobs_started)
        self.jobs.yielded.connect(self._on_jobs_yielded)
        self.jobs.returned.connect(self._on_jobs_returned)
        self.jobs.errored.connect(self._on_jobs_errored)
        self.jobs.aborted.connect(self._on_jobs_aborted)
        self.jobs.finished.connect(self._on_jobs_finished)
        self._state.model_changed.connect(self._on_state_model_changed)
        self._state.machine_changed.connect(self._on_state_machine_changed)
        self._state.changed.connect(self._on_state_changed)
        self._redraw.timeout.connect(self._on_redraw_timeout)

    # -- starting jobs --------------------------------------------------------------------------
    def model_ref(self) -> Any:
        """What to time: the file or folder on screen when there is one, else its ModelSpec."""
        ref = self._state.model_ref
        return ref if ref and Path(ref).exists() else self._state.model

    def measure_machine(self) -> None:
        from rooflab.core.measure.machine import measure_machine

        self._start(functools.partial(measure_machine, self.view.machine_plan()), "machine")

    def measure_model(self) -> None:
        from rooflab.core.measure.model import measure_model

        plan = self.view.model_plan()
        self._start(functools.partial(measure_model, self.model_ref(), plan, available=self.memory_limit), "model")
        self.points = []              # after the start: a superseded job's end may reload the kept ones
        self.calibration = None
        overlays.clear_points(self._plots)

    def import_file(self, path: str) -> None:
        self._start(functools.partial(import_job, path), "import")

    def _start(self, job: Any, kind: str) -> None:
        self.jobs.start(job)          # a job still running ends (aborted) before this one starts
        self._kind = kind
        self._source = str(self._state.model_ref)

    def cancel(self) -> None:
        self.jobs.cancel()

    def shutdown(self) -> None:
        """On close: cancel, then wait for the worker."""
        self.jobs.shutdown()

    # -- the view's controls --------------------------------------------------------------------
    def _on_machine_button_clicked(self) -> None:
        self._guarded(self.measure_machine)

    def _on_model_button_clicked(self) -> None:
        self._guarded(self.measure_model)

    def _on_import_button_clicked(self) -> None:
        path = self.view.ask_bench_file()
        if path:
            self.import_file(path)

    def _guarded(self, action: Any) -> None:
        try:
            action()
        except RooflabError as exc:
            self._show_error(str(exc))

    def _on_cancel_button_clicked(self) -> None:
        self.cancel()
        self.view.step.setText("Cancelling…")

    def _on_apply_button_clicked(self) -> None:
        if self.calibration is not None:
            self._state.update_machine(efficiency=self.calibration.efficiency)

    # -- the job's signals ----------------------------------------------------------------------
    def _on_jobs_started(self) -> None:
        self.view.show_running(True)

    def _on_jobs_yielded(self, progress: Progress) -> None:
        self.view.show_progress(progress)
        if progress.sample is None:
            return
        if self._kind == "model":
            self.points.append(progress.sample)      # a model job's samples are MeasuredPoints
            self.sample_measured.emit(progress.sample)
            self._draw_points()
        elif self._kind == "machine" and isinstance(progress.sample, RooflineSample):
            self.samples.append(progress.sample)     # (its bandwidth and matmul results are not drawn)
            self.sample_measured.emit(progress.sample)
            self._draw_samples()

    def _on_jobs_returned(self, result: object) -> None:
        done = {"machine": self._machine_done, "model": self._model_done, "import": self._import_done}[self._kind]
        try:
            done(result)
        except RooflabError as exc:
            self._show_error(str(exc))
            return
        self.view.show_done()

    def _on_jobs_errored(self, exc: BaseException) -> None:
        if isinstance(exc, RooflabError):
            self._show_error(str(exc))
        else:
            self.view.step.setText("Stopped")
            report_unexpected(exc)

    def _on_jobs_aborted(self) -> None:
        self.view.step.setText("Cancelled")

    def _on_jobs_finished(self) -> None:
        self.view.show_running(False)
        self._reload_if_moved()      # a model or machine picked while the job ran

    def _show_error(self, text: str) -> None:
        self.view.show_error(text)
        self.message.emit(f"Measurement: {text}", "error")

    # -- results --------------------------------------------------------------------------------
    def _machine_done(self, run: MachineMeasurement) -> None:
        profile = workflow.keep_machine_run(run)
        self._measured_name = profile.name
        self.machine_measured.emit(profile)
        self.samples = list(run.roofline)
        self._draw_samples()
        if self.view.use_measured.isChecked():
            self._state.set_machine(profile)
        self.message.emit(f"Machine measured: {fmt(profile.bandwidth, 'B/s')} bandwidth, "
                          f"saved as {profile.name!r}", "info")

    def _model_done(self, run: ModelMeasurement) -> None:
        done = workflow.after_model_run(run, self._state.machine, source=self._source)
        if store.model_key(self._state.model) != done.model_key:
            self.message.emit(f"Showing the model as it ran: {run.spec.name} in {run.dtype}", "info")
            self._state.set_model(run.spec, self._source)
        workload = self._state.workload
        if (workload.kv_type, workload.compute_dtype) != (run.kv_type, run.dtype):
            self._state.update_workload(kv_type=run.kv_type, compute_dtype=run.dtype)
        self._show_calibrated(done)

    def _import_done(self, bench: BenchImport) -> None:
        self.points = list(bench.points)
        for warning in bench.warnings:
            self.message.emit(warning, "warning")
        # kept like a run's fit (and 'rooflab measure import''s): it comes back with the model
        # and 'rooflab predict --calibrated' finds it
        self._show_calibrated(workflow.after_import(bench, self._state.model, self._state.machine,
                                                    source=self._source))

    def _show_calibrated(self, done: Calibrated) -> None:
        if done.keep_error:
            self.message.emit(f"Could not keep the measurement: {done.keep_error}", "warning")
        self._set_calibration(done.calibration, html=results_html(done.calibration, done.gaps, done.notes))

    def _set_calibration(self, cal: Calibration, *, html: str) -> None:
        self.calibration = cal
        self._shown_for = self._where()          # these points belong to what is on screen now
        self.view.show_results(html, can_apply=True)
        self.calibrated.emit(cal)
        self._draw_points()

    # -- what was kept ----------------------------------------------------------------------------
    def _load_stored(self) -> None:
        """Earlier measurements of the model on screen, on this machine, drawn again."""
        from rooflab.core.measure.gaps import explain

        spec, machine = self._state.model, self._state.machine
        runs = store.load_measurements(store.model_key(spec), store.machine_key(machine))
        self.points = list(runs[-1]["points"]) if runs else []
        record = store.load_calibration_record(store.model_key(spec), store.machine_key(machine))
        raw = presets.load_machine_measurement()
        measured = presets.load_measured_machine()
        self._measured_name = measured.name if measured is not None else ""
        if raw:
            try:
                self.samples = list(MachineMeasurement.from_dict(raw).roofline)
            except RooflabError:
                self.samples = []
        overlays.clear_points(self._plots)
        if record is not None and self.points:
            self._set_calibration(record, html=results_html(record, explain(spec, record), ()))
        else:
            self.calibration = None
            self.view.show_results("Earlier measurement shown." if self.points else "No measurement yet.",
                                   can_apply=False)
            self._draw_points()
        self._draw_samples()
        self._shown_for = self._where()

    def _where(self) -> tuple[str, str]:
        """What the points on screen belong to: the model's key and the machine's name (a field
        edited on the Machine tab keeps the name, so tweaking a peak keeps the points)."""
        return store.model_key(self._state.model), self._state.machine.name

    def _reload_if_moved(self) -> None:
        """Show the measurements kept for the model and machine now on screen, not the last ones."""
        if not self.jobs.busy and self._where() != self._shown_for:
            self._load_stored()

    def _on_state_model_changed(self, _spec: object) -> None:
        self._reload_if_moved()

    def _on_state_machine_changed(self, _machine: object) -> None:
        self._reload_if_moved()

    def _on_state_changed(self) -> None:
        self._redraw.start()

    def _on_redraw_timeout(self) -> None:
        self._draw_points()
        self._draw_samples()

    # -- drawing ----------------------------------------------------------------------------------
    def _draw_points(self) -> None:
        try:
            overlays.draw_points(self._plots, self._state, self.points, self.calibration)
        except RooflabError as exc:
            self.message.emit(f"Cannot draw the measured points: {exc}", "warning")

    def _samples_belong_on_screen(self) -> bool:
        """This machine's measured multiplies go beside its own roof (and live while it is being
        measured), never on another machine's: a CPU's 10 GFLOP/s under an RTX 4090's roof."""
        m = self._state.machine
        measuring = self.jobs.busy and self._kind == "machine"
        return measuring or m.key == MEASURED_MACHINE or bool(self._measured_name and m.name == self._measured_name)

    def _draw_samples(self) -> None:
        overlays.draw_samples(self._plots, self.samples, show=self._samples_belong_on_screen())
