"""Bytes and FLOPs of one forward pass: the two quantities every clock is built from.

Every function takes numpy-broadcastable token counts, so one call prices a single point or a
whole sweep. Counts are floats (exact below 2**53)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rooflab.core.values.model import ModelSpec, Role
from rooflab.core.values.workload import DEFAULT_UBATCH

Array = NDArray[np.float64]
Flags = NDArray[np.bool_]


def _f(x: ArrayLike) -> Array:
    return np.asarray(x, dtype=np.float64)


def experts_touched_fraction(spec: ModelSpec, tokens: ArrayLike) -> Array:
    """Share of a layer's routed experts that ``tokens`` independently routed tokens touch:
    1 - (1 - used/experts) ** tokens. Uniform independent routing: the pessimistic end.
    1 for a dense model (its feed-forward block is always read)."""
    tokens = _f(tokens)
    if not spec.is_moe:
        return np.ones_like(tokens)
    return 1.0 - (1.0 - spec.expert_fraction) ** tokens


def experts_touched_per_layer(spec: ModelSpec, tokens: ArrayLike) -> Array:
    """Experts per layer a step over ``tokens`` tokens reads: experts x touched fraction."""
    return spec.experts * experts_touched_fraction(spec, tokens)


def kv_tokens_read(spec: ModelSpec, context: ArrayLike) -> tuple[Array, Array]:
    """Tokens attention reads from the cache in (full, sliding-window) layers at ``context``:
    t in full layers, min(t, window) in sliding layers."""
    t = _f(context)
    window = spec.attention.sliding_window
    return t, (np.minimum(t, window) if window else np.zeros_like(t))


def kv_bytes(spec: ModelSpec, context: ArrayLike, kv_type: str = "f16", chunks: int = 0) -> Array:
    """Bytes of one sequence's cache that attention reads at ``context`` tokens:
    k_full x t + k_window x min(t, w), the full layers' t as a cache split over ``chunks``
    threads charges it (``split_context``; 0: as filled). k counts every layer that attends,
    a layer reading another layer's cache included (Gemma 3n). (What the cache holds in memory,
    padded and with room for a ubatch, is ``kv_bytes_held``.)"""
    k_full, k_window = spec.attention.kv_read_bytes_per_token(kv_type)
    full, window = kv_tokens_read(spec, context)
    return k_full * split_context(full, chunks) + k_window * window


def attention_walk_per_cache_byte(spec: ModelSpec, kv_type: str = "f16") -> tuple[float, float]:
    """(query heads, query-head values) per byte one token adds to the cache, over the layers
    that cache: the (query head, cached token) pairs a step's attention walks for each byte of
    cache it reads, and the values those pairs multiply (a key's d_k in the dot product, a
    value's d_v in the weighted sum). llama.cpp's CPU flash attention walks the cache once per
    query head, so 32 query heads on 8 cached heads of 64 values walk 4 pairs of 128 values for
    what 16 on 8 heads of 128 walk 2 pairs of 256 in: a byte of the first cache costs more.
    (0, 0): a model without a cache."""
    a = spec.attention
    heads = values = 0.0
    for layer in range(a.layers):
        if a.kv_values_read(layer) > 0:
            heads += a.heads[layer]
            values += a.heads[layer] * (a.head_dim_k + a.head_dim_v)
    total = sum(a.kv_read_bytes_per_token(kv_type))
    return (heads / total, values / total) if total > 0 else (0.0, 0.0)


CTX_PAD = 256          # llama.cpp rounds each sequence's cache (and its sliding-window cache) up to this


def padded(tokens: ArrayLike) -> Array:
    """A count of cache cells as llama.cpp allocates it: rounded up to 256."""
    return np.ceil(_f(tokens) / CTX_PAD) * CTX_PAD


def kv_cells_held(spec: ModelSpec, context_length: ArrayLike, ubatch: int) -> tuple[Array, Array]:
    """Cache cells one sequence of ``context_length`` tokens holds in (full, sliding-window)
    layers, as llama.cpp allocates them (llama-kv-cache-iswa.cpp, one stream per sequence):

        full = pad(t, 256)        sliding = min(full, pad(window + ubatch, 256))

    A sliding layer keeps its window plus room for the ubatch being written; with no sliding
    layers the second is 0. (--swa-full, a full-size sliding cache, is left out.)"""
    full = padded(context_length)
    window = spec.attention.sliding_window
    if not window:
        return full, np.zeros_like(full)
    return full, np.minimum(full, padded(window + ubatch))


def kv_bytes_held(spec: ModelSpec, context_length: ArrayLike, kv_type: str = "f16",
                  ubatch: int = DEFAULT_UBATCH) -> Array:
    """Bytes one sequence's cache holds: k_full x full cells + k_window x sliding cells
    (``kv_cells_held``). What the cache takes in memory, as against what a step reads of it
    (``kv_bytes``: min(t, window) in sliding layers, no padding)."""
    k_full, k_window = spec.kv_bytes_per_token(kv_type)
    full, window = kv_cells_held(spec, context_length, ubatch)
    return k_full * full + k_window * window


def _pairs_prefix(x: Array, window: int) -> Array:
    """sum_{j=1..x} min(j, window): keys seen by queries at positions 1..x."""
    if not window:
        return x * (x + 1) / 2
    capped = window * (window + 1) / 2 + (x - window) * window
    return np.where(x <= window, x * (x + 1) / 2, capped)


def attention_pairs(spec: ModelSpec, prompt: ArrayLike, context: ArrayLike) -> tuple[Array, Array]:
    """(full, sliding) query-key pairs when ``prompt`` new tokens follow ``context`` cached ones,
    causally: query i sees context + i keys (capped at the window in sliding layers)."""
    n, t = _f(prompt), _f(context)
    full = n * t + n * (n + 1) / 2
    window = spec.attention.sliding_window
    if not window:
        return full, np.zeros_like(full)
    return full, _pairs_prefix(t + n, window) - _pairs_prefix(t, window)


def attention_flops(spec: ModelSpec, prompt: ArrayLike, context: ArrayLike) -> Array:
    """Attention's own arithmetic (scores and weighted sum), the n² term of a long prompt:
    pairs x 2 x heads x (d_k + d_v), summed over layers."""
    per_full, per_window = spec.attention.attention_flops_per_pair()
    full, window = attention_pairs(spec, prompt, context)
    return full * per_full + window * per_window


def shared_bytes_read(spec: ModelSpec) -> float:
    """Bytes a step reads once however many tokens share it: every tensor of the blocks but the
    routed experts, and the whole output head (tied: the whole embedding matrix)."""
    return float(spec.dense_block_bytes + spec.head_bytes)


def expert_bytes_read(spec: ModelSpec, tokens: ArrayLike = 1) -> Array:
    """Routed-expert bytes a pass over ``tokens`` tokens reads: expert bytes x touched(tokens),
    used/count of them for one token, their union for many (0 for a dense model)."""
    return spec.expert_bytes * experts_touched_fraction(spec, tokens)


def weight_bytes_read(spec: ModelSpec, tokens: ArrayLike = 1) -> Array:
    """Weight bytes one pass over ``tokens`` tokens (all sequences together) reads:
    W_shared + tokens x the lookups' rows + ``expert_bytes_read(tokens)``.

    The lookups' rows (``ModelSpec.lookup_row_bytes``): one embedding row (none for a tied head,
    read in full as the head) and one per-layer embedding row (Gemma 3n: a gather of one row
    of its 262,144-row table, never the table). Activations are left out."""
    n = _f(tokens)
    return shared_bytes_read(spec) + n * spec.lookup_row_bytes + expert_bytes_read(spec, n)


def weight_bytes_read_per_token(spec: ModelSpec) -> float:
    """The lessons' W: weight bytes one batch-1 decode token reads, read off the tensor table
    (shared bytes + one embedding row + used/count of the routed experts), not the file size."""
    return float(weight_bytes_read(spec, 1))


def bytes_read_per_token(spec: ModelSpec, role: Role, nbytes: float, row_bytes: float) -> float:
    """What one batch-1 decode token reads of ``nbytes`` of tensors of ``role`` (one tensor or
    a role's total; ``row_bytes``: one row of each): an embedding one row (the whole matrix when
    it is also the tied head), a per-layer embedding one row, routed experts used/count of their
    bytes, an unread tensor nothing, the rest in full. Summed over the roles this is ``weight_bytes_read_per_token``."""
    if role is Role.EMBEDDING:
        return float(nbytes) if spec.tied_embeddings else float(row_bytes)
    if role is Role.PER_LAYER_EMBEDDING:
        return float(row_bytes)
    if role is Role.UNREAD:
        return 0.0
    if role is Role.EXPERTS:
        return nbytes * spec.expert_fraction
    return float(nbytes)


SPLIT_CELLS = 512      # llama.cpp's CPU flash attention splits one query's cache over its threads from here


def split_context(context: ArrayLike, chunks: int) -> Array:
    """The context one decode step of a single sequence is charged in full-attention layers when
    llama.cpp's CPU flash attention splits the cache over ``chunks`` threads (0 or 1: ``context``).

    The step attends to t + 1 cells in a view padded to 256 (``padded``); from 512 cells on, each
    thread takes one contiguous chunk of the view, padding included, and skips the cells not yet
    filled. The first chunk is full whenever the filled cells reach it, so the step lasts as
    long as ``chunks`` full chunks would: chunks x min(t + 1, view / chunks) cells, not t + 1
    (at t = 259 on two threads, 512 cells' worth, where the filled cells are 260).
    ggml-cpu's ``ggml_compute_forward_flash_attn_ext_f16``, ``use_split_kv_path``."""
    t = _f(context)
    if chunks <= 1:
        return t
    cells = t + 1.0
    view = padded(cells)
    charged = np.where(view >= SPLIT_CELLS, chunks * np.minimum(cells, np.ceil(view / chunks)), cells)
    return np.asarray(charged - 1.0, dtype=np.float64)


def decode_bytes(spec: ModelSpec, context: ArrayLike, batch: ArrayLike = 1,
                 kv_type: str = "f16", kv_read_factor: float = 1.0, kv_chunks: int = 0) -> tuple[Array, Array]:
    """(weight bytes, cache bytes) one decode step for ``batch`` sequences reads:
    ``weight_bytes_read`` over b tokens, and b x kv_bytes(t) x kv_read_factor; with
    ``kv_chunks`` (an engine that splits one query's cache over its threads, ``split_context``)
    a single sequence's full-attention layers are charged the split context."""
    b = _f(batch)
    cache = kv_bytes(spec, context, kv_type)
    if kv_chunks > 1:                 # a step of one sequence (one query row) is the one split
        cache = np.where(b == 1, kv_bytes(spec, context, kv_type, kv_chunks), cache)
    cache = b * cache * kv_read_factor
    return np.broadcast_arrays(weight_bytes_read(spec, b), cache)  # type: ignore[return-value]


def decode_flops(spec: ModelSpec, context: ArrayLike, batch: ArrayLike = 1) -> Array:
    """FLOPs of one decode step: b x (2 x N + attention over context + 1 keys), N including
    the output head (every decode token computes logits)."""
    b = _f(batch)
    return b * (2.0 * spec.params_per_token + attention_flops(spec, 1, context))


def prefill_weight_and_cache_bytes(spec: ModelSpec, prompt: ArrayLike, context: ArrayLike = 0,
                                   kv_type: str = "f16", batch: ArrayLike = 1) -> tuple[Array, Array]:
    """(weight bytes, cache bytes) a prefill of ``batch`` prompts of ``prompt`` tokens moves
    once: ``weight_bytes_read`` over n x b tokens (the experts they touch, one embedding row
    each), and b x kv_bytes(t + n), the cache written for the prompt and read for an earlier
    ``context``."""
    n, b = _f(prompt), _f(batch)
    cache = b * kv_bytes(spec, _f(context) + n, kv_type)
    return np.broadcast_arrays(weight_bytes_read(spec, n * b), cache)  # type: ignore[return-value]


def prefill_bytes(spec: ModelSpec, prompt: ArrayLike, context: ArrayLike = 0,
                  kv_type: str = "f16", batch: ArrayLike = 1) -> Array:
    """All bytes a prefill moves: the sum of ``prefill_weight_and_cache_bytes``."""
    weights, cache = prefill_weight_and_cache_bytes(spec, prompt, context, kv_type, batch)
    return weights + cache


def prefill_flops(spec: ModelSpec, prompt: ArrayLike, context: ArrayLike = 0,
                  batch: ArrayLike = 1) -> Array:
    """FLOPs of a prefill: 2 x N_blocks x n + attention's pairs + 2 x N_head once per sequence
    (logits at the last position only)."""
    n, b = _f(prompt), _f(batch)
    blocks = 2.0 * spec.block_params_per_token * n
    return b * (blocks + attention_flops(spec, n, context) + 2.0 * spec.head_params)
