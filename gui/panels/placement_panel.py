"""The Workload tab's Placement group: where the model sits, in llama.cpp's flags (GPU layers
-ngl or "auto", experts on the CPU --n-cpu-moe or "auto", the KV cache --no-kv-offload), and how
many identical devices share it (layer split or tensor parallel) over which interconnect, as
``rooflab predict``'s --gpu-layers, --cpu-moe, --no-kv-offload, --devices, --parallel and
--interconnect give them. It is the one control for where the weights sit: a share of the
weights offloaded is the -ngl it means.

control -> state: each edit calls ``AppState.set_placement`` with the choice the enabled controls
make (several devices: the one-device controls wait, disabled, with their values kept).
Unticking an "auto" starts from what auto placed.
state -> control: ``placement_changed``, ``model_changed`` and ``machine_changed`` refresh the
controls silently, their ranges and which of them apply (a CPU-only machine has no GPU
controls); ``show_frame`` shows, in the greyed controls, what auto placed."""

from __future__ import annotations

import functools

from PySide6.QtCore import Qt
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QWidget,
)

from rooflab.core.app.resolve import engine_for
from rooflab.core.calibration.expectations import VLLM
from rooflab.core.errors import RooflabError
from rooflab.core.io.presets import list_presets
from rooflab.core.predict.choice import PlacementChoice
from rooflab.core.predict.parallel import DEVICE_COUNTS
from rooflab.core.predict.placement import MAX_LAYERS, Placement, brief_flags, memory_words
from rooflab.core.report.units import fmt
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.gui.state.app_state import AppState
from rooflab.gui.state.recompute import Frame
from rooflab.gui.widgets.controls import error_label

# The Placement group's tooltips: each flag in llama.cpp's words and ``rooflab predict``'s.
TIPS = {
    "gpu_layers": "Layers on the GPU: llama.cpp's -ngl N (--n-gpu-layers; rooflab predict --gpu-layers N). "
                  "The device takes the last N − 1 repeating layers and the output layer; \"all\" (or any "
                  "number at or above the layers + 1, as llama.cpp reads -ngl 99) puts every layer there, the "
                  "rest run from host memory. A number is a placement by hand: not fitted, even when it does "
                  "not fit. This is where the weights sit: the share in host memory follows from it.",
    "gpu_auto": "Leave the GPU layers to rooflab: every layer on the device when it holds the model, else the "
                "most that fit around the experts on the CPU and the KV cache's place (auto-fit, as llama.cpp's "
                "fit does). The greyed number shows what auto placed; unticking starts from it.",
    "cpu_moe_auto": "Leave the experts on the CPU to auto-fit (it moves experts to the CPU before whole layers). "
                    "Unticked: exactly the number beside it, 0 for none.",
    "cpu_moe": "Keep the routed experts of the first N layers in host memory, computed by the CPU: llama.cpp's "
               "--n-cpu-moe N (rooflab predict --cpu-moe N). Attention, router and shared experts stay on the "
               "layer's device. With GPU layers on auto, rooflab fits the GPU layers around them. Only for a "
               "mixture-of-experts model.",
    "kv_on_device": "Unchecked: llama.cpp's --no-kv-offload (-nkvo; rooflab predict --no-kv-offload): the KV "
                    "cache stays in host memory and attention over it runs on the CPU. With GPU layers on "
                    "auto, rooflab fits the rest around it.",
    "devices": "Identical devices sharing the model (rooflab predict --devices N): llama.cpp's layer split "
               "across N GPUs, or vLLM's --tensor-parallel-size N. Every layer is on the devices, so the "
               "controls above wait. The numbers and every chart are the devices' (each device's memory, the "
               "link's share of each step). Needs an interconnect.",
    "parallel": "How the devices share the model (rooflab predict --parallel): layer — llama.cpp's "
                "--split-mode layer, consecutive layers per device, a token passes through them in turn "
                "(room, no speed-up for one sequence); tensor — every layer cut N ways (vLLM "
                "--tensor-parallel-size; llama.cpp's --split-mode row comes closest), two all-reduces per "
                "layer over the link.",
    "interconnect": "The link between the devices, bandwidth per direction (rooflab predict --interconnect "
                    "GB/s): the machine's own as its preset states it, or any link a preset states (NVLink, "
                    "PCIe, Thunderbolt...). Its latency stays the machine's kind of link.",
}
MODES = (("layer", "layer split"), ("tensor", "tensor parallel"))


