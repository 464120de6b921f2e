"""Time a model in the engine the user runs: one entry for the window and the command line.

- ``llamacpp``: llama.cpp through llama-cpp-python, in a child process of its own
  (``llamacpp.in_child``: llama.cpp dying ends the child, not the window or the command line;
  the points it measured before are kept, ``EngineCrashed``), on the user's own GGUF; a model
  defined by a config.json or a catalogue entry is first written as a random-weight GGUF of its
  tensor table in its weight format (timing does not depend on the weights' values);
- ``llama-bench``: the user's own build of llama.cpp's ``llama-bench`` (and
  ``llama-batched-bench`` for batches), on the same GGUF;
- ``torch``: a transformers copy of a Hugging Face model, at fp32/bf16/fp16, in a child
  process too (``torch.in_child``).

Every job returns an ``EngineRun`` whose points carry the engine and its settings and belong to
the model the user opened (``spec``): measuring never replaces it."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rooflab.core.errors import MeasurementError
from rooflab.core.files.paths import cache_dir
from rooflab.core.io import takes_weights
from rooflab.core.jobs import CancelFlag, Progress
from rooflab.core.measure.engines.child_job import EngineCrashed
from rooflab.core.measure.machine.trust import judge, load_average
from rooflab.core.values.measured import EngineSettings, MeasuredPoint
from rooflab.core.values.model import ModelSpec

R = TypeVar("R")

#: Engine keys and what the window calls them: llama.cpp as rooflab installs and runs it (through
#: llama-cpp-python, in a child process), the user's own llama.cpp tools, transformers in torch.
ENGINES: dict[str, str] = {
    "llamacpp": "llama.cpp (rooflab's)",
    "llama-bench": "llama-bench (your build)",
    "torch": "torch (transformers)",
}


@dataclass(frozen=True, kw_only=True)
class EngineRun:
    """One model measurement, in any engine.

    spec: the model the points were measured for (the user's model; for torch, the model as it
    ran, in its dtype). kv_type / dtype: the cache type and compute dtype the passes used (dtype
    None: the machine's default, as for a quantised model). overhead: seconds per pass measured
    apart (None: fitted). meta: the engine's own record of the run, kept in the store."""

    engine: str
    label: str
    spec: ModelSpec
    points: tuple[MeasuredPoint, ...]
    settings: EngineSettings
    kv_type: str
    dtype: str | None = None
    overhead: float | None = None
    notes: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """A JSON-ready record for the store and ``--json``."""
        return {"engine": self.engine, "label": self.label, "settings": self.settings.to_dict(), **self.meta,
                "notes": list(self.notes), "points": [p.to_dict() for p in self.points]}


def default_engine(ref: object) -> str:
    """llama.cpp for a GGUF file or a model that llama.cpp would run from one (a catalogue entry,
    a ModelSpec); torch for a Hugging Face folder or config.json."""
    if isinstance(ref, ModelSpec):
        return "llamacpp"
    path = Path(os.fspath(str(ref))).expanduser()
    if not takes_weights(path):
        return "llamacpp"
    return "torch" if path.exists() else "llamacpp"


def synthetic_gguf_path(spec: ModelSpec) -> Path:
    """Where the random-weight GGUF of ``spec`` is kept (one per tensor table and format)."""
    from rooflab.core.calibration.store import model_key

    return cache_dir() / "synthetic" / f"{model_key(spec)}.gguf"


def gguf_for(spec: ModelSpec, ref: object, *, synthetic: bool = False,
             cancel: CancelFlag = None) -> Generator[Progress, None, Path]:
    """The GGUF llama.cpp should run for ``spec``: the user's own file when ``ref`` is one (and
    ``synthetic`` is False), else a random-weight GGUF of ``spec``'s tensor table, written once
    and reused while it has the expected size."""
    from rooflab.core.calibration.store import model_key
    from rooflab.core.io.gguf import read_gguf
    from rooflab.core.measure.engines.gguf_synth import synthetic_gguf_bytes, write_synthetic_gguf

    if not isinstance(ref, ModelSpec):
        path = Path(os.fspath(str(ref))).expanduser()
        # the user's own file, unless it is not the model on screen (a weight format chosen
        # on top of it): then a file of the model on screen is written
        if (
            not synthetic
            and path.is_file()
            and not takes_weights(path)
            and model_key(read_gguf(path)) == model_key(spec)
        ):
            return path
    target = synthetic_gguf_path(spec)
    try:
        if target.is_file() and target.stat().st_size == synthetic_gguf_bytes(spec):
            return target
    except OSError:
        pass
    yield Progress(step="write", message=f"writing a random-weight GGUF of {spec.name}", fraction=0.0)
    return (yield from write_synthetic_gguf(spec, target, cancel=cancel))


def measure_in_llamacpp(spec: ModelSpec, ref: object, plan: Any = None, cancel: CancelFlag = None, *,
                        synthetic: bool = False, available: float | None = None,
                        ) -> Generator[Progress, None, EngineRun]:
    """Time ``spec`` (opened from ``ref``) in llama.cpp, in a child process, with ``plan`` (a
    ``LlamaCppPlan``). A run that would not fit in memory is refused before any GGUF is written.
    ``EngineCrashed`` when llama.cpp dies mid-run: one line naming the signal, with the points
    measured before as an unfinished ``EngineRun`` (its ``run``) for the caller to keep."""
    from rooflab.core.calibration.store import model_key
    from rooflab.core.measure.engines.llamacpp.in_child import measure_llamacpp_in_child
    from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan
    from rooflab.core.measure.engines.llamacpp.timing import check_memory, llamacpp_memory
    from rooflab.core.measure.machine.sysinfo import system_memory_available

    plan = plan or LlamaCppPlan()
    if not plan.gpu_layers:          # host memory only: a GPU's is not known here (the run notes it)
        check_memory(llamacpp_memory(spec, plan), system_memory_available() if available is None else available)
    path = yield from gguf_for(spec, ref, synthetic=synthetic, cancel=cancel)
    judged: dict[int, MeasuredPoint] = {}
    try:
        run, judged = yield from _judging(measure_llamacpp_in_child(path, plan, cancel, available), judged)
    except EngineCrashed as exc:
        raise EngineCrashed(exc.head, exc.points, signal_name=exc.signal_name,
                            run=_unfinished(spec, path, _apply(exc.points, judged), str(exc))) from exc
    notes = list(run.notes)
    if path == synthetic_gguf_path(spec):
        notes.append(f"measured on a random-weight GGUF of the same tensor table ({path})")
    if model_key(run.spec) != model_key(spec):
        raise MeasurementError(f"the GGUF llama.cpp ran ({path}) is not the model on screen ({spec.name})")
    return EngineRun(engine="llamacpp", label=spec.name, spec=spec, points=_apply(run.points, judged),
                     settings=run.settings,
                     kv_type=run.settings.kv_type.split("/")[0], notes=tuple(notes), meta=_meta(run.record()))


def _unfinished(spec: ModelSpec, path: Path, points: tuple[MeasuredPoint, ...], why: str) -> EngineRun | None:
    """The run llama.cpp did not finish, made of the points it measured before (None: none)."""
    settings = next((p.settings for p in points if p.settings is not None), None)
    if settings is None:
        return None
    return EngineRun(engine="llamacpp", label=spec.name, spec=spec, points=points, settings=settings,
                     kv_type=settings.kv_type.split("/")[0], notes=(why,),
                     meta={"path": str(path), "unfinished": why})


def measure_in_llamabench(spec: ModelSpec, ref: object, plan: Any, batched: Any = None, *,
                          binary: str | None = None, batched_binary: str | None = None,
                          synthetic: bool = False, cancel: CancelFlag = None,
                          ) -> Generator[Progress, None, EngineRun]:
    """Time ``spec`` with the user's ``llama-bench`` (``plan``, a ``LlamaBenchPlan`` whose model
    path is filled in here) and, when ``batched`` is given, ``llama-batched-bench``."""
    from rooflab.core.measure.engines.llamabench.run import run_batched_bench, run_llama_bench

    path = yield from gguf_for(spec, ref, synthetic=synthetic, cancel=cancel)
    run, judged = yield from _judging(run_llama_bench(dataclasses.replace(plan, model=str(path)), binary, cancel))
    points = list(_apply(run.points, judged))
    meta: dict[str, Any] = {"argv": list(run.argv), "binary": str(run.binary), "seconds": run.seconds}
    if batched is not None:
        more, judged = yield from _judging(run_batched_bench(dataclasses.replace(batched, model=str(path)),
                                                             batched_binary, cancel))
        points += _apply(more.points, judged)
        meta["batched_argv"] = list(more.argv)
    settings = run.settings
    return EngineRun(engine="llama-bench", label=spec.name, spec=spec, points=tuple(points), settings=settings,
                     kv_type=settings.kv_type.split("/")[0], meta=meta)


def measure_in_torch(ref: object, plan: Any = None, cancel: CancelFlag = None, *,
                     available: float | None = None) -> Generator[Progress, None, EngineRun]:
    """Time ``ref`` with transformers in torch (``plan``, a ``ModelPlan``), in a child process;
    the points belong to the model as it ran (its dtype), not to a quantised file of the same
    shape. ``EngineCrashed`` when the child dies: its points are not kept (the model as it ran
    is known only to the child)."""
    from rooflab.core.measure.engines.torch.in_child import measure_model_in_child

    try:
        run, judged = yield from _judging(measure_model_in_child(ref, plan, cancel, available))
    except EngineCrashed as exc:
        raise EngineCrashed(exc.head, signal_name=exc.signal_name) from exc
    settings = EngineSettings(engine="torch", version=run.torch_version, device=run.device,
                              threads=run.threads, kv_type=run.kv_type, dtype=run.dtype)
    points = tuple(dataclasses.replace(p, settings=settings) for p in _apply(run.points, judged))
    return EngineRun(engine="torch", label=run.label, spec=run.spec, points=points, settings=settings,
                     kv_type=run.kv_type, dtype=run.dtype, overhead=run.overhead, notes=run.notes,
                     meta=_meta(run.record()))


def _meta(record: dict[str, Any]) -> dict[str, Any]:
    """An engine's record less what ``EngineRun.record`` writes itself."""
    return {k: v for k, v in record.items() if k not in ("points", "settings", "label", "notes")}


def _judging(job: Generator[Progress, None, R], judged: dict[int, MeasuredPoint] | None = None,
             ) -> Generator[Progress, None, tuple[R, dict[int, MeasuredPoint]]]:
    """Run ``job``, judging each point it measures (``trust.judge``) as it arrives: the
    progress shows the judged point; returns the job's result and the judged points by the
    identity of the ones the job made (gathered in ``judged`` when given, so a caller still
    has them when the job fails). Closing this closes ``job`` (its handles are freed)."""
    start = load_average()
    judged = {} if judged is None else judged
    try:
        while True:
            try:
                progress = next(job)
            except StopIteration as stop:
                return stop.value, judged
            if isinstance(progress.sample, MeasuredPoint):
                point = judge(progress.sample, start, load_average())
                judged[id(progress.sample)] = point
                progress = dataclasses.replace(progress, sample=point)
            yield progress
    finally:
        job.close()


def _apply(points: tuple[MeasuredPoint, ...], judged: dict[int, MeasuredPoint]) -> tuple[MeasuredPoint, ...]:
    return tuple(judged.get(id(p), p) for p in points)
