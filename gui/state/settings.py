"""The window's settings: a JSON file in the platformdirs config folder, written atomically.

A file that cannot be read is never overwritten in place: it is renamed to
``settings.json.corrupt-<time>`` and the window starts from defaults with a notice saying where
the old file went, so nothing the user saved is silently lost."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rooflab.core.errors import ModelFileError
from rooflab.core.files.atomic import write_atomic
from rooflab.core.files.capped import MissingFileError, UnreadableFileError
from rooflab.core.files.paths import config_dir
from rooflab.core.files.records import set_aside
from rooflab.core.files.safe_json import dumps_json, read_json

log = logging.getLogger(__name__)

MAX_RECENT = 10
SETTINGS_VERSION = 1


@dataclass
class Settings:
    theme: str = "system"                 # system | light | dark
    recent: list[str] = field(default_factory=list)
    model: str = ""                       # last model ref (path or catalogue key)
    weights: str = ""                     # the weight format it was opened with ("" = its own)
    machine: str = ""                     # last machine ref (preset, profile key or path)
    machine_data: dict[str, Any] = field(default_factory=dict)   # an edited, unsaved machine
    workload: dict[str, Any] = field(default_factory=dict)
    placement: dict[str, Any] = field(default_factory=dict)     # PlacementChoice.to_dict(); {} = auto
    geometry: str = ""                    # QWidget.saveGeometry(), base64
    window_state: str = ""
    report_dir: str = ""
    llama_bench: str = ""                 # the user's llama-bench (file or folder; "" = found on PATH)

    def add_recent(self, ref: str) -> None:
        self.recent = [ref, *(r for r in self.recent if r != ref)][:MAX_RECENT]


def settings_path() -> Path:
    return config_dir() / "settings.json"


def _check(data: Any) -> Settings:
    """Settings from parsed JSON; raises ValueError when a field has the wrong type."""
    if not isinstance(data, dict):
        raise ValueError("settings must be a JSON object")
    defaults = Settings()
    values: dict[str, Any] = {}
    for f in fields(Settings):
        if f.name not in data:
            continue
        value, expected = data[f.name], type(getattr(defaults, f.name))
        if not isinstance(value, expected):
            raise ValueError(f"settings field {f.name!r} should be {expected.__name__}")
        values[f.name] = value
    settings = Settings(**values)
    if not all(isinstance(r, str) for r in settings.recent):
        raise ValueError("settings field 'recent' should hold file names")
    settings.recent = settings.recent[:MAX_RECENT]
    return settings


def load_settings(path: Path | None = None) -> tuple[Settings, str | None]:
    """(settings, notice): defaults and no notice when there is no file yet; defaults and a
    notice naming the backup when the file was unreadable."""
    path = path or settings_path()
    try:
        data = read_json(path, max_bytes=1 << 20, what="a settings file")
    except MissingFileError:
        return Settings(), None
    except UnreadableFileError as exc:
        return Settings(), f"Could not read settings ({exc.reason}); using defaults."
    except ModelFileError as exc:         # not UTF-8 or JSON, too deep, a folder or a pipe, too large
        why = exc.reason
    else:
        try:
            return _check(data), None
        except (ValueError, TypeError) as exc:
            why = str(exc)
    backup = set_aside(path, why)
    if backup is None:
        return Settings(), f"Settings file {path} is unreadable ({why}); using defaults."
    return Settings(), (f"Settings file was unreadable ({why}). It was kept as {backup.name} "
                        "and rooflab started from default settings.")


def save_settings(settings: Settings, path: Path | None = None) -> Path:
    data = {"version": SETTINGS_VERSION, **asdict(settings)}
    return write_atomic(path or settings_path(), dumps_json(data, indent=2) + "\n")
