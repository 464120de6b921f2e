"""Time a model the way the lessons do, phase by phase, never by stopwatch averages:

1. prefill sweep: one pass over a prompt of n tokens with logits at the last position only
   (TTFT), best of several repeats, for each n;
2. decode after each prompt: the steps that follow it, timed one by one (TPOT), best run;
3. batched decode: one step for b sequences at a fixed context, for a sweep of b at two
   contexts, the cache rewound after every step so each step sees the same context.

``measure_model`` is a job (``rooflab.core.jobs``): it yields ``Progress``, each
``MeasuredPoint`` riding on one as its ``sample`` the moment it is measured (so a plot can draw
it live), checks ``cancel`` inside every forward pass (a hook on each decoder layer), and
returns a ``ModelMeasurement``. torch only inside functions."""

from __future__ import annotations

import dataclasses
import datetime
import statistics
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from rooflab.core.errors import MeasurementError
from rooflab.core.jobs import CancelFlag, EtaTracker, Progress, check_cancel, run_job
from rooflab.core.measure.engines.budget import MemoryEstimate, check_fits, run_memory
from rooflab.core.measure.engines.torch import backend
from rooflab.core.measure.engines.torch.models import (
    ModelSource,
    build_model,
    meta_model,
    resolve_source,
    spec_from_torch,
)
from rooflab.core.measure.engines.torch.passes import Runner, overhead_probe
from rooflab.core.measure.machine.sysinfo import free_and_total_memory
from rooflab.core.report.text import count
from rooflab.core.values.measured import MAX_PLAN_REPEATS, MAX_PLAN_STEPS, MAX_THREADS, MeasuredPoint
from rooflab.core.values.model import ModelSpec

EXPERIMENTS: tuple[str, ...] = ("prefill", "decode", "batch")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPlan:
    """What to time. prompts: prefill lengths; decode_steps: steps timed after each prompt;
    repeats: runs per prompt (best kept), more while a point has taken under point_seconds,
    up to max_repeats; contexts x batches: the batched sweep, batch_steps
    steps each. random_weights: build from the config even when a folder has weights."""

    dtype: str = "fp32"
    device: str = "cpu"
    threads: int | None = None
    prompts: tuple[int, ...] = (1, 16, 64, 256, 1024)
    decode_steps: int = 8
    repeats: int = 3
    max_repeats: int = 10
    point_seconds: float = 0.5
    contexts: tuple[int, ...] = (2, 256)
    batches: tuple[int, ...] = (1, 2, 4, 8, 16)
    batch_steps: int = 5
    experiments: tuple[str, ...] = EXPERIMENTS
    random_weights: bool = False
    overhead_probe: bool = True
    warmup: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        backend.dtype_bytes(self.dtype)
        unknown = set(self.experiments) - set(EXPERIMENTS)
        if unknown:
            raise MeasurementError(f"unknown model experiments: {', '.join(sorted(unknown))}")
        for name in ("prompts", "contexts", "batches"):
            values = getattr(self, name)
            if any(not isinstance(v, int) or v < 1 for v in values):
                raise MeasurementError(f"{name} must be positive integers, got {values!r}")
        if self.repeats < 1 or self.batch_steps < 1 or self.decode_steps < 0:
            raise MeasurementError("repeats and batch_steps must be >= 1, decode_steps >= 0")
        if max(self.repeats, self.max_repeats) > MAX_PLAN_REPEATS or self.decode_steps > MAX_PLAN_STEPS:
            raise MeasurementError(f"repeats must be at most {MAX_PLAN_REPEATS}, decode_steps {MAX_PLAN_STEPS}")
        if self.threads is not None and not 1 <= self.threads <= MAX_THREADS:
            raise MeasurementError(f"threads must be in [1, {MAX_THREADS}], got {self.threads}")
        if "decode" in self.experiments and self.decode_steps < 1:
            raise MeasurementError("the decode experiment needs decode_steps >= 1")

    @property
    def timed_prompts(self) -> tuple[int, ...]:
        return self.prompts if {"prefill", "decode"} & set(self.experiments) else ()

    @property
    def timed_steps(self) -> int:
        return self.decode_steps if "decode" in self.experiments else 0

    @property
    def batch_grid(self) -> tuple[tuple[int, int], ...]:
        if "batch" not in self.experiments:
            return ()
        return tuple((t, b) for t in self.contexts for b in self.batches)


