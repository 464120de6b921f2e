"""Measure for real: this machine's ceilings, a model's prefill / decode / batched timings, and
why they differ from the prediction. Importing this package loads no torch; the measurements
import it when they run.

Each measurement is a plain generator (no Qt) yielding ``Progress`` and results as they
arrive, checking a cancel flag between small chunks, and returning its summary; the
``*_blocking`` wrappers drain one in the calling thread."""

from __future__ import annotations

from rooflab.core.jobs import CancelFlag, Progress, run_job
from rooflab.core.measure.budget import MemoryEstimate
from rooflab.core.measure.gaps import Gap, explain
from rooflab.core.measure.machine import MachinePlan, measure_machine, measure_machine_blocking
from rooflab.core.measure.machine_result import (
    BandwidthResult,
    MachineMeasurement,
    MatmulResult,
    RooflineSample,
)
from rooflab.core.measure.model import (
    ModelMeasurement,
    ModelPlan,
    measure_model,
    measure_model_blocking,
)

__all__ = [
    "BandwidthResult", "CancelFlag", "Gap", "MachineMeasurement", "MachinePlan", "MatmulResult",
    "MemoryEstimate", "ModelMeasurement", "ModelPlan", "Progress", "RooflineSample", "explain",
    "measure_machine", "measure_machine_blocking", "measure_model", "measure_model_blocking", "run_job",
]
