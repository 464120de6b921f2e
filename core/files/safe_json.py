"""The one JSON reader and writer for everything rooflab reads or keeps: config.json,
safetensors headers, llama-bench output, machine profiles, stored records and settings.

Reading is bounded: a byte cap (``capped``), a nesting limit checked before ``json.loads``
recurses (100,000 brackets would otherwise end in RecursionError), integers of at most 308
digits (any longer is no float and Python refuses past 4,300 anyway), and only finite numbers:
NaN and Infinity literals and overflowing floats such as 1e400 are refused, since no field
rooflab reads may hold one. A UTF-8 byte-order mark is skipped. Every failure is one line.

Writing never emits NaN or Infinity: non-finite floats become null."""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

import numpy as np

from rooflab.core.errors import ModelFileError
from rooflab.core.files.capped import read_capped

MAX_DEPTH = 64                      # rooflab's own files nest 6 deep, configs 4
MAX_INT_DIGITS = 308                # 10**308 is about the largest float
MAX_JSON_BYTES = 16 << 20           # records and profiles are kilobytes
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.S)     # possessive: linear even when unterminated
_SCAN_CHUNK = 1 << 18           # bytes scanned at once: about 2 MB of arrays
_OPEN = (ord("["), ord("{"))
_CLOSE = (ord("]"), ord("}"))


class JsonError(ValueError):
    """Text that is not JSON rooflab accepts; the message reads after a file name
    ("is not valid JSON (line 3: Expecting value)")."""


def _refuse_constant(name: str) -> Any:
    raise JsonError(f"holds {name}, which is not a finite number")


def _parse_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise JsonError(f"holds a number of {digits:,} digits, too large for any field")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonError(f"holds the number {text[:24]}{'...' if len(text) > 24 else ''}, too large for any field")
    return value


def check_depth(text: str, limit: int = MAX_DEPTH) -> None:
    """JsonError when brackets outside strings nest deeper than ``limit``. Linear time and
    memory bounded by a chunk, whatever the text (numpy scans the brackets)."""
    if text.count("[") + text.count("{") <= limit:
        return
    bare = _STRING.sub("", text).encode("ascii", "replace")
    codes = np.frombuffer(bare, dtype=np.uint8)
    depth = 0
    for start in range(0, codes.size, _SCAN_CHUNK):
        part = codes[start:start + _SCAN_CHUNK]
        step = ((part == _OPEN[0]) | (part == _OPEN[1])).astype(np.int32)
        step -= (part == _CLOSE[0]) | (part == _CLOSE[1])
        running = np.cumsum(step, dtype=np.int32)
        running += depth               # a depth stays within int32: at most one per byte of a 16 MB file
        if int(running.max()) > limit:
            raise JsonError(f"nests deeper than {limit} levels")
        depth = int(running[-1])


def parse_json(data: str | bytes) -> Any:
    """Parse JSON text (bytes are read as UTF-8, a byte-order mark skipped); JsonError with
    one line on anything rooflab does not accept."""
    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise JsonError(f"is not UTF-8 text (byte {exc.start:,})") from None
    else:
        text = data.removeprefix("\ufeff")
    check_depth(text)
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_int=_parse_int, parse_float=_parse_float)
    except JsonError:
        raise
    except json.JSONDecodeError as exc:
        raise JsonError(f"is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:                 # a deep stack at the call and a nesting under the limit
        raise JsonError("nests too deeply") from None
    except ValueError as exc:              # Python's own integer digit limit, as a last resort
        raise JsonError(f"holds a number that cannot be read ({str(exc)[:80]})") from None


def read_json(path: str | os.PathLike[str], *, max_bytes: int = MAX_JSON_BYTES, what: str = "a JSON file") -> Any:
    """The parsed JSON in the regular file at ``path``, read with ``capped.read_capped``'s cap.

    Raises ``capped.MissingFileError`` when nothing is there, ``capped.UnreadableFileError``
    when the system refuses to read it, and ModelFileError (one line, naming the file) for
    everything else: a folder, pipe or device, too many bytes, not UTF-8, not JSON, too deep,
    an absurd or non-finite number."""
    raw = read_capped(path, max_bytes, what)
    try:
        return parse_json(raw)
    except JsonError as exc:
        raise ModelFileError(os.fspath(path), str(exc)) from None


def finite_or_null(value: Any) -> Any:
    """``value`` with every non-finite float (inf, nan) inside dicts, lists and tuples
    replaced by None, so it can be written as strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value


def dumps_json(value: Any, **options: Any) -> str:
    """``json.dumps`` that never writes NaN or Infinity (they become null). A document with no
    such number is written as it is (walking it first cost seconds on a 100,000-row grid)."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        return json.dumps(finite_or_null(value), allow_nan=False, **options)
