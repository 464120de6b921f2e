"""The Machine tab: preset picker, editable peaks (GB/s, TFLOP/s per dtype, GB), a second
memory tier, efficiency factors, user profiles (saved atomically in the config folder) and the
machine's balance.

Fields show display units (GB, GB/s, TFLOP/s, ms); ``rooflab.core.report.units`` converts to the
SI values the MachineProfile holds. An edited preset loses its key: it is "your" machine
until saved as a profile."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from rooflab.core.errors import RooflabError
from rooflab.core.io import presets
from rooflab.core.predict.offload_terms import DEFAULT_HOST_FLOPS
from rooflab.core.predict.roofline import balance
from rooflab.core.report import units
from rooflab.core.values.machine import MachineProfile
from rooflab.gui.state.app_state import AppState
from rooflab.gui.widgets.controls import error_label
from rooflab.gui.widgets.typed import CheckedDoubleSpin

_USER = "user:"
_PRESET = "preset:"
MIN_FIELD_WIDTH = 80         # px: a field's least width, whatever its range


def _spin(low: float, high: float, decimals: int, suffix: str, tip: str) -> CheckedDoubleSpin:
    box = CheckedDoubleSpin()           # what it cannot take is refused aloud (``_on_box_refused``)
    box.setDecimals(decimals)
    # a positive minimum below the last shown decimal would display (and send) 0, which the
    # machine rejects: the smallest value is one step of the last decimal
    box.setRange(max(low, 10.0 ** -decimals) if low > 0 else low, high)
    box.setSuffix(suffix)
    box.setToolTip(tip)
    box.setKeyboardTracking(False)     # one change per finished edit, not per keystroke
    box.setGroupSeparatorShown(True)
    # as narrow as the pane: the range's widest text (1,000,000.000 TFLOP/s) made the tab wider
    # than its pane at 1280 x 720
    box.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
    box.setMinimumWidth(MIN_FIELD_WIDTH)
    return box


def breakable(text: str) -> str:
    """``text`` with a place to break after each slash and underscore (a path or a URL in a
    source note is one long word, and a label as wide as it widened the tab)."""
    return text.replace("/", "/\u200b").replace("_", "_\u200b")


class MachinePanel(QWidget):
    message = Signal(str, str)           # text, level ("error", "info")

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._state = state
        self.picker = QComboBox()
        self.picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.picker.setMinimumContentsLength(12)
        self.picker.setToolTip("Built-in machines (with the source of each figure) and your saved profiles.")
        self.name = QLineEdit()
        self.bandwidth = _spin(0.001, 1e6, 1, " GB/s", "B: bytes per second the memory that holds the weights "
                               "delivers. Decode reads every active weight once per token, so B caps tokens/s.")
        self.memory = _spin(0.001, 1e6, 2, " GB", "Memory that can hold the model: weights + KV cache must fit.")
        self.flops: dict[str, QDoubleSpinBox] = {}
        self.default_dtype = QComboBox()
        self.default_dtype.setToolTip("The dtype the model computes in: its peak is C in every formula. On a CPU "
                                      "int8 is the dot-product path llama.cpp's quantized multiplies run on, "
                                      "4x the FP32 FMA rate (8x on Arm cores with i8mm).")
        self.offload_name = QLineEdit()
        self.offload_bandwidth = _spin(0.0, 1e6, 1, " GB/s", "Bandwidth of the second, slower memory "
                                       "(system RAM behind a GPU; 0 = none). Offloaded bytes move at this rate.")
        self.offload_memory = _spin(0.0, 1e6, 2, " GB", "Size of the second memory tier.")
        self.offload_flops = _spin(0.0, 1e6, 3, " TFLOP/s", "Peak FLOP/s of the host CPU that computes the layers "
                                   "kept in the second memory (0 = not stated: a desktop CPU's 1.024 TFLOP/s "
                                   "is assumed behind a GPU).")
        self.offload_flops.setSpecialValueText(                                # shown at 0, with its unit
            f"not stated ({units.fmt(DEFAULT_HOST_FLOPS, 'FLOP/s', 4)} assumed)")
        self.eff_bandwidth = _spin(0.01, 100.0, 2, " × B", "Share of the peak bandwidth a real engine reaches "
                                   "(1.0 = the ceiling). Applied to B.")
        self.eff_compute = _spin(0.01, 100.0, 2, " × C",
                                 "Share of the peak FLOP/s a real engine reaches. Applied to C.")
        self.step_overhead = _spin(0.0, 59_999.0, 3, " ms", "Fixed time added to every forward pass "
                                   "(kernel launches, synchronisation, Python).")
        self.kv_read_factor = _spin(0.01, 100.0, 2, " ×", "Cache bytes moved per byte attention must read "
                                    "(2.0 for an engine that copies its cache each step).")
        self.balance = QLabel()
        self.balance.setWordWrap(True)
        self.sources = QLabel()
        self.sources.setWordWrap(True)
        self.sources.setOpenExternalLinks(False)
        self.error = error_label()
        self.save_button = QPushButton("Save as profile…")
        self.load_button = QPushButton("Load file…")
        self.delete_button = QPushButton("Delete profile")
        self._build()
        self.refresh_picker()
        self._show(state.machine)
        state.machine_changed.connect(self._on_state_machine_changed)

    def _build(self) -> None:
        top = QFormLayout()
        top.addRow("Machine", self.picker)
        top.addRow("Name", self.name)
        peaks = QGroupBox("Peaks")
        self._peaks_form = QFormLayout(peaks)
        self._peaks_form.addRow("Bandwidth", self.bandwidth)
        self._peaks_form.addRow("Memory", self.memory)
        self._peaks_form.addRow("Compute dtype", self.default_dtype)
        self._peaks_first_flops_row = self._peaks_form.rowCount()
        tier = QGroupBox("Second memory tier (offload)")
        form = QFormLayout(tier)
        form.addRow("Name", self.offload_name)
        form.addRow("Bandwidth", self.offload_bandwidth)
        form.addRow("Size", self.offload_memory)
        # its words ("not stated (1.024 TFLOP/s assumed)") want the whole width: under its name
        form.addRow(QLabel("Host compute"))
        form.addRow(self.offload_flops)
        eff = QGroupBox("Efficiency (1.0 = ceiling)")
        form = QFormLayout(eff)
        form.addRow("Bandwidth", self.eff_bandwidth)
        form.addRow("Compute", self.eff_compute)
        form.addRow("Per-step overhead", self.step_overhead)
        form.addRow("Cache-read factor", self.kv_read_factor)
        buttons = QGridLayout()           # two a row: three side by side were wider than the pane
        for i, b in enumerate((self.save_button, self.load_button, self.delete_button)):
            buttons.addWidget(b, i // 2, i % 2)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.balance)
        layout.addWidget(peaks)
        layout.addWidget(tier)
        layout.addWidget(eff)
        layout.addLayout(buttons)
        layout.addWidget(self.error)
        layout.addWidget(self.sources)
        layout.addStretch(1)
        self.picker.activated.connect(self._on_picker_activated)
        self.name.editingFinished.connect(self._on_field_edited)
        self.default_dtype.activated.connect(self._on_field_edited)
        self.offload_name.editingFinished.connect(self._on_field_edited)
        for box in (self.bandwidth, self.memory, self.offload_bandwidth, self.offload_memory, self.offload_flops,
                    self.eff_bandwidth, self.eff_compute, self.step_overhead, self.kv_read_factor):
            box.valueChanged.connect(self._on_field_edited)
            box.refused.connect(self._on_box_refused)
        self.save_button.clicked.connect(self._on_save_button_clicked)
        self.load_button.clicked.connect(self._on_load_button_clicked)
        self.delete_button.clicked.connect(self._on_delete_button_clicked)

    # -- picker -----------------------------------------------------------------------------
    def refresh_picker(self) -> None:
        """Presets, then the user's profiles; selects the machine on screen when listed."""
        self.picker.blockSignals(True)
        self.picker.clear()
        try:
            for m in presets.list_presets():
                self.picker.addItem(m.name, _PRESET + m.key)
            measured = presets.load_measured_machine()
            if measured is not None:        # "this machine, measured": load_machine("measured")
                self.picker.addItem(measured.name, _PRESET + presets.MEASURED_KEY)
            users = presets.list_user_profiles()
        except RooflabError as exc:
            self.message.emit(str(exc), "error")
            users = []
        if users:
            self.picker.insertSeparator(self.picker.count())
            for m in users:
                self.picker.addItem(f"{m.name} (my profile)", _USER + m.key)
        self.picker.blockSignals(False)
        self._select_current()

    def _select_current(self) -> None:
        """Point the picker at the machine on screen, or at an "(edited, unsaved)" entry."""
        m = self._state.machine
        self.picker.blockSignals(True)
        edited = self.picker.findData("edited")
        if edited >= 0:
            self.picker.removeItem(edited)
        index = -1
        for prefix in (_PRESET, _USER):
            if index < 0 and m.key:
                index = self.picker.findData(prefix + m.key)
        if index < 0:
            self.picker.addItem(f"{m.name} (edited, unsaved)", "edited")
            index = self.picker.count() - 1
        self.picker.setCurrentIndex(index)
        self.picker.blockSignals(False)
        self.delete_button.setEnabled(str(self.picker.currentData()).startswith(_USER))

    def _on_picker_activated(self, index: int) -> None:
        data = str(self.picker.itemData(index) or "")
        if not data or data == "edited":
            return
        try:
            machine = presets.load_machine(data.split(":", 1)[1])
        except RooflabError as exc:
            self.message.emit(str(exc), "error")
            self._select_current()
            return
        self._state.set_machine(machine)

    # -- state -> fields --------------------------------------------------------------------
    def _show(self, m: MachineProfile) -> None:
        widgets = [self.name, self.bandwidth, self.memory, self.default_dtype, self.offload_name,
                   self.offload_bandwidth, self.offload_memory, self.offload_flops, self.eff_bandwidth,
                   self.eff_compute, self.step_overhead, self.kv_read_factor]
        for w in widgets:
            w.blockSignals(True)
        self.name.setText(m.name)
        self.bandwidth.setValue(units.gigabytes(m.bandwidth))
        self.memory.setValue(units.gigabytes(m.memory))
        self._show_flops(m)
        self.offload_name.setText(m.offload_name)
        self.offload_bandwidth.setValue(units.gigabytes(m.offload_bandwidth))
        self.offload_memory.setValue(units.gigabytes(m.offload_memory))
        self.offload_flops.setValue(m.offload_flops / 1e12)
        eff = m.efficiency
        self.eff_bandwidth.setValue(eff.bandwidth)
        self.eff_compute.setValue(eff.compute)
        self.step_overhead.setValue(eff.step_overhead * 1e3)
        self.kv_read_factor.setValue(eff.kv_read_factor)
        for w in widgets:
            w.blockSignals(False)
        self.balance.setText(
            f"<b>Balance C / B = {units.fmt(balance(m), 'FLOP/byte')}</b> ({m.default_dtype}): work with fewer "
            "FLOPs per byte than this is bandwidth-bound on this machine.")
        self.balance.setToolTip("Machine balance = peak FLOP/s ÷ bandwidth: the intensity where the roofline bends.")
        lines = [f"<b>{k}</b>: {breakable(v)}" for k, v in m.sources.items()]
        if m.notes:
            lines.append(breakable(m.notes))
        self.sources.setText("<br>".join(lines))
        self._select_current()

    def _show_flops(self, m: MachineProfile) -> None:
        """One TFLOP/s field per dtype the machine lists (rows rebuilt when the set changes)."""
        if list(self.flops) != list(m.peak_flops):
            for box in self.flops.values():
                self._peaks_form.removeRow(box)
            self.flops = {}
            for dtype in m.peak_flops:
                box = _spin(0.001, 1e7, 3, " TFLOP/s", f"C at {dtype}: dense peak FLOP/s (no sparsity). "
                            "Prefill and large batches are bounded by it.")
                box.valueChanged.connect(self._on_field_edited)
                box.refused.connect(self._on_box_refused)
                self.flops[dtype] = box
                self._peaks_form.addRow(f"Peak {dtype}", box)
            self.default_dtype.clear()
            self.default_dtype.addItems(list(m.peak_flops))
        for dtype, box in self.flops.items():
            box.blockSignals(True)
            box.setValue(m.peak_flops[dtype] / 1e12)
            box.blockSignals(False)
        self.default_dtype.setCurrentText(m.default_dtype)

    def _on_state_machine_changed(self, machine: MachineProfile) -> None:
        self._show(machine)

    # -- fields -> state --------------------------------------------------------------------
    def _change_for(self, widget: object) -> dict[str, object]:
        """The MachineProfile fields one edited widget sets (only that one: the others keep
        their exact values, not the rounded ones their fields show)."""
        m = self._state.machine
        eff = {self.eff_bandwidth: "bandwidth", self.eff_compute: "compute",
               self.kv_read_factor: "kv_read_factor"}
        if widget is self.name:
            return {"name": self.name.text().strip() or m.name}
        if widget is self.bandwidth:
            return {"bandwidth": units.from_gigabytes(self.bandwidth.value())}
        if widget is self.memory:
            return {"memory": units.from_gigabytes(self.memory.value())}
        if widget is self.default_dtype:
            return {"default_dtype": self.default_dtype.currentText()}
        if widget is self.offload_name:
            return {"offload_name": self.offload_name.text().strip()}
        if widget is self.offload_bandwidth:
            return {"offload_bandwidth": units.from_gigabytes(self.offload_bandwidth.value())}
        if widget is self.offload_memory:
            return {"offload_memory": units.from_gigabytes(self.offload_memory.value())}
        if widget is self.offload_flops:
            return {"offload_flops": self.offload_flops.value() * 1e12}
        if widget in eff:
            changed: dict[str, Any] = {eff[widget]: widget.value()}
            return {"efficiency": dataclasses.replace(m.efficiency, **changed)}
        if widget is self.step_overhead:
            return {"efficiency": dataclasses.replace(m.efficiency, step_overhead=self.step_overhead.value() / 1e3)}
        for dtype, box in self.flops.items():
            if widget is box:
                return {"peak_flops": m.peaks_with(dtype, box.value() * 1e12)}
        return {}

    def edit_field(self, widget: object) -> None:
        """Apply what ``widget`` now shows to the machine (what each field's signal does)."""
        changes = self._change_for(widget)
        if not changes:
            return
        m = self._state.machine
        if all(getattr(m, k) == v for k, v in changes.items()):
            return
        try:
            self._state.update_machine(key="", **changes)
        except RooflabError as exc:
            self.error.setText(str(exc))
            self.error.show()
            self._show(m)           # the fields go back to the machine that is still in use
            return
        self.error.hide()

    def _on_box_refused(self, text: str) -> None:
        self.error.setText(text)
        self.error.show()

    def _on_field_edited(self, *_args: object) -> None:
        self.edit_field(self.sender())

    # -- profiles ---------------------------------------------------------------------------
    def save_profile(self, name: str) -> Path:
        """Save the machine on screen as a user profile called ``name`` and select it."""
        machine = dataclasses.replace(self._state.machine, name=name)
        # keyed by the new name, never by the machine on screen: that key is a preset's (which
        # would shadow the profile) or another profile's (which would be overwritten)
        path = presets.save_user_profile(machine, key=name)
        saved = dataclasses.replace(machine, key=path.stem)
        self.refresh_picker()
        self._state.set_machine(saved)
        self._select_current()
        self.message.emit(f"Saved machine profile “{name}” to {path}.", "info")
        return path

    def _on_save_button_clicked(self) -> None:
        name, ok = QInputDialog.getText(self, "Save machine profile", "Profile name:",
                                        text=self._state.machine.name)
        if ok and name.strip():
            if presets.user_profile_exists(name.strip()) and QMessageBox.question(
                    self, "Replace profile", f"A profile called “{name.strip()}” exists. Replace it?",
            ) != QMessageBox.StandardButton.Yes:
                return
            try:
                self.save_profile(name.strip())
            except (RooflabError, OSError) as exc:
                self.message.emit(f"Could not save the profile: {exc}", "error")

    def _on_load_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Load machine profile", "", "Machine profile (*.json)")
        if path:
            try:
                self._state.set_machine(presets.load_machine(path))
            except RooflabError as exc:
                self.message.emit(str(exc), "error")

    def delete_profile(self, key: str) -> None:
        presets.delete_user_profile(key)
        if self._state.machine.key == key:
            # the machine stays on screen as an unsaved one: a key naming no file would make the
            # next start say the last machine could not be restored
            self._state.update_machine(key="")
        self.refresh_picker()
        self.message.emit("Deleted the machine profile.", "info")

    def _on_delete_button_clicked(self) -> None:
        data = str(self.picker.currentData() or "")
        if not data.startswith(_USER):
            return
        answer = QMessageBox.question(self, "Delete profile", f"Delete the profile “{self.picker.currentText()}”?")
        if answer == QMessageBox.StandardButton.Yes:
            try:
                self.delete_profile(data[len(_USER):])
            except RooflabError as exc:
                self.message.emit(str(exc), "error")

