"""Small widgets the panels share: a slider bound to a spin box, a one-line message bar, a
status line that stays on one line, and the hidden error label a panel shows under its fields."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QToolButton,
    QWidget,
)

from rooflab.gui.widgets.typed import CheckedDoubleSpin, CheckedSpin

SLIDER_STEPS = 1000
ERROR_COLOUR = "#c62828"


def error_label() -> QLabel:
    """A wrapped, red, initially hidden label for a panel's one-line error."""
    label = QLabel()
    label.setWordWrap(True)
    label.setStyleSheet(f"color:{ERROR_COLOUR};")
    label.hide()
    return label


def eta_text(seconds: float) -> str:
    """"about 40 s", "about 3 min": seconds left, as precise as an estimate is."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    return f"about {round(seconds / 60)} min"


class RunBar(QProgressBar):
    """A job's progress bar with the seconds left written on it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setRange(0, SLIDER_STEPS)

    def show_at(self, fraction: float | None, eta: float | None = None) -> None:
        """At ``fraction`` (None: where it was) with ``eta`` seconds left (None: not said)."""
        if fraction is not None:
            self.setValue(round(SLIDER_STEPS * min(max(fraction, 0.0), 1.0)))
        self.setFormat(f"%p% · {eta_text(eta)} left" if eta is not None else "%p%")


