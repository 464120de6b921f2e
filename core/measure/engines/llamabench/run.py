"""Measure with the user's own llama.cpp build (CUDA, ROCm, Vulkan, Metal, CPU): run its
``llama-bench`` (prompt processing for a sweep of prompt lengths, token generation after a sweep
of depths) or ``llama-batched-bench`` (b sequences decoding together), read each JSONL row as it
is printed, and yield its points live, stamped with the engine settings the row records.

Cancel ends the tool's whole process group within about a second (``child_process``). A tool
that fails mid-run raises ``BenchRunError``, one line naming the binary, its exit status and its
last error line, holding the points measured before. The plans and command lines live in
``llamabench.plan``."""

from __future__ import annotations

import os
import re
import signal
import time
from collections import deque
from collections.abc import Generator, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rooflab.core.errors import MeasurementError, SpecError
from rooflab.core.files.safe_json import JsonError, parse_json
from rooflab.core.io.llamabench_rows import points_from_row
from rooflab.core.jobs import CancelFlag, Progress
from rooflab.core.measure.engines.child_process import MAX_LINE, ChildProcess
from rooflab.core.measure.engines.llamabench.plan import (
    BatchedBenchPlan,
    BenchBinary,
    EngineOptions,
    LlamaBenchPlan,
    batched_bench_argv,
    find_binary,
    llama_bench_argv,
    probe_binary,
    version_in,
)
from rooflab.core.values.measured import EngineSettings, MeasuredPoint

MAX_ROWS = 10_000               # rows one run may print; a sweep has tens
MAX_NOISE = 1_000               # stdout lines that are not JSON (log lines) tolerated in one run
_FRAME = re.compile(r"\s*(#\d+\s|0x[0-9a-fA-F]+\b|\[0x)")       # a backtrace frame, not a message
_DEVICE = re.compile(r"using device ([A-Za-z]+)\d*\b")      # llama.cpp's model loader log line


class BenchRunError(MeasurementError):
    """The tool failed mid-run; ``points`` holds what it measured before."""

    def __init__(self, message: str, points: Iterable[MeasuredPoint] = ()) -> None:
        super().__init__(message)
        self.points = tuple(points)


# --- running ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class BenchRun:
    """A finished run: what ran (``argv``), the points it measured, the settings of its last
    row, how many rows it printed and how long it took (s)."""

    tool: str
    binary: str
    argv: tuple[str, ...]
    points: tuple[MeasuredPoint, ...]
    settings: EngineSettings
    rows: int
    seconds: float


def run_llama_bench(plan: LlamaBenchPlan, binary: BenchBinary | str | os.PathLike[str] | None = None,
                    cancel: CancelFlag = None) -> Generator[Progress, None, BenchRun]:
    """Run llama-bench (``binary``, a path, or the one on PATH) over ``plan``. Yields a Progress
    per row, carrying each MeasuredPoint as its ``sample`` the moment the row is printed; returns
    the BenchRun. ``Cancelled`` on cancel (the process group ended within about a second);
    BenchRunError, holding the points measured so far, when the tool fails."""
    bench = yield from _resolve(binary, "llama-bench", cancel)
    argv = llama_bench_argv(bench, plan)
    return (yield from _stream(bench, argv, plan.model, plan.expected_rows, plan.options, cancel))


def run_batched_bench(plan: BatchedBenchPlan, binary: BenchBinary | str | os.PathLike[str] | None = None,
                      cancel: CancelFlag = None) -> Generator[Progress, None, BenchRun]:
    """As ``run_llama_bench``, for llama-batched-bench: a prefill and a batch point per row."""
    bench = yield from _resolve(binary, "llama-batched-bench", cancel)
    argv = batched_bench_argv(bench, plan)
    return (yield from _stream(bench, argv, plan.model, plan.expected_rows, plan.options, cancel))


def _resolve(binary: BenchBinary | str | os.PathLike[str] | None, tool: str,
             cancel: CancelFlag) -> Generator[Progress, None, BenchBinary]:
    if isinstance(binary, BenchBinary):
        if binary.tool != tool:
            raise MeasurementError(f"{binary.path} is {binary.tool}, not {tool}")
        return binary
    path = find_binary(tool, binary)
    yield Progress(step=tool, message=f"asking {path.name} which flags it knows", fraction=0.0)
    return probe_binary(path, tool, cancel)


