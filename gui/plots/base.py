"""A plot tab: the panels of one ``Chart``, drawn for the current scenario, the pinned ones,
and any measured or calibrated series, with a hover read-out under the panels.

Widgets never compute: they are handed Curves (``set_charts``, ``set_measured``,
``set_calibrated``) and draw them. Adding a measured series to any plot::

    plot.set_measured("ttft", [Curve(key="ttft", label="llama-bench", x=prompts, y=seconds,
                                     kind="points", role="measured", x_name="prompt",
                                     x_unit="tokens", y_name="seconds", y_unit="s",
                                     extras={"measured / predicted": ratios})])

Panel keys per chart: roofline: roofline; prefill: ttft, rate; decode: rate, step, kv_share;
batching: rate, memory, experts (MoE); memory: breakdown, growth.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, QObject, QPointF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QImage, QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from rooflab.core.report import units
from rooflab.core.report.chart_types import Chart, Curve, Panel
from rooflab.core.report.text import significant
from rooflab.gui.plots import grid
from rooflab.gui.plots.axis import UnitAxis, log_position
from rooflab.gui.plots.drawn import Drawn
from rooflab.gui.plots.panel_view import PanelView
from rooflab.gui.plots.style import Layer, LayerKind
from rooflab.gui.widgets.controls import StatusLine
from rooflab.gui.widgets.theme import LIGHT, Theme

HOVER_HINT = "Hover over a curve to read its values."
MIN_SHOWN = 120           # px of a panel in sight for it to count as shown (``hidden_below``)
_MARGINS = (6, 6, 12, 6)          # around the panels, px: left, top, right, bottom
_SPACING = 6                      # between panels, px


@dataclass(frozen=True, slots=True)
class PinnedChart:
    """A pinned series' chart; ``pin_id`` keeps its colour while it stays pinned."""

    pin_id: int
    label: str
    chart: Chart


@dataclass(frozen=True, slots=True)
class DrawnSeries:
    """What a plot shows for one layer in one panel (what a report writes as CSV)."""

    chart: str
    panel: str
    layer: Layer
    curves: tuple[Curve, ...]


