"""The model as rooflab sees it: a tensor table with roles, and the attention layout that
sizes the KV cache. Readers (``rooflab.core.io``) build it; predictions only read it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

from rooflab.core.errors import SpecError
from rooflab.core.values.quant import kv_bytes_per_value


class Role(str, Enum):
    """What a tensor does, which decides how much of it a decode token reads."""

    EMBEDDING = "embedding"            # a token reads its own row
    PER_LAYER_EMBEDDING = "per_layer_embd"  # a token reads its own row (its input to every layer), never a head
    ATTENTION = "attention"            # read in full
    FEED_FORWARD = "feed_forward"      # read in full
    EXPERTS = "experts"                # routed experts: a token reads used/count of them
    SHARED_EXPERTS = "shared_experts"  # read in full
    ROUTER = "router"                  # read in full
    OUTPUT = "output"                  # the head: read in full (tied: the embedding matrix)
    NORMS = "norms"                    # read in full
    UNREAD = "unread"                  # held, never read (K, V of Gemma 3n's layers that reuse a cache)
    OTHER = "other"                    # read in full (conservative)

    def __str__(self) -> str:
        return self.value


ROLE_ORDER: tuple[Role, ...] = tuple(Role)
# roles outside the dense blocks: lookups (a row a token), the head, the routed experts, the unread
_NOT_DENSE_BLOCK: tuple[Role, ...] = (Role.EMBEDDING, Role.PER_LAYER_EMBEDDING, Role.OUTPUT, Role.EXPERTS,
                                      Role.UNREAD)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tensor:
    """One tensor of the table: its shape is in ggml order (row length first)."""

    name: str
    shape: tuple[int, ...]
    type_name: str
    nbytes: int
    role: Role
    layer: int | None = None

    @property
    def params(self) -> int:
        return math.prod(self.shape)

    @property
    def row_bytes(self) -> int:
        """Bytes of one row (the first dimension): what one embedding lookup reads."""
        rows = self.params // self.shape[0] if self.shape and self.shape[0] else 1
        return self.nbytes // max(rows, 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorGroup:
    """Totals of one role in the table: its types, parameters, bytes in the file and tensors.
    (What a decode token reads of it is ``predict.work.bytes_read_per_token``.)"""

    name: Role
    types: tuple[str, ...]
    params: int
    bytes: int
    tensors: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionLayout:
    """Per-layer attention shape, enough to size the KV cache and attention's arithmetic.

    ``kv_heads[i] == 0`` marks a layer without its own cache (recurrent or shared-KV layers).
    ``read_kv_heads`` (when given) is what each layer's attention reads, another layer's cache
    included: Gemma 3n's last layers hold no cache and read an earlier layer's. With MLA
    (``kv_lora_rank > 0``) a layer caches one latent of ``kv_lora_rank + rope_dim`` values per
    token instead of keys and values per head.
    """

    heads: tuple[int, ...]
    kv_heads: tuple[int, ...]
    head_dim_k: int
    head_dim_v: int
    sliding: tuple[bool, ...] = ()
    sliding_window: int = 0
    kv_lora_rank: int = 0
    rope_dim: int = 0
    read_kv_heads: tuple[int, ...] = ()    # (): each layer reads its own cache (kv_heads)
    # per-token sums over layers, computed once: every prediction reads them
    _kv_values: tuple[int, int] = field(init=False, repr=False, compare=False)
    _kv_read_values: tuple[int, int] = field(init=False, repr=False, compare=False)
    _pair_flops: tuple[float, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.heads)
        if len(self.kv_heads) != n:
            raise SpecError(f"attention: {len(self.kv_heads)} kv_heads entries for {n} layers")
        if self.sliding and len(self.sliding) != n:
            raise SpecError(f"attention: {len(self.sliding)} sliding entries for {n} layers")
        if self.read_kv_heads and len(self.read_kv_heads) != n:
            raise SpecError(f"attention: {len(self.read_kv_heads)} read_kv_heads entries for {n} layers")
        if self.head_dim_k < 0 or self.head_dim_v < 0 or self.sliding_window < 0:
            raise SpecError("attention: head dims and sliding_window must be >= 0")
        if any(self.sliding) and self.sliding_window <= 0:
            raise SpecError("attention: sliding layers need a sliding_window > 0")
        object.__setattr__(self, "_kv_values", self._sum_kv_values(self.kv_values_per_token))
        object.__setattr__(self, "_kv_read_values", self._sum_kv_values(self.kv_values_read))
        object.__setattr__(self, "_pair_flops", self._sum_pair_flops())

    @property
    def layers(self) -> int:
        return len(self.heads)

    def is_sliding(self, layer: int) -> bool:
        return bool(self.sliding) and self.sliding[layer]

    def kv_values_per_token(self, layer: int) -> int:
        """Cached values one token adds in one layer (keys plus values, or the MLA latent)."""
        return self._values(self.kv_heads[layer])

    def kv_values_read(self, layer: int) -> int:
        """Cached values of one token that attention in ``layer`` reads: its own cache's, or the
        earlier layer's it attends to (``read_kv_heads``)."""
        return self._values(self.read_kv_heads[layer] if self.read_kv_heads else self.kv_heads[layer])

    def _values(self, kv_heads: int) -> int:
        if kv_heads == 0:
            return 0
        if self.kv_lora_rank:
            return self.kv_lora_rank + self.rope_dim
        return kv_heads * (self.head_dim_k + self.head_dim_v)

    def kv_bytes_per_token(self, kv_type: str = "f16") -> tuple[float, float]:
        """(full-attention layers, sliding-window layers) bytes one token adds to the cache.

        k = 2 x layers x kv_heads x head_dim x bytes_per_element, summed per layer so that
        per-layer head counts and K/V head sizes that differ are exact.
        """
        per_value = kv_bytes_per_value(kv_type)
        full, window = self._kv_values
        return full * per_value, window * per_value

    def kv_read_bytes_per_token(self, kv_type: str = "f16") -> tuple[float, float]:
        """(full-attention, sliding-window) bytes of one cached token that attention reads,
        summed over the layers that attend (a layer reading another's cache reads it again)."""
        per_value = kv_bytes_per_value(kv_type)
        full, window = self._kv_read_values
        return full * per_value, window * per_value

    def _sum_kv_values(self, per_layer: Callable[[int], int]) -> tuple[int, int]:
        full = window = 0
        for layer in range(self.layers):
            values = per_layer(layer)
            if self.is_sliding(layer):
                window += values
            else:
                full += values
        return full, window

    def attention_flops_per_pair(self) -> tuple[float, float]:
        """(full, sliding) FLOPs for one query attending to one cached key, summed over layers.

        Per layer and head: 2 x d_k for the score q.k plus 2 x d_v for the weighted sum of V.
        Softmax and masking are left out. With MLA the heads attend in the latent space.
        """
        return self._pair_flops

    def pair_flops(self, layer: int) -> tuple[float, float]:
        """(scores, weighted sum) FLOPs of one query attending to one cached key in ``layer``:
        2 x heads x d_k for q.k, 2 x heads x d_v for the sum of V (MLA: in the latent space,
        d_k = rank + rope dims, d_v = rank)."""
        if self.kv_lora_rank:
            d_k, d_v = self.kv_lora_rank + self.rope_dim, self.kv_lora_rank
        else:
            d_k, d_v = self.head_dim_k, self.head_dim_v
        return 2.0 * self.heads[layer] * d_k, 2.0 * self.heads[layer] * d_v

    def _sum_pair_flops(self) -> tuple[float, float]:
        full = window = 0.0
        for layer in range(self.layers):
            flops = sum(self.pair_flops(layer))
            if self.is_sliding(layer):
                window += flops
            else:
                full += flops
        return full, window


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model's real tensor table plus what its metadata says about attention and experts.

    All sizes in bytes and counts; derived totals are computed once and cached.
    """

    name: str
    architecture: str
    source: str                       # path or "catalogue:<key>"
    tensors: tuple[Tensor, ...]
    attention: AttentionLayout
    hidden: int
    vocab: int
    file_bytes: int                   # whole file(s) on disk, header included
    experts: int = 0                  # routed experts per layer
    experts_used: int = 0             # routed experts each token uses
    shared_experts: int = 0
    context_length: int = 0           # trained context, 0 when unknown
    weights_format: str = ""          # "Q4_K_M", "bf16", "safetensors (BF16)", ...
    warnings: tuple[str, ...] = ()
    provenance: str = ""
    metadata: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not self.tensors:
            raise SpecError(f"{self.name}: model has no tensors")
        if self.experts < 0 or self.experts_used < 0 or self.experts_used > self.experts:
            raise SpecError(f"{self.name}: experts_used must be between 0 and experts")
        if self.experts and not self.experts_used:
            raise SpecError(f"{self.name}: a mixture of experts needs experts_used > 0")
        if self.file_bytes < 0:
            raise SpecError(f"{self.name}: file_bytes must be >= 0")

    def __hash__(self) -> int:
        """A hash of the fields that tell models apart at a glance (equal specs still hash
        equal): hashing the whole tensor table at each cached placement lookup cost more than
        the lookup saved (a third of ``rooflab compare``'s time, issue 15)."""
        return hash((self.name, self.architecture, self.source, self.hidden, self.vocab, self.file_bytes,
                     self.weights_format, len(self.tensors)))

    # -- derived totals ------------------------------------------------------------------
    @property
    def layers(self) -> int:
        return self.attention.layers

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def expert_fraction(self) -> float:
        """Share of the routed experts one token reads (used / count), 1 for a dense model."""
        return self.experts_used / self.experts if self.experts else 1.0

    @cached_property
    def tied_embeddings(self) -> bool:
        """True when the file has no output head and the embedding matrix serves as one."""
        return not any(t.role is Role.OUTPUT for t in self.tensors)

    def _sum(self, role: Role, what: str) -> int:
        return sum(getattr(t, what) for t in self.tensors if t.role is role)

    @cached_property
    def widest_feed_forward(self) -> int:
        """The larger of the first two dimensions of the widest feed-forward or expert matrix
        (the intermediate width a token's feed-forward holds), 0 when the model has none."""
        roles = (Role.FEED_FORWARD, Role.EXPERTS, Role.SHARED_EXPERTS)
        return max((max(t.shape[:2]) for t in self.tensors if t.role in roles and len(t.shape) > 1), default=0)

    @cached_property
    def params_total(self) -> int:
        return sum(t.params for t in self.tensors)

    @cached_property
    def embedding_params(self) -> int:
        return self._sum(Role.EMBEDDING, "params")

    @cached_property
    def embedding_row_bytes(self) -> float:
        """Bytes one token's embedding lookup reads: one row of each embedding tensor."""
        return float(sum(t.row_bytes for t in self.tensors if t.role is Role.EMBEDDING))

    @cached_property
    def per_layer_row_bytes(self) -> float:
        """Bytes one token's per-layer embedding lookup reads (Gemma 3n): one row, which holds
        that token's input to every layer, of each per-layer embedding tensor; 0 for most models."""
        return float(self.role_row_bytes(Role.PER_LAYER_EMBEDDING))

    @cached_property
    def lookup_row_bytes(self) -> float:
        """Bytes one token's input lookups read of matrices not read whole: a row of the input
        embedding (none when it is the tied head, read whole as the head) plus a row of the
        per-layer embedding (never a head)."""
        return (0.0 if self.tied_embeddings else self.embedding_row_bytes) + self.per_layer_row_bytes

    def role_row_bytes(self, role: Role) -> int:
        """One row of each tensor of ``role``, summed (what one lookup of it reads)."""
        return sum(t.row_bytes for t in self.tensors if t.role is role)

    @cached_property
    def head_params(self) -> int:
        """Parameters of the output head (the embedding matrix when tied)."""
        if self.tied_embeddings:
            return self.embedding_params
        return self._sum(Role.OUTPUT, "params")

    @cached_property
    def head_bytes(self) -> int:
        if self.tied_embeddings:
            return self._sum(Role.EMBEDDING, "nbytes")
        return self._sum(Role.OUTPUT, "nbytes")

    @cached_property
    def expert_params(self) -> int:
        return self._sum(Role.EXPERTS, "params")

    @cached_property
    def expert_bytes(self) -> int:
        """Bytes of all routed experts in the file."""
        return self._sum(Role.EXPERTS, "nbytes")

    @cached_property
    def dense_block_params(self) -> int:
        """Parameters every token multiplies in the blocks: all but the embeddings (lookups),
        the head and the routed experts."""
        return sum(t.params for t in self.tensors if t.role not in _NOT_DENSE_BLOCK)

    @cached_property
    def dense_block_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors if t.role not in _NOT_DENSE_BLOCK)

    @cached_property
    def block_params_per_token(self) -> float:
        """N for prefill: block parameters one token multiplies (routed experts at used/count),
        the embedding lookup and the output head left out."""
        return self.dense_block_params + self.expert_params * self.expert_fraction

    @cached_property
    def params_per_token(self) -> float:
        """N for decode: block parameters one token multiplies plus the output head."""
        return self.block_params_per_token + self.head_params

    @cached_property
    def weight_bytes(self) -> int:
        """Bytes of all tensors (resident in memory), header excluded."""
        return sum(t.nbytes for t in self.tensors)

    def kv_bytes_per_token(self, kv_type: str = "f16") -> tuple[float, float]:
        """(full-attention, sliding-window) KV-cache bytes per token of context."""
        return self.attention.kv_bytes_per_token(kv_type)

    @cached_property
    def groups(self) -> tuple[TensorGroup, ...]:
        """Totals per role, in ``ROLE_ORDER``, only roles that have tensors."""
        out = []
        for role in ROLE_ORDER:
            members = [t for t in self.tensors if t.role is role]
            if members:
                out.append(TensorGroup(name=role, types=tuple(sorted({t.type_name for t in members})),
                                       params=sum(t.params for t in members),
                                       bytes=sum(t.nbytes for t in members), tensors=len(members)))
        return tuple(out)
