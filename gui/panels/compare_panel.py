"""Compare: the series pinned beside the current one on every plot, each in its colour."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor, QIcon, QPixmap, QResizeEvent
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from rooflab.gui.state.app_state import AppState
from rooflab.gui.widgets.theme import Theme

# px; past it the list scrolls. With the stopwatch under it, the side panel then fits the
# bottom of a 1080-pixel window whatever is pinned (the current row and two wrapped pins show)
LIST_HEIGHT = 84


class _RowsList(QListWidget):
    """A list as tall as its rows (up to its maximum height, then it scrolls): a list kept
    120 px tall for its one "Current" row pushed the stopwatch below a 1080-pixel window."""

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        self.executeDelayedItemsLayout()         # the rows as wrapped at the list's width now
        height = self.contentsSize().height() + 2 * self.frameWidth() + 4
        return QSize(super().sizeHint().width(), max(self.minimumSizeHint().height(), min(height, LIST_HEIGHT)))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        one = self.sizeHintForRow(0) if self.count() else self.fontMetrics().height()
        return QSize(super().minimumSizeHint().width(), one + 2 * self.frameWidth() + 4)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.updateGeometry()            # its rows wrap anew: its height follows


def _swatch(colour: str) -> QIcon:
    pixmap = QPixmap(14, 14)
    pixmap.fill(QColor(colour))
    return QIcon(pixmap)


class ComparePanel(QGroupBox):
    def __init__(self, state: AppState, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__("Compare", parent)
        self.setToolTip("Pin the model, machine and workload on screen; then change any of them. Every plot "
                        "draws the pinned series beside the current one.")
        self._state = state
        self._theme = theme
        self.list = _RowsList()
        self.list.setMaximumHeight(LIST_HEIGHT)
        self.list.setWordWrap(True)
        self.pin_button = QPushButton("Pin current")
        self.pin_button.setToolTip("Pin what is on screen as a series (Ctrl+P).")
        self.remove_button = QPushButton("Remove")
        self.clear_button = QPushButton("Clear")
        buttons = QHBoxLayout()
        for b in (self.pin_button, self.remove_button, self.clear_button):
            buttons.addWidget(b)
        layout = QVBoxLayout(self)
        layout.addWidget(self.list)
        layout.addLayout(buttons)
        self.pin_button.clicked.connect(self._on_pin_button_clicked)
        self.remove_button.clicked.connect(self._on_remove_button_clicked)
        self.clear_button.clicked.connect(self._on_clear_button_clicked)
        state.pinned_changed.connect(self._on_state_pinned_changed)
        self._refresh()

    def apply_theme(self, theme: Theme) -> None:
        self._theme = theme
        self._refresh()

    def _refresh(self) -> None:
        self.list.clear()
        current = QListWidgetItem(_swatch(self._theme.current["main"]), "Current (what the tabs show)")
        current.setFlags(Qt.ItemFlag.ItemIsEnabled)
        self.list.addItem(current)
        for p in self._state.pinned:
            item = QListWidgetItem(_swatch(self._theme.series[p.pin_id % len(self._theme.series)]), p.label)
            item.setData(Qt.ItemDataRole.UserRole, p.pin_id)
            self.list.addItem(item)
        self.list.updateGeometry()
        has = bool(self._state.pinned)
        self.remove_button.setEnabled(has)
        self.clear_button.setEnabled(has)

    def _on_state_pinned_changed(self) -> None:
        self._refresh()

    def _on_pin_button_clicked(self) -> None:
        self._state.pin_current()

    def _on_remove_button_clicked(self) -> None:
        item = self.list.currentItem()
        pin_id = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if pin_id is None and self._state.pinned:
            pin_id = self._state.pinned[-1].pin_id
        if pin_id is not None:
            self._state.unpin(int(pin_id))

    def _on_clear_button_clicked(self) -> None:
        self._state.clear_pinned()