def _stream(binary: BenchBinary, argv: list[str], model: str, expected: int, options: EngineOptions,
            cancel: CancelFlag) -> Generator[Progress, None, BenchRun]:
    if not Path(model).is_file():
        raise MeasurementError(f"{model}: no such model file")
    name, started = Path(binary.path).name, time.monotonic()
    settings = EngineSettings(engine="llama-bench", version=binary.version, threads=options.threads or 0,
                              gpu_layers=options.gpu_layers or 0, cpu_moe=options.cpu_moe,
                              flash_attention=options.flash_attention, kv_type=_kv(options),
                              batch_size=options.batch_size or 0, ubatch_size=options.ubatch_size or 0)
    base, rows = settings, 0
    points: list[MeasuredPoint] = []
    noise: list[str] = []                       # stdout lines that are not rows, first 120 chars
    errors: deque[str] = deque(maxlen=20)       # the last stderr lines
    yield Progress(step=binary.tool, message=f"starting {name} on {Path(model).name}", fraction=0.0)
    with ChildProcess(argv) as child:
        for line in child.lines(cancel):
            if line.stream == "err":
                if line.text.strip():
                    errors.append(line.text.strip()[:300])
                base = _from_log(base, line.text)
                continue
            row = _row(name, line.text, line.overlong, noise, points)
            if row is None:
                continue
            rows += 1
            if rows > MAX_ROWS:
                raise BenchRunError(f"{name} printed more than {MAX_ROWS} rows; stopped", points)
            try:
                new = points_from_row(row, base)
            except SpecError as exc:
                raise BenchRunError(f"{name} printed a row rooflab cannot read: {exc}", points) from exc
            fraction = min(1.0, rows / max(expected, 1))
            if not new:
                yield Progress(step=binary.tool, message="a row without a usable phase (skipped)", fraction=fraction)
            for point in new:
                points.append(point)
                settings = point.settings or settings
                yield Progress(step=binary.tool, message=_describe(point), fraction=fraction, sample=point)
        code = child.finish(cancel=cancel)
    # stdout and stderr are read on two threads, so a row can be parsed before the log line
    # that names the device or build: what the log said by the end applies to every point
    points = [replace(p, settings=_with_log(p.settings, base)) if p.settings else p for p in points]
    settings = _with_log(settings, base)
    if code != 0:
        raise BenchRunError(f"{name} {_status(code)} after {rows} of {expected} rows: {_last_error(errors)}", points)
    if not points:
        seen = f"; its output began {noise[0]!r}" if noise else ""
        raise BenchRunError(f"{name} ended without printing a measurement{seen}", points)
    return BenchRun(tool=binary.tool, binary=binary.path, argv=tuple(argv), points=tuple(points),
                    settings=settings, rows=rows, seconds=time.monotonic() - started)


def _row(name: str, text: str, overlong: bool, noise: list[str],
         points: list[MeasuredPoint]) -> dict[str, Any] | None:
    """The JSON object on a stdout line; None for a log line; BenchRunError for garbage."""
    if overlong:
        raise BenchRunError(f"{name} printed a line longer than {MAX_LINE // 1024} KiB; not JSONL output", points)
    text = text.strip()
    if not text.startswith("{"):
        if text:
            noise.append(text[:120])
            if len(noise) > MAX_NOISE:
                raise BenchRunError(f"{name} printed {len(noise)} lines that are not JSONL rows "
                                    f"(the first: {noise[0]!r}); is it llama.cpp's benchmark?", points)
        return None
    try:
        row = parse_json(text)
    except JsonError as exc:
        raise BenchRunError(f"{name} printed a malformed JSONL row ({exc}): {text[:80]!r}", points) from None
    if not isinstance(row, dict):
        raise BenchRunError(f"{name} printed a JSONL line that is not an object: {text[:80]!r}", points)
    return row


def _kv(options: EngineOptions) -> str:
    k, v = options.cache_type_k, options.cache_type_v
    return k if k == v else f"{k}/{v}"


def _with_log(settings: EngineSettings, log: EngineSettings) -> EngineSettings:
    """``settings`` with the version and device the log (``log``) named where the row left them
    unset."""
    return replace(settings, version=settings.version or log.version,
                   device=log.device if settings.device == "cpu" else settings.device)


def _from_log(settings: EngineSettings, text: str) -> EngineSettings:
    """llama.cpp's log names the build ("build: 5163 (8cf427ff) with ...") and the device the
    model loads on ("using device CUDA0 (...)"): llama-batched-bench's rows carry neither."""
    version, device = version_in(text), _DEVICE.search(text)
    if version and not settings.version:
        return replace(settings, version=version)
    if device and settings.device == "cpu":
        family = device.group(1).lower()
        return replace(settings, device={"mtl": "metal"}.get(family, family))
    return settings


def _describe(p: MeasuredPoint) -> str:
    what = {"prefill": f"prompt of {p.prompt} at depth {p.context}", "decode": f"generation near context {p.context}",
            "batch": f"batch of {p.batch} near context {p.context}"}[p.kind]
    return f"{what}: {p.rate:,.1f} tokens/s"


def _status(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _last_error(lines: deque[str]) -> str:
    """The last stderr line that reads as an error, else the last line (a backtrace's last frame
    says less than the assertion above it)."""
    for line in reversed(lines):
        if _FRAME.match(line):
            continue
        if re.search(r"error|failed|assert|abort|exception|unable|cannot|invalid", line, re.IGNORECASE):
            return line
    return lines[-1] if lines else "it printed no error message"
