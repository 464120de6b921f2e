"""Hand-sized models and a card for working llama.cpp's fit out on paper: layers of a round
number of GiB, a tiny vocabulary and hidden size (the compute buffer, 4 x ubatch x (vocab + 8
hidden + 3 ffn x used) + 2 x ubatch x cells bytes, is a few MB: ``BUFFER`` says how much at most)
and a CUDA card with 64 GB of host memory behind it."""

from __future__ import annotations

from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import AttentionLayout, ModelSpec, Role, Tensor
from rooflab.core.values.workload import Workload

GiB = 2**30
ROOM = 16 - 0.45 - 1.0          # GiB llama.cpp's fit may fill on a 16 GiB card (its context, its margin)
BUFFER = 0.01                    # GiB: every compute buffer below is smaller than this
SHORT = Workload(prompt=768, answer=256)          # 1,024 tokens per sequence


def card(memory_gib: float = 16.0) -> MachineProfile:
    return MachineProfile(name="16 GiB card", backend="cuda", bandwidth=1e12, peak_flops={"fp16": 1e14},
                          memory=memory_gib * GiB, offload_bandwidth=64e9, offload_memory=64e9, offload_name="DDR5")


def _t(name: str, gib: float, role: Role, layer: int | None = None) -> Tensor:
    return Tensor(name=name, shape=(16, 16), type_name="mix", nbytes=round(gib * GiB), role=role, layer=layer)


def dense(layers: int = 40, layer_gib: float = 0.5, head_gib: float = 0.25, kv_values: int = 0,
          trained: int = 32768) -> ModelSpec:
    """``layers`` layers of ``layer_gib`` each, a ``head_gib`` output head, ``kv_values`` f16 values
    cached per token per layer."""
    tensors = [_t(f"blk.{i}.ffn_up.weight", layer_gib, Role.FEED_FORWARD, i) for i in range(layers)]
    tensors += [_t("token_embd.weight", 0.0, Role.EMBEDDING), _t("output.weight", head_gib, Role.OUTPUT)]
    layout = AttentionLayout(heads=(1,) * layers, kv_heads=(1 if kv_values else 0,) * layers,
                             head_dim_k=kv_values // 2, head_dim_v=kv_values - kv_values // 2)
    return ModelSpec(name="dense", architecture="test", source="test", tensors=tuple(tensors), attention=layout,
                     hidden=16, vocab=16, file_bytes=sum(t.nbytes for t in tensors), context_length=trained)


def moe(layers: int = 10, attention_gib: float = 0.25, expert_gib: float = 0.5, shared_gib: float = 0.0,
        head_gib: float = 0.25) -> ModelSpec:
    """Each layer: attention, then gate, up and down experts of ``expert_gib`` each (llama.cpp's
    names), and a shared expert's up projection when ``shared_gib``."""
    tensors = []
    for i in range(layers):
        tensors.append(_t(f"blk.{i}.attn_q.weight", attention_gib, Role.ATTENTION, i))
        tensors += [_t(f"blk.{i}.ffn_{w}_exps.weight", expert_gib, Role.EXPERTS, i) for w in ("gate", "up", "down")]
        if shared_gib:
            tensors.append(_t(f"blk.{i}.ffn_up_shexp.weight", shared_gib, Role.SHARED_EXPERTS, i))
    tensors += [_t("token_embd.weight", 0.0, Role.EMBEDDING), _t("output.weight", head_gib, Role.OUTPUT)]
    layout = AttentionLayout(heads=(1,) * layers, kv_heads=(0,) * layers, head_dim_k=0, head_dim_v=0)
    return ModelSpec(name="moe", architecture="test", source="test", tensors=tuple(tensors), attention=layout,
                     hidden=16, vocab=16, file_bytes=sum(t.nbytes for t in tensors), experts=8, experts_used=2,
                     context_length=32768)
