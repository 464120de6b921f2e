"""``rooflab measure calibrate`` and the Measure tab's Calibrate button, in one job: measure this
machine, time rooflab's calibration models in the chosen engine, fit one calibration of
(machine, engine, settings) that applies to any model, score it out of sample and keep it.

The job is a plain generator (``Progress`` with an overall fraction, cancel between points);
torch and llama.cpp are imported only inside the measurements it runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from rooflab.core.calibration import store
from rooflab.core.calibration.engine_calibration import ModelPoints, calibrate_engine
from rooflab.core.calibration.models import REAL_SIZE_MODELS, CalibrationModel, calibration_models
from rooflab.core.errors import MeasurementError
from rooflab.core.jobs import CancelFlag, Progress, check_cancel
from rooflab.core.measure.engines.child_job import EngineCrashed
from rooflab.core.measure.engines.engine import EngineRun, measure_in_llamacpp, measure_in_torch
from rooflab.core.measure.engines.rounds import merge_rounds
from rooflab.core.values.calibration import EngineCalibration
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.machine_run import MachineMeasurement
from rooflab.core.values.measured import MAX_PLAN_REPEATS, MAX_THREADS

ENGINE_LABELS = {"llamacpp": "llama.cpp", "torch": "torch"}


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationPlan:
    """What ``run_calibration`` does: the engine ("llamacpp" or "torch"), its CPU threads
    (None: the engine's choice), the torch dtype, whether to measure the machine (before the
    timings and after them, the faster run that passes its checks used; else the kept
    "measured" profile is used), ``machine_tries``: how often the measurement after the timings
    is made while none has passed, repeats per point (each one a round over every
    model, ``rounds``), and ``quick`` (three models,
    shorter sweeps: a first look in about a minute) or ``thorough`` (llama.cpp's real-size
    models too: 0.6-2 B parameters, 152k-262k vocabularies; tens of minutes on two cores)."""

    engine: str = "llamacpp"
    threads: int | None = None
    dtype: str = "fp32"
    measure_machine: bool = True
    machine_tries: int = 2
    repeats: int = 3
    quick: bool = False
    thorough: bool = False

    def __post_init__(self) -> None:
        if self.engine not in ENGINE_LABELS:
            raise MeasurementError(f"calibration engine must be one of {', '.join(ENGINE_LABELS)}, got {self.engine!r}")
        if self.threads is not None and not 1 <= self.threads <= MAX_THREADS:
            raise MeasurementError(f"threads must be in [1, {MAX_THREADS}], got {self.threads}")
        if not 1 <= self.repeats <= MAX_PLAN_REPEATS:
            raise MeasurementError(f"repeats must be in [1, {MAX_PLAN_REPEATS}], got {self.repeats}")
        if not 1 <= self.machine_tries <= MAX_PLAN_REPEATS:
            raise MeasurementError(f"machine tries must be in [1, {MAX_PLAN_REPEATS}], got {self.machine_tries}")
        if self.quick and self.thorough:
            raise MeasurementError("a calibration is quick or thorough, not both")

    def models(self) -> tuple[CalibrationModel, ...]:
        chosen = calibration_models(self.engine)
        if self.thorough and self.engine == "llamacpp":
            chosen += REAL_SIZE_MODELS
        # quick: the dense shapes in each format (a model left out still leaves its format)
        return tuple(m for m in chosen if m.quick) if self.quick else chosen

    @property
    def rounds(self) -> int:
        """How many times every model is timed, one repetition of each test a round, the rounds
        one after another: a slow minute of a shared machine lands on every model alike
        (``rounds.merge_rounds``)."""
        return self.repeats

    def engine_plan(self) -> Any:
        """The sweep each model gets in a round (one repetition of each test): short prompts,
        shallow caches and small batches to fit on, long, deep and large ones to score
        extrapolation on; the thorough one's prompts reach 2,048 tokens, where a prompt's n²
        attention has a rate the fit can tell apart."""
        if self.engine == "torch":
            from rooflab.core.measure.engines.torch.timing import ModelPlan

            return ModelPlan(dtype=self.dtype, threads=self.threads, prompts=(16, 64, 256, 1024),
                             decode_steps=8, repeats=1, contexts=(2, 1024) if not self.quick else (2,),
                             batches=(1, 2, 4, 8, 16), random_weights=True)
        from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan

        return LlamaCppPlan(threads=self.threads, prompts=(32, 128, 512, 1024) + ((2048,) if self.thorough else ()),
                            depths=(0, 256, 1024, 2048) if not self.quick else (0, 1024, 2048), gen_tokens=8,
                            contexts=(256,), batches=(1, 2, 4, 8, 16), batch_steps=4, repeats=1)


@dataclass(frozen=True, kw_only=True)
class CalibrationRun:
    """What ``run_calibration`` made: the calibration, the machine it belongs to, each
    model's run, and whether it was kept (``keep_error``: why not)."""

    calibration: EngineCalibration
    machine: MachineProfile
    runs: tuple[EngineRun, ...]
    kept: bool = False
    keep_error: str = ""


def _kept_machine() -> MachineProfile:
    from rooflab.core.io import presets

    machine = presets.load_measured_machine()
    if machine is None:
        raise MeasurementError("this machine has not been measured yet: run without --keep-machine")
    return machine


