"""Where the window opens: within the screen's available geometry (a 1280 x 720 screen once got a
1480 x 940 window, larger than itself), maximised on a screen smaller than the size it prefers."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

PREFERRED = QSize(1480, 940)      # px: the window's size on a screen with room for it


def available(window: QWidget) -> QRect | None:
    """The available geometry of the screen ``window`` is on (the primary one before it shows)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    return None if screen is None else screen.availableGeometry()


def fit_to_screen(window: QWidget, *, maximize_small: bool = False, room: QRect | None = None) -> None:
    """Shrink ``window`` (its preferred or restored size) to the available geometry (``room``:
    the screen's) and move it inside; ``maximize_small``: maximise it when the screen is smaller
    than ``PREFERRED`` (the first start on a laptop screen), where a window a little smaller
    than the screen only wastes its edges. Rendering offscreen (a screenshot, a test) there is
    no screen to fit: the window keeps its size."""
    if room is None:
        if QGuiApplication.platformName() == "offscreen":
            return
        room = available(window)
    if room is None or room.isEmpty():
        return
    size = window.size().boundedTo(room.size())
    if size != window.size():
        window.resize(size)
    frame = window.frameGeometry()
    if not room.contains(frame):
        left = min(max(frame.left(), room.left()), room.right() - frame.width() + 1)
        top = min(max(frame.top(), room.top()), room.bottom() - frame.height() + 1)
        window.move(max(left, room.left()), max(top, room.top()))
    if maximize_small and (room.width() < PREFERRED.width() or room.height() < PREFERRED.height()):
        window.setWindowState(window.windowState() | Qt.WindowState.WindowMaximized)
