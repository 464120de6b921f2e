"""The plot area: one tab per chart, with the scenario line (and the pinned series' swatches)
above them. Each recompute's Frame redraws the plot on screen at once and the others when
their tab is shown (or a report needs them): redrawing all five would take most of a frame for
nothing visible."""

from __future__ import annotations

from typing import cast

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QTabWidget, QVBoxLayout, QWidget

from rooflab.core.app.figures import Figures
from rooflab.core.measure.engines.op_times import OpsMeasurement, measured_label, measured_points
from rooflab.core.report.chart_types import Chart, distinguishing_labels
from rooflab.core.report.charts import CHART_TITLES, ROOFLINE
from rooflab.core.report.ops_bar import time_bars
from rooflab.core.report.ops_chart import OPS_PANEL, not_running, ops_roofline_chart
from rooflab.core.report.overlays import expected_label
from rooflab.core.report.serving_chart import SERVING, SERVING_TITLE
from rooflab.gui.plots import PLOT_CLASSES, ChartPlot, PinnedChart
from rooflab.gui.plots.roofline import MEASURED_OPS, OPERATIONS, RooflinePlot
from rooflab.gui.plots.serving import ServingPlot
from rooflab.gui.plots.style import EXPECTED_INDEX
from rooflab.gui.state.recompute import Frame
from rooflab.gui.state.serving import pinned_serving_chart, serving_chart_of
from rooflab.gui.widgets.theme import Theme

EXPECTED_LAYER = "expected"
CURRENT_SERIES = "the current series"     # whose the expected curves are, beside pinned ones
SERVING_DELAY_MS = 150       # the Serving tab's simulation waits for the edits to pause
MIN_HEIGHT = 500             # px: the plot area's least height
SCENARIO_LINES = 2           # the line over the tabs: this many lines, always (more pins scroll)