class StatusLine(QLabel):
    """A status on one line: cut with "…" to the width it has (the whole text in its tooltip),
    never wrapped onto a second line the layout then clips."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self._full = ""
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt API
        self._full = text
        self.setToolTip(text)
        self._elide()

    def text(self) -> str:
        """The whole status (what is shown may be cut)."""
        return self._full

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        width = max(self.width(), 40)
        super().setText(self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, width))


class SliderSpin(QWidget):
    """A spin box with a slider beside it; the slider is logarithmic for token counts and may
    reach less far than the box (``set_slider_range``: a drag stays in a useful range, a typed
    value may go past it).

    ``value_edited`` fires when the user changes the value (not when ``set_value`` does)."""

    value_edited = Signal(float)
    refused = Signal(str)              # what was typed and could not be taken, in one line

    def __init__(self, low: float, high: float, *, integer: bool = True, log: bool = False,
                 decimals: int = 2, step: float = 1.0, suffix: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._low, self._high, self._log, self._integer = low, high, log, integer
        self._reach = (low, high)          # the slider's ends
        self.spin: CheckedSpin | CheckedDoubleSpin
        if integer:
            whole = CheckedSpin()
            whole.setRange(int(low), int(high))
            whole.setGroupSeparatorShown(True)
            whole.setSingleStep(max(1, round(step)))
            self.spin = whole
        else:
            real = CheckedDoubleSpin()
            real.setDecimals(decimals)
            real.setRange(low, high)
            real.setSingleStep(step)
            self.spin = real
        self.spin.setSuffix(suffix)
        self.spin.setStepType(QAbstractSpinBox.StepType.AdaptiveDecimalStepType if log
                              else QAbstractSpinBox.StepType.DefaultStepType)
        # One change per finished edit (Enter, focus out, arrows), not per keystroke: a value
        # sent on every digit comes back from the state re-formatted ("1234" -> "1,234") with
        # the cursor left one place short, so the next digit landed in the middle (12354).
        self.spin.setKeyboardTracking(False)
        self.spin.setMinimumWidth(96)
        self.spin.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, SLIDER_STEPS)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.spin)
        self.spin.valueChanged.connect(self._on_spin_value_changed)
        self.spin.refused.connect(self.refused)
        self.slider.valueChanged.connect(self._on_slider_value_changed)

    def value(self) -> float:
        return float(self.spin.value())

    @property
    def low(self) -> float:
        return self._low

    @property
    def slider_range(self) -> tuple[float, float]:
        return self._reach

    def set_slider_range(self, low: float, high: float) -> None:
        """The values the slider's ends stand for (within the box's range); the box keeps its own."""
        self._reach = (max(self._low, low), min(self._high, max(low, high)))
        self.slider.blockSignals(True)
        self.slider.setValue(self._to_slider(self.value()))
        self.slider.blockSignals(False)

    def set_value(self, value: float) -> None:
        """Show ``value`` without emitting ``value_edited``."""
        self.spin.blockSignals(True)
        self.slider.blockSignals(True)
        if float(self.spin.value()) != float(value):      # leave an edit in progress alone
            self._show(value)
        self.slider.setValue(self._to_slider(value))
        self.spin.blockSignals(False)
        self.slider.blockSignals(False)

    def setToolTip(self, text: str) -> None:  # noqa: N802 - Qt API
        super().setToolTip(text)
        self.spin.setToolTip(text)
        self.slider.setToolTip(text)

    # slider position <-> value (log scale over [max(low, 1), high] when log)
    def _to_slider(self, value: float) -> int:
        low, high = (max(self._reach[0], 1.0), self._reach[1]) if self._log else self._reach
        if high <= low:
            return 0
        if self._log:
            frac = (math.log(max(value, low)) - math.log(low)) / (math.log(high) - math.log(low))
        else:
            frac = (value - low) / (high - low)
        return round(min(max(frac, 0.0), 1.0) * SLIDER_STEPS)

    def _from_slider(self, position: int) -> float:
        frac = position / SLIDER_STEPS
        low, high = (max(self._reach[0], 1.0), self._reach[1]) if self._log else self._reach
        value = math.exp(math.log(low) + frac * (math.log(high) - math.log(low))) if self._log \
            else low + frac * (high - low)
        if self._log and self._reach[0] < 1 and position == 0:
            value = self._reach[0]
        if self._integer:
            # snap to two significant figures so the slider gives round numbers (2,048 not 2,063)
            value = float(round(value, -max(0, int(math.log10(max(value, 1))) - 1))) if self._log else round(value)
            if position == SLIDER_STEPS:
                value = self._reach[1]          # the far end is the bound itself (32,768, not 33,000)
        return value

    def _on_spin_value_changed(self, value: float) -> None:
        self.slider.blockSignals(True)
        self.slider.setValue(self._to_slider(value))
        self.slider.blockSignals(False)
        self.value_edited.emit(float(value))

    def _on_slider_value_changed(self, position: int) -> None:
        self._show(self._from_slider(position))

    def _show(self, value: float) -> None:
        """Put ``value`` in the spin box: whole in an integer one."""
        if isinstance(self.spin, QSpinBox):
            self.spin.setValue(int(value))
        else:
            self.spin.setValue(value)


class MessageBar(QWidget):
    """A dismissable one-line message at the top of the window (errors, notices)."""

    _STYLES = {              # (box, text): the same in light and dark themes
        "error": ("background:#fde7e9;border:1px solid #f1aeb5;", "#8a1c1c"),
        "warning": ("background:#fff4d6;border:1px solid #f0d58c;", "#6b4e00"),
        "info": ("background:#e6f0ff;border:1px solid #b4cdf5;", "#173f7a"),
    }

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self._on_close_clicked)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 4, 4, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(close)
        self.level = ""
        self.source = ""
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.hide()

    def show_message(self, text: str, level: str = "error", source: str = "") -> None:
        """Show ``text``; ``source`` names what raised it, so that what fixes it can clear it
        (``clear(source)``) without hiding anything else."""
        self.level = level
        self.source = source
        self.label.setText(text)
        box, text_colour = self._STYLES.get(level, self._STYLES["info"])
        self.setStyleSheet(f"MessageBar{{{box}border-radius:4px;}}"
                           f"QLabel, QToolButton{{border:none;background:transparent;color:{text_colour};}}")
        self.show()

    def clear(self, source: str) -> None:
        if self.source == source:
            self.hide()

    def text(self) -> str:
        return "" if self.isHidden() else self.label.text()

    def _on_close_clicked(self) -> None:
        self.hide()
