"""torch's measurement (``timing.measure_model``) run in a child process (``child_job``): what
the window and the command line run, so that torch or a kernel library dying mid-run (an
out-of-memory kill, a segfault in a native kernel) ends the child, not them.

The child runs the very job the parent would have run, on the same ``ModelSource`` with the
same plan (torch's threads default to the same physical cores), each point's clock starting
after the model is built, as in process. The source, the plan and the finished measurement
cross as pickles inside the JSON lines: both ends are this program, and a ``ModelSpec``
holds more than the protocol's plain fields. The points stream back as they are measured."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Mapping
from typing import Any

from rooflab.core.jobs import CancelFlag, Progress
from rooflab.core.measure.engines.child_job import packed, run_in_child, unpacked
from rooflab.core.measure.engines.torch.models import ModelSource, resolve_source
from rooflab.core.measure.engines.torch.timing import ModelMeasurement, ModelPlan, measure_model


def planned_points(plan: ModelPlan) -> int:
    """How many points ``plan`` measures: a prefill and a decode point per prompt (as the
    experiments ask), one per context and batch."""
    per_prompt = ("prefill" in plan.experiments) + (plan.timed_steps > 0)
    return len(plan.timed_prompts) * per_prompt + len(plan.batch_grid)


def child_job(request: Mapping[str, Any]) -> Generator[Progress, None, dict[str, Any]]:
    """In the child: ``measure_model`` of the request's source and plan; returns the
    measurement less its points (the parent has them, as they were sent)."""
    source, plan = unpacked(request["source"], ModelSource), unpacked(request["plan"], ModelPlan)
    available = request.get("available")
    run = yield from measure_model(source, plan, None, float(available) if available is not None else None)
    return {"measurement": packed(dataclasses.replace(run, points=()))}


def measure_model_in_child(ref: Any, plan: ModelPlan | None = None, cancel: CancelFlag = None,
                           available: float | None = None) -> Generator[Progress, None, ModelMeasurement]:
    """``measure_model`` of ``ref`` with ``plan``, in a child process: the same progress and
    points, the same errors; ``EngineCrashed`` (holding the points measured before) when the
    child dies."""
    plan = plan or ModelPlan()
    yield Progress(step="prepare", message="starting torch in a process of its own", fraction=0.0)
    source = ref if isinstance(ref, ModelSource) else resolve_source(ref, random_weights=plan.random_weights)
    request = {"source": packed(source), "plan": packed(plan), "available": available}
    result, points = yield from run_in_child("torch", request, cancel, name="torch", planned=planned_points(plan))
    run = unpacked(result.get("measurement"), ModelMeasurement)
    return dataclasses.replace(run, points=points)
