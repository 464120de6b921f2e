"""An in-process engine's measurement run in a child Python process, so that the engine dying
(SIGILL on an instruction the processor lacks, SIGSEGV, an abort, the out-of-memory killer's
SIGKILL) ends the child, never the window or the command line that asked (as browsers isolate
their renderers). The measurement itself is the same job with the same settings: only the
process it runs in changes, and its clock starts after the child started and loaded the model,
as it did in process.

Parent: ``run_in_child`` is a job (``rooflab.core.jobs``) that starts the child
(``ChildProcess``: its own process group, so Cancel ends it and whatever it started within a
second), hands on each ``Progress`` the child reports, its measured point as the ``sample``,
the moment it arrives, and returns the child's result with those points. A child killed by a
signal, or one that exits without a result, is one ``EngineCrashed`` line naming the signal and
how many points were measured before; it holds them.

Child: ``python -m rooflab.core.measure.engines.child_job ENGINE REQUEST`` (REQUEST: the JSON,
or "@" and a file holding it when it is long) runs the engine's ``child_job(request)``
(``CHILD_ENGINES`` names each engine's module) and writes one JSON object a line to the parent:

- ``{"progress": {"step", "message", "fraction", "eta_seconds", "point"}}``: a ``Progress``,
  with the point measured just now (``MeasuredPoint.to_dict``) or null;
- ``{"result": {...}}``: once, at the end (the engine's record, less its points);
- ``{"error": {"type", "message", "path", "reason"}}``: a ``RooflabError`` the job raised (the
  parent raises it again, same type and words); the child then exits with status 1.

The protocol has the child's stdout to itself: the child points its own file descriptor 1 at
stderr, so whatever the engine or a library prints lands there (the parent keeps its last lines
for a message).

Debugging: ``ROOFLAB_CHILD_CRASH=SIGSEGV:3`` (any signal name, and a count of points) makes the
child kill itself with that signal after its third point, as llama.cpp dying would: the way to
see, and to test, what the window and the command line do when the engine dies."""

from __future__ import annotations

import base64
import contextlib
import importlib
import json
import os
import pickle
import signal
import sys
import tempfile
import traceback
from collections import deque
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any, TextIO

from rooflab.core.errors import Cancelled, MeasurementError, ModelFileError, RooflabError, SpecError
from rooflab.core.files.safe_json import JsonError, parse_json
from rooflab.core.jobs import CancelFlag, Progress
from rooflab.core.measure.engines.child_process import ChildProcess, OutputLine
from rooflab.core.values.measured import MeasuredPoint

#: Engines that run in a child, and the module whose ``child_job(request)`` runs each there.
CHILD_ENGINES: dict[str, str] = {"llamacpp": "rooflab.core.measure.engines.llamacpp.in_child",
                                 "torch": "rooflab.core.measure.engines.torch.in_child",
                                 "torch-ops": "rooflab.core.measure.engines.torch.ops_in_child",
                                 "llamacpp-ops": "rooflab.core.measure.engines.llamacpp.ops"}
CRASH_ENV = "ROOFLAB_CHILD_CRASH"
MAX_MESSAGE = 4 << 20           # bytes of one line from the child (a point is a few hundred)
MAX_ARGUMENT = 64 << 10         # a longer request goes through a file (Linux caps one argument at 128 KiB)
_ERRORS: dict[str, type[RooflabError]] = {"MeasurementError": MeasurementError, "SpecError": SpecError,
                                          "Cancelled": Cancelled}
_HINTS = {"SIGILL": " (an instruction this processor does not have: the engine was built for another one)",
          "SIGKILL": " (the system's out-of-memory killer ends a process this way)",
          "SIGBUS": " (a memory-mapped model file changed or went away under it)"}


class EngineCrashed(MeasurementError):
    """The engine's child process died before it finished: killed by a signal (``signal_name``)
    or exited without a result. ``head``: what happened ("llama.cpp was killed by SIGSEGV after
    3 of 8 points"), the message being it and what became of the points ("; the 3 are kept").
    ``points``: what it measured before, as they arrived; ``run``: the unfinished run made of
    them, when the caller builds one (``engine.EngineRun``)."""

    def __init__(self, head: str, points: Iterable[MeasuredPoint] = (), *, signal_name: str = "",
                 run: Any = None) -> None:
        self.head = head
        self.points = tuple(points)
        super().__init__(head + _kept(len(self.points)))
        self.signal_name = signal_name
        self.run = run


