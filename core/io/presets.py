"""Machine presets (resources/machines/*.json) and user profiles (config dir), one file each."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rooflab.core.errors import ResourceError, SpecError
from rooflab.core.files.atomic import write_atomic
from rooflab.core.files.paths import data_dir, profiles_dir
from rooflab.core.files.records import read_record, set_aside, write_record
from rooflab.core.files.resources import resources_dir
from rooflab.core.values.machine import MachineProfile

MEASURED_KEY = "measured"


def _read_profile(path: Path, key: str) -> MachineProfile:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResourceError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResourceError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ResourceError(f"{path}: a machine profile must be a JSON object")
    try:
        return MachineProfile.from_dict(data, key=str(data.get("key") or key))
    except SpecError as exc:
        raise ResourceError(f"{path}: {exc}") from exc


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


def slug(name: str) -> str:
    """A file-safe key for a profile name."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "machine"


def profile_key(name: str) -> str:
    """The key a profile called ``name`` is saved under: its slug, with "my-" in front where a
    preset (or the measured machine) already has that key and would be found first."""
    key = slug(name)
    return f"my-{key}" if key in preset_keys() or key == MEASURED_KEY else key


def user_profile_exists(name: str) -> bool:
    """Whether saving a profile called ``name`` would replace one the user saved before."""
    return (profiles_dir() / f"{profile_key(name)}.json").is_file()


def save_user_profile(machine: MachineProfile, key: str | None = None) -> Path:
    """Write ``machine`` to the user's profile folder atomically; returns the file. The key
    (file name) comes from ``key``, else the machine's key, else its name (``profile_key``)."""
    key = profile_key(key or machine.key or machine.name)
    data = {"key": key, **machine.to_dict()}
    return write_atomic(profiles_dir() / f"{key}.json", json.dumps(data, indent=2) + "\n")


def delete_user_profile(key: str) -> None:
    path = profiles_dir() / f"{slug(key)}.json"
    try:
        path.unlink()
    except FileNotFoundError:
        raise ResourceError(f"no user profile called {key!r}") from None


def load_machine(ref: str) -> MachineProfile:
    """A machine by preset key, user profile key, "measured", or a profile file path."""
    candidate = Path(ref).expanduser()
    if ref.endswith(".json") or candidate.is_file():
        if not candidate.is_file():
            raise ResourceError(f"{ref}: no such machine profile file")
        return _read_profile(candidate, candidate.stem)
    key = ref.lower()
    if key == MEASURED_KEY:
        measured = load_measured_machine()
        if measured is None:
            raise ResourceError("no measured machine yet: run 'rooflab measure machine' first")
        return measured
    preset = _presets_dir() / f"{key}.json"
    if preset.is_file():
        return _read_profile(preset, key)
    user = profiles_dir() / f"{slug(key)}.json"
    if user.is_file():
        return _read_profile(user, slug(key))
    known = ", ".join(preset_keys())
    raise ResourceError(f"unknown machine {ref!r} (presets: {known}; or a profile .json path)")


# --- the measured machine (data folder: machines/measured.json) -------------------------------

def _measured_path() -> Path:
    return data_dir() / "machines" / f"{MEASURED_KEY}.json"


def save_measured_machine(profile: MachineProfile, measurement: Mapping[str, Any] | None = None) -> Path:
    """Keep ``profile`` as "this machine, measured", with the raw measurement beside it."""
    return write_record(_measured_path(), {"profile": profile.to_dict(), "measurement": dict(measurement or {})})


def load_measured_machine() -> MachineProfile | None:
    """The last measured machine profile (key "measured"), None when there is none."""
    data = read_record(_measured_path())
    if data is None:
        return None
    try:
        return MachineProfile.from_dict(data["profile"], key=MEASURED_KEY)
    except (KeyError, TypeError, SpecError) as exc:
        set_aside(_measured_path(), str(exc))
        return None


def load_machine_measurement() -> dict[str, Any] | None:
    """The raw record of the last machine measurement (roofline samples and all)."""
    data = read_record(_measured_path())
    raw = data.get("measurement") if data else None
    return dict(raw) if isinstance(raw, dict) and raw else None
