"""What a chart is made of: ``Curve`` (one drawn series), ``Panel`` (one plot area), ``Chart``
(one plot tab), and the ``Scenario`` (model, machine, workload) every series is drawn for.

Values are SI (bytes, FLOP, seconds, tokens) in read-only float64 arrays; display units are
the GUI's business. The builders that fill them from the predictions are in ``charts``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.errors import SpecError
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.predict.parallel import mode_text
from rooflab.core.predict.work import Array
from rooflab.core.report.text import capacity_text, count, significant
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

CurveKind = Literal["line", "points", "vline", "hline", "stack"]
# How a curve relates to its panel: the quantity itself, a second quantity, one of the two
# clocks, a limit of the machine, a crossover, a marker for the current workload, or the link
# between several devices.
CurveRole = Literal["main", "secondary", "memory", "compute", "limit", "crossover", "marker", "measured",
                    "calibrated", "link"]
#: ``Curve.extras`` of an expected curve's band: the 16th and 84th percentiles over the
#: calibration's replicates, point by point (hover read-outs and CSV files show them).
BAND_LOW, BAND_HIGH = "expected low", "expected high"


def _frozen(values: ArrayLike) -> Array:
    arr = np.array(values, dtype=np.float64).ravel()     # a copy, so the caller's array stays free
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, slots=True, kw_only=True)
class Curve:
    """One drawn series, y against x, as read-only float64 arrays in SI units.

    kind "line"/"points": x and y of one length. "vline": x holds positions, y is empty.
    "hline": y holds positions, x is empty. "stack": y holds the sizes of stacked segments
    named by ``categories`` (x their index). ``extras`` are per-point figures shown on hover
    (a measured series' measured/predicted ratio, say), each as long as x.
    """

    key: str
    label: str
    x: Array
    y: Array
    x_name: str
    x_unit: str
    y_name: str
    y_unit: str
    kind: CurveKind = "line"
    role: CurveRole = "main"
    categories: tuple[str, ...] = ()
    extras: Mapping[str, Array] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "x", _frozen(self.x))
        object.__setattr__(self, "y", _frozen(self.y))
        extras = {name: _frozen(v) for name, v in self.extras.items()}
        object.__setattr__(self, "extras", MappingProxyType(extras))
        if self.kind in ("line", "points") and self.x.size != self.y.size:
            raise SpecError(f"curve {self.key}: x has {self.x.size} values, y has {self.y.size}")
        if self.kind == "stack" and len(self.categories) != self.y.size:
            raise SpecError(f"curve {self.key}: {self.y.size} segments, {len(self.categories)} names")
        for name, values in extras.items():
            if values.size != self.x.size:
                raise SpecError(f"curve {self.key}: extra {name!r} has {values.size} values for {self.x.size}")

    @property
    def is_reference(self) -> bool:
        """True for lines that mark a position (limits, crossovers) rather than a series."""
        return self.kind in ("vline", "hline")


@dataclass(frozen=True, slots=True, kw_only=True)
class Panel:
    """One plot area: axis titles and units, log axes, and its curves in drawing order."""

    key: str
    title: str
    x_label: str
    x_unit: str
    y_label: str
    y_unit: str
    curves: tuple[Curve, ...]
    log_x: bool = False
    log_y: bool = False
    note: str = ""

    def curve(self, key: str) -> Curve:
        for c in self.curves:
            if c.key == key:
                return c
        raise KeyError(f"panel {self.key} has no curve {key!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Chart:
    """One plot tab: panels that share the x axis (stacked top to bottom)."""

    key: str
    title: str
    description: str        # the formula in words, for tooltips and report headers
    panels: tuple[Panel, ...]
    note: str = ""          # one line over the chart: why it draws nothing as if it ran

    def panel(self, key: str) -> Panel:
        for p in self.panels:
            if p.key == key:
                return p
        raise KeyError(f"chart {self.key} has no panel {key!r}")


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A (model, machine, workload) triple: what one series of every plot is drawn for, and
    the placement the user chose for it (``AUTO``: rooflab places the model when the device
    cannot hold it whole)."""

    model: ModelSpec
    machine: MachineProfile
    workload: Workload
    placement: PlacementChoice = AUTO

    @property
    def label(self) -> str:
        """Model · machine · cache type, then each request setting that differs from the
        default workload, so two pinned series of one model and machine read apart; on several
        devices, "2 × tensor parallel"."""
        from rooflab.core.values.defaults import DEFAULT_WORKLOAD as d

        w = self.workload
        settings = dict(self.description.workload)
        parts = [settings["kv_type"]]
        for value, default, key in ((w.batch, d.batch, "batch"), (w.prompt, d.prompt, "prompt"),
                                    (w.answer, d.answer, "answer"), (w.context, d.context, "context"),
                                    (w.offload_fraction, d.offload_fraction, "offload"),
                                    (w.draft_tokens, d.draft_tokens, "drafts")):
            if value != default:
                parts.append(settings[key])
        if self.placement.devices > 1:
            parts.append(devices_text(self.placement.devices, self.placement.parallel))
        elif not self.placement.is_auto:
            parts.append(settings["placement"])
        return f"{self.model.name} · {self.machine.name} · {', '.join(parts)}"

    @property
    def description(self) -> Description:
        """What this scenario is, part by part, for ``distinguishing_labels``."""
        w, weights = self.workload, self.model.weights_format
        name = without_format(self.model.name, weights)        # the format is its own part
        drafts = f"{count(w.draft_tokens, 'draft')} at {w.acceptance:.0%}" if w.draft_tokens else "no drafts"
        m = self.machine
        figures = f"{significant(m.bandwidth / 1e9)} GB/s, {significant(m.flops() / 1e12)} TFLOP/s, " \
                  f"{capacity_text(m.memory)}"
        return Description(model=name, machine=m.name, weights=weights, model_detail=self.model.source,
                           machine_detail=figures, workload=(
            ("kv_type", f"{w.kv_type} cache"),
            ("compute_dtype", f"{w.compute_dtype or 'default'} compute"),
            ("batch", f"batch {w.batch:,}"),
            ("prompt", f"prompt {w.prompt:,}"),
            ("answer", f"answer {w.answer:,}"),
            ("context", f"context {w.context:,}"),
            ("offload", f"{w.offload_fraction:.0%} offloaded"),
            ("drafts", drafts),
            ("placement", self.placement.describe()),
        ))


def without_format(name: str, weights: str) -> str:
    """A model's name without its weight format at the end: "Qwen3-8B Q4_K_M" and "Qwen3-8B
    (Q8_0)" give "Qwen3-8B"; a name that does not end with it is kept."""
    for tail in (f" {weights}", f" ({weights})"):
        if weights and name.lower().endswith(tail.lower()):
            return name[: -len(tail)]
    return name


def devices_text(devices: int, mode: str) -> str:
    """"2 × tensor parallel", "8 × layer split": devices sharing a model, their mode named as
    the window's Placement group names it (series labels, the Compare table)."""
    return f"{devices:,} × {mode_text(mode)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Description:
    """A series told in parts: the model's name (without its weight format), the machine's
    name, the weight format, and the workload's settings as (setting, text) pairs in display
    order, every setting listed (``distinguishing_labels`` shows those that differ)."""

    model: str
    machine: str
    weights: str = ""
    workload: tuple[tuple[str, str], ...] = ()
    model_detail: str = ""          # where the model comes from: tells apart two models of one name
    machine_detail: str = ""        # the machine's figures: tell apart two machines of one name (one edited)

    @property
    def identity(self) -> str:
        """"Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090": what it is, without the workload."""
        return " · ".join(part for part in (self._model_text(), self.machine) if part)

    def _model_text(self) -> str:
        return f"{self.model} {self.weights}".strip()


def distinguishing_labels(descriptions: Sequence[Description]) -> list[str]:
    """One label per series: always its model (with its weight format), its machine and its
    placement, then each workload setting that differs between the series (in the descriptions'
    order), joined with " · ". A legend never leaves out which machine or placement a series is.

    Two series whose models or machines share a name but not what they are (a machine edited in
    the Machine tab, a file and a catalogue model of one name) say how they differ beside the
    name ("1,008 GB/s, 165 TFLOP/s, 24 GiB (25.8 GB)"); a series identical in every part to one
    before it says so, "(same as above)", rather than being numbered."""
    def differs(values: Sequence[object]) -> bool:
        return len(set(values)) > 1

    settings: list[str] = []
    for d in descriptions:
        settings += [key for key, _ in d.workload if key not in settings and key != "placement"]
    shown = [key for key in settings if differs([dict(d.workload).get(key, "") for d in descriptions])]
    same_model = {name for name in {d._model_text() for d in descriptions}
                  if differs([d.model_detail for d in descriptions if d._model_text() == name])}
    same_machine = {name for name in {d.machine for d in descriptions}
                    if differs([d.machine_detail for d in descriptions if d.machine == name])}
    labels: list[str] = []
    for d in descriptions:
        texts = dict(d.workload)
        model = d._model_text() + (f" ({d.model_detail})" if d._model_text() in same_model else "")
        machine = d.machine + (f" ({d.machine_detail})" if d.machine in same_machine else "")
        parts = [model, machine, texts.get("placement", ""), ", ".join(texts[k] for k in shown if texts.get(k))]
        label = " · ".join(p for p in parts if p)
        labels.append(f"{label} (same as above)" if label in labels else label)
    return labels
