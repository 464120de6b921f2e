"""The headline of a placed model: the placement (chosen or given), its memory bill, the request
figures for it (or for N devices), and what to change when it does not fit. ``rooflab
predict``, ``rooflab compare`` and the window's Compare view all read it from here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from rooflab.core.errors import SpecError
from rooflab.core.predict.autofit import Fit, choose, fit_placement, placement_for_offload, suggestions
from rooflab.core.predict.choice import PlacementChoice
from rooflab.core.predict.offload import (
    placed_batch_crossover,
    placed_decode,
    placed_prefill,
    placed_prefill_crossover,
    placed_request,
)
from rooflab.core.predict.parallel import (
    DEVICE_COUNTS,
    Parallel,
    ParallelEstimate,
    Scaling,
    device_memory,
    mode_text,
    parallel_estimate,
    parallel_request,
    scaling,
)
from rooflab.core.predict.passes import crossovers_on
from rooflab.core.predict.placement import Placement, describe, has_host_tier
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
        """Whether it runs: the devices' bills (on several devices sharing every layer), else
        the placement's, host memory included."""
        if self.parallel is not None and self._shares_every_layer:
            return self.parallel.fits
        return self.fit.fits

    @property
    def _shares_every_layer(self) -> bool:
        """Several devices with every layer on them (``parallel``'s own pricing), as against a
        layer split with host memory (``fit.placement.devices`` > 1)."""
        return self.parallel is not None and self.fit.placement.devices == 1

    @property
    def placement(self) -> Placement:
        return self.fit.placement

    @property
    def runs_on(self) -> Placement | None:
        """The placement the headline figures stand on, for figures priced beside them (the
        expected ones, the decode chart): None when nothing fits, or on several devices."""
        return self.placement if self.fits and self.parallel is None else None

    @property
    def priced_on(self) -> Placement | Parallel:
        """Where the figures priced beside the headline's are (``rooflab predict``'s placed rows
        and their expected twins): the placement, fitting or not (on several devices with host
        memory too), or the devices sharing every layer."""
        return self.parallel.parallel if self.parallel is not None and self._shares_every_layer else self.placement

    @property
    def stands_on(self) -> Placement | Parallel | None:
        """Where the headline's request runs, for expected figures priced beside it: the
        placement, or the devices sharing the model; None when nothing fits."""
        if not self.fits:
            return None
        return self.priced_on

    def headline(self, spec: ModelSpec, machine: MachineProfile) -> str:
        """One line: how the model sits and whether it runs at all."""
        if self.parallel is not None:
            p = self.parallel.parallel
            state = "fits" if self.fits else "does NOT fit"
            head = (f"{state} on {p.devices} x {machine.name} ({mode_text(p.mode)} over "
                    f"{p.link_name or 'the link'}, {p.link_bandwidth / 1e9:,.0f} GB/s per direction)")
            use = self.parallel.memory
            if self._shares_every_layer:
                return f"{head}: {use.used / 1e9:,.1f} of {use.capacity / 1e9:,.1f} GB per device"
            host = self.fit.memory.host
            return (f"{head} with {describe(spec, self.placement, machine)} ({self.placement.flags()}): "
                    f"{use.used / 1e9:,.1f} of {use.capacity / 1e9:,.1f} GB on the fullest device, "
                    f"{host.used / 1e9:,.1f} of {host.capacity / 1e9:,.1f} GB of host memory")
        who = {"auto": "chosen by rooflab (auto-fit)", "manual": "as given",
               "offload": "from the share of the weights offloaded"}[self.how]
        if self.how == "auto" and self.fit.kept:
            who += f" around {self.fit.kept}"
        line = self.fit.describe(spec, machine)
        if self.fit.fits:
            line += f" ({self.placement.flags()})"
        return f"{line}; placement {who}"


def placed_crossovers(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                      placed: PlacedSummary) -> tuple[float, float] | None:
    """(n*, b*) as placed (inf: never reached), where the headline's request runs
    (``PlacedSummary.stands_on``: the placement, on several devices too, or the devices sharing
    every layer), at the workload's batch and context (b* at context + prompt). None when it
    runs nowhere: a placement that does not fit, whose figures cannot be reached. The one rule
    ``rooflab predict``'s JSON, the report's summary.csv, the window's numbers and its charts
    all take their placed crossovers from."""
    on = placed.stands_on
    if on is None:
        return None
    if isinstance(on, Parallel):
        return crossovers_on(spec, machine, workload, on)
    priced = machine_as_placed(machine, placed)
    return (placed_prefill_crossover(spec, priced, workload, on),
            placed_batch_crossover(spec, priced, workload, on, context=workload.context + workload.prompt))


def machine_as_placed(machine: MachineProfile, placed: PlacedSummary | None) -> MachineProfile:
    """``machine`` with the link the placement asked for between its devices (a layer split with
    host memory is priced on it, ``_layer_split_with_host``); ``machine`` itself otherwise."""
    if placed is None or placed.parallel is None or placed.fit.placement.devices == 1:
        return machine
    p = placed.parallel.parallel
    return on_link(machine, p)


