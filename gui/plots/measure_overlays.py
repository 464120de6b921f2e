"""Measured points, the calibrated prediction and this machine's measured multiplies, handed to
the plots as layers over the predicted curves. The curves come from
``rooflab.core.report.overlays``; this module only says which plot and layer gets which.

Each ``MeasuredSeries`` (one engine with one set of settings) is its own layer, named by its
legend text; the series the fit on screen was made from comes first and owns the calibrated
layer."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rooflab.core.calibration.calibrate import Calibration
from rooflab.core.report.overlays import MeasuredSeries
from rooflab.core.values.machine_run import RooflineSample
from rooflab.gui.plots import ChartPlot
from rooflab.gui.state.app_state import AppState

MEASURED_KEY, CALIBRATED_KEY, ROOFLINE_KEY = "measured", "calibrated", "measured-machine"

#: What a layer was handed last: its label, colour slot and which curves on which panels. A
#: layer whose label, colour or curves change is taken off first (a plot keeps a layer's first
#: label and colour, and a legend entry per curve it ever drew).
OverlayShape = tuple[str, int, frozenset[tuple[str, str, tuple[str, ...]]]]


def measured_layer(series_key: str) -> str:
    """The plot layer of the series with ``EngineSettings.key`` ``series_key``."""
    return f"{MEASURED_KEY}:{series_key}" if series_key else MEASURED_KEY


def clear_layers(plots: Mapping[str, ChartPlot], keys: Iterable[str]) -> None:
    """Take the layers ``keys`` off every plot."""
    for key in keys:
        for plot in plots.values():
            plot.clear_layer(key)


def _hand(plots: Mapping[str, ChartPlot], overlay: Mapping[tuple[str, str], list[Any]], key: str, label: str,
          kind: str, index: int = 0) -> None:
    for (chart, panel), curves in overlay.items():
        plot = plots.get(chart)
        if plot is None:
            continue
        if kind == "measured":
            plot.set_measured(panel, curves, label=label, key=key, index=index)
        else:
            plot.set_calibrated(panel, curves, label=label, key=key, index=index)


def draw_series(plots: Mapping[str, ChartPlot], state: AppState, series: Sequence[MeasuredSeries],
                calibration: Calibration | None, drawn: Mapping[str, OverlayShape]) -> dict[str, OverlayShape]:
    """Each series over the state's predictions, and, when ``calibration`` (the fit of
    ``series[0]``) is given, the prediction calibrated by it. ``drawn``: what the last call
    returned; layers it lists that are not wanted now are taken off. Returns what is drawn now.
    RooflabError when the points cannot be drawn on this scenario."""
    from rooflab.core.report.overlays import calibrated_curves, calibrated_label, measured_curves

    wanted: dict[str, tuple[str, str, int, Mapping[tuple[str, str], list[Any]]]] = {}
    for index, one in enumerate(series):
        fitted = index == 0 and calibration is not None
        overlay: Mapping[tuple[str, str], list[Any]] = measured_curves(
            one.points, state.model, state.machine, state.workload,
            kv_type=calibration.kv_type if fitted and calibration else None,
            dtype=calibration.dtype if fitted and calibration else None, label=one.label)
        wanted[measured_layer(one.key)] = (one.label, "measured", index, overlay)
    if calibration is not None and series:
        machine = dataclasses.replace(state.machine, efficiency=calibration.efficiency)
        wanted[CALIBRATED_KEY] = (calibrated_label(series[0]), "calibrated", 0,
                                  calibrated_curves(state.model, machine, state.workload))
    shapes: dict[str, OverlayShape] = {}
    for key, (label, kind, index, overlay) in wanted.items():
        shape = (label, index, frozenset((chart, panel, tuple(c.key for c in curves))
                                         for (chart, panel), curves in overlay.items()))
        if drawn.get(key, shape) != shape:
            clear_layers(plots, [key])
        _hand(plots, overlay, key, label, kind, index)
        shapes[key] = shape
    clear_layers(plots, [key for key in drawn if key not in shapes])
    return shapes


def draw_samples(plots: Mapping[str, ChartPlot], samples: Sequence[RooflineSample], *, show: bool) -> None:
    """This machine's measured multiplies on the Roofline plot, or off it when ``show`` is False
    (they belong beside this machine's roof only)."""
    from rooflab.core.report.overlays import roofline_samples_curve

    if not show:
        clear_layers(plots, [ROOFLINE_KEY])
        return
    _hand(plots, roofline_samples_curve(samples), ROOFLINE_KEY, "measured machine", "measured")

