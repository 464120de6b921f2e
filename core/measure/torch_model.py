"""A torch model to time: a local Hugging Face folder with real weights, or a random-weight
model built from a config.json, a catalogue entry or a GGUF's tensor table (the timing does not
depend on the weights' values, only on their shapes and dtype).

The GGUF path needs no metadata keys: every shape transformers needs is read off the tensor
table and the attention layout the reader already put in the ModelSpec."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rooflab.core.errors import MeasurementError, ModelFileError, RooflabError
from rooflab.core.jobs import CancelFlag, Progress, check_cancel
from rooflab.core.measure import backend
from rooflab.core.values.model import AttentionLayout, ModelSpec, Tensor

_WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")

# ModelSpec.architecture (GGUF or HF spelling) -> transformers model_type for a dense model
_DENSE_TYPES: dict[str, str] = {
    "llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "qwen3": "qwen3", "gemma": "gemma",
    "gemma2": "gemma2", "gemma3": "gemma3_text", "gemma3_text": "gemma3_text", "phi3": "phi3",
    "granite": "granite", "olmo2": "olmo2", "starcoder2": "starcoder2",
}
_MOE_TYPES: dict[str, str] = {
    "qwen3moe": "qwen3_moe", "qwen3_moe": "qwen3_moe", "qwen2moe": "qwen2_moe", "qwen2_moe": "qwen2_moe",
    "llama": "mixtral", "mixtral": "mixtral",
}


@dataclass(frozen=True, kw_only=True)
class ModelSource:
    """Where the model to time comes from. ``config`` is a config.json dict (HF spellings);
    ``folder`` is set only when real weights are loaded from it."""

    label: str
    config: Mapping[str, Any]
    folder: Path | None = None
    random_weights: bool = True
    notes: tuple[str, ...] = field(default=())


def _has_weights(folder: Path) -> bool:
    return any(any(folder.glob(pattern)) for pattern in _WEIGHT_FILES)


def _read_json(path: Path) -> dict[str, Any]:
    from rooflab.core.io.hf import read_config

    return read_config(path)


def resolve_source(ref: str | os.PathLike[str] | Mapping[str, Any] | ModelSpec, *,
                   random_weights: bool = False) -> ModelSource:
    """A ModelSource for a folder, config.json, .gguf, catalogue key, config dict or ModelSpec.

    A folder with weight files loads them unless ``random_weights``; everything else is
    built with random weights of the same shapes."""
    if isinstance(ref, ModelSpec):
        return source_from_spec(ref)
    if isinstance(ref, Mapping):
        return ModelSource(label=str(ref.get("_name_or_path") or ref.get("model_type") or "config"),
                           config=dict(ref))
    path = Path(os.fspath(ref)).expanduser()
    if path.is_dir():
        config_path = path / "config.json"
        if not config_path.is_file():
            raise ModelFileError(path, "folder has no config.json")
        config = _read_json(config_path)
        if _has_weights(path) and not random_weights:
            return ModelSource(label=path.name, config=config, folder=path, random_weights=False)
        note = () if random_weights else ("the folder has no weight files: random weights",)
        return ModelSource(label=path.name, config=config, notes=note)
    if path.suffix.lower() == ".json" and path.is_file():
        return ModelSource(label=path.parent.name or path.stem, config=_read_json(path))
    from rooflab.core.io import load_model

    return source_from_spec(load_model(os.fspath(ref)))


def source_from_spec(spec: ModelSpec) -> ModelSource:
    """Random weights shaped like ``spec``: its raw config.json when the reader kept one, else
    a config derived from the tensor table (GGUF files)."""
    raw = dict(spec.metadata).get("hf.config_json")
    if raw:
        try:
            return ModelSource(label=spec.name, config=json.loads(raw))
        except json.JSONDecodeError:
            pass
    config, notes = hf_config_from_spec(spec)
    return ModelSource(label=spec.name, config=config, notes=tuple(notes))


# --- a transformers config from a tensor table -------------------------------------------------

def _tensor(spec: ModelSpec, suffix: str) -> Tensor | None:
    """The first tensor whose llama.cpp name ends with ``suffix`` ("ffn_up.weight")."""
    for t in spec.tensors:
        if t.name.endswith(suffix) and t.layer is not None:
            return t
    return None


def _layer_types(layout: AttentionLayout) -> list[str] | None:
    if not any(layout.sliding):
        return None
    return ["sliding_attention" if s else "full_attention" for s in layout.sliding]


def hf_config_from_spec(spec: ModelSpec) -> tuple[dict[str, Any], list[str]]:
    """(config dict, notes) for a transformers model with ``spec``'s shapes.

    Read from the tensor table (ggml order, row length first): ffn width from ffn_up, expert
    width from ffn_up_exps, shared-expert width from ffn_up_shexp, q/k norms and q bias from
    their presence. Architectures transformers has no class for are built llama-shaped (same
    matrices, so nearly the same time), and the notes say so."""
    layout = spec.attention
    if layout.kv_lora_rank:
        raise MeasurementError(f"{spec.name}: multi-head latent attention cannot be rebuilt from a "
                               "tensor table; measure it from its config.json instead")
    arch = spec.architecture.lower()
    notes: list[str] = []
    table = _MOE_TYPES if spec.is_moe else _DENSE_TYPES
    model_type = table.get(arch)
    if model_type is None:
        model_type = "mixtral" if spec.is_moe else "llama"
        notes.append(f"architecture {spec.architecture!r} has no transformers class here: "
                     f"timed as a {model_type}-shaped model with the same matrices")
    up = _tensor(spec, "ffn_up.weight") or _tensor(spec, "ffn_gate.weight")
    up_exps = _tensor(spec, "ffn_up_exps.weight") or _tensor(spec, "ffn_gate_exps.weight")
    up_shexp = _tensor(spec, "ffn_up_shexp.weight")
    ffn = up.shape[1] if up is not None else (up_exps.shape[1] if up_exps is not None else 4 * spec.hidden)
    config: dict[str, Any] = {
        "model_type": model_type, "hidden_size": spec.hidden, "num_hidden_layers": spec.layers,
        "num_attention_heads": layout.heads[0], "num_key_value_heads": max(layout.kv_heads[0], 1),
        "head_dim": layout.head_dim_k, "intermediate_size": ffn, "vocab_size": spec.vocab,
        "tie_word_embeddings": spec.tied_embeddings, "max_position_embeddings": max(spec.context_length, 4096),
    }
    if layout.sliding_window:
        config["sliding_window"] = layout.sliding_window
        types = _layer_types(layout)
        if types:
            config["layer_types"] = types
    if spec.is_moe and up_exps is not None:
        expert_ffn = up_exps.shape[1]
        config.update({"num_experts": spec.experts, "num_local_experts": spec.experts,
                       "num_experts_per_tok": spec.experts_used, "moe_intermediate_size": expert_ffn,
                       "decoder_sparse_step": 1, "mlp_only_layers": []})
        if model_type == "mixtral":
            config["intermediate_size"] = expert_ffn
        if up_shexp is not None:
            config["shared_expert_intermediate_size"] = up_shexp.shape[1]
    if model_type == "llama" and _tensor(spec, "attn_q.bias") is not None:
        config["attention_bias"] = True
    if len(set(layout.heads)) > 1 or len(set(layout.kv_heads)) > 1:
        notes.append("per-layer head counts differ: every layer timed with the first layer's")
    return config, notes


# --- building -------------------------------------------------------------------------------

def transformers_config(source: ModelSource) -> Any:
    """The transformers config object for ``source`` (MeasurementError when it has no class)."""
    from transformers import AutoConfig

    raw = {k: v for k, v in source.config.items()
           if k not in ("architectures", "transformers_version", "torch_dtype", "dtype", "quantization_config",
                        "auto_map", "_name_or_path")}
    if isinstance(raw.get("text_config"), Mapping) and raw.get("model_type") not in _DENSE_TYPES.values():
        inner = dict(raw["text_config"])
        inner.setdefault("tie_word_embeddings", raw.get("tie_word_embeddings", True))
        raw = inner
    model_type = str(raw.pop("model_type", "") or "")
    try:
        return AutoConfig.for_model(model_type, **raw)
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
    yield Progress(step="load", message=f"building a random-weight {config.model_type} model", fraction=0.0)
    try:
        from transformers import AutoModelForCausalLM

        torch = backend.require_torch()
        # never build under inference_mode: inference-tensor weights send CPU bf16 multiplies of
        # more than one row down a path ten times slower (torch 2.13)
        with torch.inference_mode(False), _no_init(), torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)  # type: ignore[no-untyped-call]
    except (ValueError, RuntimeError, TypeError) as exc:
        raise MeasurementError(f"{source.label}: cannot build the model ({exc})") from exc
    if getattr(config, "tie_word_embeddings", False):
        model.tie_weights()
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
    if getattr(config, "tie_word_embeddings", False):
        model.tie_weights()
    return model


# --- the ModelSpec of what actually runs ------------------------------------------------------

_TYPE_NAMES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


def _layer_of(name: str) -> int | None:
    parts = name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part in ("layers", "h", "blocks") and parts[i + 1].isdigit():
            return int(parts[i + 1])
    return None


def spec_from_torch(model: Any, *, name: str, source: str, dtype: str | None = None) -> ModelSpec:
    """The tensor table of a torch model as it will run (tied weights counted once), with the
    attention layout read from its config. ``dtype`` overrides the parameters' own (a meta
    model is sized in the dtype it will be built in)."""
    from rooflab.core.io.hf import attention_layout, classify_hf
    from rooflab.core.io.hf_tables import normalise

    forced = backend.dtype_bytes(dtype) if dtype else None
    tensors = []
    for pname, p in model.named_parameters():
        torch_type = str(p.dtype).replace("torch.", "")
        type_name = {2: "BF16" if dtype == "bf16" else "F16", 4: "F32"}[forced] if forced else \
            _TYPE_NAMES.get(torch_type, torch_type.upper())
        elt = forced or p.element_size()
        shape = tuple(int(d) for d in reversed(p.shape)) or (1,)
        tensors.append(Tensor(name=pname, shape=shape, type_name=type_name, nbytes=int(p.numel()) * elt,
                              role=classify_hf(pname), layer=_layer_of(pname)))
    config = model.config.to_dict()
    try:
        hf = normalise(config)
        layout, warnings = attention_layout(hf)
    except RooflabError as exc:
        raise MeasurementError(f"{name}: cannot read the attention layout from the config ({exc})") from exc
    weight_bytes = sum(t.nbytes for t in tensors)
    fmt = dtype or {"F32": "fp32", "BF16": "bf16", "F16": "fp16"}.get(tensors[0].type_name, tensors[0].type_name)
    return ModelSpec(name=name, architecture=hf.model_type, source=source, tensors=tuple(tensors),
                     attention=layout, hidden=hf.hidden, vocab=hf.vocab, file_bytes=weight_bytes,
                     experts=hf.experts, experts_used=hf.experts_used,
                     shared_experts=1 if hf.shared_ffn else 0, context_length=hf.context_length,
                     weights_format=fmt.upper(), warnings=tuple(warnings), provenance="torch model as run")
