"""Reading a small text file a user named (a config.json, a benchmark output) with a size cap,
every OS and encoding failure turned into one ModelFileError line."""

from __future__ import annotations

from pathlib import Path

from rooflab.core.errors import ModelFileError


def read_text_capped(path: Path, max_bytes: int, what: str) -> str:
    """The UTF-8 text of ``path``; refuses files over ``max_bytes`` before reading them.

    ``what`` names the expected kind of file in messages ("a config.json")."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ModelFileError(path, f"{size} bytes is too large for {what}")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelFileError(path, "no such file") from None
    except IsADirectoryError:
        raise ModelFileError(path, f"is a folder, not {what}") from None
    except OSError as exc:
        raise ModelFileError(path, f"cannot read ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise ModelFileError(path, "is not UTF-8 text") from exc
