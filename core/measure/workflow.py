"""What happens after a measurement, written once for the window and the command line:

- measured points (a run in llama.cpp, llama-bench or torch, or an imported benchmark file): calibrate against the machine,
  keep the points and the fit in the store, explain the gap between ceiling and measurement;
- a machine measurement: make its profile and keep it as "this machine, measured".

No Qt and no torch here; the callers show the result their own way."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rooflab.core.io import presets
from rooflab.core.io.llamabench import BenchImport
from rooflab.core.measure import store
from rooflab.core.measure.calibrate import Calibration, calibrate
from rooflab.core.measure.engine import EngineRun
from rooflab.core.measure.gaps import Gap, explain
from rooflab.core.measure.machine_result import MachineMeasurement
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from rooflab.core.values.model import ModelSpec


@dataclass(frozen=True, kw_only=True)
class Calibrated:
    """What the workflow made of one set of measured points.

    model_key / machine_key: where the store keeps them. kept: the points and the fit were
    written; keep_error: why they could not be (an OS error's text), "" otherwise. notes: what
    the measurement itself noted (the calibration's own notes are on ``calibration``)."""

    spec: ModelSpec
    machine: MachineProfile
    calibration: Calibration
    gaps: tuple[Gap, ...]
    model_key: str
    machine_key: str
    notes: tuple[str, ...] = ()
    kept: bool = False
    keep_error: str = ""


def calibrate_and_keep(spec: ModelSpec, machine: MachineProfile, points: Sequence[MeasuredPoint], *,
                       meta: Mapping[str, Any], label: str, source: str, kv_type: str,
                       dtype: str | None = None, overhead: float | None = None,
                       notes: Iterable[str] = (), keep: bool = True,
                       include_disturbed: bool = False) -> Calibrated:
    """Fit ``machine``'s efficiency to ``points`` of ``spec``, keep points and fit in the store
    (unless ``keep`` is False), and explain the gaps.

    meta: the run's circumstances, stored beside the points. source: the model's path or
    catalogue key, so ``predict --calibrated`` finds the fit by it. kv_type, dtype: as the
    points ran; overhead: seconds per pass measured apart (None: fitted). A store that cannot
    be written is reported in ``keep_error``, not raised: the fit is still worth showing.
    include_disturbed: fit points the measurement marked disturbed too (all are stored)."""
    cal = calibrate(spec, machine, points, kv_type=kv_type, dtype=dtype, overhead=overhead,
                    include_disturbed=include_disturbed)
    key, mkey = store.model_key(spec), store.machine_key(machine)
    kept, error = False, ""
    if keep:
        try:
            store.save_measurement(key, mkey, points, meta, label=label, source=source)
            store.save_calibration(key, mkey, cal, source=source, engine=points[0].engine_key)
            kept = True
        except OSError as exc:
            error = str(exc)
    return Calibrated(spec=spec, machine=machine, calibration=cal, gaps=tuple(explain(spec, cal)), model_key=key,
                      machine_key=mkey, notes=tuple(notes), kept=kept, keep_error=error)


def after_engine_run(run: EngineRun, machine: MachineProfile, *, source: str, keep: bool = True,
                     include_disturbed: bool = False) -> Calibrated:
    """``calibrate_and_keep`` for a timing run of the model at ``source`` in any engine."""
    return calibrate_and_keep(run.spec, machine, run.points, meta=run.record(), label=run.label, source=source,
                              kv_type=run.kv_type, dtype=run.dtype, overhead=run.overhead, notes=run.notes,
                              keep=keep, include_disturbed=include_disturbed)


def after_import(bench: BenchImport, spec: ModelSpec, machine: MachineProfile, *, source: str,
                 keep: bool = True) -> Calibrated:
    """``calibrate_and_keep`` for points read from llama.cpp benchmark output, which ran
    ``spec`` (the model at ``source``) on ``machine``."""
    return calibrate_and_keep(spec, machine, bench.points, meta={"tool": bench.tool, "file": bench.path,
                                                                 **bench.metadata},
                              label=spec.name, source=source, kv_type=bench.kv_type,
                              notes=[f"{bench.tool}: {', '.join(bench.models) or bench.path}"], keep=keep)


def keep_machine_run(run: MachineMeasurement, *, keep: bool = True) -> MachineProfile:
    """The profile of "this machine, measured" from ``run``, kept (with the raw run) unless
    ``keep`` is False. Figures the run did not measure (an experiment left out) come from the
    profile kept before, when there is one; SpecError when neither has them."""
    profile = run.profile(fallback=presets.load_measured_machine())
    if keep:
        presets.save_measured_machine(profile, run.to_dict())
    return profile
