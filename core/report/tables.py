"""The tensor table as rows: every tensor with its bytes in the file and the bytes one batch-1
decode token reads from it, grouped by role like ``ModelSpec.groups``."""

from __future__ import annotations

from dataclasses import dataclass

from rooflab.core.values.model import ModelSpec, Role, Tensor, TensorGroup


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorRow:
    tensor: Tensor
    bytes_read_per_token: float


def bytes_read_per_token(spec: ModelSpec, tensor: Tensor) -> float:
    """What one batch-1 decode token reads of ``tensor``, by the rules behind ``ModelSpec.groups``:
    an embedding one row (the whole matrix when it is also the tied head), routed experts
    used/count of their bytes, everything else in full."""
    if tensor.role is Role.EMBEDDING:
        return float(tensor.nbytes) if spec.tied_embeddings else float(tensor.row_bytes)
    if tensor.role is Role.EXPERTS:
        return tensor.nbytes * spec.expert_fraction
    return float(tensor.nbytes)


def grouped_rows(spec: ModelSpec) -> list[tuple[TensorGroup, list[TensorRow]]]:
    """Each role's group totals with its tensors, largest in the file first."""
    out = []
    for group in spec.groups:
        members = [TensorRow(tensor=t, bytes_read_per_token=bytes_read_per_token(spec, t))
                   for t in spec.tensors if t.role is group.name]
        members.sort(key=lambda r: r.tensor.nbytes, reverse=True)
        out.append((group, members))
    return out
