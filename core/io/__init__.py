"""Model readers. ``load_model`` takes whatever a user names: a .gguf file, a config.json, a
model folder, or a catalogue key, and returns one ModelSpec."""

from __future__ import annotations

import os
from pathlib import Path

from rooflab.core.errors import ModelFileError, ResourceError
from rooflab.core.files.capped import path_kind
from rooflab.core.values.model import ModelSpec


def load_model(ref: str | os.PathLike[str], *, weights: str | None = None) -> ModelSpec:
    """Open a model by path or catalogue key.

    ``weights`` (fp32, bf16, q8_0, q4_k_m, mxfp4, ...) applies where the model is defined by a
    config: a config.json, a folder, a catalogue entry. A GGUF file has its own types."""
    from rooflab.core.io.catalogue import catalogue_keys, get_entry, load_entry

    text = os.fspath(ref)
    path = Path(text).expanduser()
    if not takes_weights(path):
        from rooflab.core.io.gguf import read_gguf

        if weights:
            raise ModelFileError(path, "--weights does not apply to a GGUF file (its tensors have their own types)")
        return read_gguf(path)
    if path.is_dir():
        from rooflab.core.io.hf import spec_from_folder

        return spec_from_folder(path, weights=weights)
    if path.suffix.lower() == ".json" or path.is_file():
        from rooflab.core.io.hf import load_config_file

        return load_config_file(path, weights=weights)
    entry = get_entry(text)
    if entry is not None:
        return load_entry(entry, weights)
    kind = path_kind(path)
    if kind:                        # a device, a pipe, a socket
        raise ModelFileError(path, f"is {kind}, not a model file or folder")
    if os.sep in text or "/" in text or path.suffix:
        raise ModelFileError(path, "no such file or folder")
    raise ResourceError(f"unknown model {text!r}: not a file, folder or catalogue entry "
                        f"(catalogue: {', '.join(catalogue_keys())})")


def takes_weights(ref: str | os.PathLike[str]) -> bool:
    """Whether a weight format applies to ``ref``: a config.json, a folder or a catalogue entry
    take one; a GGUF file does not (its tensors have their own types)."""
    path = Path(os.fspath(ref)).expanduser()
    return not (path.suffix.lower() == ".gguf" or (path.is_file() and _is_gguf(path)))


def _is_gguf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"GGUF"
    except OSError:
        return False
