"""Reading a file a user (or an earlier rooflab) left on disk, with a hard byte cap.

The cap holds whatever ``stat`` says: at most ``max_bytes + 1`` bytes are ever read, so
``/dev/zero`` behind a link or a file that grows while it is read cannot exhaust memory. Only
regular files are read: a folder, a named pipe, a device or a socket is refused by kind
before it is opened (a pipe with no writer would block the open or the read forever), and the
open itself is non-blocking in case the path was swapped in between. Every failure is one
ModelFileError line naming the file."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from rooflab.core.errors import ModelFileError

_CHUNK = 1 << 20
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


class MissingFileError(ModelFileError):
    """There is nothing at the path (the caller may treat it as "not saved yet")."""


class UnreadableFileError(ModelFileError):
    """Something is there but the system refuses to read it (permission, I/O error): the
    file itself may be fine, so callers should not move it aside."""


def file_kind(mode: int) -> str:
    """What a ``st_mode`` describes, as a message says it ("a folder", "a named pipe (FIFO)")."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _require_regular(name: str, mode: int, what: str) -> None:
    if not stat.S_ISREG(mode):
        raise ModelFileError(name, f"is {file_kind(mode)}, not {what}")


def os_error(name: str, exc: OSError) -> ModelFileError:
    """The one-line error for an OSError met while opening or reading ``name``."""
    code = exc.errno
    if code in (errno.ENOENT, errno.ENOTDIR):
        return MissingFileError(name, "no such file")
    if code == errno.ELOOP:
        return ModelFileError(name, "is a loop of symbolic links")
    if code == errno.EISDIR:
        return ModelFileError(name, "is a folder")
    if code == errno.ENAMETOOLONG:
        return ModelFileError(name, "the file name is too long")
    if code in (errno.EACCES, errno.EPERM):
        return UnreadableFileError(name, "permission denied")
    return UnreadableFileError(name, f"cannot read ({exc.strerror or exc})")


def stat_regular(path: str | os.PathLike[str], what: str) -> os.stat_result:
    """``os.stat`` of ``path`` (links followed), refusing anything but a regular file."""
    name = os.fspath(path)
    try:
        info = os.stat(name)
    except OSError as exc:
        raise os_error(name, exc) from None
    except ValueError:                       # an embedded NUL
        raise ModelFileError(name, "is not a valid file name") from None
    _require_regular(name, info.st_mode, what)
    return info


def open_regular(path: str | os.PathLike[str], what: str) -> int:
    """A file descriptor of the regular file at ``path``, opened without blocking; the caller
    closes it. ModelFileError for anything else at the path."""
    name = os.fspath(path)
    stat_regular(name, what)
    try:
        fd = os.open(name, _OPEN_FLAGS)
    except OSError as exc:
        raise os_error(name, exc) from None
    try:
        _require_regular(name, os.fstat(fd).st_mode, what)      # swapped since the stat
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)        # a regular file never blocks; plain reads from here on
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_fd_capped(fd: int, name: str, max_bytes: int, what: str) -> bytes:
    """Read to the end of ``fd`` but never more than ``max_bytes + 1`` bytes; ModelFileError
    when there are more than ``max_bytes``."""
    chunks: list[bytes] = []
    total = 0
    try:
        while total <= max_bytes:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise os_error(name, exc) from None
    if total > max_bytes:
        raise ModelFileError(name, f"is larger than {max_bytes:,} bytes, too large for {what}")
    return b"".join(chunks)


def read_capped(path: str | os.PathLike[str], max_bytes: int, what: str) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes`` of them.

    ``what`` names the expected kind of file in messages ("a config.json"). MissingFileError
    when nothing is there, UnreadableFileError when the system refuses, ModelFileError for
    anything else (a folder, a pipe, a device, a link loop, a file over the cap)."""
    name = os.fspath(path)
    fd = open_regular(name, what)
    try:
        return read_fd_capped(fd, name, max_bytes, what)
    finally:
        os.close(fd)


def path_kind(path: Path) -> str:
    """What is at ``path`` ("a regular file", "a folder", "a character device", ...), "" when
    nothing is (or it cannot be looked at)."""
    try:
        return file_kind(os.stat(path).st_mode)
    except (OSError, ValueError):
        return ""
