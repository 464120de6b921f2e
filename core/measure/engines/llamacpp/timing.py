"""Time a GGUF in llama.cpp, in this process, by llama-bench's and llama-batched-bench's methods:

1. prompt processing: llama-bench's ppN test for each prompt length (``-p``): a whole prompt
   into an empty cache, submitted ``n_batch`` tokens per ``llama_decode`` with one synchronise;
2. token generation at depth: llama-bench's tgN @ dD test for each depth (``-n`` at ``-d``):
   the cache brought to d tokens (untimed), then N single-token decodes timed as one run;
3. batched decode: b sequences each holding t cached tokens (one prefill copied to every
   sequence), one step decoding one token for each of them (llama-batched-bench's ``-npl``),
   rewound after every step so each step sees context t.

As llama-bench: one context per test, one warm-up run per test, ``repeats`` runs of the whole
test, threads defaulting to the physical cores, and each point the mean and standard
deviation of its runs (the best and the median kept as extras), named by its test ("pp512",
"tg128 @ d4096") as an imported llama-bench row is (``sweep.py`` says how, and what differs:
no thread pool is attached). Every point records the ``EngineSettings`` it ran with.
``measure_llamacpp`` is a job generator: it checks memory before loading, yields ``Progress``
(with each point as ``sample``), stops within a second of a cancel request, frees every
llama.cpp handle whatever happens, and returns a ``LlamaCppMeasurement``. llama_cpp is
imported only when a measurement runs."""

from __future__ import annotations

import dataclasses
import datetime
import os
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from rooflab.core.errors import MeasurementError
from rooflab.core.io.gguf import read_gguf
from rooflab.core.jobs import CancelFlag, EtaTracker, Progress, check_cancel, run_job
from rooflab.core.measure.engines.budget import HEADROOM, MemoryEstimate
from rooflab.core.measure.engines.llamacpp.binding import (
    Engine,
    default_threads,
    engine_version,
    gpu_backend,
    require_llama_cpp,
    system_info,
)
from rooflab.core.measure.engines.llamacpp.plan import EXPERIMENTS, LlamaCppPlan, llamacpp_memory
from rooflab.core.measure.engines.llamacpp.sweep import Sweep
from rooflab.core.measure.machine.sysinfo import system_memory_available
from rooflab.core.values.measured import EngineSettings, MeasuredPoint
from rooflab.core.values.model import ModelSpec

__all__ = ["EXPERIMENTS", "LlamaCppMeasurement", "LlamaCppPlan", "check_memory", "llamacpp_memory",
           "measure_llamacpp", "measure_llamacpp_blocking"]


@dataclass(frozen=True, kw_only=True)
class LlamaCppMeasurement:
    """What one ``measure_llamacpp`` run found: the points, the settings, the circumstances."""

    label: str
    path: str
    spec: ModelSpec
    points: tuple[MeasuredPoint, ...]
    settings: EngineSettings
    memory: MemoryEstimate
    system_info: str
    date: str
    notes: tuple[str, ...] = field(default=())
    seconds: float = 0.0

    def record(self) -> dict[str, Any]:
        """A JSON-ready record for the store (the spec is not stored, its path is)."""
        return {"label": self.label, "path": self.path, "settings": self.settings.to_dict(),
                "memory": dataclasses.asdict(self.memory),
                "system_info": self.system_info, "date": self.date, "notes": list(self.notes),
                "seconds": self.seconds, "points": [p.to_dict() for p in self.points]}


# --- the job ----------------------------------------------------------------------------------


def _work_weights(spec: ModelSpec, plan: LlamaCppPlan) -> list[float]:
    """Relative cost of each planned point, for the ETA: a pass streams the weights (20 GB/s)
    and does 2 FLOP per parameter per token (100 GFLOP/s); the ETA corrects the rates."""
    stream = spec.weight_bytes / 20e9
    per_token = 2.0 * spec.params_per_token / 100e9
    runs = plan.repeats + (1 if plan.warmup else 0)
    units = []
    for test in plan.tests:                 # a depth is filled once, then its state restored
        units.append(test.n_depth * per_token + runs * (test.n_prompt * per_token + stream)
                     + (plan.repeats * test.n_gen + 1) * stream)
    if "batch" in plan.experiments:
        units += [t * per_token + (plan.batch_steps + 1) * (stream + b * per_token)
                  for t in plan.contexts for b in plan.batches]
    return units or [1.0]


