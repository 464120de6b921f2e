"""A child process that can always be stopped: it runs in its own session (so in its own process
group), its stdout and stderr are read line by line (on POSIX by one thread that polls both pipes
and takes stderr first, so a log line written before a row is handed over before it; elsewhere by
a thread per pipe) and handed over through a bounded queue, every line is capped in length, and stopping ends
the whole group (SIGTERM, then
SIGKILL after a grace period) and reaps the child.

The child is reaped only in ``stop``: until then its process-group id cannot be reused, so a
signal sent to the group can only reach what the child started. Nothing here knows which program
runs; ``llamabench_run`` drives a user's llama.cpp tools with it."""

from __future__ import annotations

import os
import queue
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rooflab.core.errors import MeasurementError
from rooflab.core.jobs import CancelFlag, check_cancel

MAX_LINE = 64 * 1024            # bytes; a longer line arrives as its start, marked overlong
_QUEUE_LINES = 256              # lines waiting to be read, at most MAX_LINE bytes each
_ORPHAN_WAIT = 2.0              # s the pipes may stay open after the child exited (a grandchild)
_POSIX = os.name == "posix"


@dataclass(frozen=True, slots=True)
class OutputLine:
    """One line of output. ``stream``: "out" or "err"; ``text``: without its newline, decoded as
    UTF-8 with replacement characters; ``overlong``: the line was longer than the cap and only
    its first 200 characters are kept; ``eof``: the stream ended (no text)."""

    stream: str
    text: str = ""
    overlong: bool = False
    eof: bool = False


