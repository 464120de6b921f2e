"""Measurements and fits kept between sessions, in the user data folder (``paths.data_dir``;
ROOFLAB_DATA_DIR overrides it):

    machines/measured.json                       the latest measured machine profile
    measurements/<model key>/<machine key>.json  measured points, newest run last
    calibrations/<model key>/<machine key>.json  the latest fit

Every write is atomic (a temporary file, then os.replace). A file that cannot be read is moved
aside to ``<name>.corrupt-<time>`` and treated as absent, so a bad file costs its contents,
never a crash. The model key is a digest of the model's structure and bytes per weight, so a
spec read from a config.json and one built from the torch model that ran agree."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rooflab.core.atomic import write_atomic
from rooflab.core.calibrate import Calibration, MeasuredPoint
from rooflab.core.errors import SpecError
from rooflab.core.machine import Efficiency, MachineProfile
from rooflab.core.model import ModelSpec
from rooflab.core.paths import data_dir
from rooflab.core.presets import MEASURED_KEY

log = logging.getLogger(__name__)
FORMAT = 1
MAX_RUNS = 50            # measurement runs kept per model and machine


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
    family = re.sub(r"[^a-z0-9]+", "", spec.architecture.lower()) or "model"
    return f"{family}-{digest}"


def machine_key(machine: MachineProfile) -> str:
    return _slug(machine.key or machine.name)


def _read(path: Path) -> Any | None:
    """Parsed JSON of ``path``; None when absent; a corrupt file is moved aside and None."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not a rooflab store file of this format")
        return data
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        _set_aside(path, str(exc))
        return None


def _set_aside(path: Path, why: str) -> None:
    backup = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        path.replace(backup)
        log.warning("%s could not be read (%s); moved to %s", path, why, backup.name)
    except OSError as exc:
        log.warning("%s could not be read (%s) nor moved aside (%s)", path, why, exc)


def _write(path: Path, data: Mapping[str, Any]) -> Path:
    return write_atomic(path, json.dumps({"format": FORMAT, **data}, indent=1, sort_keys=True) + "\n")


# --- the measured machine --------------------------------------------------------------------

def _machine_path() -> Path:
    return data_dir() / "machines" / f"{MEASURED_KEY}.json"


def save_measured_machine(profile: MachineProfile, measurement: Mapping[str, Any] | None = None) -> Path:
    """Keep ``profile`` as "this machine, measured", with the raw measurement beside it."""
    return _write(_machine_path(), {"profile": profile.to_dict(), "measurement": dict(measurement or {})})


def load_measured_machine() -> MachineProfile | None:
    """The last measured machine profile (key "measured"), None when there is none."""
    data = _read(_machine_path())
    if data is None:
        return None
    try:
        return MachineProfile.from_dict(data["profile"], key=MEASURED_KEY)
    except (KeyError, TypeError, SpecError) as exc:
        _set_aside(_machine_path(), str(exc))
        return None


def load_machine_measurement() -> dict[str, Any] | None:
    """The raw record of the last machine measurement (roofline samples and all)."""
    data = _read(_machine_path())
    raw = data.get("measurement") if data else None
    return dict(raw) if isinstance(raw, dict) and raw else None


# --- model measurements ----------------------------------------------------------------------

def _measurement_path(model: str, machine: str) -> Path:
    return data_dir() / "measurements" / _slug(model) / f"{_slug(machine)}.json"


def save_measurement(model: str, machine: str, points: Sequence[MeasuredPoint],
                     meta: Mapping[str, Any] | None = None, *, label: str = "", source: str = "") -> Path:
    """Append one run (points plus its circumstances) to the model's record on ``machine``."""
    path = _measurement_path(model, machine)
    data = _read(path) or {}
    runs = list(data.get("runs", []))[-(MAX_RUNS - 1):]
    runs.append({"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "meta": dict(meta or {}),
                 "points": [p.to_dict() for p in points]})
    record = {"model": model, "machine": machine, "label": label or data.get("label", ""),
              "source": _absolute(source) or data.get("source", ""), "runs": runs}
    return _write(path, record)


def load_measurements(model: str, machine: str) -> list[dict[str, Any]]:
    """Runs kept for ``model`` on ``machine``, oldest first: dicts with date, meta and points
    (MeasuredPoint objects). Unreadable points are dropped with a log line."""
    data = _read(_measurement_path(model, machine))
    out = []
    for run in (data or {}).get("runs", []):
        points = []
        for raw in run.get("points", []):
            try:
                points.append(MeasuredPoint.from_dict(raw))
            except SpecError as exc:
                log.warning("dropped a stored point: %s", exc)
        out.append({"date": run.get("date", ""), "meta": run.get("meta", {}), "points": points})
    return out


def measured_models(machine: str | None = None) -> list[tuple[str, str]]:
    """(model key, machine key) pairs that have stored measurements."""
    root = data_dir() / "measurements"
    pairs = [(p.parent.name, p.stem) for p in sorted(root.glob("*/*.json"))]
    return [pair for pair in pairs if machine is None or pair[1] == _slug(machine)]


# --- calibrations ----------------------------------------------------------------------------

def _calibration_path(model: str, machine: str) -> Path:
    return data_dir() / "calibrations" / _slug(model) / f"{_slug(machine)}.json"


def save_calibration(model: str, machine: str, calibration: Calibration, *, source: str = "") -> Path:
    """Keep ``calibration`` as the fit for ``model`` on ``machine`` (replacing the last one).
    ``source`` (the model's path) lets ``load_calibration`` find it by path as well."""
    return _write(_calibration_path(model, machine), {"model": model, "machine": machine, "source": _absolute(source),
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


def load_calibration_record(model: str, machine: str) -> Calibration | None:
    data = _read(_calibration_path(model, machine))
    if data is None:
        return None
    try:
        return Calibration.from_dict(data["calibration"])
    except (KeyError, SpecError) as exc:
        _set_aside(_calibration_path(model, machine), str(exc))
        return None


def load_calibration(model: str, machine: str) -> Efficiency | None:
    """The fitted Efficiency for ``model`` (a ``model_key``, or the model's source path) on
    ``machine`` (a machine key), None when there is none."""
    found = load_calibration_record(model, machine)
    if found is not None:
        return found.efficiency
    for path in sorted((data_dir() / "calibrations").glob(f"*/{_slug(machine)}.json")):
        data = _read(path)
        if data and model and _same_source(str(data.get("source", "")), model):
            try:
                return Calibration.from_dict(data["calibration"]).efficiency
            except (KeyError, SpecError):
                continue
    return None
