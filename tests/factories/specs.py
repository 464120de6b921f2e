"""Hand-sized models for the roofline lesson's examples, which price a model as
'P parameters at b bits per weight with k KV bytes per token'."""

from __future__ import annotations

from rooflab.core.values.machine import MachineProfile
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


def machine(bandwidth_gb: float, peak_tflops: float = 1000.0, memory_gb: float = 1000.0,
            offload_gb_s: float = 0.0) -> MachineProfile:
    """A machine whose compute is ample unless stated: the lessons' 'compute ignored' tables."""
    return MachineProfile(name=f"{bandwidth_gb} GB/s", bandwidth=bandwidth_gb * 1e9,
                          peak_flops={"fp16": peak_tflops * 1e12}, memory=memory_gb * 1e9,
                          offload_bandwidth=offload_gb_s * 1e9, offload_memory=1e12 if offload_gb_s else 0.0)
