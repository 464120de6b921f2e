"""Each operation of a pass on its own two clocks: the bound, its time at the ceiling and as a
calibrated machine expects it, and its share of the pass (``ops`` gives the operations).

An operation's time is max(bytes / B, FLOPs / C) at the ceiling; the expected time prices it
as the pass's clocks do (``clocks.memory_seconds``, ``clocks.pass_compute``, the overlap of the
machine's efficiency), an attention row of a prefill at the attention's factor. The per-pass
overhead is not an operation's: it is left out of the rows. Summed, the rows' ceilings are at
least the pass's (each operation waits for its own slower clock, where the pass lets one
operation's arithmetic hide under another's bytes)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from rooflab.core.predict.clocks import combined_seconds, memory_seconds, pass_compute, prefill_rows
from rooflab.core.predict.ops import (
    ACTIVATION_BYTES,
    ATTENTION,
    DECODE,
    PREFILL,
    Operation,
    decode_operations,
    prefill_operations,
)
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload


@dataclass(frozen=True, slots=True, kw_only=True)
class TimedOperation:
    """One operation with its clocks: ``memory_seconds`` and ``compute_seconds`` at the
    machine's peaks, ``bound`` the slower of the two, ``seconds_ceiling`` the roofline's time,
    ``seconds_expected`` the calibrated machine's (None without a calibration), ``share`` of its
    phase's summed time (expected where there is one, else the ceiling's)."""

    op: Operation
    memory_seconds: float
    compute_seconds: float
    seconds_ceiling: float
    seconds_expected: float | None
    share: float

    @property
    def bound(self) -> str:
        return "compute" if self.compute_seconds > self.memory_seconds else "memory"

    @property
    def attained_flops(self) -> float:
        """FLOP/s the ceiling time implies: min(C, intensity x B) for this operation."""
        return self.op.flops / self.seconds_ceiling if self.seconds_ceiling > 0 else 0.0


def _seconds(machine: MachineProfile, workload: Workload, op: Operation) -> tuple[float, float, float]:
    """(memory clock, compute clock, combined) of one operation priced as its pass is."""
    mem = memory_seconds(machine, op.bytes)
    decode = op.phase == DECODE
    attention = op.flops if op.kind == ATTENTION and not decode else 0.0
    rows = None if decode else prefill_rows(workload, workload.prompt, workload.batch)
    comp, added = pass_compute(machine, workload, op.flops, batch=workload.batch if decode else None,
                               attention=attention, rows=rows)
    total = combined_seconds(mem, comp, machine.efficiency.overlap) + added
    return float(mem), float(comp + added), float(total)


def _phase_ops(spec: ModelSpec, workload: Workload, phase: str, eff: Efficiency,
               activation_bytes: float) -> tuple[Operation, ...]:
    if phase == PREFILL:
        return prefill_operations(spec, workload, activation_bytes=activation_bytes)
    return decode_operations(spec, workload, activation_bytes=activation_bytes, kv_read_factor=eff.kv_read_factor,
                             kv_chunks=eff.kv_chunks)


def timed_operations(spec: ModelSpec, machine: MachineProfile, workload: Workload, *,
                     expected: MachineProfile | None = None,
                     activation_bytes: float | None = None) -> tuple[TimedOperation, ...]:
    """The operations of the workload's prefill and decode step (``ops``), each on its clocks:
    at ``machine``'s peaks (its efficiency set aside) and, given ``expected`` (the machine as a
    calibration expects it, ``Expected.machine``), as expected. ``activation_bytes``: bytes of
    one activation value (None: ``ops.ACTIVATION_BYTES``)."""
    act = ACTIVATION_BYTES if activation_bytes is None else activation_bytes
    peak = dataclasses.replace(machine, efficiency=Efficiency())
    out: list[TimedOperation] = []
    for phase in (PREFILL, DECODE):
        ops = _phase_ops(spec, workload, phase, Efficiency(), act)
        ceiling = [_seconds(peak, workload, op) for op in ops]
        if expected is not None:
            priced = _phase_ops(spec, workload, phase, expected.efficiency, act)
            seconds: list[float | None] = [_seconds(expected, workload, op)[2] for op in priced]
        else:
            seconds = [None] * len(ops)
        basis = np.array([c[2] if s is None else s for c, s in zip(ceiling, seconds, strict=True)])
        total = float(basis.sum())
        for op, (mem, comp, ceil), exp, b in zip(ops, ceiling, seconds, basis, strict=True):
            out.append(TimedOperation(op=op, memory_seconds=mem, compute_seconds=comp, seconds_ceiling=ceil,
                                      seconds_expected=exp, share=float(b) / total if total > 0 else 0.0))
    return tuple(out)
