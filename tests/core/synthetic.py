"""Hand-sized models for the roofline lesson's examples, which price a model as
'P parameters at b bits per weight with k KV bytes per token'."""

from __future__ import annotations

from rooflab.core.values.model import AttentionLayout, ModelSpec, Role, Tensor


def synthetic_spec(params: float, bits_per_weight: float, kv_bytes_per_token: int = 0,
                   *, attention_heads: int = 0, name: str = "synthetic") -> ModelSpec:
    """One feed-forward tensor carrying all parameters, a one-value output head and embedding,
    and a one-layer cache of ``kv_bytes_per_token`` FP16 bytes (no attention FLOPs unless
    ``attention_heads``)."""
    n = int(params)
    values = kv_bytes_per_token // 2           # f16: 2 bytes per cached value
    layout = AttentionLayout(heads=(attention_heads,), kv_heads=(1,) if values else (0,),
                             head_dim_k=values // 2, head_dim_v=values - values // 2)
    tensors = (
        Tensor(name="blk.0.ffn_up.weight", shape=(n, 1), type_name="mix", nbytes=round(n * bits_per_weight / 8),
               role=Role.FEED_FORWARD, layer=0),
        Tensor(name="token_embd.weight", shape=(1, 1), type_name="F32", nbytes=0, role=Role.EMBEDDING),
        Tensor(name="output.weight", shape=(1, 1), type_name="F32", nbytes=0, role=Role.OUTPUT),
    )
    return ModelSpec(name=name, architecture="synthetic", source="test", tensors=tensors,
                     attention=layout, hidden=1, vocab=1, file_bytes=round(n * bits_per_weight / 8))
