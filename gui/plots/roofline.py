"""attainable FLOP/s against arithmetic intensity, with this workload's prefill and decode placed on it; or,
in the operation view, every operation of both passes (``core.report.ops_chart``) and, under
them, where the time goes: each pass as a bar cut into its operations (``plots.ops_bar``)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QVBoxLayout, QWidget

from rooflab.core.report.chart_types import Chart, Curve
from rooflab.core.report.charts import ROOFLINE
from rooflab.core.report.ops_bar import TimeBar
from rooflab.core.report.ops_chart import OPS_PANEL
from rooflab.gui.plots.base import ChartPlot, PinnedChart
from rooflab.gui.plots.ops_bar import TimeBarPlot
from rooflab.gui.widgets.theme import LIGHT, Theme

PASSES, OPERATIONS = "passes", "operations"
MEASURED_OPS = "measured-ops"       # the layer of the operations a run timed
MeasuredLayer = tuple[str, tuple[Curve, ...]]
VIEWS: tuple[tuple[str, str], ...] = ((PASSES, "Passes"), (OPERATIONS, "Operations"))


class RooflinePlot(ChartPlot):
    """Roofline: attainable FLOP/s against arithmetic intensity, with this workload's prefill and decode placed
    on it; the operation view places every operation of both passes instead."""

    chart_key = ROOFLINE
    view_changed = Signal(str)            # PASSES or OPERATIONS, when the user switches

    def __init__(self, theme: Theme = LIGHT, parent: QWidget | None = None) -> None:
        super().__init__(theme, parent)
        self.view_box = QComboBox()
        for key, text in VIEWS:
            self.view_box.addItem(text, key)
        self.view_box.setToolTip("Passes: prefill and decode as two points. Operations: every multiply, "
                                 "attention step and small op of both passes, each at its own intensity.")
        layout = self.bar.layout()
        if layout is not None:
            layout.addWidget(self.view_box)
        self.time_bar = TimeBarPlot(theme)           # the operation view's "where the time goes"
        self.time_bar.hide()
        self.time_bar.hovered.connect(self._on_time_bar_hovered)
        outer = self.layout()
        if isinstance(outer, QVBoxLayout):              # under the panels, above the read-out
            outer.insertWidget(outer.indexOf(self.bar), self.time_bar)
        self._passes: tuple[Chart, tuple[PinnedChart, ...], str] | None = None
        self._operations: Chart | None = None
        self._pinned_operations: tuple[PinnedChart, ...] = ()
        self.view_box.currentIndexChanged.connect(self._on_view_box_current_index_changed)

    @property
    def mode(self) -> str:
        """PASSES or OPERATIONS: what the plot draws."""
        return str(self.view_box.currentData())

    def set_view(self, view: str) -> None:
        self.view_box.setCurrentIndex(next(i for i, (key, _) in enumerate(VIEWS) if key == view))

    def set_charts(self, current: Chart, pinned: Sequence[PinnedChart] = (),
                   current_label: str = "current") -> None:
        """The passes' chart (kept, drawn in the pass view); the operations' chart itself when
        it is the one handed over (a report's twin replaying this plot)."""
        if any(p.key == OPS_PANEL for p in current.panels):
            super().set_charts(current, pinned, current_label)
            return
        self._passes = (current, tuple(pinned), current_label)
        if self.mode == OPERATIONS and self._operations is not None:
            super().set_charts(self._operations, self._pinned_operations, current_label)
        else:
            super().set_charts(current, pinned, current_label)

    def set_operations(self, chart: Chart | None, pinned: Sequence[PinnedChart] = (),
                       bars: Sequence[TimeBar] = (), pins: Sequence[int | None] = ()) -> None:
        """The current scenario's operations chart (None: none yet) and each pinned series' (so
        they compare operation by operation), drawn in the operation view from the next
        ``set_charts`` on (hand them over first: one drawing, not two); ``bars``: where the time
        goes, each series' prefill and decode bars (the current series' first), drawn now, each
        series' swatch in the colour of its pin (``pins``: None for the current series)."""
        self._operations = chart
        self._pinned_operations = tuple(pinned)
        self.time_bar.set_bars(bars, pins)

    def measured_operations(self) -> MeasuredLayer | None:
        """(label, curves) of the operations a run timed on the operation view (the layer
        ``PlotTabsPanel.show_measured_operations`` hands over), None without one: what a
        report's roofline-ops.png draws too."""
        for layer, by_panel in self._extras.values():
            if layer.kind == "measured" and by_panel.get(OPS_PANEL):
                return layer.label, by_panel[OPS_PANEL]
        return None

    def apply_theme(self, theme: Theme) -> None:
        super().apply_theme(theme)
        self.time_bar.apply_theme(theme)

    def replay_on(self, other: ChartPlot) -> None:
        """A report's twin draws the passes whatever the view (the operations have their own
        picture, roofline-ops.png)."""
        if self._passes is None:
            super().replay_on(other)
            return
        for key, (layer, by_panel) in self._extras.items():
            other._extras[key] = (layer, dict(by_panel))
        other.set_charts(*self._passes)

    def _on_time_bar_hovered(self, text: str) -> None:
        self.readout.setText(text)

    def _on_view_box_current_index_changed(self, _index: int) -> None:
        self.time_bar.setVisible(self.mode == OPERATIONS)
        if self.mode == PASSES and self._passes is not None:
            super().set_charts(*self._passes)
        elif self.mode == OPERATIONS and self._operations is not None:
            super().set_charts(self._operations, self._pinned_operations,
                               self._passes[2] if self._passes else "current")
        self.view_changed.emit(self.mode)
