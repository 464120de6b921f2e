"""A torch model to time: a local Hugging Face folder with real weights, or a random-weight
model built from a config.json, a catalogue entry or a GGUF's tensor table (the timing does not
depend on the weights' values, only on their shapes and dtype).

The readers own every config.json spelling (``core.io.hf``, ``core.io.hf_build``): this module
passes their config dicts to transformers without reading them."""

from __future__ import annotations

import os
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rooflab.core.errors import MeasurementError, RooflabError, SpecError
from rooflab.core.io import hf, hf_build
from rooflab.core.jobs import CancelFlag, Progress, check_cancel
from rooflab.core.measure.engines.torch import backend
from rooflab.core.values.model import ModelSpec


@dataclass(frozen=True, kw_only=True)
class ModelSource:
    """Where the model to time comes from. ``config`` is a config.json dict, as the readers
    give it; ``folder`` is set only when real weights are loaded from it."""

    label: str
    config: Mapping[str, Any]
    folder: Path | None = None
    random_weights: bool = True
    notes: tuple[str, ...] = field(default=())


def resolve_source(ref: str | os.PathLike[str] | Mapping[str, Any] | ModelSpec, *,
                   random_weights: bool = False) -> ModelSource:
    """A ModelSource for a folder, config.json, .gguf, catalogue key, config dict or ModelSpec.

    A folder with weight files loads them unless ``random_weights``; everything else is
    built with random weights of the same shapes."""
    if isinstance(ref, ModelSpec):
        return source_from_spec(ref)
    if isinstance(ref, Mapping):
        return ModelSource(label=hf.display_name(ref), config=dict(ref))
    path = Path(os.fspath(ref)).expanduser()
    if path.is_dir():
        config = hf.folder_config(path)
        if hf.has_weight_files(path) and not random_weights:
            return ModelSource(label=path.name, config=config, folder=path, random_weights=False)
        note = () if random_weights else ("the folder has no weight files: random weights",)
        return ModelSource(label=path.name, config=config, notes=note)
    if path.suffix.lower() == ".json" and path.is_file():
        return ModelSource(label=path.parent.name or path.stem, config=hf.read_config(path))
    from rooflab.core.io import load_model

    return source_from_spec(load_model(os.fspath(ref)))


def source_from_spec(spec: ModelSpec) -> ModelSource:
    """Random weights shaped like ``spec``: its config.json when the reader kept one, else a
    config derived from the tensor table (GGUF files)."""
    try:
        config, notes = hf_build.config_for_spec(spec)
    except SpecError as exc:
        raise MeasurementError(str(exc)) from exc
    return ModelSource(label=spec.name, config=config, notes=tuple(notes))


# --- building -------------------------------------------------------------------------------

def transformers_config(source: ModelSource) -> Any:
    """The transformers config object for ``source`` (MeasurementError when it has no class)."""
    from transformers import AutoConfig

    model_type, arguments = hf_build.transformers_arguments(source.config)
    try:
        return AutoConfig.for_model(model_type, **arguments)
    except (ValueError, KeyError, TypeError) as exc:
        raise MeasurementError(f"{source.label}: transformers cannot build model_type {model_type!r} ({exc})") from exc


def _no_init() -> Any:
    """transformers' context that skips weight initialisation (its home moved in v5)."""
    try:
        from transformers.initialization import no_init_weights
    except ImportError:
        try:
            from transformers.modeling_utils import no_init_weights  # type: ignore[attr-defined,no-redef]
        except ImportError:
            import contextlib

            return contextlib.nullcontext()
    return no_init_weights()


def _fill(model: Any, cancel: CancelFlag) -> Generator[None, None, None]:
    """Give every parameter plausible values fast: a block of N(0, 0.02) samples tiled over
    each matrix (no NaN or denormal to distort the timing), ones for vectors. Yields between
    slices so a cancel lands within a fraction of a second."""
    torch = backend.require_torch()
    params = list(model.parameters())
    if not params:
        return
    device, dtype = params[0].device, params[0].dtype
    generator = torch.Generator().manual_seed(0)
    block = (torch.randn(1 << 20, generator=generator) * 0.02).to(device=device, dtype=dtype)
    with torch.inference_mode(False), torch.no_grad():
        for p in params:
            check_cancel(cancel)
            if p.dim() < 2:
                p.fill_(1.0)
                continue
            flat = p.view(-1)
            for start in range(0, flat.numel(), 16 * block.numel()):
                for i in range(start, min(flat.numel(), start + 16 * block.numel()), block.numel()):
                    piece = flat[i:i + block.numel()]
                    piece.copy_(block[:piece.numel()])
                yield None


