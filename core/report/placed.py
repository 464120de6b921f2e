"""The headline of a placed model: the placement (chosen or given), its memory bill, the request
figures for it (or for N devices), and what to change when it does not fit. ``rooflab
predict``, ``rooflab compare`` and the window's Compare view all read it from here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rooflab.core.predict.autofit import Fit, choose, placement_for_offload, suggestions
from rooflab.core.predict.choice import PlacementChoice
from rooflab.core.predict.offload import placed_request
from rooflab.core.predict.parallel import (
    DEVICE_COUNTS,
    Parallel,
    ParallelEstimate,
    Scaling,
    mode_text,
    parallel_estimate,
    parallel_request,
    scaling,
)
from rooflab.core.predict.placement import Placement
from rooflab.core.predict.request import RequestEstimate
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

HOW = ("auto", "manual", "offload")     # who chose: auto-fit, the user's flags, --offload's share


@dataclass(frozen=True, kw_only=True)
class PlacedSummary:
    """The headline figures of (model, machine, workload) as placed. ``estimate`` is the
    request on the placement (on ``parallel``'s devices when there are several: then ``fit``
    describes one device and ``parallel_estimate`` carries the link's time)."""

    fit: Fit
    how: str
    estimate: RequestEstimate
    parallel: ParallelEstimate | None = None
    scaling: Scaling | None = None
    suggestions: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return self.parallel.fits if self.parallel is not None else self.fit.fits

    @property
    def placement(self) -> Placement:
        return self.fit.placement

    @property
    def runs_on(self) -> Placement | None:
        """The placement the headline figures stand on, for figures priced beside them (the
        expected ones, the decode chart): None when nothing fits, or on several devices."""
        return self.placement if self.fits and self.parallel is None else None

    @property
    def drawn_on(self) -> Placement | None:
        """The placement the charts draw: the headline's on one device, fitting or not (a
        placement that does not fit is drawn as it would run, its overflow on the memory
        chart); None on several devices, whose charts show one device."""
        return self.placement if self.parallel is None else None

    @property
    def stands_on(self) -> Placement | Parallel | None:
        """Where the headline's request runs, for expected figures priced beside it: the
        placement, or the devices sharing the model; None when nothing fits."""
        if not self.fits:
            return None
        return self.parallel.parallel if self.parallel is not None else self.placement

    def headline(self, spec: ModelSpec, machine: MachineProfile) -> str:
        """One line: how the model sits and whether it runs at all."""
        if self.parallel is not None:
            p = self.parallel.parallel
            state = "fits" if self.fits else "does NOT fit"
            return (f"{state} on {p.devices} x {machine.name} ({mode_text(p.mode)} over "
                    f"{p.link_name or 'the link'}, {p.link_bandwidth / 1e9:,.0f} GB/s per direction): "
                    f"{self.parallel.memory.used / 1e9:,.1f} of {self.parallel.memory.capacity / 1e9:,.1f} GB "
                    "per device")
        who = {"auto": "chosen by rooflab (auto-fit)", "manual": "as given",
               "offload": "from the share of the weights offloaded"}[self.how]
        if self.how == "auto" and self.fit.kept:
            who += f" around {self.fit.kept}"
        line = self.fit.describe(spec, machine)
        if self.fit.fits:
            line += f" ({self.placement.flags()})"
        return f"{line}; placement {who}"


def placed_summary(spec: ModelSpec, machine: MachineProfile, workload: Workload, *,
                   placement: Placement | Fit | None = None, parallel: Parallel | None = None,
                   alternatives: Mapping[str, ModelSpec] | None = None,
                   scaling_counts: tuple[int, ...] = DEVICE_COUNTS) -> PlacedSummary:
    """The placed headline: ``placement`` as given (a ``Fit``, ``PlacementChoice.fit``'s, as it
    is: "auto" when rooflab chose its -ngl), else the workload's ``offload_fraction``
    as layers when set, else auto-fit's choice; on ``parallel``'s devices when more than one
    (every layer on the devices, shared as its mode says, and the scaling over
    ``scaling_counts``)."""
    if parallel is not None and parallel.devices > 1:
        estimate = parallel_estimate(spec, machine, workload, parallel)
        par = parallel_request(spec, machine, workload, parallel)
        grow = scaling(spec, machine, workload, parallel.mode, scaling_counts, parallel.link_bandwidth,
                       parallel.link_latency)
        fit = choose(spec, machine, workload, Placement.all_on_device(spec))
        return PlacedSummary(fit=fit, how="manual", estimate=estimate, parallel=par, scaling=grow)
    how = "manual"
    if placement is None and workload.offload_fraction > 0:
        placement, how = placement_for_offload(spec, machine, workload.offload_fraction), "offload"
    elif placement is None:
        how = "auto"
    fit = choose(spec, machine, workload, placement)
    how = "auto" if fit.chosen else how
    return PlacedSummary(fit=fit, how=how, estimate=placed_request(spec, machine, workload, fit.placement),
                         suggestions=suggestions(spec, machine, workload, fit, alternatives))


def placed_as_chosen(spec: ModelSpec, machine: MachineProfile, workload: Workload, choice: PlacementChoice, *,
                     alternatives: Mapping[str, ModelSpec] | None = None) -> PlacedSummary:
    """The placed headline ``choice`` asks for: a placement by hand, -ngl fitted around the
    user's other flags (``PlacementChoice.fit``), several devices, or (nothing chosen) auto-fit
    or the workload's offload share. The window's headline, a Compare row and ``rooflab
    predict`` all place a model through here."""
    return placed_summary(spec, machine, workload, placement=choice.fit(spec, machine, workload),
                          parallel=choice.parallel_on(machine), alternatives=alternatives)
