"""rooflab's engine: value objects, model readers and predictions. No Qt, no torch at import."""

from __future__ import annotations

from importlib import metadata as _metadata

from rooflab.core.errors import (
    Cancelled,
    MeasurementError,
    ModelFileError,
    ResourceError,
    RooflabError,
    SpecError,
)

try:
    __version__ = _metadata.version("rooflab")
except _metadata.PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0+local"

__all__ = [
    "Cancelled",
    "MeasurementError",
    "ModelFileError",
    "ResourceError",
    "RooflabError",
    "SpecError",
    "__version__",
]
