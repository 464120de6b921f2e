"""The Measure tab's controller: runs the measurements (core jobs, on its own JobController, so
opening a model and measuring never cancel each other), hands the points to the plots as they
arrive, then runs the after-measurement workflow that the command line runs too
(``rooflab.core.measure.workflow``) and shows its result on the ``MeasurePanel``.

The model on screen is the user's: timing it in any engine never replaces it, its weight format
or the workload's cache type. Points are drawn one series per engine and settings (the newest
run of each), the series fitted last first. It also brings back what was kept for the model
and machine on screen, when either changes."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from rooflab.core.errors import MeasurementError, RooflabError
from rooflab.core.io import presets, takes_weights
from rooflab.core.io.llamabench import BenchImport
from rooflab.core.io.presets import MEASURED_KEY as MEASURED_MACHINE
from rooflab.core.jobs import Progress
from rooflab.core.measure import store, workflow
from rooflab.core.measure.calibrate import Calibration
from rooflab.core.measure.calibration_run import CalibrationRun
from rooflab.core.measure.engine import ENGINES, EngineRun, default_engine, measure_in_torch
from rooflab.core.measure.machine_result import MachineMeasurement, RooflineSample
from rooflab.core.measure.overlays import MeasuredSeries, series_by_engine
from rooflab.core.measure.workflow import Calibrated
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from rooflab.gui import measure_jobs
from rooflab.gui import measure_overlays as overlays
from rooflab.gui.expected_lines import calibration_html
from rooflab.gui.jobs import JobController, report_unexpected
from rooflab.gui.measure_panel import MeasurePanel
from rooflab.gui.measure_results import machine_done_text, points_done_text, results_html
from rooflab.gui.plots import ChartPlot
from rooflab.gui.settings import Settings
from rooflab.gui.state import AppState
from rooflab.gui.units import fmt


class MeasureController(QObject):
    """Runs the Measure tab; see the module docstring."""

    message = Signal(str, str)              # text, level ("error", "warning", "info")
    sample_measured = Signal(object)        # a MeasuredPoint or RooflineSample, as it arrives
    calibrated = Signal(object)             # a Calibration
    machine_measured = Signal(object)       # the MachineProfile "this machine, measured", once kept
    engine_calibrated = Signal(object)      # an EngineCalibration of this machine, once fitted (and kept)

    def __init__(self, state: AppState, plots: Mapping[str, ChartPlot], view: MeasurePanel,
                 parent: QObject | None = None, *, settings: Settings | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._plots = plots
        self._settings = settings or Settings()
        self.view = view
        self.jobs = JobController(self)
        self.memory_limit: float | None = None     # bytes to plan against (None: ask the device)
        self.samples: list[RooflineSample] = []
        self.calibration: Calibration | None = None  # the fit of ``series[0]``
        self._stored: list[list[MeasuredPoint]] = []  # runs kept for the model and machine, oldest first
        self._live: list[MeasuredPoint] = []       # the points of the model job running
        self._drawn: dict[str, overlays.Shape] = {}
        self._measured_name = ""                   # the measured machine's name, while it is kept
        self._shown_for: tuple[str, str] = ("", "")  # (model key, machine name) the points belong to
        self._source = ""                          # the model's path or key when the job started
        self._kind = ""                            # "machine", "model" or "import": the job running
        self._summary = "Done"                     # what the job found, for the status line
        self._default_engine = default_engine(self._engine_ref())
        self._kv_type = state.workload.kv_type
        self._written: tuple[object, float | None] = (None, 0.0)   # (model, bytes of its random-weight GGUF)
        self._redraw = QTimer(self)
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(80)
        view.set_engine(self._default_engine)
        view.set_kv_type(self._kv_type)
        view.bench_path.setText(self._settings.llama_bench)
        self._connect()
        self._load_stored()
        self._refresh_engine()

    def _connect(self) -> None:
        v = self.view
        v.machine_button.clicked.connect(self._on_machine_button_clicked)
        v.calibrate_button.clicked.connect(self._on_calibrate_button_clicked)
        v.model_button.clicked.connect(self._on_model_button_clicked)
        v.import_button.clicked.connect(self._on_import_button_clicked)
        v.cancel_button.clicked.connect(self._on_cancel_button_clicked)
        v.apply_button.clicked.connect(self._on_apply_button_clicked)
        v.bench_browse.clicked.connect(self._on_bench_browse_clicked)
        v.bench_path.editingFinished.connect(self._on_bench_path_editing_finished)
        v.plan_edited.connect(self._on_view_plan_edited)
        v.shown.connect(self._on_view_shown)
        self.jobs.started.connect(self._on_jobs_started)
        self.jobs.yielded.connect(self._on_jobs_yielded)
        self.jobs.returned.connect(self._on_jobs_returned)
        self.jobs.errored.connect(self._on_jobs_errored)
        self.jobs.aborted.connect(self._on_jobs_aborted)
        self.jobs.finished.connect(self._on_jobs_finished)
        self._state.model_changed.connect(self._on_state_model_changed)
        self._state.machine_changed.connect(self._on_state_machine_changed)
        self._state.workload_changed.connect(self._on_state_workload_changed)
        self._state.changed.connect(self._on_state_changed)
        self._redraw.timeout.connect(self._on_redraw_timeout)

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

    def model_ref(self) -> Any:
        """What torch times: the file or folder on screen when there is one, else its ModelSpec."""
        ref = self._state.model_ref
        return ref if ref and Path(ref).exists() else self._state.model

    def _engine_ref(self) -> Any:
        """What llama.cpp is given: the path or catalogue key on screen, else its ModelSpec."""
        return self._state.model_ref or self._state.model

    def _synthetic(self) -> bool:
        """Whether llama.cpp must run a random-weight GGUF of the model on screen rather than the
        file: the file is shown in another weight format than its own."""
        return bool(self._state.model_weights)

    def _own_gguf(self) -> bool:
        """Whether llama.cpp runs the user's own GGUF file (else one written for the model)."""
        ref = self._state.model_ref
        path = Path(ref).expanduser() if ref else None
        return bool(path and path.is_file() and not takes_weights(path) and not self._synthetic())

    # -- starting jobs --------------------------------------------------------------------------
    def measure_machine(self) -> None:
        from rooflab.core.measure.machine import measure_machine

        self._start(functools.partial(measure_machine, self.view.machine_plan()), "machine")

    def calibrate_machine(self) -> None:
        """Measure this machine and calibrate the chosen engine (llama.cpp, or torch) on it for
        every model; MeasurementError when the engine chosen cannot be calibrated."""
        from rooflab.core.measure.calibration_run import CalibrationPlan, run_calibration

        engine = self.view.engine_key()
        if engine not in ("llamacpp", "torch"):
            raise MeasurementError("calibration runs llama.cpp in process or torch: choose one of them as the engine")
        plan = CalibrationPlan(engine=engine, threads=self.view.threads.value() or None,
                               repeats=self.view.repeats.value(), measure_machine=self.view.remeasure.isChecked())
        self._start(functools.partial(run_calibration, plan), "calibrate")

    def measure_model(self) -> None:
        """Time the model on screen in the chosen engine; RooflabError (shown by the caller)
        when the controls or the engine cannot start."""
        self._start(self._model_job(self.view.engine_key()), "model")
        self._live = []
        self.calibration = None
        self._draw_points()

    def _model_job(self, engine: str) -> Any:
        if engine == "torch":
            return functools.partial(measure_in_torch, self.model_ref(), self.view.model_plan(),
                                     available=self.memory_limit)
        job, warnings = measure_jobs.engine_job(engine, self._state.model, self._engine_ref(), self.view,
                                   synthetic=self._synthetic(), available=self.memory_limit)
        for warning in warnings:
            self.message.emit(warning, "warning")
        return job

    def import_file(self, path: str) -> None:
        self._start(functools.partial(measure_jobs.import_job, path), "import")

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

    def _on_calibrate_button_clicked(self) -> None:
        self._guarded(self.calibrate_machine)

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

    def _on_bench_browse_clicked(self) -> None:
        path = self.view.ask_bench_binary()
        if path:
            self.view.bench_path.setText(path)
            self._on_bench_path_editing_finished()

    def _on_bench_path_editing_finished(self) -> None:
        self._settings.llama_bench = self.view.bench_path_text()
        self._refresh_engine()

    def _on_view_plan_edited(self) -> None:
        self._refresh_engine()

    def _on_view_shown(self) -> None:
        self._refresh_engine()

    def _refresh_engine(self) -> None:
        """Show which llama-bench would run (or why none can) and what a llama.cpp run needs;
        only while the tab is on screen (sizing a random-weight GGUF reads the whole vocabulary:
        a quarter of a second for a large one, which no window start should pay)."""
        if not self.view.isVisible():
            return                    # brought up to date when shown
        engine = self.view.engine_key()
        if engine == "llama-bench":
            text, found = measure_jobs.bench_status(self.view.bench_path_text())
            self.view.show_bench_status(text, found=found)
        self.view.show_estimate(self._estimate() if engine == "llamacpp" else
                                measure_jobs.torch_estimate(self._state.model, self.view) if engine == "torch" else "")

    def _estimate(self) -> str:
        spec = self._state.model
        if not self._own_gguf() and self._written[0] is not spec:
            # tens of ms for a large model: once per model, not per keystroke
            self._written = (spec, measure_jobs.synthetic_size(spec))
        return measure_jobs.llamacpp_estimate(spec, self.view, written=None if self._own_gguf() else self._written[1],
                                 available=self.memory_limit)

    # -- the job's signals ----------------------------------------------------------------------
    def _on_jobs_started(self) -> None:
        self.view.show_running(True)

    def _on_jobs_yielded(self, progress: Progress) -> None:
        self.view.show_progress(progress)
        if progress.sample is None:
            return
        if self._kind == "model" and isinstance(progress.sample, MeasuredPoint):
            self._live.append(progress.sample)
            self.sample_measured.emit(progress.sample)
            self._draw_points()
        elif self._kind == "machine" and isinstance(progress.sample, RooflineSample):
            self.samples.append(progress.sample)     # (its bandwidth and matmul results are not drawn)
            self.sample_measured.emit(progress.sample)
            self._draw_samples()

    def _on_jobs_returned(self, result: Any) -> None:
        done = {"machine": self._machine_done, "model": self._model_done, "import": self._import_done,
                "calibrate": self._calibration_done}[self._kind]
        try:
            done(result)
        except RooflabError as exc:
            self._drop_live()
            self._show_error(str(exc))
            return
        self.view.show_done(self._summary)

    def _on_jobs_errored(self, exc: BaseException) -> None:
        self._drop_live()
        if isinstance(exc, RooflabError):
            self._show_error(str(exc))
        else:
            self.view.step.setText("Stopped")
            report_unexpected(exc)

    def _on_jobs_aborted(self) -> None:
        self._drop_live()
        self.view.step.setText("Cancelled")

    def _on_jobs_finished(self) -> None:
        self.view.show_running(False)
        self._reload_if_moved()      # a model or machine picked while the job ran

    def _drop_live(self) -> None:
        """A run that did not finish leaves no point behind: none is kept, fitted or drawn."""
        if self._live:
            self._live = []
            self._draw_points()

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
        self._summary = machine_done_text(profile, presets.measured_machine_path())

    def _calibration_done(self, run: CalibrationRun) -> None:
        self.machine_measured.emit(run.machine)
        if run.keep_error:
            self.message.emit(f"Could not keep the calibration: {run.keep_error}", "warning")
        self.engine_calibrated.emit(run.calibration)
        if self.view.use_measured.isChecked():
            self._state.set_machine(run.machine)
        self.view.show_results(calibration_html(run.calibration), can_apply=False)
        self._summary = f"Calibrated {run.calibration.engine_label} on this machine from {len(run.runs)} models"

    def _model_done(self, run: EngineRun) -> None:
        # the run was timed here: it is fitted to this machine as measured, never to a preset on
        # screen, and the window moves to that machine to show it beside its own curves
        if store.model_key(self._state.model) != store.model_key(run.spec):
            # torch times a transformers copy (fp32, bf16): said first, whether or not the fit
            # then succeeds; its points are that model's and are kept with it
            ran = f"{run.label} in {run.dtype}" if run.dtype else run.label
            self.message.emit(f"{ENGINES.get(run.engine, run.engine)} ran {ran}, not {self._state.model.name} as "
                              "shown: its points and fit are kept with the model as it ran", "info")
        machine = workflow.host_machine(self._state.machine)
        if machine is None:
            self._stored.append(list(run.points))
            self._live = []
            self._draw_points()
            raise MeasurementError("timed, but not fitted: this machine has not been measured yet "
                                   "(Measure this machine, then time the model again)")
        workflow.check_machine(run.points, machine)      # timed elsewhere: refused, nothing kept or drawn
        try:
            done = workflow.after_engine_run(run, machine, source=self._source,
                                             include_disturbed=self.view.include_disturbed.isChecked())
        except RooflabError:
            # not fitted (every point disturbed, say), but measured and kept: they stay on screen
            self._show_run_on(machine, run)
            raise
        self._show_run_on(machine, run)
        self._summary = points_done_text(len(run.points), run.settings.legend)
        self._show_calibrated(done, engine=run.settings.label)

    def _show_run_on(self, machine: MachineProfile, run: EngineRun) -> None:
        """Draw ``run``'s points (kept in the store) beside the machine they were timed on."""
        if store.machine_key(self._state.machine) != store.machine_key(machine):
            self.message.emit(f"The model was timed on this machine, not on {self._state.machine.name}: "
                              f"showing {machine.name}", "info")
            self._state.set_machine(machine)        # brings this run back from the store with the others
        else:
            self._stored.append(list(run.points))
        self._live = []
        self._draw_points()

    def _import_done(self, bench: BenchImport) -> None:
        for warning in bench.warnings:
            self.message.emit(warning, "warning")
        # kept like a run's fit (and 'rooflab measure import''s): it comes back with the model
        # and 'rooflab predict --calibrated' finds it
        done = workflow.after_import(bench, self._state.model, self._state.machine, source=self._source)
        self._stored.append(list(bench.points))
        self._summary = points_done_text(len(bench.points), bench.tool, imported=True)
        self._show_calibrated(done)

    def _show_calibrated(self, done: Calibrated, engine: str = "") -> None:
        if done.keep_error:
            self.message.emit(f"Could not keep the measurement: {done.keep_error}", "warning")
        self._set_calibration(done.calibration, html=results_html(done.calibration, done.gaps, done.notes, engine,
                                                                  done.accuracy, done.engine_calibration))

    def _set_calibration(self, cal: Calibration, *, html: str) -> None:
        self.calibration = cal
        self._shown_for = self._where()          # these points belong to what is on screen now
        self.view.show_results(html, can_apply=True)
        self.calibrated.emit(cal)
        self._draw_points()

    # -- what was kept ----------------------------------------------------------------------------
    def _load_stored(self) -> None:
        """Earlier measurements of the model on screen, on this machine, drawn again: the newest
        run of each engine and settings, and the fit of the newest of them."""
        from rooflab.core.measure.gaps import explain

        spec, machine = self._state.model, self._state.machine
        key, mkey = store.model_key(spec), store.machine_key(machine)
        self._stored = [list(run["points"]) for run in store.load_measurements(key, mkey)]
        self._live = []
        series = self.series
        record = store.load_calibration_record(key, mkey, engine=series[0].key) if series else None
        self.samples, self._measured_name = measure_jobs.stored_machine_samples(self.samples)
        if record is not None:
            settings = series[0].settings
            self._set_calibration(record, html=results_html(record, explain(spec, record), (),
                                                            settings.label if settings else ""))
        else:
            self.calibration = None
            self.view.show_results("Earlier measurement shown." if series else "No measurement yet.",
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
        # the engine follows the model unless the user chose another one for the last model
        default = default_engine(self._engine_ref())
        if self.view.engine_key() == self._default_engine and not self.jobs.busy:
            self.view.set_engine(default)
        self._default_engine = default
        self._reload_if_moved()
        self._refresh_engine()

    def _on_state_machine_changed(self, _machine: object) -> None:
        self._reload_if_moved()

    def _on_state_workload_changed(self, workload: Any) -> None:
        if workload.kv_type != self._kv_type:        # the cache type to measure follows the workload's
            self._kv_type = workload.kv_type
            self.view.set_kv_type(workload.kv_type)

    def _on_state_changed(self) -> None:
        self._redraw.start()

    def _on_redraw_timeout(self) -> None:
        self._draw_points()
        self._draw_samples()

    # -- drawing ----------------------------------------------------------------------------------
    def _draw_points(self) -> None:
        try:
            self._drawn = overlays.draw_series(self._plots, self._state, self.series, self.calibration, self._drawn)
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
