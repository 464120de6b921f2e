"""The Measure tab: measure this machine, time the model on screen, import llama.cpp benchmark
output; the measured points go onto the plots as they arrive, then a calibration and the gap
between the ceiling and the measurement are shown.

The measurements are core generators (no Qt) run by this panel's own JobController, so opening
a model and measuring never cancel each other. Widgets never compute: the overlay curves and
the fit come from ``rooflab.core``."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from rooflab.core.errors import MeasurementError, RooflabError
from rooflab.core.io import presets
from rooflab.core.io.llamabench import BenchImport
from rooflab.core.io.presets import MEASURED_KEY as MEASURED_MACHINE
from rooflab.core.measure import store
from rooflab.core.values.measured import MeasuredPoint
from rooflab.core.measure.calibrate import Calibration, calibrate
from rooflab.core.measure.machine_result import MachineMeasurement, RooflineSample
from rooflab.core.measure.model import ModelMeasurement
from rooflab.gui.jobs import JobController, Progress
from rooflab.gui.measure_jobs import import_job, machine_job, model_job, positive_ints
from rooflab.gui.measure_results import results_html
from rooflab.gui.plots import ChartPlot
from rooflab.gui.state import AppState
from rooflab.gui.units import fmt
from rooflab.gui.widgets import error_label

RANDOM_NOTE = ("Random weights: a model of the same shapes and dtype, filled with random values. "
               "The timing does not depend on the weights' values, only on their shapes.")
MEASURED_KEY, CALIBRATED_KEY, ROOFLINE_KEY = "measured", "calibrated", "measured-machine"


def _check(label: str, checked: bool = True, tip: str = "") -> QCheckBox:
    box = QCheckBox(label)
    box.setChecked(checked)
    box.setToolTip(tip)
    return box


class MeasurePanel(QWidget):
    message = Signal(str, str)              # text, level ("error", "warning", "info")
    sample_measured = Signal(object)        # a MeasuredPoint or RooflineSample, as it arrives
    calibrated = Signal(object)             # a Calibration
    machine_measured = Signal(object)       # the MachineProfile "this machine, measured", once kept

    def __init__(self, state: AppState, plots: Mapping[str, ChartPlot], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self._plots = plots
        self.jobs = JobController(self)
        self.memory_limit: float | None = None     # bytes to plan against (None: ask the device)
        self.points: list[MeasuredPoint] = []
        self.samples: list[RooflineSample] = []
        self._measured_name = ""                   # the measured machine's name, while it is kept
        self._shown_for: tuple[str, str] = ("", "")  # (model key, machine name) the points belong to
        self.calibration: Calibration | None = None
        self._source = ""
        self._kind = ""
        self._redraw = QTimer(self)
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(80)
        self._build()
        self._connect()
        self._load_stored()

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.use_bandwidth = _check("Memory bandwidth", tip="Streaming read, copy and triad over buffers far "
                                    "larger than the last-level cache.")
        self.use_matmul = _check("Matmul peaks", tip="Large square multiplies in fp32, bf16 and fp16.")
        self.use_roofline = _check("Empirical roofline", tip="(m x k)(k x n) multiplies for m from 1 to a few "
                                   "thousand, drawn on the Roofline plot.")
        self.use_measured = _check("Use the measured machine", tip="Switch the Machine tab to the result.")
        self.machine_button = QPushButton("Measure this machine")
        machine = QGroupBox("This machine")
        box = QVBoxLayout(machine)
        for w in (self.use_bandwidth, self.use_matmul, self.use_roofline, self.use_measured, self.machine_button):
            box.addWidget(w)

        self.dtype = QComboBox()
        self.dtype.addItems(["fp32", "bf16", "fp16"])
        self.device = QComboBox()
        self.device.addItems(["cpu", "cuda", "mps"])
        self.threads = QSpinBox()
        self.threads.setRange(0, 512)
        self.threads.setSpecialValueText("auto")
        self.repeats = QSpinBox()
        self.repeats.setRange(1, 20)
        self.repeats.setValue(3)
        self.repeats.setToolTip("Runs of each prompt; the fastest is kept (more run while a point is quick).")
        self.random_weights = _check("Random weights", False, RANDOM_NOTE)
        self.random_note = QLabel(RANDOM_NOTE)
        self.random_note.setWordWrap(True)
        self.use_prefill = _check("Prefill sweep (TTFT)")
        self.use_decode = _check("Decode after each prompt (TPOT)")
        self.use_batch = _check("Batched decode at two contexts")
        self.prompts = QLineEdit("1, 16, 64, 256, 1024")
        self.contexts = QLineEdit("2, 256")
        self.batches = QLineEdit("1, 2, 4, 8, 16")
        self.model_button = QPushButton("Measure the model")
        self.import_button = QPushButton("Import llama-bench output…")
        model = QGroupBox("The model on screen")
        form = QFormLayout(model)
        form.addRow("dtype", self.dtype)
        form.addRow("device", self.device)
        form.addRow("threads", self.threads)
        form.addRow("best of", self.repeats)
        form.addRow(self.random_weights)
        form.addRow(self.random_note)
        for w in (self.use_prefill, self.use_decode, self.use_batch):
            form.addRow(w)
        form.addRow("prompts", self.prompts)
        form.addRow("contexts", self.contexts)
        form.addRow("batches", self.batches)
        form.addRow(self.model_button)
        form.addRow(self.import_button)

        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.step = QLabel("Idle")
        self.step.setWordWrap(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.error = error_label()
        self.results = QLabel("No measurement yet.")
        self.results.setWordWrap(True)
        self.results.setTextFormat(Qt.TextFormat.RichText)
        self.results.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.apply_button = QPushButton("Use the calibrated efficiency")
        self.apply_button.setEnabled(False)
        row = QHBoxLayout()
        row.addWidget(self.progress, 1)
        row.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        for w in (machine, model):
            layout.addWidget(w)
        layout.addLayout(row)
        for w in (self.step, self.error, self.results, self.apply_button):
            layout.addWidget(w)
        layout.addStretch(1)

    def _connect(self) -> None:
        self.machine_button.clicked.connect(self._on_machine_button_clicked)
        self.model_button.clicked.connect(self._on_model_button_clicked)
        self.import_button.clicked.connect(self._on_import_button_clicked)
        self.cancel_button.clicked.connect(self._on_cancel_button_clicked)
        self.apply_button.clicked.connect(self._on_apply_button_clicked)
        self.jobs.started.connect(self._on_jobs_started)
        self.jobs.progress.connect(self._on_jobs_progress)
        self.jobs.result.connect(self._on_jobs_result)
        self.jobs.failed.connect(self._on_jobs_failed)
        self.jobs.done.connect(self._on_jobs_done)
        self._state.model_changed.connect(self._on_state_model_changed)
        self._state.machine_changed.connect(self._on_state_machine_changed)
        self._state.changed.connect(self._on_state_changed)
        self._redraw.timeout.connect(self._on_redraw_timeout)

    # -- starting jobs ----------------------------------------------------------------------
    def machine_plan(self) -> Any:
        from rooflab.core.measure.machine import MachinePlan

        chosen = [name for name, box in (("bandwidth", self.use_bandwidth), ("matmul", self.use_matmul),
                                         ("roofline", self.use_roofline)) if box.isChecked()]
        if not chosen:
            raise MeasurementError("choose at least one machine experiment")
        return MachinePlan(device=self.device.currentText(), threads=self.threads.value() or None,
                           experiments=tuple(chosen))

    def model_plan(self) -> Any:
        from rooflab.core.measure.model import ModelPlan

        chosen = [name for name, box in (("prefill", self.use_prefill), ("decode", self.use_decode),
                                         ("batch", self.use_batch)) if box.isChecked()]
        if not chosen:
            raise MeasurementError("choose at least one model experiment")
        return ModelPlan(dtype=self.dtype.currentText(), device=self.device.currentText(),
                         threads=self.threads.value() or None, prompts=positive_ints(self.prompts.text(), "prompts"),
                         contexts=positive_ints(self.contexts.text(), "contexts"),
                         batches=positive_ints(self.batches.text(), "batches"), experiments=tuple(chosen),
                         repeats=self.repeats.value(), max_repeats=3 * self.repeats.value(),
                         random_weights=self.random_weights.isChecked())

    def model_ref(self) -> Any:
        """What to time: the file or folder on screen when there is one, else its ModelSpec."""
        ref = self._state.model_ref
        return ref if ref and Path(ref).exists() else self._state.model

    def measure_machine(self) -> None:
        self._start(functools.partial(machine_job, self.machine_plan()), "machine")

    def measure_model(self) -> None:
        plan = self.model_plan()
        self.points = []
        self.calibration = None
        self._clear_overlays()
        self._start(functools.partial(model_job, self.model_ref(), plan, self.memory_limit), "model")

    def import_file(self, path: str) -> None:
        self._start(functools.partial(import_job, path), "import")

    def _start(self, job: Any, kind: str) -> None:
        self._kind = kind
        self._source = str(self._state.model_ref)
        self.error.hide()
        self.jobs.start(job)

    def cancel(self) -> None:
        self.jobs.cancel()

    def shutdown(self) -> None:
        """On close: cancel, then wait for the worker."""
        self.jobs.shutdown()

    # -- slots ------------------------------------------------------------------------------
    def _on_machine_button_clicked(self) -> None:
        self._guarded(self.measure_machine)

    def _on_model_button_clicked(self) -> None:
        self._guarded(self.measure_model)

    def _on_import_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import llama-bench output", "",
                                              "Benchmark output (*.json *.jsonl *.csv *.md *.txt);;All files (*)")
        if path:
            self.import_file(path)

    def _guarded(self, action: Any) -> None:
        try:
            action()
        except RooflabError as exc:
            self._show_error(str(exc))

    def _on_cancel_button_clicked(self) -> None:
        self.cancel()
        self.step.setText("Cancelling…")

    def _on_jobs_started(self) -> None:
        for w in (self.machine_button, self.model_button, self.import_button):
            w.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setValue(0)
        self.step.setText("Starting…")

    def _on_jobs_progress(self, item: Progress) -> None:
        if item.fraction is not None:
            self.progress.setValue(int(1000 * item.fraction))
        eta = f" — about {item.eta_seconds:.0f} s left" if item.eta_seconds else ""
        self.step.setText(item.message + eta)

    def _on_jobs_result(self, item: object) -> None:
        if isinstance(item, MeasuredPoint):
            self.points.append(item)
            self.sample_measured.emit(item)
            self._draw_points()
        elif isinstance(item, RooflineSample):
            self.samples.append(item)
            self.sample_measured.emit(item)
            self._draw_samples()
        elif isinstance(item, MachineMeasurement):
            self._machine_done(item)
        elif isinstance(item, ModelMeasurement):
            self._model_done(item)
        elif isinstance(item, BenchImport):
            self._import_done(item)

    def _on_jobs_failed(self, text: str) -> None:
        self._show_error(text)

    def _on_jobs_done(self) -> None:
        for w in (self.machine_button, self.model_button, self.import_button):
            w.setEnabled(True)
        self.cancel_button.setEnabled(False)
        if self.step.text().startswith("Cancelling"):
            self.step.setText("Cancelled")
        elif self.error.isHidden():
            self.progress.setValue(1000)
            self.step.setText("Done")
        self._reload_if_moved()      # a model or machine picked while the job ran

    def _show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.show()
        self.step.setText("Stopped")
        self.message.emit(f"Measurement: {text}", "error")

    # -- results ----------------------------------------------------------------------------
    def _machine_done(self, run: MachineMeasurement) -> None:
        profile = run.profile(fallback=presets.load_measured_machine())
        presets.save_measured_machine(profile, run.to_dict())
        self._measured_name = profile.name
        self.machine_measured.emit(profile)
        self.samples = list(run.roofline)
        self._draw_samples()
        if self.use_measured.isChecked():
            self._state.set_machine(profile)
        self.message.emit(f"Machine measured: {fmt(profile.bandwidth, 'B/s')} bandwidth, "
                          f"saved as {profile.name!r}", "info")

    def _model_done(self, run: ModelMeasurement) -> None:
        cal = calibrate(run.spec, self._state.machine, run.points, kv_type=run.kv_type, dtype=run.dtype,
                        overhead=run.overhead)
        key, mkey = store.model_key(run.spec), store.machine_key(self._state.machine)
        try:
            store.save_measurement(key, mkey, run.points, run.record(), label=run.label, source=self._source)
            store.save_calibration(key, mkey, cal, source=self._source)
        except OSError as exc:
            self.message.emit(f"Could not keep the measurement: {exc}", "warning")
        if store.model_key(self._state.model) != key:
            self.message.emit(f"Showing the model as it ran: {run.spec.name} in {run.dtype}", "info")
            self._state.set_model(run.spec, self._source)
        workload = self._state.workload
        if (workload.kv_type, workload.compute_dtype) != (run.kv_type, run.dtype):
            self._state.update_workload(kv_type=run.kv_type, compute_dtype=run.dtype)
        self._set_calibration(cal, run.spec, notes=list(run.notes))

    def _import_done(self, bench: BenchImport) -> None:
        self.points = list(bench.points)
        for warning in bench.warnings:
            self.message.emit(warning, "warning")
        spec, machine = self._state.model, self._state.machine
        cal = calibrate(spec, machine, self.points, kv_type=bench.kv_type)
        key, mkey = store.model_key(spec), store.machine_key(machine)
        try:
            store.save_measurement(key, mkey, self.points, {"tool": bench.tool, **bench.metadata},
                                   label=spec.name, source=bench.path)
            # kept like a run's fit (and 'rooflab measure import''s): it comes back with the model
            # and 'rooflab predict --calibrated' finds it
            store.save_calibration(key, mkey, cal, source=self._source)
        except OSError as exc:
            self.message.emit(f"Could not keep the measurement: {exc}", "warning")
        self._set_calibration(cal, spec, notes=[f"{bench.tool}: {', '.join(bench.models) or bench.path}"])

    def _set_calibration(self, cal: Calibration, spec: Any, notes: Iterable[str] = ()) -> None:
        from rooflab.core.measure.gaps import explain

        self.calibration = cal
        self._shown_for = self._where()          # these points belong to what is on screen now
        self.apply_button.setEnabled(True)
        self.results.setText(results_html(cal, explain(spec, cal), notes))
        self.calibrated.emit(cal)
        self._draw_points()

    def _on_apply_button_clicked(self) -> None:
        if self.calibration is not None:
            self._state.update_machine(efficiency=self.calibration.efficiency)

    def _load_stored(self) -> None:
        """Earlier measurements of the model on screen, on this machine, drawn again."""
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
        self._clear_overlays()
        if record is not None and self.points:
            self._set_calibration(record, spec)
        else:
            self.calibration = None
            self.apply_button.setEnabled(False)
            self.results.setText("Earlier measurement shown." if self.points else "No measurement yet.")
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

    # -- drawing ----------------------------------------------------------------------------
    def _clear_overlays(self) -> None:
        for plot in self._plots.values():
            plot.clear_layer(MEASURED_KEY)
            plot.clear_layer(CALIBRATED_KEY)

    def _hand(self, overlay: Mapping[tuple[str, str], list[Any]], key: str, label: str, kind: str) -> None:
        for (chart, panel), curves in overlay.items():
            plot = self._plots.get(chart)
            if plot is None:
                continue
            if kind == "measured":
                plot.set_measured(panel, curves, label=label, key=key)
            else:
                plot.set_calibrated(panel, curves, label=label, key=key)

    def _draw_points(self) -> None:
        from rooflab.core.measure.overlays import calibrated_curves, measured_curves

        state = self._state
        if not self.points:
            return
        try:
            overlay = measured_curves(self.points, state.model, state.machine, state.workload,
                                      kv_type=self.calibration.kv_type if self.calibration else None,
                                      dtype=self.calibration.dtype if self.calibration else None)
            self._hand(overlay, MEASURED_KEY, "measured", "measured")
            if self.calibration is not None:
                machine = dataclasses.replace(state.machine, efficiency=self.calibration.efficiency)
                self._hand(calibrated_curves(state.model, machine, state.workload), CALIBRATED_KEY,
                           "calibrated", "calibrated")
        except RooflabError as exc:
            self.message.emit(f"Cannot draw the measured points: {exc}", "warning")

    def _samples_belong_on_screen(self) -> bool:
        """This machine's measured multiplies go beside its own roof (and live while it is being
        measured), never on another machine's: a CPU's 10 GFLOP/s under an RTX 4090's roof."""
        m = self._state.machine
        measuring = self.jobs.busy and self._kind == "machine"
        return measuring or m.key == MEASURED_MACHINE or bool(self._measured_name and m.name == self._measured_name)

    def _draw_samples(self) -> None:
        from rooflab.core.measure.overlays import roofline_samples_curve

        if not self._samples_belong_on_screen():
            for plot in self._plots.values():
                plot.clear_layer(ROOFLINE_KEY)
            return
        self._hand(roofline_samples_curve(self.samples), ROOFLINE_KEY, "measured machine", "measured")
