"""Help > Guide: the guide built in core (``report.guide``), one section per quantity with its
formula, listed on the left and shown on the right; ``show_topic`` opens it at one section (F1
on a figure, a chart's "How is this computed?")."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QHBoxLayout, QListWidget, QListWidgetItem, QTextBrowser, QWidget

from rooflab.core.report.guide import SECTIONS, SYMBOLS, topic


def guide_html() -> str:
    """The guide as HTML: an anchor per section (its key), the formula set apart."""
    parts = ["<a name='top'></a><h2>What each figure means</h2>", f"<p><i>{html.escape(SYMBOLS)}</i></p>"]
    for s in SECTIONS:
        parts.append(f"<a name='{s.key}'></a><h3>{html.escape(s.title)}</h3>"
                     f"<p style='margin-left:12px'><code>{html.escape(s.formula)}</code></p>"
                     f"<p>{html.escape(s.text)}</p>")
    return "".join(parts)


class GuideDialog(QDialog):
    """The guide, non-modal: the window keeps working while it is open."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("rooflab guide")
        self.setModal(False)
        self.contents = QListWidget()
        self.contents.setMaximumWidth(260)
        for s in SECTIONS:
            item = QListWidgetItem(s.title)
            item.setData(Qt.ItemDataRole.UserRole, s.key)
            self.contents.addItem(item)
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)
        self.browser.setHtml(guide_html())
        layout = QHBoxLayout(self)
        layout.addWidget(self.contents)
        layout.addWidget(self.browser, 1)
        self.resize(900, 640)
        self.current_topic = ""
        self.contents.currentItemChanged.connect(self._on_contents_current_changed)

    def show_topic(self, key: str) -> str:
        """Show the section ``key`` opens (a figure's key or a section's; the top for one the
        guide does not cover), raise the dialog, and return the section's key."""
        self.current_topic = topic(key)
        row = next((i for i, s in enumerate(SECTIONS) if s.key == self.current_topic), -1)
        self.contents.blockSignals(True)
        self.contents.setCurrentRow(row)
        self.contents.blockSignals(False)
        self.browser.scrollToAnchor(self.current_topic or "top")
        self.show()
        self.raise_()
        self.activateWindow()
        return self.current_topic

    def _on_contents_current_changed(self, item: QListWidgetItem | None, _previous: object) -> None:
        if item is not None:
            self.current_topic = str(item.data(Qt.ItemDataRole.UserRole))
            self.browser.scrollToAnchor(self.current_topic)
