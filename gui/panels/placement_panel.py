"""The Workload tab's Placement group: where the model sits, in llama.cpp's flags (GPU layers
-ngl or "auto", experts on the CPU --n-cpu-moe, the KV cache --no-kv-offload), and how many
identical devices share it (layer split or tensor parallel), as ``rooflab predict``'s
--gpu-layers, --cpu-moe, --no-kv-offload, --devices and --parallel give them.

control -> state: each edit calls ``state.set_placement`` with the choice the enabled controls
make (several devices: the one-device controls wait, disabled, with their values kept).
state -> control: ``placement_changed``, ``model_changed`` and ``machine_changed`` refresh the
controls silently, their ranges (0 .. layers + 1) and which of them apply."""

from __future__ import annotations

from PySide6.QtCore import Qt
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

from rooflab.core.errors import RooflabError
from rooflab.core.predict.choice import PlacementChoice
from rooflab.core.predict.parallel import DEVICE_COUNTS
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.gui.state.app_state import AppState
from rooflab.gui.widgets.controls import error_label

TIPS = {
    "gpu_layers": "Layers on the GPU: llama.cpp's -ngl N (--n-gpu-layers; rooflab predict --gpu-layers N). "
                  "The device takes the last N − 1 repeating layers and the output layer; layers + 1 puts "
                  "every layer there, the rest run from host memory. Auto: every layer on the device when it "
                  "holds the model, else rooflab chooses the fastest placement that fits, as llama.cpp's fit "
                  "does, keeping the experts on the CPU and the KV cache's place as set below. A number is a "
                  "placement by hand: not fitted, even when it does not fit. A number here (or experts on the "
                  "CPU, or the KV cache on the host) overrides the Weights offloaded share.",
    "gpu_auto": "Leave the GPU layers to rooflab: the most that fit around the experts on the CPU and the KV "
                "cache's place as set below (auto-fit, as llama.cpp's fit does; with no experts set, it moves "
                "experts to the CPU first).",
    "cpu_moe": "Keep the routed experts of the first N layers in host memory, computed by the CPU: llama.cpp's "
               "--n-cpu-moe N (rooflab predict --cpu-moe N). Attention, router and shared experts stay on the "
               "layer's device. With GPU layers on auto, exactly N layers' experts stay on the CPU and rooflab "
               "fits the GPU layers around them; 0 leaves the experts to auto-fit. Only for a "
               "mixture-of-experts model.",
    "kv_on_device": "Unchecked: llama.cpp's --no-kv-offload (-nkvo; rooflab predict --no-kv-offload): the KV "
                    "cache stays in host memory and attention over it runs on the CPU. With GPU layers on "
                    "auto, rooflab fits the rest around it.",
    "devices": "Identical devices sharing the model (rooflab predict --devices N): llama.cpp's layer split "
               "across N GPUs, or vLLM's --tensor-parallel-size N. Every layer is on the devices, so the "
               "controls above wait. The numbers panel shows the devices' estimate; the charts still draw "
               "one device. Needs the machine's interconnect.",
    "parallel": "How the devices share the model (rooflab predict --parallel): layer — llama.cpp's "
                "--split-mode layer, consecutive layers per device, a token passes through them in turn "
                "(room, no speed-up for one sequence); tensor — every layer cut N ways (vLLM "
                "--tensor-parallel-size; llama.cpp's --split-mode row comes closest), two all-reduces per "
                "layer over the link.",
}
_MODES = (("layer", "layer split"), ("tensor", "tensor parallel"))