def measure_llamacpp(path: str | os.PathLike[str], plan: LlamaCppPlan | None = None, cancel: CancelFlag = None,
                     available: float | None = None) -> Generator[Progress, None, LlamaCppMeasurement]:
    """Time the GGUF at ``path`` in llama.cpp with ``plan``.

    available: free bytes to plan against (None: ask the system). Raises ModelFileError for a
    bad file, MeasurementError before loading when the run would not fit in memory or the
    engine cannot run it, Cancelled when ``cancel`` is set."""
    plan = plan or LlamaCppPlan()
    start = time.perf_counter()
    path = os.fspath(path)
    yield Progress(step="prepare", message="reading the model", fraction=0.0)
    spec = read_gguf(path)
    lib = require_llama_cpp()
    device = "cpu"
    notes: list[str] = []
    if plan.gpu_layers:
        device = gpu_backend(lib) or ""
        if not device:
            raise MeasurementError(f"gpu_layers={plan.gpu_layers} asked for, but this llama.cpp build "
                                   "has no GPU back end; use gpu_layers=0")
        notes.append(f"{device} memory was not checked before loading")
    estimate = llamacpp_memory(spec, plan)
    if device == "cpu":
        check_memory(estimate, system_memory_available() if available is None else available)
    check_cancel(cancel)
    threads = plan.threads or default_threads()
    yield Progress(step="load", message=f"loading {os.path.basename(path)} into llama.cpp", fraction=0.0)
    settings: EngineSettings | None = None
    points: list[MeasuredPoint] = []
    eta = EtaTracker(_work_weights(spec, plan))
    with Engine(lib, cancel) as engine:
        engine.load(path, plan.gpu_layers)
        for tick in Sweep(engine, plan, threads, cancel).ticks():
            point = None
            if tick.point is not None:
                # stamped once a context exists: llama.cpp resolves "auto" flash attention then
                settings = settings or _settings(lib, plan, device, threads, engine.log.flash_attention())
                point = dataclasses.replace(tick.point, source=f"llama.cpp {settings.version} {device}",
                                            settings=settings)
                points.append(point)
                eta.advance()
            yield eta.progress(tick.step, tick.message, sample=point)
        settings = settings or _settings(lib, plan, device, threads, engine.log.flash_attention())
    return LlamaCppMeasurement(
        label=spec.name, path=path, spec=spec, points=tuple(points), settings=settings, memory=estimate,
        system_info=system_info(lib), date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        notes=tuple(notes), seconds=time.perf_counter() - start)


def check_memory(estimate: MemoryEstimate, available: float | None) -> None:
    """Refuse a run that would need more than ``HEADROOM`` of the free memory (unknown: go)."""
    if available is not None and estimate.total > HEADROOM * available:
        raise MeasurementError(
            f"not enough memory for llama.cpp: this run needs about {estimate.describe()}, but only "
            f"{available / 1e9:.2f} GB is free. Use shorter prompts and depths, fewer or smaller batches, "
            "a quantised KV cache, or a smaller model file.")


def measure_llamacpp_blocking(path: str | os.PathLike[str], plan: LlamaCppPlan | None = None,
                              cancel: CancelFlag = None, on_progress: Callable[[Progress], None] | None = None,
                              available: float | None = None) -> LlamaCppMeasurement:
    """``measure_llamacpp`` run to its end in this thread."""
    return run_job(measure_llamacpp(path, plan, cancel, available), on_progress)


def _settings(lib: Any, plan: LlamaCppPlan, device: str, threads: int, flash: bool | None) -> EngineSettings:
    """The settings as they ran: "auto" flash attention as llama.cpp resolved it (on when it
    did not say: every CPU build has the kernel)."""
    resolved = plan.flash_attention if plan.flash_attention is not None else (flash if flash is not None else True)
    return EngineSettings(engine="llama.cpp", version=engine_version(lib), device=device, threads=threads,
                          gpu_layers=plan.gpu_layers, flash_attention=resolved, kv_type=plan.kv_type,
                          batch_size=plan.batch_size, ubatch_size=plan.ubatch)
