"""per-sequence and total decode rate, memory and experts touched against batch size."""

from __future__ import annotations

from rooflab.core.report.charts import BATCHING
from rooflab.gui.plots.base import ChartPlot


class BatchingPlot(ChartPlot):
    """Batching: per-sequence and total decode rate, memory and experts touched against batch size."""

    chart_key = BATCHING
