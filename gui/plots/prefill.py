"""/ TTFT: time to first token and prompt rate against prompt length, with n* marked."""

from __future__ import annotations

from rooflab.core.report.charts import PREFILL
from rooflab.gui.plots.base import ChartPlot


class PrefillPlot(ChartPlot):
    """Prefill / TTFT: time to first token and prompt rate against prompt length, with n* marked."""

    chart_key = PREFILL
