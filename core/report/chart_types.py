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
from rooflab.core.report.text import count
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

CurveKind = Literal["line", "points", "vline", "hline", "stack"]
# How a curve relates to its panel: the quantity itself, a second quantity, one of the two
# clocks, a limit of the machine, a crossover, or a marker for the current workload.
CurveRole = Literal["main", "secondary", "memory", "compute", "limit", "crossover", "marker", "measured",
                    "calibrated"]


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
        devices, "2 × tensor parallel (charts: one device)": the charts draw one of them."""
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
            # the numbers are the devices'; every chart draws one of them
            parts.append(f"{devices_text(self.placement.devices, self.placement.parallel)} (charts: one device)")
        elif not self.placement.is_auto:
            parts.append(settings["placement"])
        return f"{self.model.name} · {self.machine.name} · {', '.join(parts)}"

    @property
    def description(self) -> Description:
        """What this scenario is, part by part, for ``distinguishing_labels``."""
        w, name, weights = self.workload, self.model.name, self.model.weights_format
        if weights and name.lower().endswith(" " + weights.lower()):
            name = name[: -len(weights) - 1]          # "Qwen3-8B Q4_K_M": the format is its own part
        drafts = f"{count(w.draft_tokens, 'draft')} at {w.acceptance:.0%}" if w.draft_tokens else "no drafts"
        return Description(model=name, machine=self.machine.name, weights=weights, workload=(
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

    @property
    def identity(self) -> str:
        """"Qwen3-8B Q4_K_M · NVIDIA GeForce RTX 4090": what it is, without the workload."""
        return " · ".join(part for part in (self._model_text(), self.machine) if part)

    def _model_text(self) -> str:
        return f"{self.model} {self.weights}".strip()


def distinguishing_labels(descriptions: Sequence[Description]) -> list[str]:
    """One label per series naming only what sets it apart from the others: the model when
    models differ, the weight format when formats differ, the machine when machines differ,
    and each workload setting that differs (in the descriptions' order), joined with " · ".

    ``[Qwen3-8B Q4_K_M on an RTX 4090, Qwen3-8B Q4_K_M on a DGX Spark]`` gives
    ``["NVIDIA GeForce RTX 4090", "NVIDIA DGX Spark (GB10)"]``, where full labels cut to a
    legend's width lost the part that told them apart. A lone series is named by model and machine;
    series identical in every part keep that name, numbered from the second: " (2)"."""
    if len(descriptions) < 2:
        return [d.identity for d in descriptions]

    def differs(values: Sequence[object]) -> bool:
        return len(set(values)) > 1

    models = differs([d.model for d in descriptions])
    weights = differs([d.weights for d in descriptions])
    machines = differs([d.machine for d in descriptions])
    settings: list[str] = []
    for d in descriptions:
        settings += [key for key, _ in d.workload if key not in settings]
    shown = [key for key in settings if differs([dict(d.workload).get(key, "") for d in descriptions])]
    labels = []
    for d in descriptions:
        model = " ".join(part for part, wanted in ((d.model, models), (d.weights, weights)) if wanted and part)
        texts = dict(d.workload)
        parts = [model, d.machine if machines else "", ", ".join(texts[k] for k in shown if texts.get(k))]
        labels.append(" · ".join(p for p in parts if p) or d.identity)
    seen: dict[str, int] = {}
    for i, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[i] = f"{label} ({seen[label]})"
    return labels