@dataclass(frozen=True, kw_only=True)
class ModelMeasurement:
    """What one ``measure_model`` run found: the points, the model as it ran, circumstances."""

    label: str
    spec: ModelSpec
    points: tuple[MeasuredPoint, ...]
    dtype: str
    kv_type: str
    device: str
    device_name: str
    threads: int
    torch_version: str
    transformers_version: str
    date: str
    random_weights: bool
    overhead: float | None           # seconds per pass of a same-depth tiny model
    memory: MemoryEstimate
    attention: str = ""
    notes: tuple[str, ...] = field(default=())
    seconds: float = 0.0

    def record(self) -> dict[str, Any]:
        """A JSON-ready record for the store (the spec itself is not stored, its key is)."""
        return {"label": self.label, "dtype": self.dtype, "kv_type": self.kv_type, "device": self.device,
                "device_name": self.device_name, "threads": self.threads, "torch": self.torch_version,
                "transformers": self.transformers_version, "date": self.date,
                "random_weights": self.random_weights, "overhead": self.overhead, "attention": self.attention,
                "memory": dataclasses.asdict(self.memory), "notes": list(self.notes), "seconds": self.seconds,
                "points": [p.to_dict() for p in self.points]}


#: Rough rates of torch passes on a CPU (a GPU: 25x): two busy cores ran a 270M-parameter
#: model's fp32 passes at about 20 GFLOP/s and its decode steps at 1.5-3 GB/s.
CPU_STREAM, CPU_FLOPS, GPU_SPEED_UP = 5e9, 25e9, 25.0
BUILD_RATE = 100e6          # bytes/s of weights built at random (or read) before the first pass


def _work_weights(spec: ModelSpec, plan: ModelPlan, device: str, weight_bytes: float | None = None) -> list[float]:
    """Seconds of each planned unit at the rough rates above: a pass costs the weight stream
    (``weight_bytes``, the spec's when None) plus its arithmetic. The ETA uses them as weights."""
    fast = 1.0 if device == "cpu" else GPU_SPEED_UP
    stream = (spec.weight_bytes if weight_bytes is None else weight_bytes) / (CPU_STREAM * fast)
    per_token = 2.0 * spec.params_per_token / (CPU_FLOPS * fast)
    units = []
    for n in plan.timed_prompts:
        units.append(plan.repeats * (stream + n * per_token + plan.timed_steps * stream))
    for t, b in plan.batch_grid:
        units.append(t * per_token + (plan.batch_steps + 1) * (stream + b * per_token))
    return units or [1.0]


def estimate_seconds(spec: ModelSpec, plan: ModelPlan) -> float:
    """Rough seconds a ``measure_model`` run of ``spec`` takes, shown before it starts: the
    weights built (at ``BUILD_RATE``), a warm-up pass, each prompt's runs (at least ``repeats``,
    more while under ``point_seconds``, up to ``max_repeats``) and the batched sweep, at the
    rough rates of ``_work_weights``. Load, the overhead probe and thermal limits are left out;
    the progress line's ETA corrects the guess as the run goes."""
    weight_bytes = spec.params_total * backend.dtype_bytes(plan.dtype)
    units = _work_weights(spec, plan, plan.device, weight_bytes)
    prompts = len(plan.timed_prompts)
    total = weight_bytes / BUILD_RATE + sum(units[prompts:])
    for runs in units[:prompts]:
        one = runs / plan.repeats
        total += max(runs, min(plan.point_seconds, plan.max_repeats * one))
    if plan.warmup:
        total += _work_weights(spec, ModelPlan(prompts=(16,), experiments=("prefill",), repeats=1), plan.device,
                               weight_bytes)[0]
    return total


def _source_label(point_source: str, plan: ModelPlan, device: str) -> str:
    return f"torch {point_source} {device} {plan.dtype}"