class PlotTabsPanel(QWidget):
    """The plots in tabs, drawn lazily; see the module docstring."""

    def __init__(self, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._theme = theme
        self.plots: dict[str, ChartPlot] = {cls.chart_key: cls(theme=theme) for cls in PLOT_CLASSES}
        self.tabs = QTabWidget()
        for key, plot in self.plots.items():
            self.tabs.addTab(plot, CHART_TITLES[key])
            self.tabs.setTabToolTip(self.tabs.count() - 1, type(plot).__doc__ or "")
        self.serving = ServingPlot(theme=theme)      # apart from ``plots``: drawn from its own chart, when shown
        self.tabs.addTab(self.serving, SERVING_TITLE)
        self.tabs.setTabToolTip(self.tabs.count() - 1, ServingPlot.__doc__ or "")
        self.serving.axis_changed.connect(self._on_serving_axis_changed)
        self._serving_timer = QTimer(self, singleShot=True, interval=SERVING_DELAY_MS)
        self._serving_timer.timeout.connect(self._on_serving_timer_timeout)
        self.tabs.setCurrentIndex(2)
        self.scenario_label = QLabel()
        self.scenario_label.setTextFormat(Qt.TextFormat.RichText)
        self.scenario_label.setWordWrap(True)     # pinned series wrap instead of widening the window
        # two lines high whatever is pinned, the rest scrolled: grown to a third line by the pins,
        # it moved the tabs and every chart down under the pointer
        self.scenario_area = QScrollArea()
        self.scenario_area.setWidget(self.scenario_label)
        self.scenario_area.setWidgetResizable(True)
        self.scenario_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scenario_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        lines = QFontMetrics(self.scenario_label.font()).lineSpacing() * SCENARIO_LINES
        self.scenario_area.setFixedHeight(lines + 2 * self.scenario_label.margin() + 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.scenario_area)
        layout.addWidget(self.tabs, 1)
        # on a 720-pixel screen the numbers below give way first: side by side, a tab's panels and
        # their legends under them need this much
        self.setMinimumHeight(MIN_HEIGHT)
        self._frame: Frame | None = None
        self._stale: set[str] = set()
        self._expected_shapes: dict[str, ExpectedShape] = {}
        # a pin's Serving chart by (pin, axis), with the answer it was simulated from: a pin does
        # not change while pinned, so it is simulated once, not at every frame of the current series
        self._pinned_serving: dict[tuple[int, str], tuple[Figures, Chart | None]] = {}
        self._measured_ops: object = None        # the model the operations measured on screen belong to
        self.tabs.currentChanged.connect(self._on_tabs_current_changed)
        self.roofline.view_changed.connect(self._on_roofline_view_changed)

    @property
    def roofline(self) -> RooflinePlot:
        return cast(RooflinePlot, self.plots[ROOFLINE])

    def show_frame(self, frame: Frame) -> None:
        """Draw ``frame`` on the plot on screen; the others are drawn when shown."""
        self._frame = frame
        self._stale = set(self.plots) | {SERVING}
        current = self.tabs.currentWidget()
        if current is self.serving:
            self._serving_timer.start()          # simulated once the edits pause
        elif isinstance(current, ChartPlot):
            self._draw(current)
        self._show_scenario()

    def flush(self) -> None:
        """Bring every plot, shown or not, up to the last frame."""
        for plot in self.plots.values():
            self._draw(plot)

    def clear_readouts(self) -> None:
        """Forget every hover read-out (the model, machine or workload it described changed)."""
        for plot in [*self.plots.values(), self.serving]:
            plot.clear_readout()

    def apply_theme(self, theme: Theme) -> None:
        self._theme = theme
        for plot in [*self.plots.values(), self.serving]:
            plot.apply_theme(theme)
        self._show_scenario()                  # its swatches take the new series colours

    def _show_scenario(self) -> None:
        frame = self._frame
        if frame is None:
            return
        series = self._theme.series
        swatch = f"<span style='color:{self._theme.current['main']}'>■</span>&nbsp;"
        # a swatch and its series' name stay on one line: wrapped apart, a swatch ended the line above
        pinned = " &nbsp; ".join(f"<span style='color:{series[p.pin_id % len(series)]}'>■</span>&nbsp;{p.label}"
                                 for p, _ in frame.pinned)
        # the current series on the first line, the pinned ones from the second: side by side,
        # the charts' legends leave the pinned series' names to this line
        if not pinned:
            pinned = (f"<span style='color:{self._theme.current['crossover']}'>Nothing pinned: Pin current "
                      "(Ctrl+P) keeps this series on every chart beside the next.</span>")
        state = "" if frame.summary.runs else \
            f" <span style='color:{self._theme.current['limit']}'><b>does NOT fit: nothing drawn</b></span>"
        self.scenario_label.setText(f"{swatch}<b>{frame.scenario.label}</b>{state}<br>{pinned}")
        names = [f"<b>{frame.scenario.label}</b>", *(p.label for p, _ in frame.pinned)]
        self.scenario_area.setToolTip("<br>".join(names))

    def _draw(self, plot: ChartPlot) -> None:
        frame = self._frame
        if frame is None or plot.chart_key not in self._stale:
            return
        self._stale.discard(plot.chart_key)
        # legends name each series by what sets it apart (the line above names them in full)
        labels = distinguishing_labels([frame.scenario.description,
                                        *(p.scenario.description for p, _ in frame.pinned)])
        pinned = [PinnedChart(p.pin_id, label, charts[plot.chart_key])
                  for (p, charts), label in zip(frame.pinned, labels[1:], strict=True)]
        if plot is self.roofline and self.roofline.mode == OPERATIONS:    # built only when shown
            self._hand_operations(frame, labels)
        plot.set_charts(frame.charts[plot.chart_key], pinned, current_label=labels[0])
        # whose expectation, once series are pinned: the current one's (the line above names it
        # first; named here in full, each expected entry took three lines of a legend)
        self._draw_expected(plot, frame, CURRENT_SERIES if pinned else "")

    def _hand_operations(self, frame: Frame, labels: list[str]) -> None:
        """The operation view's chart and "where the time goes" bars, the current series' and
        each pin's, from each one's answer (``Figures.operations``: made once, when first shown)."""
        runs = frame.summary.runs
        if self._measured_ops is not None and self._measured_ops is not frame.scenario.model:
            self.roofline.clear_layer(MEASURED_OPS)          # another model's operations
            self._measured_ops = None
        ops = ops_roofline_chart(frame.scenario, frame.figures.operations)
        if not runs:
            ops = not_running(ops, frame.charts[ROOFLINE].note)
        pins = list(zip(frame.pinned, frame.pinned_figures, labels[1:], strict=True))
        bars = [*time_bars(frame.figures.operations if runs else (), labels[0] if pins else "current")]
        for _, answer, label in pins:
            bars += time_bars(answer.operations if answer.summary.runs else (), label)
        self.roofline.set_operations(ops, [
            PinnedChart(p.pin_id, label, ops_roofline_chart(p.scenario, answer.operations, pinned=True))
            for (p, _), answer, label in pins], bars, [None, *(p.pin_id for (p, _), _, _ in pins)])

    def show_measured_operations(self, measured: OpsMeasurement) -> None:
        """A run timed by operation (the Measure tab's "By operation") as measured points on the
        Roofline tab's operation view, beside the predicted operations; taken off once the model
        on screen changes (``_hand_operations``)."""
        frame = self._frame
        if frame is None:
            return
        self._measured_ops = frame.scenario.model
        self.roofline.set_measured(OPS_PANEL, measured_points(measured, frame.scenario.machine),
                                   label=measured_label(measured), key=MEASURED_OPS)

    def _draw_expected(self, plot: ChartPlot, frame: Frame, whose: str) -> None:
        key = plot.chart_key
        shape = draw_expected(plot, frame, self._expected_shapes.get(key), whose=whose)
        if shape is None:
            self._expected_shapes.pop(key, None)
        else:
            self._expected_shapes[key] = shape

    def _on_roofline_view_changed(self, _view: str) -> None:
        self._stale.add(ROOFLINE)
        self._draw(self.roofline)

    def _on_tabs_current_changed(self, index: int) -> None:
        plot = self.tabs.widget(index)
        if plot is self.serving:
            self.draw_serving()
        elif isinstance(plot, ChartPlot):
            self._draw(plot)

    def draw_serving(self) -> None:
        """Hand the Serving tab the chart of the last frame (built here, when it is needed)."""
        frame = self._frame
        if frame is None or SERVING not in self._stale:
            return
        self._stale.discard(SERVING)
        chart = serving_chart_of(frame, self.serving.axis)
        if chart is None:
            return
        # every pin on every chart: each pinned series simulated on its own placement
        labels = distinguishing_labels([frame.scenario.description,
                                        *(p.scenario.description for p, _ in frame.pinned)])
        pinned = [PinnedChart(p.pin_id, label, drawn)
                  for (p, _), answer, label in zip(frame.pinned, frame.pinned_figures, labels[1:], strict=True)
                  if (drawn := self._pin_serving(p.pin_id, answer)) is not None]
        live = {p.pin_id for p, _ in frame.pinned}
        self._pinned_serving = {k: v for k, v in self._pinned_serving.items() if k[0] in live}
        self.serving.set_charts(chart, pinned, current_label=labels[0] if pinned else "current")

    def _pin_serving(self, pin_id: int, answer: Figures) -> Chart | None:
        """The Serving chart of a pin's ``answer`` on the axis shown, simulated once per pin."""
        key = (pin_id, self.serving.axis)
        kept = self._pinned_serving.get(key)
        if kept is None or kept[0] is not answer:
            kept = (answer, pinned_serving_chart(answer, self.serving.axis))
            self._pinned_serving[key] = kept
        return kept[1]

    def redraw_serving(self, _measured: object = None) -> None:
        """Draw the Serving tab again (``_measured``: a server measurement just kept): now if it
        is on screen, else when it is shown."""
        self._stale.add(SERVING)
        if self.tabs.currentWidget() is self.serving:
            self.draw_serving()

    def _on_serving_axis_changed(self, _axis: str) -> None:
        self.redraw_serving()

    def _on_serving_timer_timeout(self) -> None:
        self.draw_serving()


ExpectedShape = tuple[str, frozenset[tuple[str, tuple[str, ...]]]]


def draw_expected(plot: ChartPlot, frame: Frame, drawn: ExpectedShape | None = None, *,
                  whose: str = "") -> ExpectedShape | None:
    """The calibrated machine's expected curves (with their band) as their own layer on
    ``plot``, in the expected colours (no pinned series has them); off it when the machine has
    no calibration. ``whose``: for when series are pinned, ``CURRENT_SERIES`` ("expected for the
    current series, llama.cpp": the expectation is the current one's alone). ``drawn``: what the
    last call drew on this plot; a layer whose label or curves change is taken off first (a
    plot keeps a layer's first label and legend entries). Returns what is drawn now."""
    if frame.expected is None or frame.expected_curves is None:
        if drawn is not None:
            plot.clear_layer(EXPECTED_LAYER)
        return None
    label = _whose(expected_label(frame.expected), whose)
    mine = {panel: curves for (chart, panel), curves in frame.expected_curves.items() if chart == plot.chart_key}
    shape = (label, frozenset((panel, tuple(c.key for c in curves)) for panel, curves in mine.items()))
    if drawn is not None and drawn != shape:
        plot.clear_layer(EXPECTED_LAYER)
    plot.set_calibrated_panels(mine, label=label, key=EXPECTED_LAYER, index=EXPECTED_INDEX)
    return shape


def _whose(label: str, whose: str) -> str:
    """"expected, llama.cpp" as the expectation of ``whose``: "expected for the current series, llama.cpp"."""
    if not whose:
        return label
    head, comma, rest = label.partition(", ")
    return f"{head} for {whose}{comma}{rest}"