class ChildProcess:
    """``argv`` started at once in its own process group, stdin closed. Use as a context manager
    (or call ``stop``) so that it never outlives its reader."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                 max_line: int = MAX_LINE) -> None:
        self.argv = [str(a) for a in argv]
        self.name = Path(self.argv[0]).name
        self._max_line = max_line
        self._queue: queue.Queue[OutputLine] = queue.Queue(maxsize=_QUEUE_LINES)
        self._stopping = threading.Event()
        self.timed_out = False
        self._reaped_at: float | None = None    # when a poll (no waitid) reaped the child
        # a new session on POSIX (its own process group, no controlling terminal); on Windows a
        # new process group, ended with TerminateProcess (the child only)
        flags = 0 if _POSIX else getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        try:
            self._proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, env=None if env is None else dict(env),
                                          start_new_session=_POSIX, creationflags=flags)
        except OSError as exc:
            raise MeasurementError(f"{self.name} could not be started: {exc.strerror or exc}") from exc
        if _POSIX:
            self._threads = [threading.Thread(target=self._pump, daemon=True, name=f"{self.name} output")]
        else:
            self._threads = [threading.Thread(target=self._read, args=(stream, name), daemon=True,
                                              name=f"{self.name} {name}")
                             for stream, name in ((self._proc.stdout, "out"), (self._proc.stderr, "err"))]
        for thread in self._threads:
            thread.start()

    def __enter__(self) -> ChildProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        return self._proc.pid

    # --- reading ---------------------------------------------------------------------------------

    def _pump(self) -> None:
        """Read both pipes on one thread; when both have data, stderr's goes first (the order
        the child wrote them in, for a child that logs before it prints)."""
        names = {"out": self._proc.stdout, "err": self._proc.stderr}
        pending = {name: bytearray() for name in names}
        skipping = dict.fromkeys(names, False)
        selector = selectors.DefaultSelector()
        for name, stream in names.items():
            if stream is not None:
                selector.register(stream.fileno(), selectors.EVENT_READ, name)
        open_names = {key.data for key in selector.get_map().values()}
        try:
            while open_names and not self._stopping.is_set():
                ready = sorted(selector.select(timeout=0.1), key=lambda event: event[0].data != "err")
                for key, _ in ready:
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        self._feed(key.data, chunk, pending, skipping)
                        continue
                    selector.unregister(key.fd)
                    open_names.discard(key.data)
                    if pending[key.data] and not skipping[key.data]:
                        self._put(OutputLine(key.data, pending[key.data].decode("utf-8", "replace").rstrip("\r")))
                    self._put(OutputLine(key.data, eof=True))
        except (OSError, ValueError):
            pass                                # a pipe was closed under us: the end of it
        finally:
            selector.close()
            for name in open_names:
                self._put(OutputLine(name, eof=True))

    def _feed(self, name: str, chunk: bytes, pending: dict[str, bytearray], skipping: dict[str, bool]) -> None:
        """Split ``chunk`` into lines for ``name``; a line past the cap is handed over as its start
        (marked overlong) and the rest of it skipped."""
        buffer = pending[name]
        buffer += chunk
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                if len(buffer) > self._max_line and not skipping[name]:
                    self._put(OutputLine(name, buffer[:800].decode("utf-8", "replace")[:200], overlong=True))
                    skipping[name] = True
                if skipping[name]:
                    buffer.clear()
                return
            line = bytes(buffer[:end])
            del buffer[:end + 1]
            if skipping[name]:
                skipping[name] = False
            elif len(line) > self._max_line:
                self._put(OutputLine(name, line[:800].decode("utf-8", "replace")[:200], overlong=True))
            else:
                self._put(OutputLine(name, line.decode("utf-8", "replace").rstrip("\r")))

    def _read(self, stream: IO[bytes] | None, name: str) -> None:
        try:
            while stream is not None and not self._stopping.is_set():
                chunk = stream.readline(self._max_line + 1)
                if not chunk:
                    break
                overlong = len(chunk) > self._max_line and not chunk.endswith(b"\n")
                text = chunk.decode("utf-8", "replace").rstrip("\r\n")
                while chunk and overlong and not chunk.endswith(b"\n"):   # skip the rest of it
                    chunk = stream.readline(self._max_line + 1)
                self._put(OutputLine(name, text[:200] if overlong else text, overlong=overlong))
        except (OSError, ValueError):
            pass                                # the pipe was closed under us: the end of it
        finally:
            self._put(OutputLine(name, eof=True))

    def _put(self, line: OutputLine) -> None:
        while not self._stopping.is_set():
            try:
                self._queue.put(line, timeout=0.1)
                return
            except queue.Full:
                continue

    def lines(self, cancel: CancelFlag = None, deadline: float | None = None,
              poll: float = 0.1) -> Iterator[OutputLine]:
        """Each line as it arrives, until both streams end or the ``time.monotonic()``
        ``deadline`` passes (then ``timed_out`` is set). Checks ``cancel`` at least every
        ``poll`` seconds and raises ``Cancelled`` (the caller then calls ``stop``)."""
        open_streams = 2
        exited_at: float | None = None
        while open_streams:
            check_cancel(cancel)
            if deadline is not None and time.monotonic() > deadline:
                self.timed_out = True
                return
            try:
                line = self._queue.get(timeout=poll)
            except queue.Empty:
                if self._exited():
                    # the child is gone but something it started keeps the pipes open
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at > _ORPHAN_WAIT:
                        self._signal_group(kill=True)
                    if time.monotonic() - exited_at > 2 * _ORPHAN_WAIT:
                        return
                continue
            if line.eof:
                open_streams -= 1
            else:
                yield line

    # --- ending ----------------------------------------------------------------------------------

    def _exited(self) -> bool:
        """Whether the child has exited, without reaping it (its group id stays ours)."""
        if self._proc.returncode is not None:
            return True
        if _POSIX and hasattr(os, "waitid"):
            try:
                return os.waitid(os.P_PID, self._proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            except ChildProcessError:
                return True
        if self._proc.poll() is None:           # no waitid (macOS, Windows): poll reaps
            return False
        self._reaped_at = self._reaped_at or time.monotonic()
        return True

    def _signal_group(self, *, kill: bool) -> None:
        if self._proc.returncode is not None and (self._reaped_at is None
                                                  or time.monotonic() - self._reaped_at > 1.0):
            return                              # reaped long ago: the group id may be another's now
        try:
            if _POSIX:
                os.killpg(self._proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
            elif kill:
                self._proc.kill()
            else:
                self._proc.terminate()
        except (ProcessLookupError, PermissionError, OSError):
            pass

    def finish(self, timeout: float = 10.0, cancel: CancelFlag = None) -> int:
        """After the streams ended: give the child ``timeout`` seconds to exit by itself, then
        ``stop``. Returns its exit status (negative: the signal that ended it)."""
        deadline = time.monotonic() + timeout
        while not self._exited() and time.monotonic() < deadline:
            check_cancel(cancel)
            time.sleep(0.02)
        return self.stop()

    def stop(self, grace: float = 0.5) -> int:
        """End the child's whole process group: SIGTERM, then SIGKILL to whatever is left after
        ``grace`` seconds; reap the child. Safe to call again. Returns the exit status."""
        if self._proc.returncode is None:
            if not self._exited():
                self._signal_group(kill=False)
                deadline = time.monotonic() + grace
                while not self._exited() and time.monotonic() < deadline:
                    time.sleep(0.01)
            self._signal_group(kill=True)       # stragglers in the group, the child if it lingers
            self._proc.wait()
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=1.0)
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None and not any(t.is_alive() for t in self._threads):
                stream.close()
        return int(self._proc.returncode)