# --- the parent's side ----------------------------------------------------------------------------

def run_in_child(engine: str, request: Mapping[str, Any], cancel: CancelFlag, *, name: str, planned: int,
                 ) -> Generator[Progress, None, tuple[dict[str, Any], tuple[MeasuredPoint, ...]]]:
    """Run ``engine``'s measurement of ``request`` (JSON-ready) in a child process; ``name``: the
    engine as messages call it ("llama.cpp"); ``planned``: the points the run should measure.

    Yields each ``Progress`` as the child reports it; returns (the child's result, the points
    as they were yielded). ``Cancelled`` on cancel (the child's group ended); the child's own
    ``RooflabError`` raised again; ``EngineCrashed`` when it died."""
    if engine not in CHILD_ENGINES:
        raise MeasurementError(f"no engine {engine!r} runs in a child process")
    points: list[MeasuredPoint] = []
    result: dict[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    said: deque[str] = deque(maxlen=20)        # the child's last stderr lines
    with _request_argument(request) as argument, ChildProcess([sys.executable, "-m", __name__, engine, argument],
                                                              max_line=MAX_MESSAGE) as child:
        for line in child.lines(cancel):
            message = _message(line, said)
            if message is None:
                continue
            if "progress" in message:
                progress = _progress(message["progress"])
                if isinstance(progress.sample, MeasuredPoint):
                    points.append(progress.sample)
                yield progress
            elif "result" in message and isinstance(message["result"], dict):
                result = message["result"]
            elif "error" in message and isinstance(message["error"], Mapping):
                error = message["error"]
        code = child.finish(cancel=cancel)
    if error is not None:
        raise _raised(error)
    if code < 0:
        signal_name = _signal_name(-code)
        raise EngineCrashed(f"{name} was killed by {signal_name}{_HINTS.get(signal_name, '')} after "
                            f"{len(points)} of {planned} points", points, signal_name=signal_name)
    if code != 0 or result is None:
        last = next((text for text in reversed(said) if text.strip()), "it printed no error message")
        raise EngineCrashed(f"{name} stopped (its process exited with status {code}: {last[:200]}) after "
                            f"{len(points)} of {planned} points", points)
    return result, tuple(points)


def _kept(measured: int) -> str:
    return f"; the {measured} are kept" if measured > 1 else "; that one is kept" if measured == 1 else ""


@contextlib.contextmanager
def _request_argument(request: Mapping[str, Any]) -> Iterator[str]:
    """The request as the child's argument: its JSON, or "@" and a file holding it when it is
    too long for one (removed once the child is done)."""
    text = json.dumps(dict(request))
    if len(text) <= MAX_ARGUMENT:
        yield text
        return
    with tempfile.TemporaryDirectory(prefix="rooflab-request-") as folder:
        path = os.path.join(folder, "request.json")
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
        yield "@" + path


def _read_request(argument: str) -> Any:
    if argument.startswith("@"):
        with open(argument[1:], encoding="utf-8") as file:
            return json.load(file)
    return json.loads(argument)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _message(line: OutputLine, said: deque[str]) -> dict[str, Any] | None:
    """The JSON object on a stdout line; None for a stderr line (kept in ``said``) or anything
    that is not one of ours."""
    if line.stream == "err":
        said.append(line.text.strip()[:300])
        return None
    if line.overlong or not line.text.startswith("{"):
        return None
    try:
        found = parse_json(line.text)
    except JsonError:
        return None
    return found if isinstance(found, dict) else None


def _progress(raw: Any) -> Progress:
    if not isinstance(raw, Mapping):
        raise MeasurementError("the measuring process sent a malformed progress line")
    point = raw.get("point")
    fraction, eta = raw.get("fraction"), raw.get("eta_seconds")
    return Progress(step=str(raw.get("step", "")), message=str(raw.get("message", "")),
                    fraction=float(fraction) if isinstance(fraction, (int, float)) else None,
                    eta_seconds=float(eta) if isinstance(eta, (int, float)) else None,
                    sample=MeasuredPoint.from_dict(point) if isinstance(point, Mapping) else None)


def _raised(error: Mapping[str, Any]) -> RooflabError:
    """The child's error as this process raises it: same type (a ``ModelFileError`` with its
    path and reason), same words."""
    kind, text = str(error.get("type", "")), str(error.get("message", ""))
    if kind == "ModelFileError":
        return ModelFileError(str(error.get("path", "")), str(error.get("reason", text)))
    return _ERRORS.get(kind, MeasurementError)(text)


# --- the child's side -----------------------------------------------------------------------------

def _protocol_stream() -> TextIO:
    """This process's stdout for the protocol alone: file descriptor 1 points at stderr from now
    on (C code printing there included), and ``sys.stdout`` is stderr."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _send(out: TextIO, message: Mapping[str, Any]) -> None:
    out.write(json.dumps(message, allow_nan=False) + "\n")
    out.flush()


def crash_after(value: str | None) -> tuple[signal.Signals, int] | None:
    """``ROOFLAB_CHILD_CRASH``'s value ("SIGSEGV:3", "SIGABRT:0") as (signal, points), None when
    unset; MeasurementError when it is not one."""
    if not value:
        return None
    name, _, count = value.partition(":")
    try:
        return signal.Signals[name.strip().upper()], int(count or 0)
    except (KeyError, ValueError):
        raise MeasurementError(f"{CRASH_ENV}={value!r}: expected a signal name and a count of points, "
                               "as SIGSEGV:3") from None


def _die(sig: signal.Signals) -> None:
    """End this process with ``sig``, as an engine's fault would (no core file left behind)."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, OSError, ValueError):
        pass
    try:
        signal.signal(sig, signal.SIG_DFL)
    except (OSError, ValueError):
        pass                                  # SIGKILL and SIGSTOP cannot be caught anyway
    os.kill(os.getpid(), sig)
    os._exit(128 + int(sig))                  # a signal that does not end a process (SIGCHLD, say)


def child_main(argv: Sequence[str]) -> int:
    """The child's entry point: ``argv`` is [ENGINE, REQUEST-JSON]. Returns its exit status."""
    out = _protocol_stream()
    try:
        crash = crash_after(os.environ.get(CRASH_ENV))
        if len(argv) != 2 or argv[0] not in CHILD_ENGINES:
            raise MeasurementError(f"the measuring process was started with {list(argv)[:1]!r}, not an engine")
        job = importlib.import_module(CHILD_ENGINES[argv[0]]).child_job(_read_request(argv[1]))
        measured = 0
        if crash is not None and crash[1] == 0:
            _die(crash[0])
        while True:
            try:
                progress = next(job)
            except StopIteration as stop:
                _send(out, {"result": stop.value})
                return 0
            point = progress.sample if isinstance(progress.sample, MeasuredPoint) else None
            _send(out, {"progress": {"step": progress.step, "message": progress.message,
                                     "fraction": progress.fraction, "eta_seconds": progress.eta_seconds,
                                     "point": point.to_dict() if point is not None else None}})
            measured += point is not None
            if crash is not None and point is not None and measured >= crash[1]:
                _die(crash[0])
    except RooflabError as exc:
        _send(out, {"error": {"type": type(exc).__name__, "message": str(exc),
                              "path": getattr(exc, "path", ""), "reason": getattr(exc, "reason", "")}})
        return 1
    except Exception:  # noqa: BLE001  (a bug: its traceback goes to the parent's message)
        traceback.print_exc(file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))


def packed(value: object) -> str:
    """``value`` pickled into one JSON-safe string, to cross to or from the measuring process
    (a torch model source, a plan, a measurement: objects only our own processes read)."""
    return base64.b64encode(pickle.dumps(value)).decode("ascii")


def unpacked(text: object, kind: type) -> Any:
    """What ``packed`` made of a ``kind``; MeasurementError (one line) for anything else."""
    try:
        value = pickle.loads(base64.b64decode(str(text)))       # noqa: S301  (our own child's, or parent's)
    except Exception as exc:  # noqa: BLE001  (any failure to read it back is one malformed message)
        raise MeasurementError(f"the measuring process sent a malformed {kind.__name__}") from exc
    if not isinstance(value, kind):
        raise MeasurementError(f"the measuring process sent a malformed {kind.__name__}")
    return value
