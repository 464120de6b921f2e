"""latency percentiles and output rate of a continuous-batching server against concurrent requests
or the request rate, with a toggle between the two axes."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from rooflab.core.report.serving_chart import SERVING
from rooflab.gui.plots.base import ChartPlot
from rooflab.gui.widgets.theme import LIGHT, Theme

AXIS_NAMES = {"concurrency": "concurrent requests", "rate": "request rate"}


class ServingPlot(ChartPlot):
    """Serving: TTFT and TPOT percentiles and output tokens/s against concurrent requests or the
    request rate, simulated for a continuous-batching server (llama-server, vLLM), the expected
    curves with their band, and measured levels as points."""

    chart_key = SERVING
    axis_changed = Signal(str)          # "concurrency" or "rate": the x axis the user chose

    def __init__(self, theme: Theme = LIGHT, parent: QWidget | None = None) -> None:
        super().__init__(theme=theme, parent=parent)
        self.axis_box = QComboBox()
        for key, name in AXIS_NAMES.items():
            self.axis_box.addItem(name, key)
        self.axis_box.setToolTip("Concurrent requests: each client sends its next request when its last one "
                                 "ends. Request rate: requests arrive at random (Poisson) at each rate.")
        bar = self.bar.layout()
        if isinstance(bar, QHBoxLayout):        # the read-out bar: the toggle at its left
            bar.insertWidget(0, QLabel("x axis:"))
            bar.insertWidget(1, self.axis_box)
        self.axis_box.currentIndexChanged.connect(self._on_axis_box_current_index_changed)

    @property
    def axis(self) -> str:
        """The x axis chosen: "concurrency" or "rate"."""
        return str(self.axis_box.currentData())

    def set_axis(self, axis: str) -> None:
        """Choose the x axis (``axis_changed`` follows when it changes)."""
        index = self.axis_box.findData(axis)
        if index >= 0:
            self.axis_box.setCurrentIndex(index)

    def _on_axis_box_current_index_changed(self, _index: int) -> None:
        self.axis_changed.emit(self.axis)
