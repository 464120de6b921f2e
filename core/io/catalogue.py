"""The built-in model catalogue (resources/models/*.json): configs with a weight format and
the provenance of every figure."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rooflab.core.errors import ModelFileError, ResourceError, SpecError
from rooflab.core.files.resources import resources_dir
from rooflab.core.files.safe_json import read_json
from rooflab.core.values.model import ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogueEntry:
    key: str
    name: str
    description: str
    default_weights: str
    header_bytes: int
    config: dict[str, Any] = field(repr=False)
    sources: dict[str, str] = field(default_factory=dict)
    lesson: dict[str, Any] = field(default_factory=dict)   # the lessons' figures, for checks
    files: dict[str, int] = field(default_factory=dict)    # published GGUF sizes by format, bytes

    @property
    def repository(self) -> str:
        """The Hugging Face repository the config comes from ("Qwen/Qwen3-8B"), "" if none."""
        return str(self.config.get("_name_or_path") or "")


def _models_dir() -> Path:
    return resources_dir() / "models"


def _read(path: Path) -> CatalogueEntry:
    try:
        data = read_json(path, what="a catalogue entry")
        return CatalogueEntry(key=str(data.get("key") or path.stem), name=str(data["name"]),
                              description=str(data.get("description", "")),
                              default_weights=str(data.get("weights", "bf16")),
                              header_bytes=int(data.get("header_bytes") or 0), config=dict(data["config"]),
                              sources=dict(data.get("sources") or {}), lesson=dict(data.get("lesson") or {}),
                              files=_files(data.get("files") or {}, path))
    except ModelFileError as exc:
        raise ResourceError(str(exc)) from exc
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ResourceError(f"{path}: bad catalogue entry ({exc})") from exc


def _files(raw: dict[str, Any], path: Path) -> dict[str, int]:
    """Published GGUF file sizes: {"Q4_K_M": bytes, ...}, each a whole number of bytes > 0."""
    files = {str(k).upper(): int(v) for k, v in dict(raw).items()}
    if any(v <= 0 for v in files.values()):
        raise ResourceError(f"{path}: a published file size must be > 0 bytes")
    return files


def list_catalogue() -> list[CatalogueEntry]:
    """All entries, in file-name order."""
    return [_read(p) for p in sorted(_models_dir().glob("*.json"))]


def search_catalogue(text: str) -> list[CatalogueEntry]:
    """The entries every word of ``text`` finds (case-insensitive) in their key, name,
    description or Hugging Face repository ("qwen3 coder", "moe", "meta-llama")."""
    words = text.lower().split()
    return [e for e in list_catalogue()
            if all(w in f"{e.key} {e.name} {e.description} {e.repository}".lower() for w in words)]


def catalogue_keys() -> list[str]:
    return sorted(p.stem for p in _models_dir().glob("*.json"))


def get_entry(key: str) -> CatalogueEntry | None:
    path = _models_dir() / f"{key.lower()}.json"
    return _read(path) if path.is_file() else None


def load_entry(entry: CatalogueEntry, weights: str | None = None) -> ModelSpec:
    """The entry's ModelSpec at its own weight format, or at ``weights`` when given."""
    from rooflab.core.io.hf import spec_from_config

    chosen = weights or entry.default_weights
    name = entry.name if weights is None or weights.lower() == entry.default_weights else \
        f"{entry.name.split(' ')[0]} ({chosen.upper()})"
    provenance = "; ".join(f"{k}: {v}" for k, v in entry.sources.items())
    try:
        return spec_from_config(entry.config, weights=chosen, name=name, source=f"catalogue:{entry.key}",
                                header_bytes=entry.header_bytes if weights is None else 0,
                                provenance=provenance)
    except SpecError as exc:
        raise ResourceError(f"catalogue entry {entry.key}: {exc}") from exc
