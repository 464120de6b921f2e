"""Writing a random-weight GGUF in the test's own thread: the product runs
``gguf_synth.write_synthetic_gguf`` as a job (the window on a worker, the command line through
``run_job``); tests drain the same job here."""

from __future__ import annotations

import os
from pathlib import Path

from rooflab.core.jobs import CancelFlag, run_job
from rooflab.core.measure.engines.gguf_synth import DEFAULT_MAX_BYTES, write_synthetic_gguf
from rooflab.core.values.model import ModelSpec


def write_synthetic_gguf_blocking(spec: ModelSpec, path: str | os.PathLike[str], *, seed: int = 0,
                                  max_bytes: int = DEFAULT_MAX_BYTES, cancel: CancelFlag = None) -> Path:
    """``write_synthetic_gguf`` run to its end in this thread."""
    return run_job(write_synthetic_gguf(spec, path, seed=seed, max_bytes=max_bytes, cancel=cancel))
