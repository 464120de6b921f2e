"""The tensor table as rows: every tensor with its bytes in the file and the bytes one batch-1
decode token reads from it (``predict.work.bytes_read_per_token``), grouped by role like
``ModelSpec.groups``."""

from __future__ import annotations

from dataclasses import dataclass

from rooflab.core.predict.work import bytes_read_per_token
from rooflab.core.values.model import ModelSpec, Tensor, TensorGroup


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorRow:
    tensor: Tensor
    bytes_read_per_token: float


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupRow:
    """One role's totals from the table and what a batch-1 decode token reads of them."""

    group: TensorGroup
    bytes_read_per_token: float
    members: tuple[TensorRow, ...]       # largest in the file first


def tensor_row(spec: ModelSpec, tensor: Tensor) -> TensorRow:
    return TensorRow(tensor=tensor, bytes_read_per_token=bytes_read_per_token(
        spec, tensor.role, tensor.nbytes, tensor.row_bytes))


def grouped_rows(spec: ModelSpec) -> list[GroupRow]:
    """Each role's group totals with its tensors, in ``ModelSpec.groups`` order."""
    out = []
    for group in spec.groups:
        members = [tensor_row(spec, t) for t in spec.tensors if t.role is group.name]
        members.sort(key=lambda r: r.tensor.nbytes, reverse=True)
        read = bytes_read_per_token(spec, group.name, group.bytes, spec.role_row_bytes(group.name))
        out.append(GroupRow(group=group, bytes_read_per_token=read, members=tuple(members)))
    return out
