"""Measurements and fits kept between sessions, in the user data folder (``paths.data_dir``;
ROOFLAB_DATA_DIR overrides it):

    measurements/<model key>/<machine key>.json  measured points, newest run last
    calibrations/<model key>/<machine key>.json  the latest fit of one model
    engine-calibrations/<machine key>/<engine settings key>.json  the latest calibration of an
        engine on the machine, which applies to any model

Every write is atomic (a temporary file, then os.replace). A file that cannot be read, or
that is JSON of the wrong shape, is moved aside to ``<name>.corrupt-<time>`` and treated as
absent, so a bad file costs its contents, never a crash (``files.records``). The model key is
a digest of the model's structure and bytes per weight, so a spec read from a config.json and
one built from the torch model that ran agree."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rooflab.core.calibration.calibrate import Calibration
from rooflab.core.errors import ResourceError
from rooflab.core.files import records
from rooflab.core.files.paths import data_dir
from rooflab.core.files.records import load_record, write_record
from rooflab.core.files.safe_json import dumps_json
from rooflab.core.io.arch import llama_cpp_name
from rooflab.core.io.textfile import MAX_NAME, printable
from rooflab.core.values.calibration import EngineCalibration, Rates
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.measured import MeasuredPoint
from rooflab.core.values.model import ModelSpec

log = logging.getLogger(__name__)
MAX_RUNS = 50            # measurement runs kept per model and machine
HISTORY_SHARE = 0.75     # of the largest record rooflab reads back: what a history may fill
Run = dict[str, Any]     # date (str), meta (dict), points (MeasuredPoints)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.") or "unnamed"


def model_key(spec: ModelSpec) -> str:
    """A stable key for ``spec``: architecture family plus a digest of layers, widths, heads,
    experts and bytes per parameter (not its name or path, which differ between readers)."""
    layout = spec.attention
    per_param = spec.weight_bytes / max(spec.params_total, 1)
    shape = (spec.layers, spec.hidden, spec.vocab, layout.heads, layout.kv_heads, layout.head_dim_k,
             layout.head_dim_v, spec.experts, spec.experts_used, round(spec.params_total, -4), f"{per_param:.2f}")
    digest = hashlib.sha1(repr(shape).encode()).hexdigest()[:12]
    family = re.sub(r"[^a-z0-9]+", "", llama_cpp_name(spec.architecture)) or "model"
    return f"{family}-{digest}"


def machine_key(machine: MachineProfile) -> str:
    return _slug(machine.key or machine.name)


# --- model measurements ----------------------------------------------------------------------

def _measurement_path(model: str, machine: str) -> Path:
    return data_dir() / "measurements" / _slug(model) / f"{_slug(machine)}.json"


def save_measurement(model: str, machine: str, points: Sequence[MeasuredPoint],
                     meta: Mapping[str, Any] | None = None, *, label: str = "", source: str = "") -> Path:
    """Append one run (points plus its circumstances) to the model's record on ``machine``,
    dropping the oldest runs past ``MAX_RUNS`` or past ``HISTORY_SHARE`` of the size rooflab
    reads a record back at (a history over it would be set aside whole at the next read).
    ResourceError when this run alone is too large to keep."""
    path = _measurement_path(model, machine)
    old = load_record(path, _measurement_record) or ("", "", [])
    runs = [_stored_run(run) for run in old[2]][-(MAX_RUNS - 1):]
    runs.append({"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "meta": dict(meta or {}),
                 "points": [p.to_dict() for p in points]})
    record = {"model": model, "machine": machine, "label": label or old[0], "source": _absolute(source) or old[1]}
    budget = int(records.MAX_RECORD_BYTES * HISTORY_SHARE) - len(dumps_json(record).encode())
    return write_record(path, {**record, "runs": _newest_within(runs, budget)})


def _newest_within(runs: list[Run], budget: int) -> list[Run]:
    """The newest of ``runs`` whose text, as ``write_record`` writes it (two levels deep in the
    record), takes at most ``budget`` bytes; ResourceError when the newest alone takes more."""
    kept: list[Run] = []
    total = 0
    for run in reversed(runs):
        text = dumps_json(run, indent=1, sort_keys=True)
        total += len(text.encode()) + 2 * text.count("\n") + 8        # its indent, comma and line breaks
        if total > budget:
            break
        kept.append(run)
    if not kept:
        raise ResourceError(f"{len(runs[-1]['points']):,} points are {total / 1e6:,.1f} MB written out, more than "
                            f"a measurement history keeps ({budget / 1e6:,.1f} MB): not kept")
    if len(kept) < len(runs):
        log.info("measurement history over %d bytes: the %d oldest runs dropped", budget, len(runs) - len(kept))
    return kept[::-1]


def _measurement_record(data: dict[str, Any]) -> tuple[str, str, list[Run]]:
    """(label, source, runs) of a measurement record; raises (TypeError, SpecError, ...) on a
    record of the wrong shape, which ``load_record`` then sets aside."""
    runs = data.get("runs", [])
    if not isinstance(runs, list):
        raise TypeError(f"runs must be a list, not {type(runs).__name__}")
    label, source = data.get("label", ""), data.get("source", "")
    if not isinstance(label, str) or not isinstance(source, str):
        raise TypeError("label and source must be text")
    return label, source, [_run(run) for run in runs]


def _run(raw: Any) -> Run:
    if not isinstance(raw, dict):
        raise TypeError(f"a run must be an object, not {type(raw).__name__}")
    date, meta, points = raw.get("date", ""), raw.get("meta", {}), raw.get("points", [])
    if not isinstance(date, str) or not isinstance(meta, dict) or not isinstance(points, list):
        raise TypeError("a run needs a date (text), meta (an object) and points (a list)")
    return {"date": date, "meta": meta, "points": [MeasuredPoint.from_dict(p) for p in points]}


def _stored_run(run: Run) -> dict[str, Any]:
    return {**run, "points": [p.to_dict() for p in run["points"]]}


def load_measurements(model: str, machine: str) -> list[Run]:
    """Runs kept for ``model`` on ``machine``, oldest first: dicts with date, meta and points
    (MeasuredPoint objects). A record of the wrong shape is set aside and gives no runs."""
    found = load_record(_measurement_path(model, machine), _measurement_record)
    return found[2] if found is not None else []


# --- calibrations ----------------------------------------------------------------------------

def _calibration_path(model: str, machine: str, engine: str = "") -> Path:
    """One fit per model, machine and engine settings (``EngineSettings.key``; "" for fits kept
    before settings were recorded)."""
    name = _slug(machine) + (f"@{_slug(engine)}" if engine else "")
    return data_dir() / "calibrations" / _slug(model) / f"{name}.json"


def _calibration_paths(model: str, machine: str) -> list[Path]:
    """Every fit kept for ``model`` ("*" for any) on ``machine``, newest first."""
    folder = data_dir() / "calibrations"
    found = [*folder.glob(f"{model}/{_slug(machine)}.json"), *folder.glob(f"{model}/{_slug(machine)}@*.json")]
    return sorted(found, key=_mtime, reverse=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def save_calibration(model: str, machine: str, calibration: Calibration, *, source: str = "",
                     engine: str = "") -> Path:
    """Keep ``calibration`` as the fit for ``model`` on ``machine`` with the engine settings
    ``engine`` (replacing the last one of the same three). ``source`` (the model's path) lets
    ``load_calibration`` find it by path as well."""
    return write_record(_calibration_path(model, machine, engine),
                        {"model": model, "machine": machine, "engine": engine, "source": _absolute(source),
                         "calibration": calibration.to_dict()})


def _absolute(source: str) -> str:
    """A path that exists, made absolute (so a later run from another folder matches it)."""
    try:
        path = Path(source).expanduser()
        return str(path.resolve()) if source and path.exists() else source
    except OSError:
        return source


def _same_source(a: str, b: str) -> bool:
    """Equal references, or two paths naming the same file or folder."""
    if not a or not b:
        return False
    if a == b:
        return True
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve() and Path(a).expanduser().exists()
    except OSError:
        return False


def load_calibration_record(model: str, machine: str, engine: str | None = None) -> Calibration | None:
    """The fit kept for ``model`` on ``machine`` with engine settings ``engine`` (None: the
    newest of any engine), None when there is none."""
    paths = [_calibration_path(model, machine, engine)] if engine is not None else _calibration_paths(_slug(model),
                                                                                                         machine)
    for path in paths:
        found = load_record(path, _calibration)
        if found is not None:
            return found[1]
    return None


def _calibration(data: dict[str, Any]) -> tuple[str, Calibration]:
    """(source, fit) of a calibration record; raises on a record of the wrong shape."""
    source = data.get("source", "")
    if not isinstance(source, str):
        raise TypeError("source must be text")
    return source, Calibration.from_dict(data["calibration"])


def load_calibration(model: str, machine: str, peak: float | None = None) -> Efficiency | None:
    """The fitted Efficiency for ``model`` (a ``model_key``, or the model's source path) on
    ``machine`` (a machine key), None when there is none. ``peak``: the machine's compute peak
    now, FLOP/s; the fit's factors were of the peak it kept (``Calibration.peak_flops``), and are
    rescaled so that each rate stays what was measured (a CPU's peak became its int8 path)."""
    found = load_calibration_record(model, machine)
    if found is None and model:
        for path in _calibration_paths("*", machine):
            stored = load_record(path, _calibration)
            if stored is not None and _same_source(stored[0], model):
                found = stored[1]
                break
    if found is None:
        return None
    if peak and found.peak_flops > 0:
        return found.efficiency.compute_scaled(found.peak_flops / peak)
    return found.efficiency


# --- calibrations of a machine and engine (any model) ----------------------------------------

def _engine_calibration_path(machine: str, engine: str) -> Path:
    return data_dir() / "engine-calibrations" / _slug(machine) / f"{_slug(engine)}.json"


def printable_calibration(cal: EngineCalibration) -> EngineCalibration:
    """``cal`` with the text a file gave it made safe to print: a stored or cached calibration
    is data, and its labels, names and notes end up in "expected with ..." lines."""
    def text(value: str, limit: int = MAX_NAME) -> str:
        return printable(value, limit)

    def rates(r: Rates) -> Rates:          # format classes name the fitted terms ("bandwidth, q8")
        def keys(table: Mapping[str, float]) -> dict[str, float]:
            return {text(k, 40): v for k, v in table.items()}

        return dataclasses.replace(r, bandwidth=keys(r.bandwidth), prefill_flops=keys(r.prefill_flops),
                                   decode_flops=keys(r.decode_flops))

    return dataclasses.replace(
        cal, machine_key=text(cal.machine_key), machine_name=text(cal.machine_name), engine_key=text(cal.engine_key),
        engine_label=text(cal.engine_label), date=text(cal.date, 40), source=text(cal.source, 40),
        models=tuple(map(text, cal.models)), model_keys=tuple(map(text, cal.model_keys)),
        notes=tuple(text(n, 2000) for n in cal.notes), central=rates(cal.central),
        replicates=tuple(map(rates, cal.replicates)),
        accuracy={text(p, 40): {text(k, 40): a for k, a in v.items()} for p, v in cal.accuracy.items()},
        settings={text(k, 40): text(v) if isinstance(v, str) else v for k, v in cal.settings.items()})


def _engine_calibration(data: dict[str, Any]) -> EngineCalibration:
    return printable_calibration(EngineCalibration.from_dict(data))


def save_engine_calibration(calibration: EngineCalibration) -> Path:
    """Keep ``calibration`` as the one of its machine and engine settings (replacing the last)."""
    return write_record(_engine_calibration_path(calibration.machine_key, calibration.engine_key),
                        calibration.to_dict())


def engine_calibrations(machine: str) -> list[EngineCalibration]:
    """Every calibration kept for ``machine`` (a machine key), newest first. A record of the
    wrong shape is set aside and skipped."""
    folder = data_dir() / "engine-calibrations" / _slug(machine)
    found = []
    for path in sorted(folder.glob("*.json"), key=_mtime, reverse=True):
        cal = load_record(path, _engine_calibration)
        if cal is not None:
            found.append(cal)
    return found


def load_engine_calibration(machine: str, engine: str | None = None) -> EngineCalibration | None:
    """The calibration of ``machine`` with engine settings ``engine`` (an ``EngineSettings.key``;
    None: the newest of any engine), None when there is none."""
    if engine is not None:
        return load_record(_engine_calibration_path(machine, engine), _engine_calibration)
    found = engine_calibrations(machine)
    return found[0] if found else None


# --- measurements of a server under load -------------------------------------------------------

MAX_SERVER_RUNS = 10     # measurements kept per server, model and machine (each at most about 1 MB)


def _server_path(server: str, model: str, machine: str) -> Path:
    return data_dir() / "servers" / _slug(server) / _slug(model) / f"{_slug(machine)}.json"


def server_run_path(server: str, model: str, machine: str) -> Path:
    """The file ``save_server_run`` keeps (``server``, ``model``, ``machine``)'s runs in."""
    return _server_path(server, model, machine)


def _server_runs(data: dict[str, Any]) -> list[dict[str, Any]]:
    runs = data.get("runs", [])
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("levels"), list) for r in runs):
        raise TypeError("runs must be a list of objects with levels")
    return runs


def save_server_run(server: str, model: str, machine: str, run: Mapping[str, Any]) -> Path:
    """Append one measurement of a server (``ServerMeasurement.to_dict()``: no API key) to the
    record of (``server``, the served ``model``, the ``machine`` the user says it runs on)."""
    path = _server_path(server, model, machine)
    runs = [*(load_record(path, _server_runs) or [])[-(MAX_SERVER_RUNS - 1):], dict(run)]
    budget, total = int(records.MAX_RECORD_BYTES * HISTORY_SHARE), 0
    kept: list[dict[str, Any]] = []
    for one in reversed(runs):          # the newest that fit the size a record is read back at
        total += len(dumps_json(one, indent=1, sort_keys=True).encode()) * 2     # its indent two levels deeper
        if total > budget and kept:
            break
        kept.append(one)
    return write_record(path, {"server": server, "model": model, "machine": machine, "runs": kept[::-1]})


def load_server_runs(server: str, model: str, machine: str) -> list[dict[str, Any]]:
    """The measurements kept of ``model`` served at ``server`` on ``machine``, oldest first."""
    return load_record(_server_path(server, model, machine), _server_runs) or []


def server_runs_on(machine: str) -> list[dict[str, Any]]:
    """Every measurement of any server and served model kept for ``machine``, oldest first
    (by file, then within each file)."""
    runs: list[dict[str, Any]] = []
    for path in sorted((data_dir() / "servers").glob(f"*/*/{_slug(machine)}.json"), key=_mtime):
        runs += load_record(path, _server_runs) or []
    return runs
