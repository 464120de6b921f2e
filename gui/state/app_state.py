"""The one state object of the window: the model, machine, workload and placement choice on
screen and the series pinned for comparison. Every change goes through a setter and emits
signals; nothing here computes a prediction (see ``recompute``)."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Signal

from rooflab.core.predict.autofit import placement_for_offload
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.report.chart_types import Scenario
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload, runnable


@dataclass(frozen=True, slots=True)
class Pinned:
    """A pinned series: its scenario and a stable id (which keeps its colour)."""

    pin_id: int
    scenario: Scenario = field(repr=False)     # a ModelSpec's repr lists every tensor

    @property
    def label(self) -> str:
        return self.scenario.label


class AppState(QObject):
    model_changed = Signal(object)       # ModelSpec
    machine_changed = Signal(object)     # MachineProfile
    workload_changed = Signal(object)    # Workload
    placement_changed = Signal(object)   # PlacementChoice
    pinned_changed = Signal()
    changed = Signal()                   # any of the above

    def __init__(self, model: ModelSpec, machine: MachineProfile, workload: Workload,
                 model_ref: str = "", parent: QObject | None = None, *, model_weights: str = "",
                 placement: PlacementChoice = AUTO) -> None:
        super().__init__(parent)
        self._model, self._machine = model, machine
        self._workload, placement = self._fold_offload(workload, placement)
        self._placement = self._fit_placement(placement, model, machine)
        self.model_ref = model_ref or model.source
        self.model_weights = model_weights       # the weight format it was opened with ("" = its own)
        self._pinned: list[Pinned] = []
        self._ids = itertools.count(1)

    # -- reading ----------------------------------------------------------------------------
    @property
    def model(self) -> ModelSpec:
        return self._model

    @property
    def machine(self) -> MachineProfile:
        return self._machine

    @property
    def workload(self) -> Workload:
        return self._workload

    @property
    def placement(self) -> PlacementChoice:
        return self._placement

    @property
    def scenario(self) -> Scenario:
        return Scenario(model=self._model, machine=self._machine, workload=self._workload,
                        placement=self._placement)

    @property
    def pinned(self) -> tuple[Pinned, ...]:
        return tuple(self._pinned)

    # -- changing ---------------------------------------------------------------------------
    def set_model(self, model: ModelSpec, ref: str = "", weights: str = "") -> None:
        self._model = model
        self.model_ref = ref or model.source
        self.model_weights = weights
        self.model_changed.emit(model)
        self._refit_placement()
        self.changed.emit()

    def set_machine(self, machine: MachineProfile) -> None:
        if machine == self._machine:
            return
        self._machine = machine
        self.machine_changed.emit(machine)
        self._refit_placement()
        self.changed.emit()

    def set_workload(self, workload: Workload) -> None:
        workload, placement = self._fold_offload(workload, self._placement)
        placement = self._fit_placement(placement, self._model, self._machine)
        if workload == self._workload and placement == self._placement:
            return
        if placement != self._placement:
            self._placement = placement
            self.placement_changed.emit(placement)
        if workload != self._workload:
            self._workload = workload
            self.workload_changed.emit(workload)
        self.changed.emit()

    def update_workload(self, **changes: object) -> None:
        """Change workload fields; raises SpecError (naming the field) for a bad value, or for
        settings llama.cpp refuses (``values.workload.runnable``)."""
        self.set_workload(runnable(dataclasses.replace(self._workload, **changes)))  # type: ignore[arg-type]

    def set_placement(self, choice: PlacementChoice) -> None:
        """Place the model by hand (llama.cpp's flags) or on several devices; ``AUTO``: rooflab
        places it when the device cannot hold it whole."""
        choice = self._fit_placement(choice, self._model, self._machine)
        if choice == self._placement:
            return
        self._placement = choice
        self.placement_changed.emit(choice)
        self.changed.emit()

    def update_placement(self, **changes: object) -> None:
        """Change placement fields; raises SpecError (naming the field) for a bad value."""
        self.set_placement(dataclasses.replace(self._placement, **changes))  # type: ignore[arg-type]

    def update_machine(self, **changes: object) -> None:
        """Change machine fields; raises SpecError for a bad value. (An edit that makes the
        machine no longer its preset should pass ``key=""``, as the Machine tab does.)"""
        self.set_machine(dataclasses.replace(self._machine, **changes))  # type: ignore[arg-type]

    def pin_current(self) -> Pinned | None:
        """Pin what is on screen; None (no change) when an identical series is already pinned."""
        return self.pin(self.scenario)

    def pin(self, sc: Scenario) -> Pinned | None:
        """Pin ``sc`` (what is on screen, or the Compare table's model on another machine): every
        chart draws it and the Compare table lists it. None (no change) when an identical series
        is already pinned."""
        for p in self._pinned:
            if p.scenario.model is sc.model and p.scenario.machine == sc.machine and \
                    p.scenario.workload == sc.workload and p.scenario.placement == sc.placement:
                return None
        pinned = Pinned(pin_id=next(self._ids), scenario=sc)
        self._pinned.append(pinned)
        self.pinned_changed.emit()
        self.changed.emit()
        return pinned

    def unpin(self, pin_id: int) -> None:
        before = len(self._pinned)
        self._pinned = [p for p in self._pinned if p.pin_id != pin_id]
        if len(self._pinned) != before:
            self.pinned_changed.emit()
            self.changed.emit()

    def clear_pinned(self) -> None:
        if self._pinned:
            self._pinned.clear()
            self.pinned_changed.emit()
            self.changed.emit()

    def _refit_placement(self) -> None:
        """The choice as it applies to a new model or machine (emits ``placement_changed`` when
        that changes it; the caller emits ``changed``)."""
        fitted = self._fit_placement(self._placement, self._model, self._machine)
        if fitted != self._placement:
            self._placement = fitted
            self.placement_changed.emit(fitted)

    @staticmethod
    def _fit_placement(choice: PlacementChoice, model: ModelSpec, machine: MachineProfile) -> PlacementChoice:
        """The choice as llama.cpp applies its flags to ``model``: -ngl at most layers + 1,
        --n-cpu-moe at most layers and dropped for a dense model (no routed experts); and one
        device on a machine that states no interconnect (nothing to share the model over)."""
        changes: dict[str, object] = {}
        if choice.gpu_layers is not None and choice.gpu_layers > model.layers + 1:
            changes["gpu_layers"] = model.layers + 1
        if choice.cpu_moe is not None and (not model.is_moe or choice.cpu_moe > model.layers):
            changes["cpu_moe"] = min(choice.cpu_moe, model.layers) if model.is_moe else None
        if choice.devices > 1 and choice.link_bandwidth is None and not machine.has_interconnect:
            changes["devices"] = 1
        return dataclasses.replace(choice, **changes) if changes else choice  # type: ignore[arg-type]

    def _fold_offload(self, workload: Workload, choice: PlacementChoice) -> tuple[Workload, PlacementChoice]:
        """A share of the weights offloaded (``rooflab predict --offload``, or a workload saved
        before the window had no share of its own) as the placement it means: the -ngl that
        keeps that share in host memory (``placement_for_offload``), unless a placement is
        given; without a second memory, nothing moves. The workload keeps no share."""
        if not workload.offload_fraction:
            return workload, choice
        if choice.is_auto and self._machine.has_offload:
            layers = placement_for_offload(self._model, self._machine, workload.offload_fraction).gpu_layers
            choice = dataclasses.replace(choice, gpu_layers=layers)
        return dataclasses.replace(workload, offload_fraction=0.0), choice