def _measure_machine(plan: CalibrationPlan, cancel: CancelFlag, message: str,
                     fraction: float) -> Generator[Progress, None, MachineMeasurement]:
    """One quick measurement of this machine (bandwidth and matmul peaks, 3 repeats), its
    progress shown at ``fraction`` of the whole calibration."""
    from rooflab.core.measure.machine.benchmark import MachinePlan, measure_machine

    job = measure_machine(MachinePlan(threads=plan.threads, repeats=3, experiments=("bandwidth", "matmul")), cancel)
    try:
        while True:
            try:
                progress = next(job)
            except StopIteration as stop:
                return stop.value
            yield dataclasses.replace(progress, fraction=fraction, message=f"{message}: {progress.message}")
    finally:
        job.close()


def _machine_after(plan: CalibrationPlan, cancel: CancelFlag, keep: bool,
                   measured: list[tuple[str, MachineMeasurement]]) -> Generator[Progress, None, tuple[
                       MachineProfile, tuple[str, ...]]]:
    """The machine measured again after the timings (up to ``plan.machine_tries`` times while
    none has passed its checks), then the best run of all kept (``keep_best_machine_run``)."""
    from rooflab.core.measure.workflow import keep_best_machine_run

    for attempt in range(1, plan.machine_tries + 1):
        check_cancel(cancel)
        when = "after the timings" + (f" (try {attempt})" if attempt > 1 else "")
        run = yield from _measure_machine(plan, cancel, f"measuring this machine {when}", 1.0)
        measured.append((when, run))
        try:
            return keep_best_machine_run(measured, keep=keep)
        except MeasurementError:
            if attempt == plan.machine_tries:
                raise
    raise AssertionError("unreachable")


def run_calibration(plan: CalibrationPlan | None = None, cancel: CancelFlag = None, *, keep: bool = True,
                    machine: MachineProfile | None = None) -> Generator[Progress, None, CalibrationRun]:
    """Measure the machine before and after the timings (unless ``machine``, this machine's
    profile, is given, or the plan takes the kept one), time every calibration model, fit and
    keep the calibration (unless ``keep`` is False). A measurement of the machine set aside (its
    checks failed, or it fell far short of the other) is said in the calibration's notes."""
    plan = plan or CalibrationPlan()
    if machine is None and not plan.measure_machine:
        machine = _kept_machine()
    measured: list[tuple[str, MachineMeasurement]] = []
    if machine is None:         # one that fails its checks stops nothing: the run after the timings may pass
        measured.append(("before the timings", (yield from _measure_machine(
            plan, cancel, "measuring this machine before the timings", 0.0))))
    models = plan.models()
    if len(models) < 2:
        raise MeasurementError("a calibration needs at least two models (one is left out to score it)")
    engine_plan = plan.engine_plan()          # frozen: every round and model runs the same one
    specs = [model.spec() for model in models]
    rounds: list[list[EngineRun]] = [[] for _ in models]
    for r in range(plan.rounds):
        for i, (model, spec) in enumerate(zip(models, specs, strict=True)):
            check_cancel(cancel)
            job = (measure_in_torch(model.config, engine_plan, cancel) if plan.engine == "torch" else
                   measure_in_llamacpp(spec, spec, engine_plan, cancel, synthetic=True))
            label = f"model {i + 1} of {len(models)} ({model.key})"
            if plan.rounds > 1:
                label = f"round {r + 1} of {plan.rounds}, {label}"
            try:
                for progress in job_progress(job, r * len(models) + i, plan.rounds * len(models), label):
                    if isinstance(progress, EngineRun):
                        rounds[i].append(progress)
                    else:
                        yield progress
            except EngineCrashed as exc:       # nothing of a calibration is kept before its fit
                raise MeasurementError(f"{label}: {exc.head}; the calibration stopped") from exc
    runs = [merge_rounds(model_rounds) for model_rounds in rounds]
    machine_notes: tuple[str, ...] = ()
    if machine is None:
        machine, machine_notes = yield from _machine_after(plan, cancel, keep, measured)
    yield Progress(step="fit", message="fitting and scoring the calibration", fraction=1.0)
    points = [ModelPoints(key=m.key, spec=r.spec, points=r.points, kv_type=r.kv_type, dtype=r.dtype)
              for m, r in zip(models, runs, strict=True)]
    calibration = calibrate_engine(points, machine, engine_label=_label(runs[0]),
                                   dtype=runs[0].dtype)
    if machine_notes:
        calibration = dataclasses.replace(calibration, notes=machine_notes + calibration.notes)
    kept, error = False, ""
    if keep:
        try:
            for run in runs:
                store.save_measurement(store.model_key(run.spec), store.machine_key(machine), run.points,
                                       run.record(), label=run.label, source="calibration")
            store.save_engine_calibration(calibration)
            kept = True
        except OSError as exc:
            error = str(exc)
    return CalibrationRun(calibration=calibration, machine=machine, runs=tuple(runs), kept=kept, keep_error=error)


def job_progress(job: Generator[Progress, None, EngineRun], index: int, count: int,
                 label: str) -> Generator[Progress | EngineRun, None, None]:
    """``job``'s progress scaled into part ``index`` of ``count`` (its messages after
    ``label``), then its result."""
    try:
        while True:
            try:
                progress = next(job)
            except StopIteration as stop:
                yield stop.value
                return
            share = (index + (progress.fraction or 0.0)) / count
            yield dataclasses.replace(progress, fraction=share,
                                      message=f"{label}: {progress.message}")
    finally:
        job.close()


def _label(run: EngineRun) -> str:
    s = run.settings
    parts = [f"{s.engine} {s.version}".strip(), s.device]
    if s.threads:
        parts.append(f"{s.threads} thread{'s' if s.threads != 1 else ''}")
    if s.dtype:
        parts.append(s.dtype)
    if s.flash_attention:
        parts.append("flash attention")
    return ", ".join(parts)