def measure_model(ref: str | Mapping[str, Any] | ModelSpec | ModelSource, plan: ModelPlan | None = None,
                  cancel: CancelFlag = None, available: float | None = None,
                  ) -> Generator[Progress, None, ModelMeasurement]:
    """Time ``ref`` (folder, config.json, .gguf, catalogue key, config dict, ModelSpec).

    available: free bytes to plan against (None: ask the device). Raises MeasurementError
    before loading anything when the run would not fit, Cancelled when ``cancel`` is set."""
    plan = plan or ModelPlan()
    start = time.perf_counter()
    yield Progress(step="prepare", message="reading the model", fraction=0.0)
    torch = backend.require_torch()
    device = backend.resolve_device(plan.device)
    source = ref if isinstance(ref, ModelSource) else resolve_source(ref, random_weights=plan.random_weights)
    kv_type = backend.KV_TYPE_OF[plan.dtype]
    sized = spec_from_torch(meta_model(source), name=source.label, source=source.label, dtype=plan.dtype)
    estimate = run_memory(sized, elt=backend.dtype_bytes(plan.dtype), kv_type=kv_type,
                          prompts=plan.timed_prompts, decode_steps=plan.timed_steps,
                          contexts=plan.contexts if plan.batch_grid else (), batches=plan.batches)
    check_fits(estimate, free_and_total_memory(device)[0] if available is None else available, device)
    check_cancel(cancel)
    import transformers

    with backend.torch_threads(plan.threads) as threads, torch.inference_mode():
        model = yield from build_model(source, plan.dtype, device, cancel)
        spec = spec_from_torch(model, name=source.label, source=source.label)
        runner = Runner(model, device, cancel, seed=plan.seed)
        notes = list(source.notes) + runner.notes
        label = _source_label(torch.__version__, plan, device)
        eta = EtaTracker(_work_weights(spec, plan, device))
        points: list[MeasuredPoint] = []
        overhead: float | None = None
        try:
            if plan.warmup:
                yield eta.progress("warm-up", "warm-up pass")
                runner.prefill(min(16, max(plan.prompts)))
            if plan.overhead_probe:
                yield eta.progress("overhead", "timing a same-depth tiny model (per-pass overhead)")
                overhead, probe_note = overhead_probe(source, plan.dtype, device, cancel)
                if probe_note:
                    notes.append(probe_note)
            points += yield from _prefill_decode(runner, plan, label, eta)
            points += yield from _batched(runner, plan, label, eta)
        finally:
            runner.close()
    return ModelMeasurement(
        label=source.label, spec=spec, points=tuple(points), dtype=plan.dtype, kv_type=kv_type, device=device,
        device_name=backend.device_name(device), threads=threads, torch_version=str(torch.__version__),
        transformers_version=str(transformers.__version__),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        random_weights=source.folder is None or source.random_weights, overhead=overhead, memory=estimate,
        attention=runner.attention, notes=tuple(notes), seconds=time.perf_counter() - start)


def _prefill_decode(runner: Runner, plan: ModelPlan, label: str, eta: EtaTracker,
                    ) -> Generator[Progress, None, list[MeasuredPoint]]:
    """For each prompt, runs of (prefill, then ``decode_steps`` steps): at least ``repeats``,
    more while the point has taken under ``point_seconds`` (up to ``max_repeats``).

    TTFT is the fastest prefill; TPOT the fastest step, at the steps' middle context. On a
    shared machine the slower repeats measure the other load, not the model: their median is
    kept beside the best so the spread shows it."""
    steps = plan.timed_steps
    points: list[MeasuredPoint] = []
    for n in plan.timed_prompts:
        ttfts: list[float] = []
        step_times: list[float] = []
        began = time.perf_counter()
        while len(ttfts) < plan.repeats or (
                len(ttfts) < plan.max_repeats and time.perf_counter() - began < plan.point_seconds):
            yield eta.progress("prefill", f"prompt of {count(n, 'token')}: run {len(ttfts) + 1}")
            ttft, times = runner.request(n, steps)
            ttfts.append(ttft)
            step_times += times
        eta.advance()
        if "prefill" in plan.experiments:
            points.append(MeasuredPoint(kind="prefill", prompt=n, context=0, batch=1, seconds=min(ttfts),
                                        median=statistics.median(ttfts), repeats=len(ttfts), source=label))
            yield eta.progress("prefill", f"prompt of {count(n, 'token')}: measured", sample=points[-1])
        if step_times:
            points.append(MeasuredPoint(kind="decode", prompt=1, context=n + (steps - 1) // 2, batch=1,
                                        seconds=min(step_times), median=statistics.median(step_times),
                                        repeats=len(step_times), source=label))
            yield eta.progress("decode", f"after a prompt of {count(n, 'token')}: measured", sample=points[-1])
    return points


def _batched(runner: Runner, plan: ModelPlan, label: str, eta: EtaTracker,
             ) -> Generator[Progress, None, list[MeasuredPoint]]:
    """One decode step for b sequences at context t, ``batch_steps`` times, cache rewound."""
    points: list[MeasuredPoint] = []
    for t in (plan.contexts if plan.batch_grid else ()):
        base = runner.context_cache(t)
        for b in plan.batches:
            yield eta.progress("batch", f"batch of {b} at context {t}")
            times = runner.batch_steps(base, b, plan.batch_steps)
            eta.advance()
            points.append(MeasuredPoint(kind="batch", prompt=1, context=t, batch=b, seconds=min(times),
                                        median=statistics.median(times), repeats=len(times), source=label))
            yield eta.progress("batch", f"batch of {b} at context {t}: measured", sample=points[-1])
        del base
    return points


def measure_model_blocking(ref: str | Mapping[str, Any] | ModelSpec | ModelSource,
                           plan: ModelPlan | None = None, cancel: CancelFlag = None,
                           on_progress: Callable[[Progress], None] | None = None,
                           available: float | None = None) -> ModelMeasurement:
    """``measure_model`` run to its end in this thread, each ``Progress`` to ``on_progress``."""
    return run_job(measure_model(ref, plan, cancel, available), on_progress)
