"""What a Measure tab job that returned leads to: the after-measurement workflow that the command
line runs too (``rooflab.core.measure.workflow``: fit, keep, explain), its read-out on the
``MeasurePanel``, the points on the plots (through the ``MeasureDisplayController``) and the
status line's summary.

A model run was timed here: it is fitted to this machine as measured, never to a preset on
screen, and the window moves to that machine to show it beside its own curves."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal

from rooflab.core.calibration import store
from rooflab.core.errors import MeasurementError, RooflabError
from rooflab.core.io import presets
from rooflab.core.io.llamabench import BenchImport
from rooflab.core.measure import workflow
from rooflab.core.measure.calibration_run import CalibrationRun
from rooflab.core.measure.engines.engine import ENGINES, EngineRun
from rooflab.core.measure.workflow import Calibrated
from rooflab.core.report.units import fmt
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.machine_run import MachineMeasurement
from rooflab.gui.controllers.measure_display import MeasureDisplayController
from rooflab.gui.controllers.measure_text import calibration_html, machine_done_text, points_done_text, results_html
from rooflab.gui.panels.measure_panel import MeasurePanel
from rooflab.gui.state.app_state import AppState


class MeasureOutcomeController(QObject):
    """Handles what a measurement returned; see the module docstring."""

    message = Signal(str, str)              # text, level ("error", "warning", "info")
    machine_measured = Signal(object)       # the MachineProfile "this machine, measured", once kept
    engine_calibrated = Signal(object)      # an EngineCalibration of this machine, once fitted (and kept)

    def __init__(self, state: AppState, view: MeasurePanel, display: MeasureDisplayController,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._view = view
        self._display = display

    def apply(self, kind: str, result: Any, *, source: str) -> str:
        """Fit, keep and show what the ``kind`` job ("machine", "calibrate", "model" or "import")
        returned; ``source``: the model's path or key when it started. Returns what it found, for
        the status line; RooflabError (shown by the caller) when it cannot be fitted or kept."""
        if kind == "machine":
            return self._machine_done(result)
        if kind == "calibrate":
            return self._calibration_done(result)
        if kind == "model":
            return self._model_done(result, source=source)
        if kind == "import":
            return self._import_done(result, source=source)
        raise ValueError(f"no Measure tab job {kind!r}")

    def _machine_done(self, run: MachineMeasurement) -> str:
        # a run that fails its checks is kept apart and raises: the window never switches to it
        profile = workflow.keep_machine_run(run)
        self._display.measured_name = profile.name
        self.machine_measured.emit(profile)
        self._display.samples = list(run.roofline)
        self._display.draw_samples()
        if self._view.use_measured.isChecked():
            self._state.set_machine(profile)
        self.message.emit(f"Machine measured: {fmt(profile.bandwidth, 'B/s')} bandwidth, "
                          f"saved as {profile.name!r}", "info")
        return machine_done_text(profile, presets.measured_machine_path(), run.spread_text())

    def _calibration_done(self, run: CalibrationRun) -> str:
        self.machine_measured.emit(run.machine)
        if run.keep_error:
            self.message.emit(f"Could not keep the calibration: {run.keep_error}", "warning")
        self.engine_calibrated.emit(run.calibration)
        if self._view.use_measured.isChecked():
            self._state.set_machine(run.machine)
        self._view.show_results(calibration_html(run.calibration), can_apply=False)
        return f"Calibrated {run.calibration.engine_label} on this machine from {len(run.runs)} models"

    def _model_done(self, run: EngineRun, *, source: str) -> str:
        if store.model_key(self._state.model) != store.model_key(run.spec):
            # torch times a transformers copy (fp32, bf16): said first, whether or not the fit
            # then succeeds; its points are that model's and are kept with it
            ran = f"{run.label} in {run.dtype}" if run.dtype else run.label
            self.message.emit(f"{ENGINES.get(run.engine, run.engine)} ran {ran}, not {self._state.model.name} as "
                              "shown: its points and fit are kept with the model as it ran", "info")
        machine = workflow.host_machine(self._state.machine)
        if machine is None:
            self._display.keep(run.points)
            self._display.end_live()
            raise MeasurementError("timed, but not fitted: this machine has not been measured yet "
                                   "(Measure this machine, then time the model again)")
        workflow.check_machine(run.points, machine)      # timed elsewhere: refused, nothing kept or drawn
        unfitted = workflow.unrepeated(run.points)
        if unfitted:                # timed once: kept and drawn, not fitted (``rooflab measure model`` alike)
            reason = workflow.keep_unfinished(run, machine, source=source)
            if reason:
                self.message.emit(f"Could not keep the points measured: {reason}", "warning")
            self._show_run_on(machine, run)
            self._view.show_results(f"<p>Not fitted: {unfitted}.</p>", can_apply=False)
            return (f"Measured {len(run.points)} points with {run.settings.legend}; not fitted: one repeat has "
                    "no spread (set repeats to 2 or more)")
        try:
            done = workflow.after_engine_run(run, machine, source=source,
                                             include_disturbed=self._view.include_disturbed.isChecked())
        except RooflabError:
            # not fitted (every point disturbed, say), but measured and kept: they stay on screen
            self._show_run_on(machine, run)
            raise
        self._show_run_on(machine, run)
        summary = points_done_text(len(run.points), run.settings.legend)
        self._show_calibrated(done, engine=run.settings.label)
        return summary

    def keep_unfinished(self, run: EngineRun, *, source: str) -> None:
        """A run its engine did not finish (killed mid-run): the points it measured before stay on
        screen and in the store for this machine as measured (``workflow.keep_unfinished``),
        unfitted; the error line that says so is the caller's."""
        machine = workflow.host_machine(self._state.machine)
        if machine is None:                 # no machine to keep them for: on screen only
            self._display.keep(run.points)
            self._display.end_live()
            return
        reason = workflow.keep_unfinished(run, machine, source=source)
        if reason:
            self.message.emit(f"Could not keep the points measured before: {reason}", "warning")
        self._show_run_on(machine, run)

    def _show_run_on(self, machine: MachineProfile, run: EngineRun) -> None:
        """Draw ``run``'s points (kept in the store) beside the machine they were timed on."""
        if store.machine_key(self._state.machine) != store.machine_key(machine):
            self.message.emit(f"The model was timed on this machine, not on {self._state.machine.name}: "
                              f"showing {machine.name}", "info")
            self._state.set_machine(machine)        # brings this run back from the store with the others
        else:
            self._display.keep(run.points)
        self._display.end_live()

    def _import_done(self, bench: BenchImport, *, source: str) -> str:
        for warning in bench.warnings:
            self.message.emit(warning, "warning")
        # kept like a run's fit (and 'rooflab measure import''s): it comes back with the model
        # and 'rooflab predict --calibrated' finds it
        done = workflow.after_import(bench, self._state.model, self._state.machine, source=source)
        self._display.keep(bench.points)
        summary = points_done_text(len(bench.points), bench.tool, imported=True)
        self._show_calibrated(done)
        return summary

    def _show_calibrated(self, done: Calibrated, engine: str = "") -> None:
        if done.keep_error:
            self.message.emit(f"Could not keep the measurement: {done.keep_error}", "warning")
        self._display.set_calibration(done.calibration, html=results_html(
            done.calibration, done.gaps, done.notes, engine, done.accuracy, done.engine_calibration))
