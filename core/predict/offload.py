"""Partial offload: weights split across a fast and a slow memory are each read at their own
memory's rate, so per-token time is a sum, not a max."""

from __future__ import annotations

from rooflab.core.errors import SpecError
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec


def offload_slowdown(fraction: float, ratio: float) -> float:
    """Slowdown against keeping all bytes on the fast memory when a share ``fraction`` of the
    bytes read sits on a memory ``ratio`` times slower: (1 - f) + f x r."""
    if not 0.0 <= fraction <= 1.0:
        raise SpecError(f"offload fraction must be in [0, 1], got {fraction!r}")
    if not ratio > 0:
        raise SpecError(f"offload bandwidth ratio must be > 0, got {ratio!r}")
    return (1.0 - fraction) + fraction * ratio


def split_seconds(fast_bytes: float, slow_bytes: float, fast_bandwidth: float,
                  slow_bandwidth: float) -> float:
    """Seconds per token for bytes split across two memories: W_fast / B_fast + W_slow / B_slow."""
    if fast_bandwidth <= 0 or (slow_bytes > 0 and slow_bandwidth <= 0):
        raise SpecError("offload: bandwidths must be > 0")
    slow = slow_bytes / slow_bandwidth if slow_bytes else 0.0
    return fast_bytes / fast_bandwidth + slow


def minimum_offload_fraction(spec: ModelSpec, machine: MachineProfile, resident_bytes: float) -> float:
    """Smallest share of the resident bytes that must leave the fast memory for the rest to fit
    (0 when everything fits). Raises when even both tiers together cannot hold it."""
    if resident_bytes <= machine.memory:
        return 0.0
    if resident_bytes > machine.memory + machine.offload_memory:
        raise SpecError(f"{spec.name} needs {resident_bytes / 1e9:.1f} GB; {machine.name} has "
                        f"{(machine.memory + machine.offload_memory) / 1e9:.1f} GB in both memories")
    return (resident_bytes - machine.memory) / resident_bytes
