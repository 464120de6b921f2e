"""The Measure tab's controller: runs the measurements (core jobs, on its own JobController, so
opening a model and measuring never cancel each other) and hands their progress to the
``MeasurePanel``; what a finished job leads to (the after-measurement workflow that the command
line runs too) is the ``MeasureOutcomeController``'s, and the points on the plots, with what was
kept for the model and machine on screen, the ``MeasureDisplayController``'s, which this one
tells when the model or machine on screen moved.

The model on screen is the user's: timing it in any engine never replaces it, its weight format
or the workload's cache type."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from rooflab.core.calibration.calibrate import Calibration
from rooflab.core.errors import MeasurementError, RooflabError
from rooflab.core.io import takes_weights
from rooflab.core.jobs import Progress
from rooflab.core.measure.engines.child_job import EngineCrashed
from rooflab.core.measure.engines.engine import default_engine, measure_in_torch
from rooflab.core.measure.engines.plan_times import PlannedPoint, planned_points
from rooflab.core.report.overlays import MeasuredSeries
from rooflab.core.values.machine_run import RooflineSample
from rooflab.core.values.measured import MeasuredPoint
from rooflab.gui.controllers import measure_jobs
from rooflab.gui.controllers.measure_display import MeasureDisplayController
from rooflab.gui.controllers.measure_outcome import MeasureOutcomeController
from rooflab.gui.controllers.measure_progress import RunProgressController
from rooflab.gui.controllers.measure_server import ServerMeasureController
from rooflab.gui.panels.measure_panel import MeasurePanel
from rooflab.gui.plots import ChartPlot
from rooflab.gui.state.app_state import AppState
from rooflab.gui.state.settings import Settings
from rooflab.gui.workers.jobs import JobController, report_unexpected

#: the status of a job that ran to its end but whose result could not be fitted or kept
FINISHED = {"model": "Finished: timed, not fitted (the line below says why)",
            "machine": "Finished: measured, not kept (the line below says why)",
            "": "Finished (the line below says what went wrong)"}


class MeasureController(QObject):
    """Runs the Measure tab; see the module docstring."""

    message = Signal(str, str)              # text, level ("error", "warning", "info")
    sample_measured = Signal(object)        # a MeasuredPoint or RooflineSample, as it arrives
    calibrated = Signal(object)             # a Calibration
    machine_measured = Signal(object)       # the MachineProfile "this machine, measured", once kept
    engine_calibrated = Signal(object)      # an EngineCalibration of this machine, once fitted (and kept)
    operations_measured = Signal(object)    # an OpsMeasurement: a run timed by operation ("By operation")

    def __init__(self, state: AppState, plots: Mapping[str, ChartPlot], view: MeasurePanel,
                 parent: QObject | None = None, *, settings: Settings | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._settings = settings or Settings()
        self.view = view
        self.jobs = JobController(self)
        self.memory_limit: float | None = None     # bytes to plan against (None: ask the device)
        self.display = MeasureDisplayController(state, plots, view, measuring_machine=self._measuring_machine,
                                                parent=self)
        self.outcome = MeasureOutcomeController(state, view, self.display, self)
        self.run_progress = RunProgressController(view, self)
        self._source = ""                          # the model's path or key when the job started
        self._kind = ""                            # "machine", "calibrate", "model" or "import": the job running
        self._default_engine = default_engine(self._engine_ref())
        self._kv_type = state.workload.kv_type
        self._written: tuple[object, float | None] = (None, 0.0)   # (model, bytes of its random-weight GGUF)
        view.set_engine(self._default_engine)
        view.set_kv_type(self._kv_type)
        view.bench_path.setText(self._settings.llama_bench)
        self._connect()
        # the Server source, after ``_connect``: its Cancel (which keeps what was measured) speaks last
        self.server = ServerMeasureController(state, view, self)
        self.server.message.connect(self.message)
        self.display.load_stored()
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
        # the helpers' signals are this controller's (same thread: passed on at once, in order)
        self.display.message.connect(self.message)
        self.display.calibrated.connect(self.calibrated)
        self.outcome.message.connect(self.message)
        self.outcome.machine_measured.connect(self.machine_measured)
        self.outcome.engine_calibrated.connect(self.engine_calibrated)

    # -- what is measured (kept and drawn by ``display``) -------------------------------------------
    @property
    def series(self) -> list[MeasuredSeries]:
        """One series per engine and settings, the newest run of each; the running job's first."""
        return self.display.series

    @property
    def points(self) -> list[MeasuredPoint]:
        """The points of the newest series (the one ``calibration`` was fitted to)."""
        return self.display.points

    @property
    def calibration(self) -> Calibration | None:
        """The fit of ``series[0]`` (None: none on screen)."""
        return self.display.calibration

    @property
    def samples(self) -> list[RooflineSample]:
        """This machine's measured multiplies: the run's as they arrive, else the kept ones."""
        return self.display.samples

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

    def _measuring_machine(self) -> bool:
        """Whether this machine is being measured now (its multiplies are drawn as they come)."""
        return self.jobs.busy and self._kind == "machine"

    # -- starting jobs --------------------------------------------------------------------------
    def measure_machine(self) -> None:
        from rooflab.core.measure.machine.benchmark import measure_machine

        self._start(functools.partial(measure_machine, self.view.machine_plan()), "machine")

    def calibrate_machine(self) -> None:
        """Measure this machine and calibrate the chosen engine (llama.cpp, or torch) on it for
        every model; MeasurementError when the engine chosen cannot be calibrated."""
        from rooflab.core.measure.calibration_run import CalibrationPlan, run_calibration

        engine = self.view.engine_key()
        if engine not in ("llamacpp", "torch"):
            raise MeasurementError("calibration runs rooflab's llama.cpp or torch: choose one of them as the engine")
        plan = CalibrationPlan(engine=engine, threads=self.view.threads.value() or None,
                               repeats=self.view.repeats.value(), measure_machine=self.view.remeasure.isChecked())
        self._start(functools.partial(run_calibration, plan), "calibrate")

    def measure_model(self) -> None:
        """Time the model on screen in the chosen engine; RooflabError (shown by the caller)
        when the controls or the engine cannot start."""
        engine = self.view.engine_key()
        if self.view.by_operation.isChecked():
            self._start(self._ops_job(engine), "ops")
            self.view.mark_results_old()
            return
        self._start(self._model_job(engine), "model")
        self.run_progress.begin(self._planned(engine))
        self.view.mark_results_old()          # until this run's read-out replaces it
        self.display.begin_run()

    def _planned(self, engine: str) -> tuple[PlannedPoint, ...]:
        """The run's units priced on this machine as measured (else the machine on screen), for
        a bar and an ETA weighted by the points' predicted times."""
        from rooflab.core.io.presets import load_measured_machine

        try:
            plan = self.view.llamacpp_plan() if engine == "llamacpp" else self.view.model_plan()
            machine = load_measured_machine() or self._state.machine
        except RooflabError:
            return ()
        return planned_points(engine, self._state.model, machine, plan)

    def _model_job(self, engine: str) -> Any:
        if engine == "torch":
            return functools.partial(measure_in_torch, self.model_ref(), self.view.model_plan(),
                                     available=self.memory_limit)
        job, warnings = measure_jobs.engine_job(engine, self._state.model, self._engine_ref(), self.view,
                                   synthetic=self._synthetic(), available=self.memory_limit)
        for warning in warnings:
            self.message.emit(warning, "warning")
        return job

    def _ops_job(self, engine: str) -> Any:
        """The model on screen timed by operation: torch's profiler, or llama.cpp's graph node
        by node (the GGUF on screen, else a random-weight one of its tensor table)."""
        if engine == "torch":
            from rooflab.core.measure.engines.torch.ops_in_child import measure_ops_in_child

            return functools.partial(measure_ops_in_child, self.model_ref(), self.view.ops_plan())
        if engine == "llamacpp":
            from rooflab.core.measure.engines.llamacpp.ops import NodePlan, measure_nodes_of

            kv = self.view.kv_type.currentText()
            plan = NodePlan(prompts=self.view.ops_plan().prompts, repeats=self.view.repeats.value(),
                            threads=self.view.threads.value() or None,
                            flash_attention=self.view.flash_attention.currentText() == "on", kv_type=kv)
            return functools.partial(measure_nodes_of, self._state.model, self._engine_ref(), plan,
                                     synthetic=self._synthetic())
        raise MeasurementError("by operation: choose torch (its profiler) or llama.cpp (its graph node by node)")

    def import_file(self, path: str) -> None:
        self._start(functools.partial(measure_jobs.import_job, path), "import")

    def _start(self, job: Any, kind: str) -> None:
        self.jobs.start(job)          # a job still running ends (aborted) before this one starts
        self._kind = kind
        self._source = str(self._state.model_ref)
        self.run_progress.begin()

    def cancel(self) -> None:
        self.jobs.cancel()

    def shutdown(self) -> None:
        """On close: cancel, then wait for the workers."""
        self.server.shutdown()
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
        self.run_progress.end()
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
        self.run_progress.show(progress)
        if progress.sample is None:
            return
        if self._kind == "model" and isinstance(progress.sample, MeasuredPoint):
            self.display.add_live(progress.sample)
            self.sample_measured.emit(progress.sample)
            self.display.draw_points()
        elif self._kind == "machine" and isinstance(progress.sample, RooflineSample):
            self.display.samples.append(progress.sample)     # (its bandwidth and matmul results are not drawn)
            self.sample_measured.emit(progress.sample)
            self.display.draw_samples()

    def _on_jobs_returned(self, result: Any) -> None:
        if self._kind == "ops":            # drawn on the Roofline tab's operation view
            self.run_progress.end()
            self.view.show_done(f"Timed by operation: {len(result.operations)} rows; see the Roofline tab's "
                                "operation view")
            self.operations_measured.emit(result)
            return
        try:
            summary = self.outcome.apply(self._kind, result, source=self._source)
        except RooflabError as exc:
            self.display.drop_live()
            self.run_progress.end()
            self._show_error(str(exc), finished=FINISHED.get(self._kind, FINISHED[""]))    # not "Stopped"
            return
        self.run_progress.end()
        self.view.show_done(summary)

    def _on_jobs_errored(self, exc: BaseException) -> None:
        if isinstance(exc, EngineCrashed) and exc.run is not None and self._kind == "model":
            self.outcome.keep_unfinished(exc.run, source=self._source)    # its points stay, unfitted
        else:
            self.display.drop_live()
        self.run_progress.end("Stopped")
        if isinstance(exc, RooflabError):
            self._show_error(str(exc))
        else:
            report_unexpected(exc)

    def _on_jobs_aborted(self) -> None:
        self.display.drop_live()
        self.run_progress.end("Cancelled")           # the bar back to empty, not left at 42 %

    def _on_jobs_finished(self) -> None:
        self.run_progress.end()
        self.view.show_running(False)
        self._reload_if_moved()      # a model or machine picked while the job ran

    def _show_error(self, text: str, *, finished: str = "") -> None:
        self.view.show_error(text, finished=finished)
        self.message.emit(f"Measurement: {text}", "error")

    # -- the scenario on screen -----------------------------------------------------------------
    def _reload_if_moved(self) -> None:
        """Show the measurements kept for the model and machine now on screen, not the last ones
        (once no job runs: its points belong to what was on screen when it started)."""
        if not self.jobs.busy and self.display.moved():
            self.display.load_stored()

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
