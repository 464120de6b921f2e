"""vs context: the decode ceiling, time per token and KV share as the cache grows."""

from __future__ import annotations

from rooflab.core.report.charts import DECODE
from rooflab.gui.plots.base import ChartPlot


class DecodePlot(ChartPlot):
    """Decode vs context: the decode ceiling, time per token and KV share as the cache grows."""

    chart_key = DECODE
