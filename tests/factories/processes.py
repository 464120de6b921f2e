"""The processes a test started: what a cancelled or crashed engine must not leave behind."""

from __future__ import annotations

import os
from pathlib import Path


def children() -> set[int]:
    """Processes whose parent is this one (Linux's /proc; elsewhere, none are seen)."""
    found: set[int] = set()
    if not os.path.isdir("/proc/self"):
        return found
    for entry in (e for e in os.listdir("/proc") if e.isdigit()):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
            found.add(int(entry))
    return found
