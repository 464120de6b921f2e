"""weights, KV cache and what is left, against the machine's memory."""

from __future__ import annotations

from rooflab.core.report.charts import MEMORY
from rooflab.gui.plots.base import ChartPlot


class MemoryPlot(ChartPlot):
    """Memory: weights, KV cache and what is left, against the machine's memory."""

    chart_key = MEMORY