def on_link(machine: MachineProfile, parallel: Parallel) -> MachineProfile:
    """``machine`` whose interconnect is ``parallel``'s link (its bandwidth, name and kind, joining
    any number of devices): how a layer split with host memory prices its hops (``offload``)."""
    return dataclasses.replace(machine, interconnect_bandwidth=parallel.link_bandwidth,
                               interconnect_name=parallel.link_name, interconnect_kind=parallel.link.kind,
                               interconnect_devices=0)


def placed_summary(spec: ModelSpec, machine: MachineProfile, workload: Workload, *,
                   placement: Placement | Fit | None = None, parallel: Parallel | None = None,
                   alternatives: Mapping[str, ModelSpec] | None = None,
                   scaling_counts: tuple[int, ...] = DEVICE_COUNTS, suggest: bool = True) -> PlacedSummary:
    """The placed headline: ``placement`` as given (a ``Fit``, ``PlacementChoice.fit``'s, as it
    is: "auto" when rooflab chose its -ngl), else the workload's ``offload_fraction``
    as layers when set, else auto-fit's choice; on ``parallel``'s devices when more than one
    (every layer on the devices, shared as its mode says, and the scaling over
    ``scaling_counts``). A layer split that is given llama.cpp's placement flags, or whose
    devices cannot hold every layer, is placed as llama.cpp places it: the devices share the
    device's layers and the rest sits in host memory (``layer_split``)."""
    if parallel is not None and parallel.devices > 1:
        given = placement.placement if isinstance(placement, Fit) else placement
        if parallel.mode == "layer" and (given is not None or _needs_the_host(spec, machine, workload, parallel)):
            return _layer_split_with_host(spec, machine, workload, parallel, placement, scaling_counts)
        estimate = parallel_estimate(spec, machine, workload, parallel)
        par = parallel_request(spec, machine, workload, parallel)
        grow = scaling(spec, machine, workload, parallel.mode, scaling_counts, _given_link(machine, parallel))
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
                         suggestions=suggestions(spec, machine, workload, fit, alternatives) if suggest else ())


def _given_link(machine: MachineProfile, parallel: Parallel) -> float | None:
    """The link bandwidth the scaling holds for every device count: None (each count on the
    link that joins so many, ``parallel.device_link``) unless ``parallel``'s is not the preset's."""
    try:
        preset = Parallel.on(machine, parallel.devices, parallel.mode)
    except SpecError:               # the machine states no link: the one given is the only one
        return parallel.link_bandwidth
    return None if parallel == preset else parallel.link_bandwidth


def _needs_the_host(spec: ModelSpec, machine: MachineProfile, workload: Workload, parallel: Parallel) -> bool:
    """Whether the devices of a layer split cannot hold every layer and host memory can take some."""
    return has_host_tier(machine) and not device_memory(spec, machine, workload, parallel).fits


def _layer_split_with_host(spec: ModelSpec, machine: MachineProfile, workload: Workload, parallel: Parallel,
                           placement: Placement | Fit | None, scaling_counts: tuple[int, ...]) -> PlacedSummary:
    """A layer split over ``parallel``'s devices with host memory for the rest: the placement
    given (with its devices), else auto-fit's over the devices; its request priced on a machine
    whose interconnect is the link asked for."""
    link = on_link(machine, parallel)
    if isinstance(placement, Fit):
        fit = placement
    elif placement is not None:
        fit = choose(spec, machine, workload, dataclasses.replace(placement, devices=parallel.devices))
    else:
        fit = fit_placement(spec, machine, workload, devices=parallel.devices)
    on = fit.placement
    estimate = placed_request(spec, link, workload, on)
    start = workload.context + workload.prompt
    comm = float(placed_decode(spec, link, workload, on, context=start).communication)
    par = ParallelEstimate(parallel=parallel, ttft=estimate.ttft, tpot=estimate.tpot, decode_rate=estimate.decode_rate,
                           total_rate=estimate.total_rate, communication_seconds_per_step=comm,
                           communication_seconds_per_token=comm / workload.batch,
                           prefill_communication_seconds=float(placed_prefill(spec, link, workload, on).communication),
                           memory=fit.memory.device)
    grow = scaling(spec, machine, workload, parallel.mode, scaling_counts, _given_link(machine, parallel))
    return PlacedSummary(fit=fit, how="auto" if fit.chosen else "manual", estimate=estimate, parallel=par,
                         scaling=grow, suggestions=suggestions(spec, machine, workload, fit))


def placed_as_chosen(spec: ModelSpec, machine: MachineProfile, workload: Workload, choice: PlacementChoice, *,
                     alternatives: Mapping[str, ModelSpec] | None = None, suggest: bool = True) -> PlacedSummary:
    """The placed headline ``choice`` asks for: a placement by hand, -ngl fitted around the
    user's other flags (``PlacementChoice.fit``), several devices, or (nothing chosen) auto-fit
    or the workload's offload share. The window's headline, a Compare row and ``rooflab
    predict`` all place a model through here. ``suggest``: False leaves out what to change
    when it does not fit (a Compare row shows none, and the search is a tenth of a row's time)."""
    return placed_summary(spec, machine, workload, placement=choice.fit(spec, machine, workload),
                          parallel=choice.parallel_on(machine), alternatives=alternatives, suggest=suggest)
