"""Measure for real: this machine's ceilings, a model's prefill / decode / batched timings, and
why they differ from the prediction. Importing this package loads no torch; the measurements
import it when they run.

Each measurement is a job (``rooflab.core.jobs``): a plain generator (no Qt) yielding
``Progress``, each result riding on one as its ``sample`` as it arrives, checking its
``CancelToken`` between small chunks, and returning its summary; the ``*_blocking`` wrappers
drain one in the calling thread. What follows a measurement (calibrate, keep, explain) is
``workflow``, shared by the window and the command line."""

from __future__ import annotations

from rooflab.core.jobs import CancelFlag, CancelToken, Progress, run_job
from rooflab.core.measure.engines.budget import MemoryEstimate
from rooflab.core.measure.engines.torch.timing import (
    ModelMeasurement,
    ModelPlan,
    measure_model,
    measure_model_blocking,
)
from rooflab.core.measure.machine.benchmark import MachinePlan, measure_machine, measure_machine_blocking
from rooflab.core.report.gaps import Gap, explain_gaps
from rooflab.core.values.machine_run import (
    BandwidthResult,
    MachineMeasurement,
    MatmulResult,
    RooflineSample,
)

__all__ = [
    "BandwidthResult", "CancelFlag", "CancelToken", "Gap", "MachineMeasurement", "MachinePlan", "MatmulResult",
    "MemoryEstimate", "ModelMeasurement", "ModelPlan", "Progress", "RooflineSample", "explain_gaps",
    "measure_machine", "measure_machine_blocking", "measure_model", "measure_model_blocking", "run_job",
]