@functools.cache
def preset_links() -> tuple[tuple[str, float], ...]:
    """(name, bytes/s per direction) of every link a preset states between its devices, fastest first."""
    try:
        presets = list_presets()
    except RooflabError:           # a broken preset file: the machine's own link stays on offer
        return ()
    found = {(m.interconnect_name, m.interconnect_bandwidth) for m in presets if m.has_interconnect}
    return tuple(sorted(found, key=lambda link: (-link[1], link[0])))


class LayersSpin(QSpinBox):
    """-ngl: a number of layers, or "all" (also any number at or above the model's layers + 1,
    as llama.cpp reads -ngl 99)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setRange(0, MAX_LAYERS)
        self.all_layers = 1

    def textFromValue(self, value: int) -> str:  # noqa: N802 - Qt API
        return "all" if value >= self.all_layers else str(value)

    def valueFromText(self, text: str) -> int:  # noqa: N802 - Qt API
        text = text.strip().lower()
        return self.all_layers if not text or "all".startswith(text) else int(text)

    def validate(self, text: str, pos: int) -> object:  # type: ignore[override]  # PySide6 takes the state alone too
        t = text.strip().lower()
        if t == "all" or t.isdigit():
            return QValidator.State.Acceptable, text, pos
        if not t or "all".startswith(t):
            return QValidator.State.Intermediate, text, pos
        return QValidator.State.Invalid, text, pos


class PlacementPanel(QGroupBox):
    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__("Placement", parent)
        self._state = state
        self._auto: Placement | None = None          # what auto placed, for the frame's scenario
        self._one_device: tuple[int, int] | None = None   # -ngl and --n-cpu-moe while several devices show
        self.gpu_auto = QCheckBox("auto")
        self.gpu_layers = LayersSpin()
        self.cpu_moe_auto = QCheckBox("auto")
        self.cpu_moe = QSpinBox()
        self.kv_on_device = QCheckBox("KV cache on the device")
        self.devices = QComboBox()
        for n in DEVICE_COUNTS:
            self.devices.addItem(str(n), n)
        self.parallel = QComboBox()
        for mode, text in MODES:
            self.parallel.addItem(text, mode)
        self.interconnect = QComboBox()
        for combo in (self.devices, self.parallel, self.interconnect):
            # as narrow as the pane allows: sized to its longest item, the group was wider than the tab
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(8)
        for spin in (self.gpu_layers, self.cpu_moe):
            spin.setKeyboardTracking(False)        # one change per finished edit (see SliderSpin)
            spin.setMinimumWidth(64)
            spin.setAlignment(Qt.AlignmentFlag.AlignRight)
        for key, tip in TIPS.items():
            getattr(self, key).setToolTip(tip)
        self.placed = QLabel()                     # what the placement puts where
        self.placed.setWordWrap(True)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.error = error_label()

        self._form = form = QFormLayout(self)
        form.addRow("GPU layers", _row(self.gpu_auto, self.gpu_layers))
        form.addRow("Experts on the CPU", _row(self.cpu_moe_auto, self.cpu_moe))
        form.addRow(self.kv_on_device)
        form.addRow("Devices", self.devices)
        form.addRow("Parallel", self.parallel)
        form.addRow("Interconnect", self.interconnect)
        form.addRow(self.placed)
        form.addRow(self.note)
        form.addRow(self.error)

        self.gpu_auto.toggled.connect(self._on_gpu_auto_toggled)
        self.gpu_layers.valueChanged.connect(self._on_gpu_layers_value_changed)
        self.cpu_moe_auto.toggled.connect(self._on_cpu_moe_auto_toggled)
        self.cpu_moe.valueChanged.connect(self._on_cpu_moe_value_changed)
        self.kv_on_device.toggled.connect(self._on_kv_on_device_toggled)
        self.devices.currentIndexChanged.connect(self._on_devices_current_index_changed)
        self.parallel.currentIndexChanged.connect(self._on_parallel_current_index_changed)
        self.interconnect.currentIndexChanged.connect(self._on_interconnect_current_index_changed)
        state.placement_changed.connect(self._on_state_placement_changed)
        state.model_changed.connect(self._on_state_model_changed)
        state.machine_changed.connect(self._on_state_machine_changed)
        self._fit_ranges(state.model)
        self._fill_links(state.machine)
        self._show(state.placement)

    @property
    def _widgets(self) -> tuple[QWidget, ...]:
        return (self.gpu_auto, self.gpu_layers, self.cpu_moe_auto, self.cpu_moe, self.kv_on_device, self.devices,
                self.parallel, self.interconnect)

    # -- state -> controls ------------------------------------------------------------------
    def _fit_ranges(self, model: ModelSpec) -> None:
        """-ngl 0 .. "all" (layers + 1, the output layer; more is read as all). --n-cpu-moe takes
        what llama.cpp takes (99 means every layer's experts): a range capped at the model's
        layers turned a typed 99 into 9 without a word."""
        self.gpu_layers.all_layers = model.layers + 1
        self.cpu_moe.blockSignals(True)
        self.cpu_moe.setRange(0, MAX_LAYERS)
        self.cpu_moe.blockSignals(False)

    def _fill_links(self, machine: MachineProfile) -> None:
        """The machine's own interconnect first, then every link a preset states."""
        self.interconnect.blockSignals(True)
        self.interconnect.clear()
        own = f"{machine.interconnect_name}, " if machine.interconnect_name else ""
        self.interconnect.addItem(f"as stated ({own}{fmt(machine.interconnect_bandwidth, 'B/s')})"
                                  if machine.has_interconnect else "as stated (none)", None)
        for name, bandwidth in preset_links():
            self.interconnect.addItem(f"{name}: {fmt(bandwidth, 'B/s')}", bandwidth)
        self.interconnect.blockSignals(False)

    def _show(self, choice: PlacementChoice) -> None:
        for w in self._widgets:
            w.blockSignals(True)
        if choice.devices > 1:       # every layer on the devices, no experts on the CPU: the greyed
            # boxes say so (they kept a one-device -ngl, "44", beside two devices holding every layer);
            # what one device had comes back with it (``_on_devices_current_index_changed``)
            if self._one_device is None:
                self._one_device = (self.gpu_layers.value(), self.cpu_moe.value())
            self.gpu_layers.setValue(self.gpu_layers.all_layers)
            self.cpu_moe.setValue(0)
        else:
            self._one_device = None
            self.gpu_auto.setChecked(choice.gpu_layers is None)
            self.cpu_moe_auto.setChecked(choice.gpu_layers is None and choice.cpu_moe is None)
            if choice.gpu_layers is not None:
                self.gpu_layers.setValue(choice.gpu_layers)
            if choice.cpu_moe is not None or not self._state.model.is_moe:
                self.cpu_moe.setValue(choice.cpu_moe or 0)
            self.kv_on_device.setChecked(choice.kv_on_device)
            self._show_auto()
        if self.devices.findData(choice.devices) < 0:                 # a count only the command line offers
            self.devices.addItem(str(choice.devices), choice.devices)
        self.devices.setCurrentIndex(self.devices.findData(choice.devices))
        self.parallel.setCurrentIndex(max(self.parallel.findData(choice.parallel), 0))
        link = choice.link_bandwidth
        if link is not None and self.interconnect.findData(link) < 0:
            self.interconnect.addItem(f"{fmt(link, 'B/s')} (as set)", link)
        self.interconnect.setCurrentIndex(max(0, self.interconnect.findData(link)) if link is not None else 0)
        for w in self._widgets:
            w.blockSignals(False)
        self._enable()

    def _show_auto(self) -> None:
        """Put what auto placed in the controls left on auto (signals blocked by the caller)."""
        auto = self._auto or Placement.all_on_device(self._state.model)
        if self.gpu_auto.isChecked():
            self.gpu_layers.setValue(auto.gpu_layers)
        if self.gpu_auto.isChecked() and self.cpu_moe_auto.isChecked():
            self.cpu_moe.setValue(auto.cpu_moe if self._state.model.is_moe else 0)

    def show_frame(self, frame: Frame) -> None:
        """What the placement on screen puts where: the greyed auto controls take auto's -ngl and
        --n-cpu-moe, and a line says where the weights sit."""
        state = self._state
        if frame.scenario.model is not state.model or frame.scenario.machine != state.machine:
            return                                    # a frame of what was on screen before
        placed = frame.summary.placed
        self._auto = None if placed is None or placed.parallel is not None else placed.placement
        for w in (self.gpu_layers, self.cpu_moe):
            w.blockSignals(True)
        if state.placement.devices == 1:
            self._show_auto()
        for w in (self.gpu_layers, self.cpu_moe):
            w.blockSignals(False)
        self.placed.setText(_where_text(frame))
        self.placed.setVisible(bool(self.placed.text()))

    def _enable(self) -> None:
        """Which controls apply: the one-device flags on one device (experts only for a
        mixture-of-experts model, none on a CPU-only machine), the device count with an
        interconnect, the mode and the link with several."""
        one = self.devices.currentData() == 1
        machine, model = self._state.machine, self._state.model
        gpu = machine.kind != "cpu"
        for row in (self.gpu_auto.parentWidget(), self.cpu_moe.parentWidget(), self.kv_on_device):
            if row is not None:
                self._form.setRowVisible(row, gpu)
        self.gpu_auto.setEnabled(one)
        self.gpu_layers.setEnabled(one and not self.gpu_auto.isChecked())
        self.cpu_moe_auto.setEnabled(one and model.is_moe and self.gpu_auto.isChecked())
        self.cpu_moe.setEnabled(one and model.is_moe and not (self.gpu_auto.isChecked()
                                                              and self.cpu_moe_auto.isChecked()))
        self.kv_on_device.setEnabled(one)
        linked = machine.has_interconnect or self._state.placement.link_bandwidth is not None
        self.devices.setEnabled(linked)
        self.parallel.setEnabled(not one)
        self.interconnect.setEnabled(not one)
        notes = []
        if not gpu:
            notes.append(f"{machine.name} is a CPU: every layer runs from its memory.")
        elif not model.is_moe:
            notes.append(f"{model.name} has no routed experts to keep on the CPU.")
        if not linked:
            notes.append(f"{machine.name} states no interconnect between devices: one device.")
        elif not one:
            notes.append(f"{self.devices.currentData()} devices: the numbers and every chart are theirs "
                         "(each device's memory, the link's share of each step).")
            if engine_for(self._state.placement) == VLLM:
                # the expected engine changes with the mode: said where the mode is chosen
                notes.append("Tensor parallel is how vLLM runs a model (llama.cpp's --split-mode row comes "
                             "closest): the expected figures are a vLLM calibration's, none without one.")
        self.note.setText(" ".join(notes))
        self.note.setVisible(bool(notes))

    def _on_state_placement_changed(self, choice: PlacementChoice) -> None:
        self._show(choice)

    def _on_state_model_changed(self, model: ModelSpec) -> None:
        self._auto = None
        self._fit_ranges(model)
        self._show(self._state.placement)

    def _on_state_machine_changed(self, machine: MachineProfile) -> None:
        self._auto = None
        self._fill_links(machine)
        self._show(self._state.placement)

    # -- controls -> state ------------------------------------------------------------------
    def choice(self) -> PlacementChoice:
        """The choice the enabled controls make."""
        devices = int(self.devices.currentData())
        link = self.interconnect.currentData()
        link = None if link is None else float(link)
        if devices > 1:
            return PlacementChoice(devices=devices, parallel=str(self.parallel.currentData()), link_bandwidth=link)
        model = self._state.model
        gpu_auto = self.gpu_auto.isChecked()
        experts = None if not model.is_moe or (gpu_auto and self.cpu_moe_auto.isChecked()) else self.cpu_moe.value()
        return PlacementChoice(gpu_layers=None if gpu_auto else min(self.gpu_layers.value(), model.layers + 1),
                               cpu_moe=experts, kv_on_device=self.kv_on_device.isChecked(),
                               parallel=str(self.parallel.currentData()), link_bandwidth=link)

    def _apply(self) -> None:
        try:
            self._state.set_placement(self.choice())
        except RooflabError as exc:
            self.error.setText(str(exc))
            self.error.show()
            return
        self.error.hide()
        self._enable()

    def _on_gpu_auto_toggled(self, checked: bool) -> None:
        if not checked:                # by hand from what auto placed: the experts too (llama.cpp's flags)
            self.cpu_moe_auto.blockSignals(True)
            self.cpu_moe_auto.setChecked(False)
            self.cpu_moe_auto.blockSignals(False)
        self._apply()

    def _on_gpu_layers_value_changed(self, _value: int) -> None:
        self._apply()

    def _on_cpu_moe_auto_toggled(self, _checked: bool) -> None:
        self._apply()

    def _on_cpu_moe_value_changed(self, _value: int) -> None:
        self._apply()

    def _on_kv_on_device_toggled(self, _checked: bool) -> None:
        self._apply()

    def _on_devices_current_index_changed(self, _index: int) -> None:
        if self.devices.currentData() == 1 and self._one_device is not None:
            for box, value in zip((self.gpu_layers, self.cpu_moe), self._one_device, strict=True):
                box.blockSignals(True)
                box.setValue(value)
                box.blockSignals(False)
            self._one_device = None
        self._apply()

    def _on_parallel_current_index_changed(self, _index: int) -> None:
        self._apply()

    def _on_interconnect_current_index_changed(self, _index: int) -> None:
        self._apply()


def _row(check: QCheckBox, spin: QSpinBox) -> QWidget:
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(check)
    layout.addWidget(spin, 1)
    return row


def _where_text(frame: Frame) -> str:
    """"Auto placed -ngl 37 --n-cpu-moe 23: weights 21.3 GB on the GPU, 44.5 GB in host memory",
    then where the prompt's and a token's time go (``Figures.parts_lines``: the numbers panel's
    and ``rooflab predict``'s words); "" when the device holds the model whole."""
    where = _weights_text(frame)
    parts = [f"{line.label} ({line.value}): {line.sentence}" for line in frame.figures.parts_lines()]
    return "\n".join([where, *parts]) if where else ""


def _weights_text(frame: Frame) -> str:
    """Where the weights sit, one sentence ("" when the device holds the model whole)."""
    placed = frame.summary.placed
    if placed is None or not placed.fits:
        return ""
    if placed.parallel is not None and placed.placement.devices == 1:
        par = placed.parallel
        return f"Each of {par.devices} devices holds {fmt(par.memory.weights, 'B')} of weights."
    host = placed.fit.memory.host
    who = {"auto": "Auto placed", "manual": "Placed"}.get(placed.how, "Placed")
    device_word, host_word = memory_words(frame.scenario.machine)
    parts = [f"{fmt(sum(u.weights for u in placed.fit.memory.device_bills), 'B')} {device_word}"]
    if host.weights > 0:
        parts.append(f"{fmt(host.weights, 'B')} {host_word}")
    return f"{who} {brief_flags(placed.placement)}: weights {', '.join(parts)}."
