"""Measured points, the calibrated prediction and this machine's measured multiplies, handed to
the plots as layers over the predicted curves. The curves come from
``rooflab.core.measure.overlays``; this module only says which plot and layer gets which."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rooflab.core.measure.calibrate import Calibration
from rooflab.core.measure.machine_result import RooflineSample
from rooflab.core.values.measured import MeasuredPoint
from rooflab.gui.plots import ChartPlot
from rooflab.gui.state import AppState

MEASURED_KEY, CALIBRATED_KEY, ROOFLINE_KEY = "measured", "calibrated", "measured-machine"


def clear_points(plots: Mapping[str, ChartPlot]) -> None:
    """Take the measured points and the calibrated curves off every plot."""
    for plot in plots.values():
        plot.clear_layer(MEASURED_KEY)
        plot.clear_layer(CALIBRATED_KEY)


def _hand(plots: Mapping[str, ChartPlot], overlay: Mapping[tuple[str, str], list[Any]], key: str, label: str,
          kind: str) -> None:
    for (chart, panel), curves in overlay.items():
        plot = plots.get(chart)
        if plot is None:
            continue
        if kind == "measured":
            plot.set_measured(panel, curves, label=label, key=key)
        else:
            plot.set_calibrated(panel, curves, label=label, key=key)


def draw_points(plots: Mapping[str, ChartPlot], state: AppState, points: Sequence[MeasuredPoint],
                calibration: Calibration | None) -> None:
    """The measured points over the state's predictions and, once there is a fit, the
    calibrated prediction. RooflabError when the points cannot be drawn on this scenario."""
    from rooflab.core.measure.overlays import calibrated_curves, measured_curves

    if not points:
        return
    overlay = measured_curves(points, state.model, state.machine, state.workload,
                              kv_type=calibration.kv_type if calibration else None,
                              dtype=calibration.dtype if calibration else None)
    _hand(plots, overlay, MEASURED_KEY, "measured", "measured")
    if calibration is not None:
        machine = dataclasses.replace(state.machine, efficiency=calibration.efficiency)
        _hand(plots, calibrated_curves(state.model, machine, state.workload), CALIBRATED_KEY, "calibrated",
              "calibrated")


def draw_samples(plots: Mapping[str, ChartPlot], samples: Sequence[RooflineSample], *, show: bool) -> None:
    """This machine's measured multiplies on the Roofline plot, or off it when ``show`` is False
    (they belong beside this machine's roof only)."""
    from rooflab.core.measure.overlays import roofline_samples_curve

    if not show:
        for plot in plots.values():
            plot.clear_layer(ROOFLINE_KEY)
        return
    _hand(plots, roofline_samples_curve(samples), ROOFLINE_KEY, "measured machine", "measured")
