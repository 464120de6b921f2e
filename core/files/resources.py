"""Where rooflab's data files live: a checkout, an installed wheel or a frozen build."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def resources_dir() -> Path:
    """The ``resources/`` folder (machines/, models/, icons/).

    ROOFLAB_RESOURCES overrides; a PyInstaller build unpacks to sys._MEIPASS; otherwise the
    ``rooflab.resources`` package, which is the checkout's resources/ in an editable install."""
    override = os.environ.get("ROOFLAB_RESOURCES")
    if override:
        return Path(override)
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        return Path(frozen) / "rooflab" / "resources"
    import rooflab.resources as package

    return Path(next(iter(package.__path__)))
