"""A GGUF file as a ``ModelSpec``: its real tensor table, plus what its metadata says about
attention, experts and context. The only module that knows llama.cpp's metadata keys.

The header is parsed by ``gguf_header`` (fast, defensive); this module interprets it.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from gguf.constants import GGUFValueType, LlamaFileType

from rooflab.core.errors import ModelFileError, SpecError
from rooflab.core.io.arch import default_sliding, pattern_from_period
from rooflab.core.io.gguf_header import (
    GGUFHeader,
    LargeArray,
    TensorInfo,
    Value,
    read_header,
)
from rooflab.core.io.roles import classify, layer_of, unread_kv_projections
from rooflab.core.io.textfile import printable, shown
from rooflab.core.values.model import AttentionLayout, ModelSpec, Role, Tensor

__all__ = ["GGUFHeader", "LargeArray", "TensorInfo", "read_gguf", "read_header", "spec_from_headers", "split_names"]

# architectures whose metadata rooflab has checked against llama.cpp's loader
KNOWN_ARCHITECTURES: frozenset[str] = frozenset({
    "llama", "llama4", "mistral3", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "gemma", "gemma2",
    "gemma3", "gpt-oss", "phi3", "phimoe", "deepseek", "deepseek2", "command-r", "cohere2",
    "granite", "granitemoe", "olmo2", "olmoe", "glm4", "glm4moe", "exaone4", "gemma3n",
})
MAX_LAYERS = 1 << 16
MAX_PARTS = 1024                # of one split GGUF
_SPLIT_NAME = re.compile(r"^(?P<stem>.*)-(?P<part>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


def read_gguf(path: str | os.PathLike[str]) -> ModelSpec:
    """The model in the GGUF file at ``path``: every tensor's exact bytes and role, and the
    attention layout that sizes the KV cache. A part of a split GGUF (``-00002-of-00003.gguf``)
    whose sibling parts are all beside it is read with them, as llama.cpp loads it. Raises
    ``ModelFileError`` for any bad file."""
    names = split_names(Path(path).name)
    if len(names) > 1:
        parts = [Path(path).with_name(n) for n in names]
        if all(p.is_file() for p in parts):
            return spec_from_headers([read_header(p) for p in parts], source=os.fspath(path))
    return spec_from_headers([read_header(path)])


def split_names(name: str) -> list[str]:
    """The file names of every part of a split GGUF, first part first, given the name of any
    of them (llama.cpp's ``-00001-of-00003.gguf``); ``[name]`` for any other name."""
    found = _SPLIT_NAME.match(name)
    if found is None or not 1 <= int(found["part"]) <= int(found["count"]) <= MAX_PARTS:
        return [name]
    count = int(found["count"])
    return [f"{found['stem']}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]


def spec_from_headers(headers: list[GGUFHeader], source: str = "") -> ModelSpec:
    """The model of one GGUF file's header, or of every part of a split GGUF (``-00001-of-0000N``)
    in order: the first part's metadata, all parts' tensors and bytes. ``source`` names the
    model (a URL, an ``hf:`` name); the first part's path by default."""
    first = headers[0]
    if len(headers) > 1:
        first = dataclasses.replace(first, path=source or first.path,
                                    tensors=tuple(t for h in headers for t in h.tensors),
                                    file_bytes=sum(h.file_bytes for h in headers))
    elif source:
        first = dataclasses.replace(first, path=source)
    try:
        return _Interpreter(first, parts=len(headers)).spec()
    except SpecError as exc:
        raise ModelFileError(first.path, str(exc)) from exc


class _Interpreter:
    """Typed access to one header's metadata, collecting warnings as it goes."""

    def __init__(self, header: GGUFHeader, parts: int = 1) -> None:
        self.header = header
        self.parts = parts
        self.meta: Mapping[str, Value] = header.metadata
        self.warnings: list[str] = []
        self.shared_kv_layers = 0
        arch = self.meta.get("general.architecture", "")
        self.arch = arch if isinstance(arch, str) else ""

    def fail(self, key: str, reason: str) -> ModelFileError:
        return ModelFileError(self.header.path, f"metadata key {key!r}: {reason}")

    def key(self, name: str) -> str:
        return f"{self.arch}.{name}"

    def integer(self, key: str, default: int = 0) -> int:
        value = self.meta.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected a whole number, found {_describe(value)}")
        if value < 0:
            raise self.fail(key, f"{value} is negative")
        return value

    def per_layer(self, key: str, layers: int) -> tuple[int, ...] | None:
        """A value llama.cpp reads with get_key_or_arr: one number, or one per layer."""
        value = self.meta.get(key)
        if value is None:
            return None
        if not isinstance(value, tuple):
            return (self.integer(key),) * layers
        if len(value) != layers:
            raise self.fail(key, f"{len(value)} entries for {layers} layers")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
            raise self.fail(key, "expected whole numbers >= 0")
        return tuple(int(v) for v in value)

    # -- the spec ----------------------------------------------------------------------------
    def spec(self) -> ModelSpec:
        header = self.header
        if self.meta.get("general.type") == "adapter":
            raise ModelFileError(header.path, "is a LoRA adapter, not a model")
        if self.arch == "clip":
            raise ModelFileError(header.path, "is a multimodal projector (mmproj), not a language model")
        if not self.arch:
            self.warnings.append("no general.architecture: only the tensor table is known")
        elif self.arch not in KNOWN_ARCHITECTURES:
            self.warnings.append(f"architecture {shown(self.arch)} is not one rooflab has checked; "
                                 "its attention and experts are read from the usual keys")
        tensors = tuple(_tensor(t) for t in header.tensors)
        if not tensors:
            raise ModelFileError(header.path, "has no tensors (a vocabulary-only file?)")
        layers = self.layers(tensors)
        hidden = self.integer(self.key("embedding_length")) or _dim(tensors, "token_embd.weight", 0)
        experts, used, shared = self.experts(tensors)
        split = self.integer("split.count", 1)
        if split > 1 and self.parts < split:
            self.warnings.append(f"this is one shard of {split}: only its tensors are counted")
        name = self.meta.get("general.name")
        attention = self.attention(layers, hidden)   # before the warnings are frozen
        if self.shared_kv_layers:
            tensors = unread_kv_projections(tensors, layers - self.shared_kv_layers)
        return ModelSpec(
            name=(printable(name) if isinstance(name, str) else "") or printable(Path(header.path).stem),
            architecture=printable(self.arch, 100) or "unknown",
            source=header.path,
            tensors=tensors,
            attention=attention,
            hidden=hidden,
            vocab=self.vocab(tensors),
            file_bytes=header.file_bytes,
            experts=experts,
            experts_used=used,
            shared_experts=shared,
            context_length=self.integer(self.key("context_length")),
            weights_format=self.weights_format(tensors),
            warnings=tuple(printable(w, 500) for w in self.warnings),   # they quote keys from the file
            provenance=header.path,
            metadata=_display(self.meta),
        )

    def layers(self, tensors: tuple[Tensor, ...]) -> int:
        """``block_count``, else one more than the highest ``blk.N`` in the tensor names."""
        named = max((t.layer for t in tensors if t.layer is not None), default=-1) + 1
        key = self.key("block_count")
        if key not in self.meta:
            if named > min(MAX_LAYERS, len(tensors)):
                raise ModelFileError(self.header.path, f"tensor names reach layer {named - 1} "
                                     f"in a file of {len(tensors)} tensors")
            if named:
                self.warnings.append(f"no {key}: {named} layers inferred from tensor names")
            return named
        layers = self.integer(key)
        if layers > min(MAX_LAYERS, len(tensors)):
            raise self.fail(key, f"{layers} layers in a file of {len(tensors)} tensors")
        if named > layers:
            self.warnings.append(f"tensors name layer {named - 1} but {key} is {layers}")
        return layers

    def attention(self, layers: int, hidden: int) -> AttentionLayout:
        heads = self.per_layer(self.key("attention.head_count"), layers)
        if heads is None:
            if layers:
                self.warnings.append("no attention.head_count: the KV cache is taken as 0")
            heads = (0,) * layers
        read_kv_heads = self.per_layer(self.key("attention.head_count_kv"), layers) or heads
        kv_heads = self.own_caches(read_kv_heads)
        first = next((h for h in heads if h), 0)
        fallback = hidden // first if first else 0
        head_k = self.integer(self.key("attention.key_length"), fallback)
        head_v = self.integer(self.key("attention.value_length"), fallback)
        lora = self.integer(self.key("attention.kv_lora_rank"))
        rope = 0
        if lora:
            # MLA (deepseek2). Since llama.cpp's MLA rework, key_length/value_length hold the
            # absorbed latent sizes (kv_lora_rank + rope, kv_lora_rank) and *_mla the per-head
            # sizes; older files have only the per-head sizes. The cache is the latent either way.
            rope = self.integer(self.key("rope.dimension_count"))
            head_k = self.integer(self.key("attention.key_length_mla"), head_k)
            head_v = self.integer(self.key("attention.value_length_mla"), head_v)
        window = self.integer(self.key("attention.sliding_window"))
        return AttentionLayout(heads=heads, kv_heads=kv_heads, head_dim_k=head_k, head_dim_v=head_v,
                               sliding=self.sliding(layers, window),
                               sliding_window=window, kv_lora_rank=lora, rope_dim=rope,
                               read_kv_heads=read_kv_heads if kv_heads != read_kv_heads else ())

    def own_caches(self, kv_heads: tuple[int, ...]) -> tuple[int, ...]:
        """``kv_heads`` with 0 for the last ``attention.shared_kv_layers`` layers (Gemma 3n), which
        attend to an earlier layer's cache and hold none of their own."""
        key = self.key("attention.shared_kv_layers")
        shared = self.integer(key)
        if shared >= max(len(kv_heads), 1) and shared:
            raise self.fail(key, f"{shared} shared layers leave none of the {len(kv_heads)} to own a cache")
        owners = len(kv_heads) - shared
        self.shared_kv_layers = shared
        return tuple(h if i < owners else 0 for i, h in enumerate(kv_heads))

    def sliding(self, layers: int, window: int) -> tuple[bool, ...]:
        """Which layers slide: the file's pattern (a period or one flag per layer), else the
        architecture's known pattern. Without a window, none do."""
        key = self.key("attention.sliding_window_pattern")
        value = self.meta.get(key)
        if value is None:
            flags, known = default_sliding(self.arch, layers, window)
            if not known:
                self.warnings.append(f"sliding_window {window} but no pattern known for "
                                     f"{shown(self.arch)}: every layer is taken as full attention")
            return tuple(flags)
        if isinstance(value, tuple):
            if len(value) != layers:
                raise self.fail(key, f"{len(value)} entries for {layers} layers")
            if not all(isinstance(v, int) for v in value):   # bools are ints
                raise self.fail(key, "expected one flag per layer")
            flags = tuple(bool(v) for v in value)
        else:
            period = self.integer(key)
            # llama.cpp's set_swa_pattern: a period of 0 makes every layer slide
            flags = (True,) * layers if period == 0 else pattern_from_period(period, layers)
        if any(flags) and window <= 0:
            self.warnings.append(f"{key} is set but there is no sliding_window: ignored")
            return ()
        return flags if any(flags) else ()

    def experts(self, tensors: tuple[Tensor, ...]) -> tuple[int, int, int]:
        """(routed experts, used per token, shared experts)."""
        count = self.integer(self.key("expert_count"))
        used = self.integer(self.key("expert_used_count"))
        if count and not used:
            raise self.fail(self.key("expert_used_count"), f"missing for {count} experts")
        if not count and any(t.role is Role.EXPERTS for t in tensors):
            self.warnings.append("routed-expert tensors but no expert_count: all of them are "
                                 "counted as read by every token")
        has_shared = any(t.role is Role.SHARED_EXPERTS for t in tensors)
        # qwen2moe writes no expert_shared_count for its single shared expert
        shared = self.integer(self.key("expert_shared_count"), 1 if has_shared else 0)
        return count, used, shared

    def vocab(self, tensors: tuple[Tensor, ...]) -> int:
        vocab = self.integer(self.key("vocab_size")) or _dim(tensors, "token_embd.weight", 1)
        if not vocab:
            tokens = self.meta.get("tokenizer.ggml.tokens")
            if isinstance(tokens, LargeArray):
                vocab = tokens.count
            elif isinstance(tokens, tuple):
                vocab = len(tokens)
        return vocab

    def weights_format(self, tensors: tuple[Tensor, ...]) -> str:
        """llama.cpp's file type ("Q4_K_M"), else the type holding most bytes ("mostly Q8_0")."""
        value = self.meta.get("general.file_type")
        if isinstance(value, int) and not isinstance(value, bool):
            guessed = value & LlamaFileType.GUESSED
            try:
                name = LlamaFileType(value & ~LlamaFileType.GUESSED).name
            except ValueError:
                return f"file_type {value}"
            name = name.removeprefix("MOSTLY_").removeprefix("ALL_")
            return f"{name} (guessed)" if guessed else name
        by_type: Counter[str] = Counter()
        for t in tensors:
            by_type[t.type_name] += t.nbytes
        return f"mostly {by_type.most_common(1)[0][0]}"


def _tensor(info: TensorInfo) -> Tensor:
    return Tensor(name=info.name, shape=info.shape, type_name=info.type.name, nbytes=info.nbytes,
                  role=classify(info.name), layer=layer_of(info.name))


def _dim(tensors: tuple[Tensor, ...], name: str, axis: int) -> int:
    """Dimension ``axis`` (ggml order) of the tensor called ``name``, 0 if absent."""
    for t in tensors:
        if t.name == name and len(t.shape) > axis:
            return int(t.shape[axis])
    return 0


def _describe(value: Value) -> str:
    if isinstance(value, LargeArray):
        return f"[{value.count} × {GGUFValueType(value.item_type).name.lower()}]"
    if isinstance(value, tuple):
        if len(value) <= 8:
            return "[" + ", ".join(_describe(v) for v in value) + "]"
        return f"[{len(value)} × {type(value[0]).__name__}]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str):
        text = " ".join(value.split())
        return text if len(text) <= 80 else text[:79] + "…"
    return str(value)


def _display(meta: Mapping[str, Value]) -> tuple[tuple[str, str], ...]:
    """(key, short text) for every metadata key, long arrays summarised as [count × type]."""
    return tuple((key, _describe(value)) for key, value in meta.items())
