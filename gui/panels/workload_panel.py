"""The Workload tab: prompt, answer, context, batch, cache type, llama.cpp's run settings (-ub,
-fa, and -t on a CPU), speculative decoding, and the placement (``placement_panel``), which is
also where the weights sit (no share of its own).

control -> state: each edit calls ``AppState.update_workload``; a value the workload rejects is
shown under the fields and the state keeps its last good workload.
state -> control: ``workload_changed`` refreshes the fields silently; ``model_changed`` bounds
the token sliders by the model's trained context (the boxes still take any count)."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QGroupBox, QVBoxLayout, QWidget

from rooflab.core.errors import RooflabError
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.quant import KV_TYPES
from rooflab.core.values.workload import MAX_BATCH, MAX_THREADS, MAX_TOKENS, Workload
from rooflab.gui.panels.placement_panel import PlacementPanel
from rooflab.gui.state.app_state import AppState
from rooflab.gui.state.recompute import Frame
from rooflab.gui.widgets.controls import SliderSpin, error_label

_TIPS = {
    "prompt": "Prompt tokens: processed together in one prefill pass. Its FLOPs grow with the prompt "
              "(2 × active parameters × tokens), its bytes hardly at all, so long prompts turn compute-bound.",
    "answer": "Answer tokens: generated one decode step each; every step re-reads the weights and the "
              "whole cache. TPOT averages the steps as the cache grows over the answer.",
    "context": "Tokens already in the cache before the prompt (a cached prefix or an earlier conversation): "
               "every decode step reads their keys and values too.",
    "batch": "Sequences decoded together: they share one read of the weights per step, so the total rate "
             "grows almost with the batch until the caches, memory or arithmetic stop it.",
    "kv_type": "KV-cache element type: bytes per cached key or value (f16: 2, q8_0: 1.06, q4_0: 0.56). "
               "KV bytes per token = 2 × layers × KV heads × head size × bytes per element.",
    "draft_tokens": "Speculative decoding: tokens a draft model proposes per step; the target verifies them "
                    "in one pass over drafts + 1 positions, which costs about one step while decode is "
                    "bandwidth-bound.",
    "acceptance": "Probability each drafted token is accepted; expected tokens per verify step = "
                  "(1 − a^(k+1)) / (1 − a).",
    "draft_cost": "One draft step's time as a share of one target step (a small draft model: ~0.05).",
    "ubatch": "llama.cpp's -ub: a prompt runs in passes of this many tokens, and each multiply of a pass gets "
              "that many rows (a routed expert about -ub × used / count of them): a multiply of r rows runs at "
              "r / (r + r0) of its rate, so a small -ub slows prompts, a large one speeds up MoE prompts.",
    "flash_attention": "llama.cpp's -fa. Off, its compute buffer holds the attention scores (more memory, "
                       "growing with the context), and a prompt's attention (its n² term) takes the other "
                       "kernel's rate where a calibration timed both (none: the same time either way). A "
                       "quantized KV cache needs it on: llama.cpp refuses a q8_0 V cache with -fa off. llama.cpp "
                       "turns it on where it runs by default.",
    "threads": "llama.cpp's -t on a CPU: its matrix kernels scale with min(threads, cores) / cores of the "
               "peak. 0: llama.cpp's default, the physical cores.",
}
#: the token sliders' reach when a model states no trained context
UNSTATED_CONTEXT = 32_768


class WorkloadPanel(QWidget):
    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self.fields: dict[str, SliderSpin] = {
            # the whole range the workload accepts: a narrower spin box would turn a typed
            # 65536 into 655 and clip a restored workload on the next edit
            "prompt": SliderSpin(1, MAX_TOKENS, log=True),
            "answer": SliderSpin(1, MAX_TOKENS, log=True),
            "context": SliderSpin(0, MAX_TOKENS, log=True),
            "batch": SliderSpin(1, MAX_BATCH, log=True),
            "draft_tokens": SliderSpin(0, 16),
            "acceptance": SliderSpin(0.0, 1.0, integer=False, step=0.05),
            "draft_cost": SliderSpin(0.0, 1.0, integer=False, step=0.01),
            "ubatch": SliderSpin(1, MAX_BATCH, log=True),
            "threads": SliderSpin(0, MAX_THREADS),
        }
        self.flash_attention = QCheckBox("Flash attention (-fa)")
        self.flash_attention.setToolTip(_TIPS["flash_attention"])
        self.kv_type = QComboBox()
        self.kv_type.addItems(list(KV_TYPES))
        self.kv_type.setToolTip(_TIPS["kv_type"])
        self.error = error_label()

        request = QGroupBox("Request")
        form = QFormLayout(request)
        for key, label in (("prompt", "Prompt tokens"), ("answer", "Answer tokens"),
                           ("context", "Cached context"), ("batch", "Batch (sequences)")):
            form.addRow(label, self.fields[key])
        form.addRow("KV-cache type", self.kv_type)
        engine = QGroupBox("llama.cpp settings")
        self._engine_form = form = QFormLayout(engine)
        form.addRow("Ubatch (-ub)", self.fields["ubatch"])
        form.addRow(self.flash_attention)
        form.addRow("CPU threads (-t)", self.fields["threads"])
        spec = QGroupBox("Speculative decoding")
        form = QFormLayout(spec)
        form.addRow("Draft tokens", self.fields["draft_tokens"])
        form.addRow("Acceptance", self.fields["acceptance"])
        form.addRow("Draft cost", self.fields["draft_cost"])
        self.placement = PlacementPanel(state)

        layout = QVBoxLayout(self)
        # the error under the controls it is about, not under the placement (below the fold at 720p)
        for box in (request, engine, self.error, spec, self.placement):
            layout.addWidget(box)
        layout.addStretch(1)

        for key, field in self.fields.items():
            field.setToolTip(_TIPS[key])
            field.value_edited.connect(self._on_field_value_edited)
            field.refused.connect(self._on_field_refused)
        self.kv_type.currentTextChanged.connect(self._on_kv_type_text_changed)
        self.flash_attention.toggled.connect(self._on_flash_attention_toggled)
        state.workload_changed.connect(self._on_state_workload_changed)
        state.model_changed.connect(self._on_state_model_changed)
        state.machine_changed.connect(self._on_state_machine_changed)
        self._bound_sliders(state.model)
        self._show(state.workload)
        self._on_state_machine_changed(state.machine)

    # -- state -> controls ------------------------------------------------------------------
    def _show(self, w: Workload) -> None:
        values = {"prompt": w.prompt, "answer": w.answer, "context": w.context, "batch": w.batch,
                  "draft_tokens": w.draft_tokens, "acceptance": w.acceptance, "draft_cost": w.draft_cost,
                  "ubatch": w.ubatch, "threads": w.threads or 0}
        for key, value in values.items():
            self.fields[key].set_value(value)
        self._show_switches(w)
        for key in ("acceptance", "draft_cost"):
            self.fields[key].setEnabled(w.draft_tokens > 0)

    def _show_switches(self, w: Workload) -> None:
        """The KV-cache type and flash attention as ``w`` has them (typed numbers stay as typed)."""
        self.kv_type.blockSignals(True)
        self.kv_type.setCurrentText(w.kv_type.lower())
        self.kv_type.blockSignals(False)
        self.flash_attention.blockSignals(True)
        self.flash_attention.setChecked(w.flash_attention)
        self.flash_attention.blockSignals(False)

    def _bound_sliders(self, model: ModelSpec) -> None:
        """The prompt, answer and context sliders reach the model's trained context (a drag across
        them once ran to 16M tokens); the boxes beside them still take any count."""
        trained = model.context_length or UNSTATED_CONTEXT
        for key in ("prompt", "answer", "context"):
            self.fields[key].set_slider_range(self.fields[key].low, trained)
        self._show(self._state.workload)

    def show_frame(self, frame: Frame) -> None:
        """What the placement on screen puts where (``PlacementPanel.show_frame``)."""
        self.placement.show_frame(frame)

    def _on_state_workload_changed(self, workload: Workload) -> None:
        self._show(workload)

    def _on_state_model_changed(self, model: ModelSpec) -> None:
        self._bound_sliders(model)

    def _on_state_machine_changed(self, machine: MachineProfile) -> None:
        """Threads only where llama.cpp computes on the CPU (a GPU machine hides the row)."""
        self._engine_form.setRowVisible(self.fields["threads"], machine.kind == "cpu")

    # -- controls -> state ------------------------------------------------------------------
    def _collect(self) -> dict[str, object]:
        f = self.fields
        return dict(prompt=int(f["prompt"].value()), answer=int(f["answer"].value()),
                    context=int(f["context"].value()), batch=int(f["batch"].value()),
                    kv_type=self.kv_type.currentText(), draft_tokens=int(f["draft_tokens"].value()),
                    acceptance=f["acceptance"].value(), draft_cost=f["draft_cost"].value(),
                    ubatch=int(f["ubatch"].value()), flash_attention=self.flash_attention.isChecked(),
                    threads=int(f["threads"].value()) or None)

    def _apply(self) -> None:
        try:
            self._state.update_workload(**self._collect())
        except RooflabError as exc:
            self.error.setText(str(exc))
            self.error.show()
            self._show_switches(self._state.workload)     # a refused switch goes back to what runs
            return
        self.error.hide()
        for key in ("acceptance", "draft_cost"):
            self.fields[key].setEnabled(self._state.workload.draft_tokens > 0)

    def _on_field_value_edited(self, _value: float) -> None:
        self._apply()

    def _on_field_refused(self, text: str) -> None:
        self.error.setText(text)
        self.error.show()

    def _on_kv_type_text_changed(self, _text: str) -> None:
        self._apply()

    def _on_flash_attention_toggled(self, _on: bool) -> None:
        self._apply()
