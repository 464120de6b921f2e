"""The pass broken into its operations: every multiply, attention step and small op of a layer,
with its FLOPs and the bytes it moves, so each sits on the roofline by itself.

A pass's figures (``work``) are the sums of these rows: the weight bytes of the operations are
the pass's weight bytes, their cache bytes its cache bytes, and their FLOPs less what the pass
leaves out (``Operation.flops_left_out``) its FLOPs. What the pass leaves out, the rows carry:

- activations, read and written in the engine's activation type (llama.cpp keeps them in f32,
  4 bytes), an unfused graph's traffic: each operation reads its inputs and writes its output;
- the arithmetic of the small ops: normalisation (4 FLOPs a value: square, sum, scale, weight;
  the pass counts the weight's 2), RoPE (3 a rotated value), softmax (5 a score: max, subtract,
  exp, sum, divide), the feed-forward's activation and gate product (4 a value), the router's
  top-k softmax (5 an expert) and sampling (5 a vocabulary entry).

Left out here too: residual adds, masks, the sin/cos tables, the cache write of a decode step's
one new token (the pass does not count it either). With flash attention the scores stay on the
chip: softmax moves no bytes and the scores' and weighted sum's only traffic is the cache, the
query and the output. The cache bytes of a layer go to the scores (keys) and the weighted sum
(values), as the pass charges them (written by a prefill, read by a step); an MLA layer's latent
is read once, by the scores.

Layers are grouped by kind: the attention ("sliding", "mla" or full) and the feed-forward
("dense" or "moe") of a block, "moe" or "sliding dense", say; each row sums its layers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from rooflab.core.predict import work
from rooflab.core.values.model import ModelSpec, Role, Tensor
from rooflab.core.values.workload import Workload

ACTIVATION_BYTES = 4.0       # llama.cpp's graph keeps activations in f32
NORM_FLOPS = 4.0             # per normalised value: square, sum, scale, weight
ROPE_FLOPS = 3.0             # per rotated value: a pair takes 4 multiplies and 2 adds
SOFTMAX_FLOPS = 5.0          # per score: max, subtract, exp, sum, divide
ACT_FLOPS = 4.0              # per feed-forward value: SiLU (or GELU) and the gate product
SAMPLING_FLOPS = 5.0         # per vocabulary entry: a softmax over the logits, then the pick

PREFILL, DECODE = "prefill", "decode"
EMBEDDING, HEAD, SAMPLING = "embedding", "head", "sampling"
MATMUL, ATTENTION, SMALL, LOOKUP = "multiply", "attention", "small", "lookup"

# llama.cpp tensor stems -> the operation that multiplies by them
_OPS: dict[str, str] = {
    "attn_q": "q_proj", "attn_q_a": "q_proj", "attn_q_b": "q_proj", "attn_k": "k_proj", "attn_v": "v_proj",
    "attn_qkv": "qkv_proj", "attn_kv_a_mqa": "kv_proj", "attn_kv_b": "kv_proj", "attn_k_b": "kv_proj",
    "attn_v_b": "kv_proj", "attn_output": "o_proj", "attn_sinks": "softmax",
    "ffn_gate": "ffn_gate", "ffn_up": "ffn_up", "ffn_down": "ffn_down",
    "ffn_gate_inp": "router", "exp_probs_b": "router", "ffn_gate_inp_shexp": "router",
    "ffn_gate_exps": "expert_gate", "ffn_up_exps": "expert_up", "ffn_down_exps": "expert_down",
    "ffn_gate_up_exps": "expert_up", "ffn_gate_up": "ffn_up", "ffn_gate_up_shexp": "shared_up",
    "ffn_gate_shexp": "shared_gate", "ffn_up_shexp": "shared_up", "ffn_down_shexp": "shared_down",
    "output": "output_head",
}
_BY_ROLE: dict[Role, str] = {Role.ATTENTION: "attn_other", Role.FEED_FORWARD: "ffn_other",
                             Role.EXPERTS: "expert_other", Role.SHARED_EXPERTS: "shared_other",
                             Role.ROUTER: "router", Role.OUTPUT: "output_head", Role.OTHER: "other"}
# the order a layer's rows are listed in (a pass's order)
ORDER: tuple[str, ...] = (
    "embedding", "attn_norm", "qkv_proj", "q_proj", "k_proj", "v_proj", "kv_proj", "latent_norm", "qk_norm",
    "rope", "attn_scores", "softmax", "attn_weighted_sum", "o_proj", "attn_other", "post_norm", "ffn_norm",
    "router", "ffn_gate", "ffn_up", "ffn_act", "ffn_down", "ffn_other", "expert_gate", "expert_up",
    "expert_down", "expert_other", "shared_gate", "shared_up", "shared_down", "shared_other", "norm", "other",
    "output_norm", "output_head", "sampling")


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """One operation of a pass, summed over the ``layers`` layers of its kind: FLOPs and the
    bytes it moves (weights, KV cache, activations), in SI units. ``flops_left_out``: the part
    of ``flops`` the pass's formula does not count (a small op's own arithmetic)."""

    name: str
    layer_kind: str
    phase: str
    kind: str                  # MATMUL, ATTENTION, SMALL or LOOKUP
    layers: int
    flops: float
    weight_bytes: float
    cache_bytes: float
    activation_bytes: float
    flops_left_out: float = 0.0

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.cache_bytes + self.activation_bytes

    @property
    def intensity(self) -> float:
        """FLOP per byte moved (inf for an operation that moves nothing: a fused softmax)."""
        return self.flops / self.bytes if self.bytes > 0 else float("inf")


class _Sums:
    """Rows being summed, keyed by (layer kind, name)."""

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.rows: dict[tuple[str, str], dict[str, float]] = {}
        self.layers: dict[tuple[str, str], set[int]] = {}
        self.kinds: dict[tuple[str, str], str] = {}

    def add(self, kind_of_layer: str, name: str, kind: str, layer: int | None, *, flops: float = 0.0,
            weights: float = 0.0, cache: float = 0.0, act: float = 0.0, left_out: float = 0.0) -> None:
        key = (kind_of_layer, name)
        row = self.rows.setdefault(key, dict.fromkeys(("flops", "weights", "cache", "act", "left_out"), 0.0))
        row["flops"] += flops
        row["weights"] += weights
        row["cache"] += cache
        row["act"] += act
        row["left_out"] += left_out
        self.layers.setdefault(key, set()).add(-1 if layer is None else layer)
        self.kinds.setdefault(key, kind)

    def operations(self) -> tuple[Operation, ...]:
        rank = {name: i for i, name in enumerate(ORDER)}
        kinds = list(dict.fromkeys(k for k, _ in self.rows))
        out = []
        for key in sorted(self.rows, key=lambda k: (_kind_rank(k[0], kinds), rank.get(k[1], len(ORDER)), k[1])):
            r = self.rows[key]
            out.append(Operation(name=key[1], layer_kind=key[0], phase=self.phase, kind=self.kinds[key],
                                 layers=len(self.layers[key]), flops=r["flops"], weight_bytes=r["weights"],
                                 cache_bytes=r["cache"], activation_bytes=r["act"], flops_left_out=r["left_out"]))
        return tuple(out)


def _kind_rank(kind: str, kinds: list[str]) -> tuple[int, int]:
    """Embedding first, then the layer kinds as met, then the head and sampling."""
    edge = {EMBEDDING: 0, HEAD: 2, SAMPLING: 3}
    return (edge.get(kind, 1), kinds.index(kind))


def layer_kinds(spec: ModelSpec) -> tuple[str, ...]:
    """Each block's kind: its attention ("mla", "sliding" or full, unnamed) and its feed-forward
    ("moe" where it has routed experts, else "dense"), "sliding moe", "dense", ..."""
    a = spec.attention
    moe = {t.layer for t in spec.tensors if t.role is Role.EXPERTS and t.layer is not None}
    kinds = []
    for layer in range(a.layers):
        attention = "mla" if a.kv_lora_rank else "sliding" if a.is_sliding(layer) else ""
        kinds.append(f"{attention} {'moe' if layer in moe else 'dense'}".strip())
    return tuple(kinds)


# Hugging Face module names (a safetensors folder, a torch model as run) -> llama.cpp stems
_HF_STEMS: dict[str, str] = {
    "q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output", "qkv_proj": "attn_qkv",
    "q_norm": "attn_q_norm", "k_norm": "attn_k_norm", "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm", "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm", "embed_tokens": "token_embd", "lm_head": "output",
    "norm": "output_norm", "gate": "ffn_gate_inp", "sinks": "attn_sinks",
}
_HF_FFN = {"gate_proj": "ffn_gate", "w1": "ffn_gate", "up_proj": "ffn_up", "w3": "ffn_up", "down_proj": "ffn_down",
           "w2": "ffn_down", "gate_up_proj": "ffn_gate_up"}
_SUFFIX = {Role.EXPERTS: "_exps", Role.SHARED_EXPERTS: "_shexp"}


def _stem(t: Tensor, post_attention: str = "ffn_norm") -> str:
    """The llama.cpp stem of a tensor ("attn_q", "ffn_up_exps"), whichever convention names it;
    ``post_attention``: what a Hugging Face post_attention_layernorm is (a post-norm where the
    model has a pre_feedforward_layernorm, Gemma's)."""
    base = t.name.rsplit(".", 1)[0] if t.name.endswith((".weight", ".bias", ".scale")) else t.name
    if t.name.startswith("blk."):
        return base.split(".", 2)[2] if base.count(".") >= 2 else base
    if "." not in base:
        return base                               # a llama.cpp global: token_embd, output, output_norm
    last = base.rsplit(".", 1)[1]
    if last in _HF_FFN:
        return _HF_FFN[last] + _SUFFIX.get(t.role, "")
    if last == "post_attention_layernorm":
        return post_attention
    return _HF_STEMS.get(last, last)


def _norm_op(stem: str) -> str:
    if stem in ("attn_q_norm", "attn_k_norm"):
        return "qk_norm"
    if stem in ("attn_q_a_norm", "attn_kv_a_norm"):
        return "latent_norm"
    if stem in ("attn_norm", "ffn_norm", "output_norm"):
        return stem
    return "post_norm" if "post" in stem else "norm"


def _norm_values(spec: ModelSpec, stem: str, t: Tensor) -> float:
    """Values one token normalises with ``t`` (a per-head norm runs over every head)."""
    if t.layer is not None and stem == "attn_q_norm":
        return float(t.params * spec.attention.heads[t.layer])
    if t.layer is not None and stem == "attn_k_norm":
        return float(t.params * max(spec.attention.kv_heads[t.layer], 1))
    return float(t.params)


@dataclass(frozen=True, slots=True)
class _Pass:
    """What one pass computes: ``rows`` tokens through the blocks, ``head_rows`` through the
    head (a prefill's last position of each prompt), ``pairs`` (full, sliding) query-key pairs
    per layer, the cache bytes it moves, and its flash-attention choice."""

    phase: str
    rows: float
    head_rows: float
    pairs: tuple[float, float]
    cache_bytes: float
    cache_tokens: tuple[float, float]
    flash: bool
    act: float


def _tensor_rows(spec: ModelSpec, p: _Pass, sums: _Sums, kinds: tuple[str, ...]) -> None:
    """The multiplies (every tensor at 2 FLOPs a parameter a token, as the pass counts them),
    the norms and the embedding lookup."""
    touched = float(work.experts_touched_fraction(spec, p.rows))
    post = _post_attention(spec)
    for t in spec.tensors:
        stem = _stem(t, post)
        kind_of_layer = kinds[t.layer] if t.layer is not None and t.layer < len(kinds) else HEAD
        if t.role is Role.UNREAD:                   # loaded, never multiplied
            continue
        if t.role is Role.PER_LAYER_EMBEDDING:      # a gather: one row a token, never a head
            sums.add(EMBEDDING, "embedding", LOOKUP, None, weights=p.rows * t.row_bytes)
            continue
        if t.role is Role.EMBEDDING:
            rows = 0.0 if spec.tied_embeddings else p.rows
            sums.add(EMBEDDING, "embedding", LOOKUP, None, weights=rows * t.row_bytes,
                     act=p.rows * t.shape[0] * p.act if stem == "token_embd" else 0.0)
            if spec.tied_embeddings and stem == "token_embd":
                _multiply(sums, HEAD, "output_head", None, t, p.head_rows, float(t.nbytes), p.act)
            elif spec.tied_embeddings:
                sums.add(HEAD, "output_head", MATMUL, None, flops=2.0 * t.params * p.head_rows, weights=t.nbytes)
            continue
        if t.role is Role.OUTPUT:
            _multiply(sums, HEAD, "output_head", None, t, p.head_rows, float(t.nbytes), p.act)
            continue
        if t.role is Role.NORMS:
            values = _norm_values(spec, stem, t) * p.rows
            counted = 2.0 * t.params * p.rows
            flops = max(NORM_FLOPS * values, counted)
            sums.add(HEAD if t.layer is None else kind_of_layer, _norm_op(stem), SMALL, t.layer, flops=flops,
                     weights=t.nbytes, act=2.0 * values * p.act, left_out=flops - counted)
            continue
        name = _OPS.get(stem) or _BY_ROLE.get(t.role, "other")
        if t.role is Role.EXPERTS:
            _multiply(sums, kind_of_layer, name, t.layer, t, p.rows * spec.expert_fraction, t.nbytes * touched,
                      p.act, per_expert=True)
        else:
            _multiply(sums, kind_of_layer, name, t.layer, t, p.rows, float(t.nbytes), p.act)


def _post_attention(spec: ModelSpec) -> str:
    gemma = any(t.name.endswith("pre_feedforward_layernorm.weight") for t in spec.tensors)
    return "post_attention_norm" if gemma else "ffn_norm"


def _multiply(sums: _Sums, kind_of_layer: str, name: str, layer: int | None, t: Tensor, rows: float,
              weights: float, act: float, *, per_expert: bool = False) -> None:
    """A weight multiply: 2 FLOPs a parameter a row; reads the weights and each row's input,
    writes each row's output (a bias or a vector adds no activations of its own). Routed
    experts: ``rows`` is tokens x used / count of the tensor's parameters, so the FLOPs are the
    pass's; the activations are each token's used experts' inputs and outputs."""
    flops = 2.0 * t.params * rows
    values = 0.0
    if len(t.shape) >= 2 and not t.name.endswith(".bias"):
        values = float(t.shape[0] + t.shape[1]) * rows * (t.shape[2] if per_expert and len(t.shape) > 2 else 1)
    sums.add(kind_of_layer, name, MATMUL, layer, flops=flops, weights=weights, act=values * act)


def _attention_rows(spec: ModelSpec, p: _Pass, sums: _Sums, kinds: tuple[str, ...]) -> None:
    """Scores, softmax, weighted sum and RoPE of every layer, and the cache each reads."""
    a = spec.attention
    share = _cache_shares(spec, p)
    for layer in range(a.layers):
        heads, kv_heads = a.heads[layer], max(a.kv_heads[layer], 1)
        k_share, v_share = share[layer]
        kind = kinds[layer]
        if not heads:                   # no attention here (a recurrent block): its cache, if any
            if k_share or v_share:
                sums.add(kind, "attn_scores", ATTENTION, layer, cache=k_share * p.cache_bytes)
                sums.add(kind, "attn_weighted_sum", ATTENTION, layer, cache=v_share * p.cache_bytes)
            continue
        pairs = p.pairs[1] if a.is_sliding(layer) else p.pairs[0]
        scores_flops, sum_flops = a.pair_flops(layer)
        d_k, d_v = scores_flops / (2.0 * heads), sum_flops / (2.0 * heads)   # the widths a query head multiplies
        score_values = pairs * heads
        spill = 0.0 if p.flash else score_values * p.act       # the scores written and read back
        sums.add(kind, "attn_scores", ATTENTION, layer, flops=pairs * scores_flops, cache=k_share * p.cache_bytes,
                 act=p.rows * heads * d_k * p.act + spill)
        softmax = SOFTMAX_FLOPS * score_values
        sums.add(kind, "softmax", ATTENTION, layer, flops=softmax, act=2.0 * spill, left_out=softmax)
        sums.add(kind, "attn_weighted_sum", ATTENTION, layer, flops=pairs * sum_flops,
                 cache=v_share * p.cache_bytes, act=spill + p.rows * heads * d_v * p.act)
        rotated = p.rows * (heads + (1 if a.kv_lora_rank else kv_heads)) * (a.rope_dim or a.head_dim_k)
        sums.add(kind, "rope", SMALL, layer, flops=ROPE_FLOPS * rotated, act=2.0 * rotated * p.act,
                 left_out=ROPE_FLOPS * rotated)


def _cache_shares(spec: ModelSpec, p: _Pass) -> list[tuple[float, float]]:
    """Each layer's (keys, values) share of the pass's cache bytes: its values a token caches
    times the tokens it holds (full: t, sliding: min(t, window)), keys and values by their
    widths (MLA: the latent, all to the keys)."""
    a = spec.attention
    weights = []
    for layer in range(a.layers):
        values = float(a.kv_values_read(layer))
        tokens = p.cache_tokens[1] if a.is_sliding(layer) else p.cache_tokens[0]
        k_part = 1.0 if a.kv_lora_rank or values == 0 else a.head_dim_k / (a.head_dim_k + a.head_dim_v)
        weights.append((values * tokens * k_part, values * tokens * (1.0 - k_part)))
    total = sum(k + v for k, v in weights)
    return [(k / total, v / total) if total > 0 else (0.0, 0.0) for k, v in weights]


def _ffn_act_rows(spec: ModelSpec, p: _Pass, sums: _Sums, kinds: tuple[str, ...]) -> None:
    """The feed-forward's activation and gate product: reads gate and up, writes their product."""
    for t in spec.tensors:
        stem = _stem(t)
        ups = ("ffn_up", "ffn_up_exps", "ffn_up_shexp", "ffn_gate_up", "ffn_gate_up_exps", "ffn_gate_up_shexp")
        if t.layer is None or len(t.shape) < 2 or stem not in ups or t.name.endswith(".bias"):
            continue
        width = float(t.shape[1]) / (2.0 if "gate_up" in stem else 1.0)
        rows = p.rows * (spec.experts_used if stem.endswith("_exps") else 1)
        flops = ACT_FLOPS * width * rows
        sums.add(kinds[t.layer], "ffn_act", SMALL, t.layer, flops=flops, act=3.0 * width * rows * p.act,
                 left_out=flops)


def _router_rows(spec: ModelSpec, p: _Pass, sums: _Sums, kinds: tuple[str, ...]) -> None:
    """The router's top-k softmax over each layer's experts."""
    if not spec.is_moe:
        return
    for layer, kind in enumerate(kinds):
        if kind.endswith("moe"):
            flops = SOFTMAX_FLOPS * spec.experts * p.rows
            sums.add(kind, "router", MATMUL, layer, flops=flops, act=2.0 * spec.experts * p.rows * p.act,
                     left_out=flops)


def _sampling_row(spec: ModelSpec, p: _Pass, sums: _Sums) -> None:
    """Sampling: a softmax over each sequence's logits, then the pick (reads and writes them)."""
    flops = SAMPLING_FLOPS * spec.vocab * p.head_rows
    sums.add(SAMPLING, "sampling", SMALL, None, flops=flops, act=2.0 * spec.vocab * p.head_rows * p.act,
             left_out=flops)


def _operations(spec: ModelSpec, p: _Pass) -> tuple[Operation, ...]:
    kinds = layer_kinds(spec)
    sums = _Sums(p.phase)
    _tensor_rows(spec, p, sums, kinds)
    _attention_rows(spec, p, sums, kinds)
    _ffn_act_rows(spec, p, sums, kinds)
    _router_rows(spec, p, sums, kinds)
    _sampling_row(spec, p, sums)
    return sums.operations()


def prefill_operations(spec: ModelSpec, workload: Workload, *, activation_bytes: float = ACTIVATION_BYTES,
                       kv_read_factor: float = 1.0) -> tuple[Operation, ...]:
    """The operations of a prefill of the workload's ``batch`` prompts of ``prompt`` tokens
    after ``context`` cached ones: the blocks over n x b rows, the head and sampling once a
    prompt. Their weight and cache bytes sum to ``work.prefill_weight_and_cache_bytes``, their
    FLOPs less ``flops_left_out`` to ``work.prefill_flops``. (``kv_read_factor`` is not a
    prefill's: accepted for symmetry, unused.)"""
    del kv_read_factor
    n, t, b, kv = workload.prompt, workload.context, workload.batch, workload.kv_type
    _, cache = work.prefill_weight_and_cache_bytes(spec, n, t, kv, b)
    full, window = work.kv_tokens_read(spec, t + n)
    pairs = work.attention_pairs(spec, n, t)
    p = _Pass(PREFILL, float(n * b), float(b), (float(pairs[0]) * b, float(pairs[1]) * b), float(cache),
              (float(full), float(window)), workload.flash_attention, activation_bytes)
    return _operations(spec, p)


def decode_operations(spec: ModelSpec, workload: Workload, *, context: int | None = None,
                      activation_bytes: float = ACTIVATION_BYTES, kv_read_factor: float = 1.0,
                      kv_chunks: int = 0) -> tuple[Operation, ...]:
    """The operations of one decode step of ``batch`` sequences with ``context`` tokens cached
    (the workload's context plus its prompt by default, where ``roofline.phase_points`` puts the
    step). Their weight and cache bytes sum to ``work.decode_bytes``, their FLOPs less
    ``flops_left_out`` to ``work.decode_flops``."""
    t = workload.context + workload.prompt if context is None else context
    b = workload.batch
    _, cache = work.decode_bytes(spec, t, b, workload.kv_type, kv_read_factor, kv_chunks)
    full, window = work.kv_tokens_read(spec, t)
    if kv_chunks > 1 and b == 1:
        full = work.split_context(full, kv_chunks)
    pairs = work.attention_pairs(spec, 1, t)
    p = _Pass(DECODE, float(b), float(b), (float(pairs[0]) * b, float(pairs[1]) * b), float(cache),
              (float(full), float(window)), workload.flash_attention, activation_bytes)
    return _operations(spec, p)


def totals(ops: Iterable[Operation]) -> tuple[float, float, float]:
    """(FLOPs the pass counts, weight bytes, cache bytes) of ``ops``: what the pass's own
    figures are the sum of."""
    rows = list(ops)
    return (float(np.sum([o.flops - o.flops_left_out for o in rows])), float(np.sum([o.weight_bytes for o in rows])),
            float(np.sum([o.cache_bytes for o in rows])))