def build_model(source: ModelSource, dtype: str, device: str, cancel: CancelFlag = None,
                ) -> Generator[Progress, None, Any]:
    """Load or build the model on ``device`` in ``dtype``; yields progress, returns the model
    in eval mode. Errors from transformers become MeasurementError."""
    backend.require_torch()
    torch_dtype = backend.torch_dtype(dtype)
    if source.folder is not None and not source.random_weights:
        yield Progress(step="load", message=f"loading weights from {source.folder.name}", fraction=0.0)
        try:
            from transformers import AutoModelForCausalLM

            with backend.require_torch().inference_mode(False):
                model = AutoModelForCausalLM.from_pretrained(str(source.folder), dtype=torch_dtype,
                                                             local_files_only=True)
        except (OSError, ValueError, RuntimeError) as exc:
            raise MeasurementError(f"{source.folder}: cannot load the weights ({exc})") from exc
        return model.to(device).eval()  # type: ignore[arg-type]
    config = transformers_config(source)
    yield Progress(step="load", message=f"building a random-weight model of {source.label}", fraction=0.0)
    try:
        from transformers import AutoModelForCausalLM

        torch = backend.require_torch()
        # never build under inference_mode: inference-tensor weights send CPU bf16 multiplies of
        # more than one row down a path ten times slower (torch 2.13)
        with torch.inference_mode(False), _no_init(), torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)  # type: ignore[no-untyped-call]
    except (ValueError, RuntimeError, TypeError) as exc:
        raise MeasurementError(f"{source.label}: cannot build the model ({exc})") from exc
    model.tie_weights()         # transformers ties only where the config says so
    shown = time.perf_counter()
    for _ in _fill(model, cancel):
        if time.perf_counter() - shown > 0.25:
            shown = time.perf_counter()
            yield Progress(step="load", message="filling random weights", fraction=0.0)
    return model.eval()


def meta_model(source: ModelSource) -> Any:
    """The model on torch's meta device: shapes without memory, for sizing a run first."""
    torch = backend.require_torch()
    config = transformers_config(source)
    if source.folder is not None and not source.random_weights:
        from transformers import AutoConfig

        try:
            config = AutoConfig.from_pretrained(source.folder, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise MeasurementError(f"{source.folder}: cannot read its config ({exc})") from exc
    from transformers import AutoModelForCausalLM

    try:
        with _no_init(), torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    except (ValueError, RuntimeError, TypeError) as exc:
        raise MeasurementError(f"{source.label}: cannot build the model ({exc})") from exc
    model.tie_weights()
    return model


# --- the ModelSpec of what actually runs ------------------------------------------------------

_TYPE_NAMES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


def spec_from_torch(model: Any, *, name: str, source: str, dtype: str | None = None) -> ModelSpec:
    """The tensor table of a torch model as it will run (tied weights counted once), with the
    attention layout read from its config. ``dtype`` overrides the parameters' own (a meta
    model is sized in the dtype it will be built in)."""
    forced = backend.dtype_bytes(dtype) if dtype else None
    stored = []
    for pname, p in model.named_parameters():
        torch_type = str(p.dtype).replace("torch.", "")
        type_name = {2: "BF16" if dtype == "bf16" else "F16", 4: "F32"}[forced] if forced else \
            _TYPE_NAMES.get(torch_type, torch_type.upper())
        stored.append(hf.StoredTensor(name=pname, shape=tuple(int(d) for d in p.shape), type_name=type_name,
                                      nbytes=int(p.numel()) * (forced or p.element_size())))
    fmt = dtype or {"F32": "fp32", "BF16": "bf16", "F16": "fp16"}.get(stored[0].type_name, stored[0].type_name)
    try:
        return hf.spec_from_stored(model.config.to_dict(), stored, name=name, source=source,
                                   weights_format=fmt.upper(), provenance="torch model as run")
    except RooflabError as exc:
        raise MeasurementError(f"{name}: cannot read the model's shape from its config ({exc})") from exc
