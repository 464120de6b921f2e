"""The Measure tab's view: the controls for measuring this machine, timing the model on screen
in an engine (llama.cpp through llama-cpp-python, the user's llama-bench, or torch), importing
llama.cpp benchmark output and loading a running server (``ServerBox``), a progress bar, and the
calibration read-out.

It reads its controls into plans and shows what it is handed; ``MeasureController`` runs the
jobs and decides what to show. Only the controls of the chosen engine are shown, and each
engine keeps its own sweep (the prompts, depths, contexts and batches typed for it)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from rooflab.core.errors import MeasurementError
from rooflab.core.jobs import Progress
from rooflab.core.measure.engines.engine import ENGINES
from rooflab.core.values.quant import KV_TYPES
from rooflab.gui.panels.measure_fields import check, positive_ints, wrapped
from rooflab.gui.panels.measure_server_box import ServerBox
from rooflab.gui.widgets.controls import ERROR_COLOUR, RunBar, StatusLine, error_label

RANDOM_NOTE = ("Random weights: a model of the same shapes and dtype, filled with random values. "
               "The timing does not depend on the weights' values, only on their shapes.")
BENCH_FILTER = "Benchmark output (*.json *.jsonl *.csv *.md *.txt);;All files (*)"
LLAMA = ("llamacpp", "llama-bench")
FLASH = {"auto": None, "on": True, "off": False}
#: A quick sweep per engine: well under a minute on two cores for a small model.
SWEEPS: dict[str, dict[str, str]] = {
    "llamacpp": {"prompts": "16, 64, 256", "depths": "0, 256", "contexts": "256", "batches": "1, 2, 4"},
    "llama-bench": {"prompts": "64, 256", "depths": "0, 256", "contexts": "256", "batches": "1, 2, 4"},
    # (the command line's torch default, 1..1024 x batches to 16, took about 700 s for a 270M model)
    "torch": {"prompts": "1, 16, 128", "depths": "0", "contexts": "64", "batches": "1, 4"},
}
DECODE_TEXT = {"torch": "Decode after each prompt (TPOT)", "llamacpp": "Generation at each depth (TPOT)",
               "llama-bench": "Generation at each depth (TPOT)"}
BENCH_GEN = 32                  # tokens llama-bench generates per depth (-n)


OLD_RESULTS = "From an earlier run (the one started since has not finished):"


class MeasurePanel(QWidget):
    """The Measure tab's widgets; see the module docstring."""

    plan_edited = Signal()           # a control that changes what the model measurement needs
    shown = Signal()                 # the tab came on screen (what it shows is brought up to date then)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt API
        super().showEvent(event)
        self.shown.emit()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._engine = "llamacpp"
        self._sweeps = {engine: dict(sweep) for engine, sweep in SWEEPS.items()}
        machine = self._build_machine_box()
        model = self._build_model_box()
        self.progress = RunBar()
        self.step = StatusLine("Idle")         # one line: a wrapped status was clipped
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.error = error_label()
        self.results = wrapped("No measurement yet.")
        self.results.setTextFormat(Qt.TextFormat.RichText)
        self.results.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.apply_button = QPushButton("Use the calibrated efficiency")
        self.apply_button.setEnabled(False)
        # the bar, Cancel and the status line in one strip, which the window pins under the
        # scrolled tab: at 720p they sat below the fold, under the buttons that start a run
        self.run_strip = QWidget()
        strip = QVBoxLayout(self.run_strip)
        strip.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.progress, 1)
        row.addWidget(self.cancel_button)
        strip.addLayout(row)
        strip.addWidget(self.step)
        layout = QVBoxLayout(self)
        self.server = ServerBox()              # the Server source: a running server under load
        for box in (machine, model, self.server):
            layout.addWidget(box)
        layout.addWidget(self.run_strip)       # here until the window takes it (``pin_run_strip``)
        for w in (self.error, self.results, self.apply_button):
            layout.addWidget(w)
        layout.addStretch(1)
        self._show_engine_rows()
        self._connect()

    def _build_machine_box(self) -> QGroupBox:
        self.use_bandwidth = check("Memory bandwidth", tip="Streaming read, copy and triad over buffers far "
                                    "larger than the last-level cache.")
        self.use_matmul = check("Matmul peaks", tip="Large square multiplies in fp32, bf16 and fp16.")
        self.use_roofline = check("Empirical roofline", tip="(m x k)(k x n) multiplies for m from 1 to a few "
                                   "thousand, drawn on the Roofline plot.")
        self.use_measured = check("Use the measured machine", tip="Switch the Machine tab to the result.")
        self.machine_button = QPushButton("Measure this machine")
        self.remeasure = check("Measure the machine before calibrating",
                                tip="Off: use the machine measured before (its bandwidth and peaks) and only "
                                    "time the calibration models.")
        self.calibrate_button = QPushButton("Calibrate for every model")
        self.calibrate_button.setToolTip(
            "Measure this machine, then time rooflab's own calibration models (dense, sliding-window and "
            "mixture-of-experts, two weight formats) in the engine chosen below (llama.cpp or torch) with its "
            "threads. The fit gives every model opened on this machine an expected figure beside the ceiling, "
            "scored on models it did not see. A few minutes on two cores.")
        machine = QGroupBox("This machine")
        box = QVBoxLayout(machine)
        for w in (self.use_bandwidth, self.use_matmul, self.use_roofline, self.use_measured, self.machine_button,
                  self.remeasure, self.calibrate_button):
            box.addWidget(w)
        return machine

    def _build_engine_controls(self) -> None:
        self.engine = QComboBox()
        for key, name in ENGINES.items():
            self.engine.addItem(name, key)
        self.engine.setToolTip("What runs the model: llama.cpp for a GGUF (your own file; a model defined by a "
                               "config or the catalogue is written as a random-weight GGUF first), torch for "
                               "a Hugging Face model.")
        self.bench_path = QLineEdit()
        self.bench_path.setPlaceholderText("found on PATH")
        self.bench_path.setToolTip("Your build's llama-bench (or the folder holding it, such as build/bin); "
                                   "llama-batched-bench is looked for beside it.")
        self.bench_browse = QPushButton("Browse…")
        self.bench_status = wrapped()
        self.gpu_layers = QSpinBox()
        self.gpu_layers.setRange(0, 999)
        self.gpu_layers.setToolTip("Layers offloaded to the GPU (-ngl); 999: every layer. 0 on a CPU build.")
        self.flash_attention = QComboBox()
        self.flash_attention.addItems(list(FLASH))
        self.flash_attention.setToolTip("Flash attention (-fa). auto: llama.cpp decides (llama-bench: off).")
        self.kv_type = QComboBox()
        self.kv_type.addItems(list(KV_TYPES))
        self.kv_type.setToolTip("KV cache type (-ctk/-ctv), from the Workload tab; a quantised V cache needs "
                                "flash attention.")

    def _build_model_box(self) -> QGroupBox:
        self._build_engine_controls()
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
        self.repeats.setToolTip("Repetitions of each test: their mean (as llama-bench reports it), spread, median "
                                "and best are kept. A calibration times them in rounds over all its models.")
        self.random_weights = check("Random weights", False, RANDOM_NOTE)
        self.random_note = wrapped(RANDOM_NOTE)
        self.use_prefill = check("Prompt sweep (TTFT)")
        self.use_decode = check(DECODE_TEXT["llamacpp"])
        self.use_batch = check("Batched decode (contexts × batches)")
        self.by_operation = check("By operation (the Roofline tab's operation view)", False,
                                  "Time a prefill of each prompt and the decode step after it operation by "
                                  "operation (torch: its profiler; llama.cpp: its graph node by node on the CPU) "
                                  "and draw them on the Roofline tab's operation view beside the predicted ones.")
        self.include_disturbed = check("Fit disturbed points too", False,
                                        "Points whose repeats spread widely or that ran while the load average "
                                        "rose are kept and drawn, but left out of the fit unless this is ticked.")
        self.prompts = QLineEdit(SWEEPS["llamacpp"]["prompts"])
        self.depths = QLineEdit(SWEEPS["llamacpp"]["depths"])
        self.depths.setToolTip("Tokens already in the cache when generation is timed (llama-bench's -d).")
        self.contexts = QLineEdit(SWEEPS["llamacpp"]["contexts"])
        self.batches = QLineEdit(SWEEPS["llamacpp"]["batches"])
        self.estimate = wrapped()
        self.model_button = QPushButton("Measure the model")
        self.import_button = QPushButton("Import llama-bench output…")
        bench = QWidget()
        bench_row = QHBoxLayout(bench)
        bench_row.setContentsMargins(0, 0, 0, 0)
        bench_row.addWidget(self.bench_path, 1)
        bench_row.addWidget(self.bench_browse)
        model = QGroupBox("The model on screen")
        form = self._form = QFormLayout(model)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        form.addRow("engine", self.engine)
        form.addRow("llama-bench", bench)
        form.addRow(self.bench_status)
        labelled: list[tuple[str, QWidget]] = [
            ("threads", self.threads), ("GPU layers", self.gpu_layers), ("flash attention", self.flash_attention),
            ("KV cache", self.kv_type), ("dtype", self.dtype), ("device", self.device), ("repeats", self.repeats)]
        for label, field in labelled:
            form.addRow(label, field)
        whole: list[QWidget] = [self.random_weights, self.random_note, self.use_prefill, self.use_decode,
                                self.use_batch, self.by_operation]
        for row in whole:
            form.addRow(row)
        for label, line in (("prompts", self.prompts), ("depths", self.depths), ("contexts", self.contexts),
                            ("batches", self.batches)):
            form.addRow(label, line)
        for row in (self.include_disturbed, self.estimate, self.model_button, self.import_button):
            form.addRow(row)
        # the rows each engine shows (the rest are hidden while it is chosen)
        self._rows: dict[QWidget, tuple[str, ...]] = {
            bench: ("llama-bench",), self.bench_status: ("llama-bench",), self.gpu_layers: LLAMA,
            self.flash_attention: LLAMA, self.kv_type: LLAMA, self.depths: LLAMA, self.estimate: ("llamacpp", "torch"),
            self.dtype: ("torch",), self.device: ("torch",), self.random_weights: ("torch",),
            self.random_note: ("torch",), self.by_operation: ("llamacpp", "torch")}
        return model

    def _connect(self) -> None:
        self.engine.currentIndexChanged.connect(self._on_engine_current_index_changed)
        for spin in (self.threads, self.gpu_layers, self.repeats):
            spin.valueChanged.connect(self._on_control_edited)
        for combo in (self.flash_attention, self.kv_type):
            combo.currentIndexChanged.connect(self._on_control_edited)
        for box in (self.use_prefill, self.use_decode, self.use_batch):
            box.toggled.connect(self._on_control_edited)
        for line in (self.prompts, self.depths, self.contexts, self.batches):
            line.editingFinished.connect(self._on_control_edited)

    # -- engine choice ------------------------------------------------------------------------
    def engine_key(self) -> str:
        """The chosen engine: a key of ``ENGINES``."""
        return str(self.engine.currentData())

    def set_engine(self, key: str) -> None:
        """Choose the engine ``key`` (its controls show, its sweep comes back)."""
        index = self.engine.findData(key)
        if index < 0:
            raise MeasurementError(f"unknown engine {key!r}; one of {', '.join(ENGINES)}")
        self.engine.setCurrentIndex(index)

    def _on_engine_current_index_changed(self, _index: int) -> None:
        fields = {"prompts": self.prompts, "depths": self.depths, "contexts": self.contexts, "batches": self.batches}
        self._sweeps[self._engine] = {name: line.text() for name, line in fields.items()}
        self._engine = self.engine_key()
        for name, line in fields.items():
            line.setText(self._sweeps[self._engine][name])
        self._show_engine_rows()
        self.plan_edited.emit()

    def _show_engine_rows(self) -> None:
        engine = self._engine
        for widget, engines in self._rows.items():
            self._form.setRowVisible(widget, engine in engines)
        self.use_decode.setText(DECODE_TEXT[engine])
        self.threads.setToolTip("CPU threads (-t); auto: the engine's choice." if engine in LLAMA
                                else "CPU threads torch uses; auto: torch's choice.")

    def _on_control_edited(self, *_args: object) -> None:
        self.plan_edited.emit()

    # -- what the controls say ----------------------------------------------------------------
    def machine_plan(self) -> Any:
        """The MachinePlan the controls describe; MeasurementError when none is chosen."""
        from rooflab.core.measure.machine.benchmark import MachinePlan

        chosen = [name for name, box in (("bandwidth", self.use_bandwidth), ("matmul", self.use_matmul),
                                         ("roofline", self.use_roofline)) if box.isChecked()]
        if not chosen:
            raise MeasurementError("choose at least one machine experiment")
        return MachinePlan(device=self.device.currentText(), threads=self.threads.value() or None,
                           experiments=tuple(chosen))

    def experiments(self) -> tuple[str, ...]:
        """The model experiments ticked; MeasurementError when none is."""
        chosen = tuple(name for name, box in (("prefill", self.use_prefill), ("decode", self.use_decode),
                                              ("batch", self.use_batch)) if box.isChecked())
        if not chosen:
            raise MeasurementError("choose at least one model experiment")
        return chosen

    def model_plan(self) -> Any:
        """The torch ModelPlan the controls describe; MeasurementError names a bad field."""
        from rooflab.core.measure.engines.torch.timing import ModelPlan

        return ModelPlan(dtype=self.dtype.currentText(), device=self.device.currentText(),
                         threads=self.threads.value() or None, prompts=positive_ints(self.prompts.text(), "prompts"),
                         contexts=positive_ints(self.contexts.text(), "contexts"),
                         batches=positive_ints(self.batches.text(), "batches"), experiments=self.experiments(),
                         repeats=self.repeats.value(), max_repeats=3 * self.repeats.value(),
                         random_weights=self.random_weights.isChecked())

    def ops_plan(self) -> Any:
        """What "By operation" times (torch's OpsPlan: the prompts, repeats, dtype, device,
        threads and weights on screen); MeasurementError names a bad field."""
        from rooflab.core.measure.engines.torch.ops import OpsPlan

        return OpsPlan(prompts=positive_ints(self.prompts.text(), "prompts"), repeats=self.repeats.value(),
                       dtype=self.dtype.currentText(), device=self.device.currentText(),
                       threads=self.threads.value() or None, random_weights=self.random_weights.isChecked())

    def llamacpp_plan(self) -> Any:
        """The LlamaCppPlan the controls describe; MeasurementError names a bad field."""
        from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan

        kv = self.kv_type.currentText()
        return LlamaCppPlan(threads=self.threads.value() or None, gpu_layers=self.gpu_layers.value(),
                            flash_attention=FLASH[self.flash_attention.currentText()], cache_type_k=kv,
                            cache_type_v=kv, prompts=positive_ints(self.prompts.text(), "prompts"),
                            depths=positive_ints(self.depths.text(), "depths", low=0),
                            contexts=positive_ints(self.contexts.text(), "contexts"),
                            batches=positive_ints(self.batches.text(), "batches"), repeats=self.repeats.value(),
                            experiments=self.experiments())

    def llamabench_plans(self, model: str) -> tuple[Any, Any]:
        """(LlamaBenchPlan, BatchedBenchPlan or None) for the GGUF ``model`` (the job puts the
        file it runs in their place), as ``rooflab measure model --engine llama-bench`` maps
        its options; SpecError or MeasurementError names a bad field."""
        from rooflab.core.measure.engines.llamabench.plan import EngineOptions, sweep_plans, tools_flash_attention

        chosen = self.experiments()
        kv = self.kv_type.currentText()
        options = EngineOptions(threads=self.threads.value() or None, gpu_layers=self.gpu_layers.value(),
                                flash_attention=tools_flash_attention(FLASH[self.flash_attention.currentText()], kv),
                                cache_type_k=kv, cache_type_v=kv)
        return sweep_plans(
            model=model, experiments=chosen, options=options, repetitions=self.repeats.value(), gen=BENCH_GEN,
            prompts=positive_ints(self.prompts.text(), "prompts") if "prefill" in chosen else (512,),
            depths=positive_ints(self.depths.text(), "depths", low=0),
            contexts=positive_ints(self.contexts.text(), "contexts") if "batch" in chosen else (512,),
            batches=positive_ints(self.batches.text(), "batches") if "batch" in chosen else (1,))

    def bench_path_text(self) -> str:
        """The llama-bench path typed ("" for the one on PATH)."""
        return self.bench_path.text().strip()

    def set_kv_type(self, kv_type: str) -> None:
        """Show ``kv_type`` as the cache type to measure with (one of ``KV_TYPES``)."""
        index = self.kv_type.findText(kv_type.lower())
        if index >= 0:
            self.kv_type.setCurrentIndex(index)

    def ask_bench_file(self) -> str:
        """The benchmark output file the user picks ("" when cancelled)."""
        path, _ = QFileDialog.getOpenFileName(self, "Import llama-bench output", "", BENCH_FILTER)
        return path

    def ask_bench_binary(self) -> str:
        """The llama-bench executable the user picks ("" when cancelled)."""
        path, _ = QFileDialog.getOpenFileName(self, "Your llama.cpp build's llama-bench", self.bench_path_text())
        return path

    # -- showing --------------------------------------------------------------------------------
    def show_bench_status(self, text: str, *, found: bool) -> None:
        """Which llama-bench runs, or why none can (in the error colour)."""
        self.bench_status.setText(text)
        self.bench_status.setStyleSheet("" if found else f"color:{ERROR_COLOUR};")

    def show_estimate(self, text: str) -> None:
        """What the run will need, shown before it starts ("" hides the line)."""
        self.estimate.setText(text)

    def show_running(self, running: bool) -> None:
        """Start buttons off and Cancel on while a job runs, the other way round after."""
        for w in (self.machine_button, self.calibrate_button, self.model_button, self.import_button, self.engine,
                  self.server.run_button):
            w.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        if running:
            self.progress.show_at(0.0)
            self.step.setText("Starting…")
            self.error.hide()

    def show_progress(self, progress: Progress, *, fraction: float | None = None, eta: float | None = None) -> None:
        """The job's ``progress``: the bar at ``fraction`` and ``eta`` seconds left when the caller
        has better ones (weighted by the points' predicted times), else the job's own."""
        self.progress.show_at(progress.fraction if fraction is None else fraction,
                      progress.eta_seconds if eta is None else eta)
        self.step.setText(f"{progress.step}: {progress.message}")

    def show_done(self, summary: str = "Done") -> None:
        """The bar full and, in the status line, what the run found (``summary``)."""
        self.progress.show_at(1.0)
        self.step.setText(summary)

    def show_stopped(self, status: str) -> None:
        """A run that ended without a result (Cancel, an error): the bar back to empty."""
        self.progress.show_at(0.0)
        self.step.setText(status)

    def show_error(self, text: str, *, finished: str = "") -> None:
        """One line under the controls; the status says the job stopped, or, for a job that ran
        to its end and whose result could not be fitted or kept, ``finished`` (the status, on a
        full bar: "0 % · Stopped" read as a cancel)."""
        self.error.setText(text)
        self.error.show()
        if finished:
            self.show_done(finished)
        else:
            self.show_stopped("Stopped")

    def mark_results_old(self) -> None:
        """The read-out shown is an earlier run's: say so until this run's replaces it."""
        text = self.results.text()
        if text and OLD_RESULTS not in text and text != "No measurement yet.":
            self.results.setText(f"<p style='color:gray'><i>{OLD_RESULTS}</i></p>{text}")
        self.apply_button.setEnabled(False)

    def show_results(self, html: str, *, can_apply: bool) -> None:
        self.results.setText(html)
        self.apply_button.setEnabled(can_apply)

