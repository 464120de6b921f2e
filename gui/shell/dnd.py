"""Drops of files anywhere on the window, including on widgets that take drops themselves
(text fields, spin boxes): an application event filter sees the drag first and claims any
drag that carries local files or web links for the window."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, QObject, Signal
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QApplication, QWidget

_DRAG_EVENTS = (QEvent.Type.DragEnter, QEvent.Type.DragMove, QEvent.Type.Drop)


def local_paths(mime: QMimeData | None) -> list[str]:
    """The local files and folders a drag carries, and its web links (a GGUF link or a Hugging
    Face page dragged from a browser opens as a remote model); plain text is not a model."""
    if mime is None or not mime.hasUrls():
        return []
    return [url.toLocalFile() if url.isLocalFile() else url.toString() for url in mime.urls()
            if (url.isLocalFile() and url.toLocalFile()) or url.scheme() in ("http", "https")]


_SHARD = re.compile(r"-(\d+)-of-\d+\.gguf$", re.IGNORECASE)


def _later_shard(name: str) -> bool:
    """Whether ``name`` is a split model's second or later file ("-00002-of-00003.gguf")."""
    found = _SHARD.search(name)
    return found is not None and int(found.group(1)) > 1


def folder_ggufs(path: str) -> list[Path] | None:
    """The GGUF files a dropped folder holds when it is not a Hugging Face folder (no
    config.json): what LM Studio's and llama.cpp's model folders look like, each split model by
    its first shard; None when ``path`` is not such a folder (a file, a link, a folder that opens
    as it is)."""
    folder = Path(path)
    try:
        if not folder.is_dir() or (folder / "config.json").is_file():
            return None
        found = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".gguf" and p.is_file()
                       and not _later_shard(p.name))
    except OSError:
        return None
    return found


class DropController(QObject):
    """Claims file drags over any widget of ``window`` and reports dropped paths."""

    dropped = Signal(list)        # list[str]

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self._window = window
        window.setAcceptDrops(True)     # so Qt finds a drop target under every point of the window
        app = QApplication.instance()
        if app is not None:
            app.installEventFilter(self)

    def uninstall(self) -> None:
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt API
        if event.type() not in _DRAG_EVENTS or not isinstance(event, QDropEvent):
            return False      # QDragEnterEvent and QDragMoveEvent derive from QDropEvent
        if not isinstance(obj, QWidget) or obj.window() is not self._window:
            return False
        paths = local_paths(event.mimeData())
        if not paths:
            return False
        event.acceptProposedAction()
        if event.type() == QEvent.Type.Drop:
            self.dropped.emit(paths)
        return True
