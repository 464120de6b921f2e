"""The Measure tab's view: the controls for measuring this machine, timing the model on screen
and importing llama.cpp benchmark output, a progress bar, and the calibration read-out.

It reads its controls into plans and shows what it is handed; ``MeasureController`` runs the
jobs and decides what to show."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
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

from rooflab.core.errors import MeasurementError
from rooflab.core.jobs import Progress
from rooflab.gui.measure_jobs import positive_ints
from rooflab.gui.widgets import error_label

RANDOM_NOTE = ("Random weights: a model of the same shapes and dtype, filled with random values. "
               "The timing does not depend on the weights' values, only on their shapes.")
BENCH_FILTER = "Benchmark output (*.json *.jsonl *.csv *.md *.txt);;All files (*)"


def _check(label: str, checked: bool = True, tip: str = "") -> QCheckBox:
    box = QCheckBox(label)
    box.setChecked(checked)
    box.setToolTip(tip)
    return box


class MeasurePanel(QWidget):
    """The Measure tab's widgets; see the module docstring."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        machine = self._build_machine_box()
        model = self._build_model_box()
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

    def _build_machine_box(self) -> QGroupBox:
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
        return machine

    def _build_model_box(self) -> QGroupBox:
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
        return model

    # -- what the controls say ----------------------------------------------------------------
    def machine_plan(self) -> Any:
        """The MachinePlan the controls describe; MeasurementError when none is chosen."""
        from rooflab.core.measure.machine import MachinePlan

        chosen = [name for name, box in (("bandwidth", self.use_bandwidth), ("matmul", self.use_matmul),
                                         ("roofline", self.use_roofline)) if box.isChecked()]
        if not chosen:
            raise MeasurementError("choose at least one machine experiment")
        return MachinePlan(device=self.device.currentText(), threads=self.threads.value() or None,
                           experiments=tuple(chosen))

    def model_plan(self) -> Any:
        """The ModelPlan the controls describe; MeasurementError names a bad field."""
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

    def ask_bench_file(self) -> str:
        """The benchmark output file the user picks ("" when cancelled)."""
        path, _ = QFileDialog.getOpenFileName(self, "Import llama-bench output", "", BENCH_FILTER)
        return path

    # -- showing --------------------------------------------------------------------------------
    def show_running(self, running: bool) -> None:
        """Start buttons off and Cancel on while a job runs, the other way round after."""
        for w in (self.machine_button, self.model_button, self.import_button):
            w.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        if running:
            self.progress.setValue(0)
            self.step.setText("Starting…")
            self.error.hide()

    def show_progress(self, progress: Progress) -> None:
        if progress.fraction is not None:
            self.progress.setValue(int(1000 * progress.fraction))
        eta = f" — about {progress.eta_seconds:.0f} s left" if progress.eta_seconds else ""
        self.step.setText(f"{progress.step}: {progress.message}{eta}")

    def show_done(self) -> None:
        self.progress.setValue(1000)
        self.step.setText("Done")

    def show_error(self, text: str) -> None:
        """One line under the controls; the status says the job stopped."""
        self.error.setText(text)
        self.error.show()
        self.step.setText("Stopped")

    def show_results(self, html: str, *, can_apply: bool) -> None:
        self.results.setText(html)
        self.apply_button.setEnabled(can_apply)