class PlacementPanel(QGroupBox):
    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__("Placement", parent)
        self._state = state
        self.gpu_auto = QCheckBox("auto")
        self.gpu_layers = QSpinBox()
        self.cpu_moe = QSpinBox()
        self.kv_on_device = QCheckBox("KV cache on the device")
        self.devices = QComboBox()
        for n in DEVICE_COUNTS:
            self.devices.addItem(str(n), n)
        self.parallel = QComboBox()
        for mode, text in _MODES:
            self.parallel.addItem(text, mode)
        for spin in (self.gpu_layers, self.cpu_moe):
            spin.setKeyboardTracking(False)        # one change per finished edit (see SliderSpin)
            spin.setMinimumWidth(72)
            spin.setAlignment(Qt.AlignmentFlag.AlignRight)
        for key in TIPS:
            getattr(self, key).setToolTip(TIPS[key])
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.error = error_label()

        gpu = QWidget()
        row = QHBoxLayout(gpu)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.gpu_auto)
        row.addWidget(self.gpu_layers, 1)
        form = QFormLayout(self)
        form.addRow("GPU layers", gpu)
        form.addRow("Experts on the CPU", self.cpu_moe)
        form.addRow(self.kv_on_device)
        form.addRow("Devices", self.devices)
        form.addRow("Parallel", self.parallel)
        form.addRow(self.note)
        form.addRow(self.error)

        self.gpu_auto.toggled.connect(self._on_gpu_auto_toggled)
        self.gpu_layers.valueChanged.connect(self._on_gpu_layers_value_changed)
        self.cpu_moe.valueChanged.connect(self._on_cpu_moe_value_changed)
        self.kv_on_device.toggled.connect(self._on_kv_on_device_toggled)
        self.devices.currentIndexChanged.connect(self._on_devices_current_index_changed)
        self.parallel.currentIndexChanged.connect(self._on_parallel_current_index_changed)
        state.placement_changed.connect(self._on_state_placement_changed)
        state.model_changed.connect(self._on_state_model_changed)
        state.machine_changed.connect(self._on_state_machine_changed)
        self._fit_ranges(state.model)
        self._show(state.placement)

    # -- state -> controls ------------------------------------------------------------------
    def _fit_ranges(self, model: ModelSpec) -> None:
        """Spin ranges for ``model``: -ngl 0 .. layers + 1 (the output layer), --n-cpu-moe 0 .. layers."""
        for spin, high in ((self.gpu_layers, model.layers + 1), (self.cpu_moe, model.layers)):
            spin.blockSignals(True)
            spin.setRange(0, high)
            spin.blockSignals(False)

    def _show(self, choice: PlacementChoice) -> None:
        widgets = (self.gpu_auto, self.gpu_layers, self.cpu_moe, self.kv_on_device, self.devices, self.parallel)
        for w in widgets:
            w.blockSignals(True)
        if choice.devices == 1:      # several devices: the one-device controls keep their values
            self.gpu_auto.setChecked(choice.gpu_layers is None)
            if choice.gpu_layers is not None:
                self.gpu_layers.setValue(choice.gpu_layers)
            elif self.gpu_layers.value() == 0:
                self.gpu_layers.setValue(self.gpu_layers.maximum())   # where a first edit starts: all of them
            self.cpu_moe.setValue(choice.cpu_moe or 0)
            self.kv_on_device.setChecked(choice.kv_on_device)
        if self.devices.findData(choice.devices) < 0:                 # a count only the command line offers
            self.devices.addItem(str(choice.devices), choice.devices)
        self.devices.setCurrentIndex(self.devices.findData(choice.devices))
        self.parallel.setCurrentIndex(max(self.parallel.findData(choice.parallel), 0))
        for w in widgets:
            w.blockSignals(False)
        self._enable()

    def _enable(self) -> None:
        """Which controls apply: the one-device flags on one device (experts only for a
        mixture-of-experts model), the device count with an interconnect, the mode with several."""
        one = self.devices.currentData() == 1
        machine, model = self._state.machine, self._state.model
        self.gpu_auto.setEnabled(one)
        self.gpu_layers.setEnabled(one and not self.gpu_auto.isChecked())
        self.cpu_moe.setEnabled(one and model.is_moe)
        self.kv_on_device.setEnabled(one)
        linked = machine.has_interconnect or self._state.placement.link_bandwidth is not None
        self.devices.setEnabled(linked)
        self.parallel.setEnabled(not one)
        notes = []
        if not model.is_moe:
            notes.append(f"{model.name} has no routed experts to keep on the CPU.")
        if not linked:
            notes.append(f"{machine.name} states no interconnect between devices: one device.")
        elif not one:
            notes.append(f"{self.devices.currentData()} devices over {machine.interconnect_name or 'the link'}: "
                         "the numbers panel shows their estimate; the charts still draw one device.")
        self.note.setText(" ".join(notes))
        self.note.setVisible(bool(notes))

    def _on_state_placement_changed(self, choice: PlacementChoice) -> None:
        self._show(choice)

    def _on_state_model_changed(self, model: ModelSpec) -> None:
        self._fit_ranges(model)
        self._show(self._state.placement)

    def _on_state_machine_changed(self, _machine: MachineProfile) -> None:
        self._enable()

    # -- controls -> state ------------------------------------------------------------------
    def choice(self) -> PlacementChoice:
        """The choice the enabled controls make."""
        devices = int(self.devices.currentData())
        link = self._state.placement.link_bandwidth
        if devices > 1:
            return PlacementChoice(devices=devices, parallel=str(self.parallel.currentData()), link_bandwidth=link)
        experts = self.cpu_moe.value() if self._state.model.is_moe else 0
        return PlacementChoice(gpu_layers=None if self.gpu_auto.isChecked() else self.gpu_layers.value(),
                               cpu_moe=experts or None, kv_on_device=self.kv_on_device.isChecked(),
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

    def _on_gpu_auto_toggled(self, _checked: bool) -> None:
        self._apply()

    def _on_gpu_layers_value_changed(self, _value: int) -> None:
        self._apply()

    def _on_cpu_moe_value_changed(self, _value: int) -> None:
        self._apply()

    def _on_kv_on_device_toggled(self, _checked: bool) -> None:
        self._apply()

    def _on_devices_current_index_changed(self, _index: int) -> None:
        self._apply()

    def _on_parallel_current_index_changed(self, _index: int) -> None:
        self._apply()
