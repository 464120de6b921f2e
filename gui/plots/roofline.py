"""attainable FLOP/s against arithmetic intensity, with this workload's prefill and decode placed on it."""

from __future__ import annotations

from rooflab.core.report.charts import ROOFLINE
from rooflab.gui.plots.base import ChartPlot


class RooflinePlot(ChartPlot):
    """Roofline: attainable FLOP/s against arithmetic intensity, with this workload's prefill and decode placed
    on it."""

    chart_key = ROOFLINE
