"""rooflab's own record files (the measured machine, measurements, calibrations): one JSON object
each, with a ``format`` number, written atomically.

A record that cannot be read is moved aside to ``<name>.corrupt-<time>`` with a log line and
treated as absent, so a bad file costs its contents, never a crash."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rooflab.core.files.atomic import write_atomic

log = logging.getLogger(__name__)
FORMAT = 1


def read_record(path: Path) -> dict[str, Any] | None:
    """Parsed record at ``path``; None when absent or unreadable (a corrupt file is set aside)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not a rooflab store file of this format")
        return data
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        set_aside(path, str(exc))
        return None


def set_aside(path: Path, why: str) -> None:
    """Move an unusable record out of the way, keeping its bytes for the user to inspect."""
    backup = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        path.replace(backup)
        log.warning("%s could not be read (%s); moved to %s", path, why, backup.name)
    except OSError as exc:
        log.warning("%s could not be read (%s) nor moved aside (%s)", path, why, exc)


def write_record(path: Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` (plus the format number) to ``path`` atomically."""
    return write_atomic(path, json.dumps({"format": FORMAT, **data}, indent=1, sort_keys=True) + "\n")