class ChartPlot(QWidget):
    """Base of the five plot widgets; subclasses name their chart."""

    chart_key: ClassVar[str] = ""
    redrawn = Signal()
    hovered = Signal(str)

    def __init__(self, theme: Theme = LIGHT, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.theme = theme
        self.view = pg.GraphicsLayoutWidget()
        self.view.setAcceptDrops(False)            # file drops go to the window
        self.view.ci.setContentsMargins(*_MARGINS)
        # spacing set, not left to the style: a layout asked for the style's spacing after a
        # theme switch replaced the style crashed PySide6 (6 px is what the style gave)
        self.view.ci.layout.setSpacing(_SPACING)
        # one line cut to the width it has: a long read-out once widened the window past the
        # screen at 1280x720, and the charts and panels on the right stayed off-screen
        self.readout = StatusLine(HOVER_HINT)
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.info = QLabel("<u>How is this computed?</u>")
        self._info_html = ""
        self.info.setToolTipDuration(60_000)
        self.bar = QWidget()
        bar = QHBoxLayout(self.bar)
        bar.setContentsMargins(8, 0, 8, 2)
        self.below = QLabel()                 # the charts scrolled out of sight under these ones
        self.below.hide()
        bar.addWidget(self.readout, 1)
        bar.addWidget(self.below)
        bar.addWidget(self.info)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        # on a short screen the panels keep a readable height and scroll (see _fit_height)
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidget(self.view)
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.banner = QLabel()                # why nothing is drawn as if it ran (``_show_note``)
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet("QLabel{background:#fff4d6;color:#6b4e00;border:1px solid #f0d58c;"
                                  "border-radius:4px;padding:3px 6px;}")
        self.banner.hide()
        layout.addWidget(self.banner)
        layout.addWidget(self.scroll_area, 1)
        layout.addWidget(self.bar)
        self.scroll_area.verticalScrollBar().valueChanged.connect(self._on_scroll_value_changed)
        # the view's height, not only the tab's, sets how far a row's panels give way (a banner
        # or the Serving tab's axis box takes some of it)
        self.scroll_area.viewport().installEventFilter(self)
        # a legend learns its height when laid out, after the panels were fitted to it: fitted
        # again then, if it changed (``_on_refit_timeout``)
        self._legend_heights: list[float] = []
        self._refit = QTimer(self, singleShot=True, interval=0)
        self._refit.timeout.connect(self._on_refit_timeout)
        self._panels: dict[str, PanelView] = {}
        self._order: list[str] = []
        self._current: Chart | None = None
        self._current_label = "current"
        self._pinned: dict[int, Layer] = {}
        self._pinned_charts: tuple[PinnedChart, ...] = ()
        self._columns = 0                     # panels side by side as laid out (``columns``)
        self.fixed_columns = 0                # 0: as the size allows; a report's twin: 1
        self._extras: dict[str, tuple[Layer, dict[str, tuple[Curve, ...]]]] = {}
        self.view.scene().sigMouseMoved.connect(self._on_scene_mouse_moved)
        self.view.setBackground(theme.background)

    # -- public API -------------------------------------------------------------------------
    @property
    def chart(self) -> Chart | None:
        return self._current

    def panel_keys(self) -> list[str]:
        return list(self._order)

    def panel_view(self, key: str) -> PanelView:
        return self._panels[key]

    def set_charts(self, current: Chart, pinned: Sequence[PinnedChart] = (),
                   current_label: str = "current") -> None:
        """Draw ``current`` and every pinned chart; layers of series no longer pinned go."""
        self._current, self._current_label, self._pinned_charts = current, current_label, tuple(pinned)
        self.info.setToolTip(f"<p>{current.description}</p>")
        self._arrange([current.panels, *(p.chart.panels for p in pinned)])
        for view in self._panels.values():
            view.bars.clear()
        layer = Layer(key="current", label=current_label, kind="current")
        for panel in current.panels:
            self._panels[panel.key].draw(layer, panel.curves, 0)
        keep = {p.pin_id for p in pinned}
        for pin_id in [i for i in self._pinned if i not in keep]:
            self._drop_layer(self._pinned.pop(pin_id).key)
        for slot, p in enumerate(pinned, start=1):
            pin = self._pinned[p.pin_id] = Layer(key=f"pin:{p.pin_id}", label=p.label, kind="pinned",
                                                  index=p.pin_id)
            for panel in p.chart.panels:
                self._panels[panel.key].draw(pin, panel.curves, slot)
        for extra, by_panel in self._extras.values():
            self._draw_extra(extra, by_panel)
        self._show_note(current)
        self._finish()

    def _show_note(self, chart: Chart) -> None:
        """Why the chart draws nothing as if it ran: over its first empty panel (in a report's
        picture too), else (its panels hold the memory's bills) in the line above them."""
        empty = [p.key for p in chart.panels if not p.curves] if chart.note else []
        for key in self._order:
            self._panels[key].set_note(chart.note if empty and key == empty[0] else "")
        self.banner.setText(chart.note if chart.note and not empty else "")
        self.banner.setVisible(bool(self.banner.text()))

    def set_measured(self, panel: str, curves: Sequence[Curve], *, label: str = "measured",
                     key: str = "measured", index: int = 0) -> None:
        """Show measured points (hollow rings) on ``panel``; ``key`` names the series, so
        several measured series can coexist. Replaces that key's curves on that panel."""
        self._set_extra(key, label, "measured", index, panel, curves)

    def set_calibrated(self, panel: str, curves: Sequence[Curve], *, label: str = "calibrated",
                       key: str = "calibrated", index: int = 0) -> None:
        """Show a calibrated prediction (dotted) on ``panel``."""
        self._set_extra(key, label, "calibrated", index, panel, curves)

    def set_calibrated_panels(self, by_panel: Mapping[str, Sequence[Curve]], *, label: str, key: str,
                              index: int = 0) -> None:
        """``set_calibrated`` on several panels at once, framed once (the expected layer is
        handed over on every redraw)."""
        layer, drawn = self._extras.get(key, (Layer(key=key, label=label, kind="calibrated", index=index), {}))
        drawn.update({panel: tuple(curves) for panel, curves in by_panel.items()})
        self._extras[key] = (layer, drawn)
        self._draw_extra(layer, drawn)
        self._finish()

    def clear_layer(self, key: str) -> None:
        """Remove a measured or calibrated series from every panel."""
        if self._extras.pop(key, None) is not None:
            self._drop_layer(key)
            self._finish()

    def drawn(self) -> list[DrawnSeries]:
        """Every (panel, layer) with the curves it shows, current first."""
        out = []
        for key in self._order:
            view = self._panels[key]
            for layer in view.layers():
                curves = view.curves_of(layer.key)
                if curves:
                    out.append(DrawnSeries(chart=self.chart_key, panel=key, layer=layer, curves=tuple(curves)))
        return out

    def curve(self, panel: str, curve_key: str, layer: str = "current") -> Curve:
        """The curve a layer shows on a panel (tests assert on what was handed over)."""
        return self._panels[panel].drawn[(layer, curve_key)].curve

    def items(self, panel: str, curve_key: str, layer: str = "current") -> list[object]:
        """The graphics items drawing that curve."""
        return list(self._panels[panel].drawn[(layer, curve_key)].items)

    def set_info_link(self, html: str) -> None:
        """Show ``html`` (a link) in place of "How is this computed?", in the theme's link colour."""
        self._info_html = html
        self.info.setText(coloured_links(html, self.theme.hyperlink))

    def apply_theme(self, theme: Theme) -> None:
        self.theme = theme
        self.view.setBackground(theme.background)
        # a label's rich text keeps the link colour it was set with, whatever the palette says
        # now: set again, the link follows the theme (it stayed pale blue after dark -> light)
        if self._info_html:
            self.set_info_link(self._info_html)
        for view in self._panels.values():
            view.apply_theme(theme)
        if self._current is not None:
            self.set_charts(self._current, self._pinned_charts, self._current_label)

    def replay_on(self, other: ChartPlot) -> None:
        """Hand ``other`` everything this plot shows (for rendering a report twin)."""
        if self._current is not None:
            for key, (layer, by_panel) in self._extras.items():
                other._extras[key] = (layer, dict(by_panel))
            other.set_charts(self._current, self._pinned_charts, self._current_label)

    def render_image(self, size: QSize | None = None) -> QImage:
        """The panels (no read-out bar) as an image, ``size`` pixels when given (the widget
        is resized to it: meant for an offscreen twin, see ``replay_on``)."""
        if size is not None:
            self.bar.hide()
            self.fixed_columns = 1            # a report's picture keeps its panels stacked
            self.resize(size)
            self._lay_out(force=True)
            layout = self.layout()
            if layout is not None:
                layout.activate()
        # an axis learns how wide its tick labels are only when painted: paint once, let the
        # axes widen, then paint what is kept (else a y-axis title overlaps its tick labels)
        self.view.grab()
        QCoreApplication.sendPostedEvents()
        return self.view.grab().toImage()

    def readout_at(self, panel: str, x: float, y: float, *, view_coords: bool = False) -> str:
        """Describe the point nearest (x, y) of ``panel`` (data units unless ``view_coords``)
        and show it in the read-out line; "" when nothing is near."""
        view = self._panels[panel]
        if not view_coords:
            x = log_position(x, view.panel.log_x)
            y = log_position(y, view.panel.log_y)
        text = ""
        hit = view.nearest(x, y)
        if hit is not None:
            drawn, i = hit
            c = drawn.curve
            view.hover_dot.setData([log_position(float(c.x[i]), view.panel.log_x)],
                                   [log_position(float(c.y[i]), view.panel.log_y)])
            text = _describe_point(drawn, i)
        else:
            view.hover_dot.setData([], [])
            stack = view.stack_at(x, y)
            if stack is not None:
                text = _describe_segment(*stack)
        self.readout.setText(text or HOVER_HINT)
        if text:
            self.hovered.emit(text)
        return text

    def clear_readout(self) -> None:
        """Back to the hint, with no hover dot: for when what the read-out described is gone."""
        for view in self._panels.values():
            view.hover_dot.setData([], [])
        self.readout.setText(HOVER_HINT)

    # -- internals --------------------------------------------------------------------------
    def _arrange(self, panel_sets: Sequence[Sequence[Panel]]) -> None:
        """Create missing panels, configure them, and lay out those in use (``_lay_out``)."""
        wanted: list[Panel] = []
        for panels in panel_sets:
            for panel in panels:
                if panel.key not in {p.key for p in wanted}:
                    wanted.append(panel)
        for panel in wanted:
            if panel.key in self._panels:
                self._panels[panel.key].configure(panel)
            else:
                self._panels[panel.key] = PanelView(panel, self.theme)
        order = [p.key for p in wanted]
        if order != self._order:
            self._order = order
            first = self._panels[order[0]]
            axes = [self._panels[key].plot.getAxis("left") for key in order]
            for axis in axes:
                axis.peers = [other for other in axes if other is not axis]
            for key in order[1:]:
                view = self._panels[key]
                if (view.panel.x_unit, view.panel.log_x) == (first.panel.x_unit, first.panel.log_x):
                    view.plot.setXLink(first.plot)
            self._lay_out(force=True)

    def unlink(self) -> None:
        """Undo the links between this plot's panels (shared x ranges, left axes' widths), as its
        window closes: torn down, a view box still told its linked peer of a resize, and the
        peer's deleted items ended the process (a segfault in the suite, between window tests)."""
        for view in self._panels.values():
            view.plot.setXLink(None)
            axis = view.plot.getAxis("left")
            if isinstance(axis, UnitAxis):
                axis.peers = []
        self._order = []            # a later _arrange links them again

    def columns(self) -> int:
        """Panels side by side now (``grid.columns_for`` this plot's size)."""
        height = self.height() - self.bar.sizeHint().height() - _MARGINS[1] - _MARGINS[3]
        # less the scroll bar's width: the panels must fit beside it once they scroll
        width = self.width() - _MARGINS[0] - _MARGINS[2] - self.scroll_area.verticalScrollBar().sizeHint().width()
        return grid.columns_for(len(self._order), width, height, self.fixed_columns)

    def _lay_out(self, *, force: bool = False) -> None:
        """Place the panels in ``columns()`` columns (row by row), each legend beside its panel
        when stacked or under it side by side."""
        columns = self.columns()
        if columns == self._columns and not force:
            return
        self._columns = columns
        ci = self.view.ci
        ci.clear()
        width = self.width() - _MARGINS[0] - _MARGINS[2] - (columns - 1) * _SPACING
        for i, key in enumerate(self._order):
            view = self._panels[key]
            row, col = divmod(i, columns)
            if columns == 1:
                ci.addItem(view.plot, row=row, col=0)
                ci.addItem(view.legend, row=row, col=1)
                view.set_legend_room(0)
            else:
                ci.addItem(view.plot, row=2 * row, col=col)
                ci.addItem(view.legend, row=2 * row + 1, col=col)
                # as wide as its panel (less the swatch): a wider one pushed the last column off the view
                view.set_legend_room(max(120.0, width / columns - grid.LEGEND_SWATCH))
            # at its own height, top-aligned: stretched, its rows would drift apart
            view.legend.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
            ci.layout.setAlignment(view.legend, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        for col in range(columns):          # side by side, each as wide as the next, whatever its legend holds
            ci.layout.setColumnStretchFactor(col, 1)
            ci.layout.setColumnPreferredWidth(col, width / columns)
        self._share_legends()
        for upper, lower in zip(self._order, [*self._order[1:], None], strict=True):
            # stacked over one with the same x axis, a panel leaves the axis title to that one
            below = self._panels[lower].panel if lower is not None and columns == 1 else None
            self._panels[upper].show_x_title(below is None or _x_axis(below) != _x_axis(self._panels[upper].panel))
        self._fit_height()

    def _share_legends(self) -> None:
        # on screen the line over the tabs names each pinned series with its colour (a report's
        # picture, stacked, keeps them in its legends)
        above = frozenset(p.label for p in self._pinned_charts) if not self.fixed_columns else frozenset()
        grid.share_legends([self._panels[key] for key in self._order], max(1, self._columns), above)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        if self._order:
            self._lay_out()
            self._fit_height()               # the view's height sets how far a row's panels give way
        self._say_below()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.Type.Resize and self._order and watched is self.scroll_area.viewport():
            self._fit_height()
        return super().eventFilter(watched, event)

    def hidden_below(self) -> list[str]:
        """The titles of the panels wholly or mostly under the scroll area's view (at 1280 x 720
        the Decode tab's third chart sat there, unseen and unsaid)."""
        port = self.scroll_area.viewport().height()
        if port <= 0:
            return []
        bottom = self.scroll_area.verticalScrollBar().value() + port
        out = []
        for key in self._order:
            view = self._panels[key]
            top = view.plot.mapRectToScene(view.plot.boundingRect()).top()
            if top + 0.5 * MIN_SHOWN > bottom:
                out.append(view.panel.title)
        return out

    def _say_below(self) -> None:
        hidden = self.hidden_below()
        self.below.setText(f"↓ below: {', '.join(hidden)}" if hidden else "")
        self.below.setVisible(bool(hidden))

    def _on_scroll_value_changed(self, _value: int) -> None:
        self._say_below()

    def _fit_height(self) -> None:
        """Keep each panel tall enough for its y-axis title (on screen at least ``MIN_CHART_HEIGHT``,
        or what keeps a row's legends in the view: ``grid.fit_heights``; the scroll area takes
        what the window cannot hold)."""
        on_screen = not self.fixed_columns
        room = self.scroll_area.viewport().height() - _MARGINS[1] - _MARGINS[3] - 4
        views = [self._panels[key] for key in self._order]
        need = grid.fit_heights(views, max(1, self._columns), on_screen, room)
        self.view.setMinimumHeight(int(need + _MARGINS[1] + _MARGINS[3]) + 4)
        self._legend_heights = [v.legend.boundingRect().height() for v in views]
        if on_screen:
            self._refit.start()
        self._say_below()

    def _on_refit_timeout(self) -> None:
        if [self._panels[key].legend.boundingRect().height() for key in self._order] != self._legend_heights:
            self._fit_height()

    def _set_extra(self, key: str, label: str, kind: LayerKind, index: int, panel: str,
                   curves: Sequence[Curve]) -> None:
        layer, by_panel = self._extras.get(key, (Layer(key=key, label=label, kind=kind, index=index), {}))
        by_panel[panel] = tuple(curves)
        self._extras[key] = (layer, by_panel)
        self._draw_extra(layer, by_panel)
        self._finish()

    def _draw_extra(self, layer: Layer, by_panel: Mapping[str, tuple[Curve, ...]]) -> None:
        for panel, curves in by_panel.items():
            if panel in self._panels:
                self._panels[panel].draw(layer, curves)

    def _drop_layer(self, key: str) -> None:
        for view in self._panels.values():
            view.drop_layer(key)

    def _finish(self) -> None:
        for key in self._order:
            self._panels[key].frame()
        self._share_legends()
        self._fit_height()                   # after framing: the axis titles take their prefixes
        self.redrawn.emit()

    def _on_scene_mouse_moved(self, pos: QPointF) -> None:
        for key in self._order:
            vb = self._panels[key].plot.getViewBox()
            if vb.sceneBoundingRect().contains(pos):
                point = vb.mapSceneToView(pos)
                self.readout_at(key, point.x(), point.y(), view_coords=True)
                return


def _x_axis(panel: Panel) -> tuple[str, str, bool]:
    return panel.x_label, panel.x_unit, panel.log_x


def _describe_point(drawn: Drawn, i: int) -> str:
    c, layer = drawn.curve, drawn.layer
    x, y = float(c.x[i]), float(c.y[i])
    # a series that is its layer's only curve (label = the layer's) is named once, by the layer
    what = f"{c.label}:" if c.label != layer.label else c.y_name
    text = f"{what} {units.fmt(y, c.y_unit)} at {c.x_name} {units.fmt(x, c.x_unit)}"
    for name, values in c.extras.items():
        text += f" · {name} {significant(float(values[i]))}"
    return f"{layer.label} — {text}"


def _describe_segment(drawn: Drawn, i: int) -> str:
    c = drawn.curve
    capacity = float(c.extras["capacity"][i]) if "capacity" in c.extras else float("nan")
    return (f"{drawn.layer.label} — {c.categories[i]}: {units.fmt(float(c.y[i]), c.y_unit)} "
            f"of {units.fmt(capacity, c.y_unit)}")


def coloured_links(html: str, colour: str) -> str:
    """``html`` with every ``<a ...>`` drawn in ``colour`` (any colour it named replaced)."""
    plain = re.sub(r"(<a\b[^>]*?)\s+style='[^']*'", r"\1", html)
    return re.sub(r"<a\b", f"<a style='color:{colour}'", plain)
