"""rooflab's own record files (the measured machine, measurements, calibrations): one JSON object
each, with a ``format`` number, written atomically.

A record that cannot be used (not JSON, too deep, too large, a folder or a pipe where the file
belongs, or well-formed JSON of the wrong shape) is moved aside to ``<name>.corrupt-<time>``
with a log line and treated as absent, so a bad file costs its contents, never a crash. A
record from a newer rooflab (a higher ``format``) is left where it is and ignored; a write to
its place keeps it beside as ``<name>.newer-<time>``."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from rooflab.core.errors import ModelFileError, ResourceError, RooflabError
from rooflab.core.files.atomic import write_atomic
from rooflab.core.files.capped import MissingFileError, UnreadableFileError
from rooflab.core.files.safe_json import MAX_JSON_BYTES, dumps_json, read_json

log = logging.getLogger(__name__)
FORMAT = 1
MAX_RECORD_BYTES = MAX_JSON_BYTES
# what building objects from a record of the wrong shape raises ([1].items(), int("a"), ...)
SHAPE_ERRORS: tuple[type[Exception], ...] = (RooflabError, KeyError, IndexError, TypeError, ValueError,
                                             AttributeError, OverflowError)
T = TypeVar("T")


def record_format(data: Any) -> int | None:
    """The ``format`` of a parsed record; None when it has none a rooflab ever wrote."""
    value = data.get("format") if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def is_newer(path: Path) -> bool:
    """Whether ``path`` holds a record a newer rooflab wrote (a format above ours)."""
    try:
        fmt = record_format(read_json(path, max_bytes=MAX_RECORD_BYTES, what="a rooflab record"))
    except ModelFileError:
        return False
    return fmt is not None and fmt > FORMAT


def read_record(path: Path) -> dict[str, Any] | None:
    """Parsed record at ``path``; None when absent, unreadable, from a newer rooflab (kept as
    it is) or corrupt (set aside)."""
    try:
        data = read_json(path, max_bytes=MAX_RECORD_BYTES, what="a rooflab record")
    except MissingFileError:
        return None
    except UnreadableFileError as exc:
        log.warning("%s", exc)
        return None
    except ModelFileError as exc:
        set_aside(path, exc.reason)
        return None
    fmt = record_format(data)
    if fmt is None or not isinstance(data, dict):
        set_aside(path, "not a rooflab record (no format number)")
        return None
    if fmt > FORMAT:
        log.warning("%s was written by a newer rooflab (format %d, this one reads %d): left as it is and "
                    "ignored", path, fmt, FORMAT)
        return None
    return data


def load_record(path: Path, build: Callable[[dict[str, Any]], T]) -> T | None:
    """``build(record)`` for the record at ``path``; None when there is none to use. A record
    ``build`` cannot use (it raises one of ``SHAPE_ERRORS``) is set aside like a corrupt one."""
    data = read_record(path)
    if data is None:
        return None
    try:
        return build(data)
    except SHAPE_ERRORS as exc:
        set_aside(path, f"wrong shape: {str(exc)[:200] or type(exc).__name__}")
        return None


def _free_name(path: Path, tag: str) -> Path:
    """``<name>.<tag>-<time>``, with ``-2``, ``-3``, ... added until nothing has that name."""
    stem = f"{path.name}.{tag}-{time.strftime('%Y%m%d-%H%M%S')}"
    candidate = path.with_name(stem)
    number = 1
    while os.path.lexists(candidate):
        number += 1
        candidate = path.with_name(f"{stem}-{number}")
    return candidate


def set_aside(path: Path, why: str, *, tag: str = "corrupt") -> Path | None:
    """Move an unusable record (file, folder or anything else) out of the way, keeping its
    bytes for the user to inspect; returns where it went, None when it could not be moved."""
    backup = _free_name(path, tag)
    try:
        path.replace(backup)
    except OSError as exc:
        log.warning("%s could not be read (%s) nor moved aside (%s)", path, why, exc)
        return None
    log.warning("%s could not be read (%s); moved to %s", path, why, backup.name)
    return backup


def write_record(path: Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` (plus the format number) to ``path`` atomically; non-finite numbers are
    written as null. A newer rooflab's record at ``path`` is kept beside, not overwritten.
    ResourceError, nothing written, when the record is larger than ``read_record`` reads."""
    payload = (dumps_json({"format": FORMAT, **data}, indent=1, sort_keys=True) + "\n").encode()
    if len(payload) > MAX_RECORD_BYTES:         # read_record would refuse it and set it aside
        raise ResourceError(f"{path}: {len(payload):,} bytes, more than a rooflab record may hold "
                            f"({MAX_RECORD_BYTES:,}): not written")
    if is_newer(path):
        set_aside(path, "written by a newer rooflab", tag="newer")
    return write_atomic(path, payload)
