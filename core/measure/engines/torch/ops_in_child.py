"""The torch engine timed operation by operation (``ops.measure_ops``) in a child process
(``child_job``), as every torch measurement runs: torch or a kernel library dying mid-run ends
the child, not the window or the command line. The source, the plan and the finished
measurement cross as pickles inside the JSON lines (both ends are this program)."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

from rooflab.core.jobs import CancelFlag, Progress
from rooflab.core.measure.engines.child_job import packed, run_in_child, unpacked
from rooflab.core.measure.engines.op_times import OpsMeasurement
from rooflab.core.measure.engines.torch.models import ModelSource, resolve_source
from rooflab.core.measure.engines.torch.ops import OpsPlan, measure_ops

ENGINE = "torch-ops"        # its name among child_job.CHILD_ENGINES


def child_job(request: Mapping[str, Any]) -> Generator[Progress, None, dict[str, Any]]:
    """In the child: ``measure_ops`` of the request's source and plan."""
    source, plan = unpacked(request["source"], ModelSource), unpacked(request["plan"], OpsPlan)
    run = yield from measure_ops(source, plan, None)
    return {"measurement": packed(run)}


def measure_ops_in_child(ref: Any, plan: OpsPlan | None = None,
                         cancel: CancelFlag = None) -> Generator[Progress, None, OpsMeasurement]:
    """``measure_ops`` of ``ref`` with ``plan`` in a child process: the same progress and
    errors; ``EngineCrashed`` when the child dies."""
    plan = plan or OpsPlan()
    yield Progress(step="prepare", message="starting torch in a process of its own", fraction=0.0)
    source = ref if isinstance(ref, ModelSource) else resolve_source(ref, random_weights=plan.random_weights)
    request = {"source": packed(source), "plan": packed(plan)}
    result, _ = yield from run_in_child(ENGINE, request, cancel, name="torch", planned=0)
    run: OpsMeasurement = unpacked(result.get("measurement"), OpsMeasurement)
    return run
