"""The rooflab error family: every failure a user can cause is one of these, with one clear line."""

from __future__ import annotations

from pathlib import Path


class RooflabError(Exception):
    """Base of every error rooflab reports to a user as one line."""


class SpecError(RooflabError, ValueError):
    """A value object was given an invalid field; the message names the field."""


class ModelFileError(RooflabError):
    """A model file (GGUF, config.json, safetensors, folder) could not be read.

    The message always starts with the file name, so a CLI or dialog can show it as is.
    """

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class ResourceError(RooflabError):
    """A preset, catalogue entry or profile could not be found or read."""


class MeasurementError(RooflabError):
    """A measurement could not run (missing torch, not enough memory, bad model folder, ...)."""


class ReportError(RooflabError):
    """Report files could not be written (a folder that cannot be created or written to)."""


class Cancelled(RooflabError):
    """A long job was cancelled by the user."""
