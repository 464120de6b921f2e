"""Text read from files: a small file a user named (a config.json, a benchmark output) read with
a hard size cap, and the one function that makes a string from a file safe to print.

Names in files (a GGUF's general.name, a config's model_type, a llama-bench model) are data,
not trusted text: an escape sequence in one printed raw can retitle, clear or hijack the
terminal. ``printable`` removes control characters wherever such a string enters a ModelSpec,
a machine profile or an import result."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rooflab.core.errors import ModelFileError
from rooflab.core.files.capped import read_capped

# C0 and C1 controls and DEL, bidirectional overrides and isolates (which reorder what a
# terminal shows); line breaks and tabs become spaces, the rest go
_BREAKS = re.compile(r"[\t\n\v\f\r\x85\u2028\u2029]+")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
MAX_NAME = 200


def printable(text: Any, limit: int = MAX_NAME) -> str:
    """``text`` as one safe line: control characters removed, line breaks and tabs turned
    into spaces, at most ``limit`` characters (an ellipsis marks a cut)."""
    line = _CONTROLS.sub("", _BREAKS.sub(" ", str(text))).strip()
    return line if len(line) <= limit else line[: max(limit - 1, 0)] + "…"


def shown(value: Any, limit: int = 60) -> str:
    """A value quoted for an error message (``repr``, so nothing in it is printed raw), cut to
    ``limit`` characters: a 4 MB string in a config must not make a 4 MB message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_text_capped(path: Path, max_bytes: int, what: str) -> str:
    """The UTF-8 text of the regular file at ``path`` (a byte-order mark skipped), at most
    ``max_bytes`` of it; one ModelFileError line for anything else.

    ``what`` names the expected kind of file in messages ("a config.json")."""
    raw = read_capped(path, max_bytes, what)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ModelFileError(path, f"is not UTF-8 text (byte {exc.start:,})") from None


def _squeezed(name: str) -> str:
    return re.sub(r"[-_. ]", "", name.lower())


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """"; did you mean rtx-4090?" for a name one slip away from a known key (separators
    ignored, then spelling), or "" when none is near."""
    keys = list(known)
    by_squeezed = {_squeezed(k): k for k in keys}
    if (same := by_squeezed.get(_squeezed(name))) is not None:
        return f"; did you mean {same}?"
    near = difflib.get_close_matches(_squeezed(name), list(by_squeezed), n=3, cutoff=0.75)
    if not near:
        return ""
    return f"; did you mean {' or '.join(by_squeezed[k] for k in near)}?"
