"""Machine presets (resources/machines/*.json) and user profiles (config dir), one file each."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rooflab.core.errors import ModelFileError, ResourceError, SpecError
from rooflab.core.files.atomic import write_atomic
from rooflab.core.files.paths import data_dir, profiles_dir
from rooflab.core.files.records import load_record, read_record, write_record
from rooflab.core.files.resources import resources_dir
from rooflab.core.files.safe_json import dumps_json, read_json
from rooflab.core.io.textfile import did_you_mean, printable
from rooflab.core.values.machine import MEASURED_KEY as MEASURED_KEY  # re-exported: the key beside the presets'
from rooflab.core.values.machine import MachineProfile

MAX_PROFILE_BYTES = 1 << 20          # a profile is a few hundred bytes


def _printable_profile(machine: MachineProfile) -> MachineProfile:
    """``machine`` with the strings a file gave it made safe to print."""
    return dataclasses.replace(
        machine, name=printable(machine.name) or "machine", kind=printable(machine.kind, 20),
        offload_name=printable(machine.offload_name), notes=printable(machine.notes, 2000),
        sources={printable(k, 40): printable(v, 500) for k, v in machine.sources.items()})


def profile_from_dict(data: Any, key: str = "") -> MachineProfile:
    """A machine profile from parsed JSON (the preset file format); SpecError naming the bad
    field, printable strings."""
    if not isinstance(data, dict):
        raise SpecError("a machine profile must be a JSON object")
    return _printable_profile(MachineProfile.from_dict(data, key=profile_file_key(str(data.get("key") or key))))


def _read_profile(path: Path, key: str) -> MachineProfile:
    try:
        data = read_json(path, max_bytes=MAX_PROFILE_BYTES, what="a machine profile")
        return profile_from_dict(data, key)
    except ModelFileError as exc:
        raise ResourceError(printable(exc, 1000)) from exc
    except SpecError as exc:            # its message quotes the file's own name for the machine
        raise ResourceError(printable(f"{path}: {exc}", 1000)) from exc


def _presets_dir() -> Path:
    return resources_dir() / "machines"


def list_presets() -> list[MachineProfile]:
    """Built-in machines, sorted by name."""
    out = [_read_profile(p, p.stem) for p in sorted(_presets_dir().glob("*.json"))]
    return sorted(out, key=lambda m: m.name.lower())


def preset_keys() -> list[str]:
    return sorted(p.stem for p in _presets_dir().glob("*.json"))


def list_user_profiles() -> list[MachineProfile]:
    """Profiles the user saved; unreadable ones are skipped (see ``broken_user_profiles``)."""
    out = []
    for path in sorted(profiles_dir().glob("*.json")):
        try:
            out.append(_read_profile(path, path.stem))
        except ResourceError:
            continue
    return out


def broken_user_profiles() -> list[str]:
    """One line per user profile file that cannot be read."""
    lines = []
    for path in sorted(profiles_dir().glob("*.json")):
        try:
            _read_profile(path, path.stem)
        except ResourceError as exc:
            lines.append(str(exc))
    return lines


def profile_file_key(name: str) -> str:
    """A file-safe key for a profile name."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "machine"


def profile_key(name: str) -> str:
    """The key a profile called ``name`` is saved under: its slug, with "my-" in front where a
    preset (or the measured machine) already has that key and would be found first."""
    key = profile_file_key(name)
    return f"my-{key}" if key in preset_keys() or key == MEASURED_KEY else key


def user_profile_exists(name: str) -> bool:
    """Whether saving a profile called ``name`` would replace one the user saved before."""
    return (profiles_dir() / f"{profile_key(name)}.json").is_file()


def save_user_profile(machine: MachineProfile, key: str | None = None) -> Path:
    """Write ``machine`` to the user's profile folder atomically; returns the file. The key
    (file name) comes from ``key``, else the machine's key, else its name (``profile_key``)."""
    key = profile_key(key or machine.key or machine.name)
    data = {"key": key, **machine.to_dict()}
    return write_atomic(profiles_dir() / f"{key}.json", dumps_json(data, indent=2) + "\n")


def delete_user_profile(key: str) -> None:
    path = profiles_dir() / f"{profile_file_key(key)}.json"
    try:
        path.unlink()
    except FileNotFoundError:
        raise ResourceError(f"no user profile called {key!r}") from None


def load_machine(ref: str) -> MachineProfile:
    """A machine by preset key, user profile key, "measured", or a profile file path."""
    candidate = Path(ref).expanduser()
    if ref.endswith(".json") or os.sep in ref or "/" in ref or candidate.is_file():
        return _read_profile(candidate, candidate.stem)
    key = ref.lower()
    if key == MEASURED_KEY:
        measured = load_measured_machine()
        if measured is None:
            raise ResourceError(_no_measured_machine())
        return measured
    preset = _presets_dir() / f"{key}.json"
    if preset.is_file():
        return _read_profile(preset, key)
    user = profiles_dir() / f"{profile_file_key(key)}.json"
    if user.is_file():
        return _read_profile(user, profile_file_key(key))
    known = preset_keys()
    raise ResourceError(f"unknown machine {ref!r}{did_you_mean(ref, known)} (presets: {', '.join(known)}; "
                        "or a profile .json path)")


# --- the measured machine (data folder: machines/measured.json) -------------------------------

def _measured_path() -> Path:
    return data_dir() / "machines" / f"{MEASURED_KEY}.json"


def measured_machine_path() -> Path:
    """Where "this machine, measured" is kept (the window says so when a run ends)."""
    return _measured_path()


def save_measured_machine(profile: MachineProfile, measurement: Mapping[str, Any] | None = None) -> Path:
    """Keep ``profile`` as "this machine, measured", with the raw measurement beside it."""
    return write_record(_measured_path(), {"profile": profile.to_dict(), "measurement": dict(measurement or {})})


def disturbed_machine_path() -> Path:
    """Where the last machine measurement that failed its checks is kept, apart from the one used."""
    return data_dir() / "machines" / f"{MEASURED_KEY}-disturbed.json"


def _no_measured_machine() -> str:
    """Why there is no measured machine, and what to do: a run set aside as disturbed is named
    (it said "no measured machine yet" as if none had run)."""
    data = read_record(disturbed_machine_path())
    reason = data.get("disturbed") if isinstance(data, dict) else None
    if not isinstance(reason, str):
        return "no measured machine yet: run 'rooflab measure machine' first"
    return (f"no measured machine yet: the last measurement of this machine was set aside as disturbed "
            f"({printable(reason, 200)}; kept in {disturbed_machine_path()}): run 'rooflab measure machine' "
            "again when the machine is quieter, or name a preset with --machine")


def save_disturbed_machine_run(measurement: Mapping[str, Any], reason: str) -> Path:
    """Keep a machine measurement that failed its checks, with why, without making it the
    measured machine."""
    return write_record(disturbed_machine_path(), {"disturbed": reason, "measurement": dict(measurement)})


def load_measured_machine() -> MachineProfile | None:
    """The last measured machine profile (key "measured"), None when there is none."""
    return load_record(_measured_path(), lambda data: profile_from_dict(data["profile"], MEASURED_KEY))


def load_machine_measurement() -> dict[str, Any] | None:
    """The raw record of the last machine measurement (roofline samples and all)."""
    data = read_record(_measured_path())
    raw = data.get("measurement") if data else None
    return dict(raw) if isinstance(raw, dict) and raw else None
