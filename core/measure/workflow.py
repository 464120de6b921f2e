"""What happens after a measurement, written once for the window and the command line:

- measured points (a run in llama.cpp, llama-bench or torch,
                   or an imported benchmark file): calibrate against the machine,
  keep the points and the fit in the store, explain the gap between ceiling and measurement;
- a machine measurement: make its profile and keep it as "this machine, measured".

No Qt and no torch here; the callers show the result their own way."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rooflab.core.calibration import store
from rooflab.core.calibration.calibrate import Calibration, calibrate
from rooflab.core.calibration.engine_calibration import ModelPoints, score
from rooflab.core.errors import MeasurementError, ResourceError, SpecError
from rooflab.core.io import presets
from rooflab.core.io.llamabench import BenchImport
from rooflab.core.measure.engines.engine import EngineRun
from rooflab.core.measure.machine.checks import headline, judge_machine, short_of
from rooflab.core.report.gaps import Gap, explain_gaps
from rooflab.core.values.calibration import Accuracy, EngineCalibration
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.machine_run import MachineMeasurement
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
    # the machine's engine calibration scored on these points, which it never saw (per phase),
    # and that calibration; empty and None when there is none for these settings
    accuracy: Mapping[str, Accuracy] = field(default_factory=dict)
    engine_calibration: EngineCalibration | None = None


#: Engines whose points were timed on this host (an imported file may come from anywhere).
LOCAL_ENGINES = ("llama.cpp", "llama-bench", "torch")
_DEVICE_KINDS = {"cpu": ("cpu", "unified")}


def host_machine(on_screen: MachineProfile) -> MachineProfile | None:
    """The profile a run on this host is fitted against: the machine on screen when it is this
    machine as measured, else the measured profile kept before; None when this machine was
    never measured. A preset on screen (an RTX 4090, say) is never it."""
    if on_screen.key == presets.MEASURED_KEY:
        return on_screen
    return presets.load_measured_machine()


def check_machine(points: Sequence[MeasuredPoint], machine: MachineProfile) -> None:
    """Refuse to fit points timed on this host to a machine of another kind than the device
    they ran on (a CPU run against a GPU's profile: MeasurementError). A CPU profile named on
    purpose (``measure model --machine``) is the user's choice; the window always uses
    ``host_machine``."""
    settings = next((p.settings for p in points if p.settings is not None), None)
    if settings is None or settings.engine not in LOCAL_ENGINES or machine.key == presets.MEASURED_KEY:
        return
    kinds = _DEVICE_KINDS.get(settings.device, ("gpu", "unified"))
    if machine.kind not in kinds:
        raise MeasurementError(
            f"these points were measured here ({settings.engine} on {settings.device}), not on {machine.name}: "
            "they are fitted to this machine as measured (measure it first: 'rooflab measure machine')")


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
    include_disturbed: fit points the measurement marked disturbed too (all are stored, even when
    the fit then refuses them). A fit that is not offered (``Calibration.refusal``) is shown
    with a note saying why, and not kept."""
    check_machine(points, machine)
    key, mkey = store.model_key(spec), store.machine_key(machine)
    kept, error = False, ""
    if keep:
        # the points are kept before the fit is tried: a fit that refuses them (every point
        # disturbed, say) must not lose minutes of measurement
        try:
            store.save_measurement(key, mkey, points, meta, label=label, source=source)
        except (OSError, ResourceError) as exc:          # a disk full, a run too large to keep
            error = str(exc)
    cal = calibrate(spec, machine, points, kv_type=kv_type, dtype=dtype, overhead=overhead,
                    include_disturbed=include_disturbed)
    notes = list(notes)
    if cal.refusal:
        # the points stay; a fit that is not offered is never kept for 'predict --calibrated'
        notes.append(f"the fit is not offered as this machine's efficiency: {cal.refusal}")
    elif keep and not error:
        try:
            store.save_calibration(key, mkey, cal, source=source, engine=points[0].engine_key)
            kept = True
        except OSError as exc:
            error = str(exc)
    engine_cal, accuracy = _scored_by_engine_calibration(spec, machine, cal)
    return Calibrated(spec=spec, machine=machine, calibration=cal, gaps=tuple(explain_gaps(spec, cal)), model_key=key,
                      machine_key=mkey, notes=tuple(notes), kept=kept, keep_error=error, accuracy=accuracy,
                      engine_calibration=engine_cal)


def _scored_by_engine_calibration(spec: ModelSpec, machine: MachineProfile, cal: Calibration,
                                  ) -> tuple[EngineCalibration | None, dict[str, Accuracy]]:
    """The engine calibration kept for this machine and these settings, and its errors on the
    fitted points: accuracy on a model it did not see (none when it did)."""
    points = cal.points
    if not points or points[0].settings is None:
        return None, {}
    found = store.load_engine_calibration(store.machine_key(machine), points[0].engine_key)
    if found is None or store.model_key(spec) in found.model_keys:
        return found, {}
    return found, score(ModelPoints(key=spec.name, spec=spec, points=points, kv_type=cal.kv_type,
                                    dtype=cal.dtype if points[0].settings.dtype else None), machine, found)


def after_engine_run(run: EngineRun, machine: MachineProfile, *, source: str, keep: bool = True,
                     include_disturbed: bool = False) -> Calibrated:
    """``calibrate_and_keep`` for a timing run of the model at ``source`` in any engine."""
    return calibrate_and_keep(run.spec, machine, run.points, meta=run.record(), label=run.label, source=source,
                              kv_type=run.kv_type, dtype=run.dtype, overhead=run.overhead, notes=run.notes,
                              keep=keep, include_disturbed=include_disturbed)


def unrepeated(points: Sequence[MeasuredPoint]) -> str:
    """Why ``points`` are not fitted, "" when they are: a point timed once (``--repeats 1``) has
    no spread, so nothing tells a real gap from the noise of that one run, and a fit would be
    made on it (a batch of 2 "81 % faster than the calibrated roof", a spread of 0.0 %). The
    window and ``measure model`` keep such points unfitted and say so."""
    once = sum(p.repeats <= 1 for p in points)
    if not once:
        return ""
    which = "every point was" if once == len(points) else f"{once} of {len(points)} points were"
    return (f"{which} timed once (repeats 1): one run has no spread, so nothing tells a real difference "
            "from noise, and they are not fitted (time it with 2 or more repeats to fit)")


def keep_unfinished(run: EngineRun, machine: MachineProfile, *, source: str) -> str:
    """Keep the points of a run its engine did not finish (killed mid-run: ``EngineCrashed``'s
    ``run``) in the store beside the finished runs, unfitted: minutes of measurement are not lost
    with the engine, and a fit waits for a run that finished. Returns "" when kept, else why not
    (points timed here that do not belong to ``machine``, a store that cannot be written)."""
    try:
        check_machine(run.points, machine)
        store.save_measurement(store.model_key(run.spec), store.machine_key(machine), run.points, run.record(),
                               label=run.label, source=source)
    except (OSError, ResourceError, MeasurementError) as exc:
        return str(exc)
    return ""


def _plain(name: str) -> str:
    """An architecture or format name without case or separators ("gpt-oss" is "gpt_oss")."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def check_bench_model(bench: BenchImport, spec: ModelSpec) -> None:
    """Refuse to fit a benchmark to a model it did not run, whatever its format (JSON, JSONL,
    CSV, markdown, a batched-bench table with its load log): the architecture and weight format
    it names must be ``spec``'s, its parameter count and tensor bytes within 2 % and 5 % of
    ``spec``'s (SpecError, one line naming both). What a file does not record is not checked."""
    ran, wrong = bench.model, []
    if ran.architecture and spec.architecture and _plain(ran.architecture) != _plain(spec.architecture):
        wrong.append(f"architecture {ran.architecture} (this model is {spec.architecture})")
    mine = spec.weights_format.upper()
    if ran.weight_format and re.fullmatch(r"[A-Z0-9_]+", mine) and _plain(ran.weight_format) != _plain(mine):
        wrong.append(f"weights in {ran.weight_format} (this model's are {spec.weights_format})")
    if ran.params is not None and abs(ran.params - spec.params_total) > 0.02 * spec.params_total:
        wrong.append(f"{ran.params / 1e9:.3g} B parameters (this model has {spec.params_total / 1e9:.3g} B)")
    if ran.size is not None and abs(ran.size - spec.weight_bytes) > 0.05 * spec.weight_bytes:
        wrong.append(f"{ran.size / 1e9:.3g} GB of weights (this model has {spec.weight_bytes / 1e9:.3g} GB)")
    if wrong:
        named = ran.description or ", ".join(bench.models) or "its model"
        raise SpecError(f"{bench.path}: the benchmark ran {named} with {', '.join(wrong)}, not {spec.name}: "
                        "open the model it ran, then import it")


def after_import(bench: BenchImport, spec: ModelSpec, machine: MachineProfile, *, source: str,
                 keep: bool = True) -> Calibrated:
    """``calibrate_and_keep`` for points read from llama.cpp benchmark output, which ran
    ``spec`` (the model at ``source``) on ``machine`` (checked: ``check_bench_model``)."""
    check_bench_model(bench, spec)
    return calibrate_and_keep(spec, machine, bench.points, meta={"tool": bench.tool, "file": bench.path,
                                                                 **bench.metadata},
                              label=spec.name, source=source, kv_type=bench.kv_type,
                              notes=[f"{bench.tool}: {', '.join(bench.models) or bench.path}"], keep=keep)


def kept_machine_run() -> MachineMeasurement | None:
    """The measurement behind "this machine, measured", None when there is none or its record is
    from a rooflab that wrote other fields (then there is nothing to compare a new run with)."""
    raw = presets.load_machine_measurement()
    if raw is None:
        return None
    try:
        return MachineMeasurement.from_dict(raw)
    except SpecError:
        return None


REPLACE_HINT = "if this machine is slower now for good, 'rooflab measure machine --replace' keeps such a run"


def keep_machine_run(run: MachineMeasurement, *, keep: bool = True, earlier: Sequence[MachineMeasurement] = (),
                     replace: bool = False) -> MachineProfile:
    """The profile of "this machine, measured" from ``run``, kept (with the raw run) unless
    ``keep`` is False. Figures the run did not measure (an experiment left out) come from the
    profile kept before, when there is one; SpecError when neither has them.

    The run is checked first (``machine_checks``), against the run kept before and ``earlier``
    too (no figure far short of theirs) unless ``replace``: one that fails is kept apart as a
    disturbed run (``presets.disturbed_machine_path``) and MeasurementError says why in one line;
    the measured machine stays as it was, so nothing switches to a profile that cannot be trusted."""
    kept = kept_machine_run()
    references = () if replace else (*earlier, *((kept,) if kept is not None else ()))
    run = judge_machine(run, references)
    if run.disturbed:
        where = ""
        if keep:
            where = f", kept apart in {presets.save_disturbed_machine_run(run.to_dict(), run.disturbed)}"
        hint = f"; {REPLACE_HINT}" if short_of(run, references) else ""
        raise MeasurementError(f"this machine's measurement was disturbed ({run.disturbed}){where} and is not used: "
                               f"measure again when the machine is quieter{hint}")
    profile = run.profile(fallback=presets.load_measured_machine())
    if keep:
        presets.save_measured_machine(profile, run.to_dict())
    return profile


def keep_best_machine_run(runs: Sequence[tuple[str, MachineMeasurement]], *,
                          keep: bool = True) -> tuple[MachineProfile, tuple[str, ...]]:
    """The profile of the best of ``runs``, (when, run) pairs of this machine measured at several
    moments of one job (before and after a calibration's timings), kept as ``keep_machine_run``
    keeps one. Each run is judged by its own checks, then against the others that passed them
    and the run kept before: one far short of another is set aside, as is one that failed. Of
    those left, the fastest (highest product of its headline figures) is used: a timing cannot
    beat the hardware, so the faster run is the nearer the ceiling. Returns the profile and one
    note per run set aside ("the machine measured before the timings was set aside: ...");
    MeasurementError, naming each run's reason, when none is left."""
    kept = kept_machine_run()
    own = [(when, judge_machine(run)) for when, run in runs]
    references = [run for _, run in own if not run.disturbed] + ([kept] if kept is not None else [])
    judged = [(when, run if run.disturbed else judge_machine(run, [o for o in references if o is not run]))
              for when, run in own]
    left = [run for _, run in judged if not run.disturbed]
    if not left:
        if keep:
            presets.save_disturbed_machine_run(judged[-1][1].to_dict(), judged[-1][1].disturbed)
        raise MeasurementError("this machine's measurements were disturbed ("
                               + "; ".join(f"{when}: {run.disturbed}" for when, run in judged)
                               + ") and are not used: measure again when the machine is quieter")
    best = max(left, key=lambda run: math.prod(value for value, _ in headline(run).values()))
    notes = tuple(f"the machine measured {when} was set aside ({run.disturbed}); the one measured "
                  f"{next(w for w, r in judged if r is best)} is used" for when, run in judged if run.disturbed)
    return keep_machine_run(best, keep=keep, earlier=[r for r in left if r is not best]), notes
