"""Model readers. ``load_model`` takes whatever a user names: a .gguf file, a config.json, a
model folder, a catalogue key, or a model on a server (``hf:OWNER/REPO``,
``hf:OWNER/REPO/FILE.gguf``, ``https://…/FILE.gguf``: headers only, see ``io.hf_hub``), and
returns one ModelSpec."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Generator
from pathlib import Path

from rooflab.core.errors import ModelFileError, ResourceError
from rooflab.core.files.capped import path_kind
from rooflab.core.io.textfile import did_you_mean
from rooflab.core.jobs import CancelFlag, Progress, run_job
from rooflab.core.values.model import ModelSpec


def is_remote(ref: str | os.PathLike[str]) -> bool:
    """Whether ``ref`` names a model on a server (``hf:`` or an http(s) URL)."""
    text = os.fspath(ref)
    return text.startswith(("hf:", "https://", "http://"))


def load_model_job(ref: str | os.PathLike[str], *, weights: str | None = None,
                   cancel: CancelFlag = None) -> Generator[Progress, None, ModelSpec]:
    """``load_model`` as a job: a Progress per request for a remote model (the window runs it
    on its worker); a file, folder or catalogue key is read at once."""
    text = os.fspath(ref)
    if is_remote(text):
        from rooflab.core.io.hf_hub import open_remote_job

        return (yield from open_remote_job(text, weights, cancel))
    return load_model(text, weights=weights)


def load_model(ref: str | os.PathLike[str], *, weights: str | None = None,
               on_progress: Callable[[Progress], None] | None = None) -> ModelSpec:
    """Open a model by path, catalogue key, ``hf:`` name or URL.

    ``weights`` (fp32, bf16, q8_0, q4_k_m, mxfp4, ...) applies where the model is defined by a
    config: a config.json, a folder, a catalogue entry, a Hub repository. A GGUF file has its
    own types. ``on_progress`` hears a remote model's requests (by default a status line on a
    terminal's stderr)."""
    from rooflab.core.io.catalogue import catalogue_keys, get_entry, load_entry

    text = os.fspath(ref)
    if is_remote(text):
        if on_progress is not None:
            return run_job(load_model_job(text, weights=weights), on_progress)
        try:
            return run_job(load_model_job(text, weights=weights), _status_line)
        finally:
            _status_line(None)
    path = Path(text).expanduser()
    if not takes_weights(path):
        from rooflab.core.io.gguf import read_gguf

        if weights:
            raise ModelFileError(path, "--weights does not apply to a GGUF file (its tensors have their own types)")
        return read_gguf(path)
    if path.is_dir():
        from rooflab.core.io.hf import spec_from_folder

        return spec_from_folder(path, weights=weights)
    if path.is_file() and path.suffix.lower() != ".json" and not _starts_like_json(path):
        raise ModelFileError(path, "is neither a GGUF file nor a Hugging Face config.json (rooflab opens .gguf "
                                   "files, config.json files and model folders, catalogue names, hf: names and links)")
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
    keys = catalogue_keys()
    raise ResourceError(f"unknown model {text!r}: not a file, folder or catalogue entry{did_you_mean(text, keys)} "
                        f"({len(keys)} in the catalogue: 'rooflab models' lists them)")


def takes_weights(ref: str | os.PathLike[str]) -> bool:
    """Whether a weight format applies to ``ref``: a config.json, a folder or a catalogue entry
    take one; a GGUF file does not (its tensors have their own types)."""
    if is_remote(ref):
        from rooflab.core.io.hf_hub import remote_takes_weights

        return remote_takes_weights(os.fspath(ref))
    path = Path(os.fspath(ref)).expanduser()
    return not (path.suffix.lower() == ".gguf" or (path.is_file() and _is_gguf(path)))


def _starts_like_json(path: Path) -> bool:
    """Whether the file's first non-blank byte opens a JSON object (a config.json by another name)."""
    try:
        with path.open("rb") as handle:
            return handle.read(4096).lstrip(b" \t\r\n\xef\xbb\xbf")[:1] == b"{"
    except OSError:
        return True                     # the config reader says what is wrong with it


def _is_gguf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"GGUF"
    except OSError:
        return False


def _status_line(progress: Progress | None) -> None:
    """What a remote read is doing, on one rewritten line of a terminal's stderr (never into a
    pipe or a log, where it would mix with the output); None wipes the line when it is done."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + (progress.message if progress is not None else ""))
        sys.stderr.flush()
