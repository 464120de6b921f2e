"""Atomic file writes: a reader sees the old file or the new one, never half of either.

The temporary file is ``.<name>.<random>.tmp`` in the target's folder. A write killed before
its rename leaves one behind; the next write of the same name removes those over an hour old
(a younger one may belong to a write still in progress in another process)."""

from __future__ import annotations

import glob
import logging
import os
import stat
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)
ORPHAN_AGE = 3600.0        # seconds after which a temporary file is taken as left by a killed write


def _temp_prefix(target: Path) -> str:
    return f".{target.name}."


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same folder and os.replace.

    The folder is created if needed; text is written as UTF-8. Returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    remove_orphans(target)
    return target


def remove_orphans(target: Path, *, older_than: float = ORPHAN_AGE) -> list[Path]:
    """Delete the temporary files killed writes of ``target`` left in its folder, those last
    modified more than ``older_than`` seconds ago; returns what was removed. Never raises."""
    pattern = glob.escape(_temp_prefix(target)) + "*.tmp"
    removed = []
    now = time.time()
    for candidate in target.parent.glob(pattern):
        try:
            info = candidate.lstat()
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > older_than:
                candidate.unlink()
                removed.append(candidate)
                log.info("removed %s, left by an interrupted write", candidate)
        except OSError:
            continue
    return removed
