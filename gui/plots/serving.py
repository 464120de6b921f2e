"""latency percentiles and output rate of a continuous-batching server against concurrent requests."""

from __future__ import annotations

from rooflab.core.report.serving_chart import SERVING
from rooflab.gui.plots.base import ChartPlot


class ServingPlot(ChartPlot):
    """Serving: TTFT and TPOT percentiles and output tokens/s against concurrent requests, simulated
    for a continuous-batching server (llama-server, vLLM), with measured levels as points."""

    chart_key = SERVING
