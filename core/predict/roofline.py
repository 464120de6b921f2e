"""The roofline: attainable FLOP/s = min(C, intensity x B), and where each phase sits on it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict.clocks import Clocked, decode_pass, prefill_pass
from rooflab.core.predict.offload import placed_decode, placed_prefill
from rooflab.core.predict.placement import Placement
from rooflab.core.predict.work import Array
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload


def attainable(intensity: ArrayLike, peak_flops: float, bandwidth: float) -> Array:
    """Attainable FLOP/s at ``intensity`` FLOP/byte: min(peak, intensity x bandwidth)."""
    return np.minimum(peak_flops, np.asarray(intensity, dtype=np.float64) * bandwidth)


def balance(machine: MachineProfile, dtype: str | None = None) -> float:
    """The balance point C / B, FLOP/byte, at ``dtype`` (the machine's default when None): the
    intensity where the roof turns from memory- to compute-bound. Peak figures, efficiency
    left out."""
    return machine.flops(dtype) / machine.bandwidth


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflinePoint:
    label: str
    intensity: float              # FLOP/byte
    achieved: float               # FLOP/s the predicted time implies
    attainable: float             # FLOP/s the roof allows at this intensity
    bound: str


def _point(label: str, p: Clocked, machine: MachineProfile, dtype: str | None) -> RooflinePoint:
    intensity = float(p.intensity)
    roof = float(attainable(intensity, machine.flops(dtype), machine.bandwidth))
    return RooflinePoint(label=label, intensity=intensity, achieved=float(p.flops / p.seconds),
                         attainable=roof, bound=str(p.bound()))


def phase_points(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                 placement: Placement | None = None) -> tuple[RooflinePoint, ...]:
    """Prefill at the workload's prompt and decode at its batch and context, on the roofline.

    A phase's intensity is its FLOPs over the bytes it moves: a batch-1 decode step with no
    cache sits at 2 x N / W, 1.0 at FP16 and 3.56 at 4.5 bits per weight (activations left out).
    ``placement``: each phase as placed (both parts' FLOPs over both parts' bytes, achieved
    over the placed time), which sits below the device's roof by the host's share."""
    t = workload.context + workload.prompt
    if placement is None:
        pre: Clocked = prefill_pass(spec, machine, workload)
        dec: Clocked = decode_pass(spec, machine, workload, context=t)
        names = (f"prefill {workload.prompt} tok", f"decode batch {workload.batch}")
    else:
        pre = placed_prefill(spec, machine, workload, placement)
        dec = placed_decode(spec, machine, workload, placement, context=t)
        names = (f"prefill {workload.prompt} tok, as placed", f"decode batch {workload.batch}, as placed")
    return (_point(names[0], pre, machine, workload.compute_dtype),
            _point(names[1], dec, machine, workload.compute_dtype))
