"""llama.cpp's measurement (``timing.measure_llamacpp``) run in a child process
(``child_job``): what the window and the command line run, so that llama.cpp dying mid-run
(SIGILL, SIGSEGV, an abort, an out-of-memory kill) ends the child, not them.

The child runs the very job the parent would have run, with the same plan: the thread count it
leaves to llama.cpp's default is the same physical cores of the same machine, and each point's
clock starts after the model is loaded, as in process. The points stream back as they are
measured; the parent rebuilds the ``LlamaCppMeasurement`` from the child's record and those
points, reading the GGUF's ``ModelSpec`` itself."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Generator, Mapping
from typing import Any

from rooflab.core.errors import MeasurementError
from rooflab.core.io.gguf import read_gguf
from rooflab.core.jobs import CancelFlag, Progress
from rooflab.core.measure.engines.budget import MemoryEstimate
from rooflab.core.measure.engines.child_job import run_in_child
from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan
from rooflab.core.measure.engines.llamacpp.timing import LlamaCppMeasurement, measure_llamacpp
from rooflab.core.values.measured import EngineSettings, MeasuredPoint


def plan_record(plan: LlamaCppPlan) -> dict[str, Any]:
    """``plan`` as JSON-ready fields (``plan_from_record`` reads it back)."""
    return {f.name: list(value) if isinstance(value := getattr(plan, f.name), tuple) else value
            for f in dataclasses.fields(plan)}


def plan_from_record(record: Mapping[str, Any]) -> LlamaCppPlan:
    """The ``LlamaCppPlan`` ``plan_record`` wrote (validated again by the plan itself)."""
    names = {f.name for f in dataclasses.fields(LlamaCppPlan)}
    if not isinstance(record, Mapping) or set(record) - names:
        raise MeasurementError("the measuring process was given a malformed llama.cpp plan")
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in record.items()}
    return LlamaCppPlan(**fields)


def planned_points(plan: LlamaCppPlan) -> int:
    """How many points ``plan`` measures: one per llama-bench test, one per context and batch."""
    batched = len(plan.contexts) * len(plan.batches) if plan.batch_context else 0
    return len(plan.tests) + batched


def child_job(request: Mapping[str, Any]) -> Generator[Progress, None, dict[str, Any]]:
    """In the child: ``measure_llamacpp`` of the request's path and plan; returns its record
    less the points (the parent has them, as they were sent)."""
    available = request.get("available")
    run = yield from measure_llamacpp(str(request["path"]), plan_from_record(request["plan"]), None,
                                      float(available) if available is not None else None)
    return {k: v for k, v in run.record().items() if k != "points"}


def measure_llamacpp_in_child(path: str | os.PathLike[str], plan: LlamaCppPlan | None = None,
                              cancel: CancelFlag = None, available: float | None = None,
                              ) -> Generator[Progress, None, LlamaCppMeasurement]:
    """``measure_llamacpp`` of the GGUF at ``path`` with ``plan``, in a child process: the same
    progress and points, the same errors; ``EngineCrashed`` (holding the points measured
    before) when llama.cpp dies."""
    plan = plan or LlamaCppPlan()
    path = os.fspath(path)
    request = {"path": path, "plan": plan_record(plan), "available": available}
    yield Progress(step="prepare", message="starting llama.cpp in a process of its own", fraction=0.0)
    record, points = yield from run_in_child("llamacpp", request, cancel, name="llama.cpp",
                                             planned=planned_points(plan))
    return measurement_from_record(record, points, read_gguf(path))


def measurement_from_record(record: Mapping[str, Any], points: tuple[MeasuredPoint, ...],
                            spec: Any) -> LlamaCppMeasurement:
    """The ``LlamaCppMeasurement`` whose ``record()`` (less its points) is ``record``."""
    try:
        memory = MemoryEstimate(**record["memory"])
        return LlamaCppMeasurement(
            label=str(record["label"]), path=str(record["path"]), spec=spec, points=points,
            settings=EngineSettings.from_dict(record["settings"]), memory=memory,
            system_info=str(record["system_info"]), date=str(record["date"]),
            notes=tuple(str(n) for n in record["notes"]), seconds=float(record["seconds"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise MeasurementError(f"the measuring process sent a malformed result ({exc})") from None
