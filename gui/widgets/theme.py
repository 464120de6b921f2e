"""Light and dark looks: the Qt palette, and the colours plots draw series with.

Follows the system's colour scheme unless the user picks one (View > Theme)."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory

THEME_MODES: tuple[str, ...] = ("system", "light", "dark")


@dataclass(frozen=True, slots=True)
class Theme:
    """Colours a plot needs; ``series`` gives each pinned series its colour in turn.
    ``expected``: the current series' expected curves (what a calibration expects), by the role
    of the prediction each one shadows; none of them is a ``series`` colour, so an expected
    curve never reads as a pinned series."""

    dark: bool
    background: str
    foreground: str
    grid_alpha: float
    current: dict[str, str]        # role -> colour for the current series
    series: tuple[str, ...]
    expected: dict[str, str]       # role of the prediction shadowed -> colour of its expected curve
    measured: str
    measured_series: tuple[str, ...]   # further measured series: greys, never a pinned series' colour
    stack: tuple[str, ...]         # memory bar segments: weights, KV, free, offloaded, buffers and reserve
    hyperlink: str = "#1a5fb4"      # a link in text ("How is this computed?"), readable on ``background``


LIGHT = Theme(
    dark=False, background="#ffffff", foreground="#202124", grid_alpha=0.18,
    current={"main": "#1f5fbf", "secondary": "#7b3fb5", "memory": "#e07b00", "compute": "#1a9a50",
             "limit": "#c62828", "crossover": "#5f6368", "marker": "#1f5fbf", "calibrated": "#1f5fbf",
             "link": "#ad1457"},
    series=("#d0312d", "#2a9d8f", "#8d5a2b", "#c2185b", "#6d7d00", "#00838f"),
    # the current's blue and purple, darker: its shadow, not another series
    expected={"main": "#0b2f6e", "secondary": "#6a1b9a"},
    measured="#000000",
    measured_series=("#5f6368", "#9aa0a6", "#3c4043"),
    stack=("#1f5fbf", "#e07b00", "#c9d3dd", "#7fa7e0", "#8a63c7"),
)

DARK = Theme(
    dark=True, background="#1e1f22", foreground="#e3e3e3", grid_alpha=0.22,
    current={"main": "#6ea8ff", "secondary": "#c39bff", "memory": "#ffb454", "compute": "#5fd38d",
             "limit": "#ff6b6b", "crossover": "#a0a4a8", "marker": "#6ea8ff", "calibrated": "#6ea8ff",
             "link": "#f48fb1"},
    series=("#ff7a6e", "#4fd1c5", "#d9a066", "#f48fb1", "#c5d86d", "#4dd0e1"),
    expected={"main": "#b9d4ff", "secondary": "#dab8ff"},
    measured="#ffffff",
    measured_series=("#bdc1c6", "#80868b", "#e8eaed"),
    stack=("#6ea8ff", "#ffb454", "#4a4f57", "#3d5f99", "#b592f0"),
    hyperlink="#8ab4f8",
)


def system_is_dark() -> bool:
    app = QGuiApplication.instance()
    if app is None:
        return False
    scheme = QGuiApplication.styleHints().colorScheme()
    if scheme == Qt.ColorScheme.Dark:
        return True
    if scheme == Qt.ColorScheme.Light:
        return False
    # unknown scheme (some desktops): judge by the window colour of the platform palette
    return QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness() < 128


def theme_for(mode: str) -> Theme:
    if mode == "dark":
        return DARK
    if mode == "light":
        return LIGHT
    return DARK if system_is_dark() else LIGHT


def _dark_palette() -> QPalette:
    p = QPalette()
    colours = {
        QPalette.ColorRole.Window: "#2b2d30", QPalette.ColorRole.WindowText: "#e3e3e3",
        QPalette.ColorRole.Base: "#1e1f22", QPalette.ColorRole.AlternateBase: "#26282b",
        QPalette.ColorRole.ToolTipBase: "#3c3f41", QPalette.ColorRole.ToolTipText: "#e3e3e3",
        QPalette.ColorRole.Text: "#e3e3e3", QPalette.ColorRole.Button: "#35373b",
        QPalette.ColorRole.ButtonText: "#e3e3e3", QPalette.ColorRole.BrightText: "#ff6b6b",
        QPalette.ColorRole.Highlight: "#3d6fb6", QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: DARK.hyperlink, QPalette.ColorRole.PlaceholderText: "#8a8d91",
    }
    for role, colour in colours.items():
        p.setColor(role, QColor(colour))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7a7d81"))
    return p


def apply_theme(mode: str) -> Theme:
    """Set the application's style and palette for ``mode`` and return the plot colours."""
    app = QApplication.instance()
    theme = theme_for(mode)
    if isinstance(app, QApplication):
        style = QStyleFactory.create("Fusion")
        if style is not None:
            app.setStyle(style)
            palette = _dark_palette() if theme.dark else style.standardPalette()
            palette.setColor(QPalette.ColorRole.Link, QColor(theme.hyperlink))
            app.setPalette(palette)
    return theme
