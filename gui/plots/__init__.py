"""The plot widgets: one per chart of ``rooflab.core.report.charts``."""

from __future__ import annotations

from rooflab.gui.plots.base import ChartPlot, DrawnSeries, PinnedChart
from rooflab.gui.plots.batching import BatchingPlot
from rooflab.gui.plots.decode import DecodePlot
from rooflab.gui.plots.memory import MemoryPlot
from rooflab.gui.plots.prefill import PrefillPlot
from rooflab.gui.plots.roofline import RooflinePlot
from rooflab.gui.plots.style import Layer

PLOT_CLASSES: tuple[type[ChartPlot], ...] = (RooflinePlot, PrefillPlot, DecodePlot, BatchingPlot, MemoryPlot)

__all__ = [
    "PLOT_CLASSES",
    "BatchingPlot",
    "ChartPlot",
    "DecodePlot",
    "DrawnSeries",
    "Layer",
    "MemoryPlot",
    "PinnedChart",
    "PrefillPlot",
    "RooflinePlot",
]
