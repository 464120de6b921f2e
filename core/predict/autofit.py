"""Auto-fit: the placement rooflab chooses when the user does not, the largest context and batch
a placement holds, and what to change when a model does not fit.

The search follows llama.cpp's fit (``--fit``, ggml-org/llama.cpp#16653): keep every layer on
the device if the bill allows; for a mixture of experts, then move the routed experts of the
first layers to the host one layer at a time (``--n-cpu-moe``: they are most of the bytes and
each token reads few of them), and only then move whole layers (``-ngl``). The first
placement on that path that fits is the fastest one on it, since every step puts more of
each token's bytes on the slower memory. The path's device bill falls and its host bill grows
step by step, so a bisection finds it.

A flag the user sets is kept and only the others are fitted around it, as llama.cpp's fit
leaves a value the user set alone: ``--no-kv-offload`` fixes the cache's place and the path
is walked with it there; ``--n-cpu-moe N`` fixes the experts on the host at exactly N (not
"at least N": no more experts move) and only -ngl is walked, L + 1 down to 0. (llama.cpp
itself does not fit at all once --n-cpu-moe is given: it sets tensor overrides, and its fit
stops there, loading every layer on the device; rooflab fits -ngl around it instead and shows
the -ngl it chose in the flags.) A -ngl the user sets is never fitted: see ``choose``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rooflab.core.predict.footprint import MemoryPlan, plan_memory
from rooflab.core.predict.placement import Placement, describe, has_host_tier
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.quant import KV_TYPES, kv_bytes_per_value
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS, Workload

GB = 1e9


@dataclass(frozen=True, slots=True, kw_only=True)
class Fit:
    """A placement and its memory bill: ``chosen`` when rooflab picked -ngl (auto-fit), False
    when the user set it; ``kept``: the user's flags a chosen fit was fitted around, in
    llama.cpp's spelling ("--n-cpu-moe 10 --no-kv-offload"; "" when rooflab chose it all).
    When nothing fits, ``placement`` is the one that came closest (the path's end: least on
    the device) and ``fits`` is False."""

    placement: Placement
    memory: MemoryPlan
    chosen: bool
    kept: str = ""

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def describe(self, spec: ModelSpec, machine: MachineProfile | None = None) -> str:
        """"fits with all 37 layers on the GPU, ..." or "does NOT fit: ..." in one line."""
        if not self.fits:
            return f"does NOT fit: {shortfall(self.memory)}"
        return f"fits with {describe(spec, self.placement, machine)}"


def shortfall(plan: MemoryPlan) -> str:
    """What overflows, in words: "needs 64.5 GB of 25.8 GB on NVIDIA ... and 4.9 GB of 64.0 GB on host"."""
    parts = []
    for use in (plan.device, plan.host):
        if use.used > 0 and (not use.fits or use is plan.device):
            parts.append(f"{use.used / GB:,.1f} GB of {use.capacity / GB:,.1f} GB on {use.name}")
    return "needs " + " and ".join(parts)


def placement_path(spec: ModelSpec, machine: MachineProfile, *, cpu_moe: int | None = None,
                   kv_on_device: bool = True) -> list[Placement]:
    """Placements from fastest to slowest, as llama.cpp's fit walks them: all on the device;
    (MoE) the experts of layers 0..k-1 on the host, k = 1..L; then fewer layers on the device
    (-ngl L, ..., 0). Only the first without a host tier. ``cpu_moe`` given: the experts of
    exactly that many layers stay on the host and only -ngl walks (L + 1, ..., 0);
    ``kv_on_device``: where every placement on the path keeps the cache."""
    kv = kv_on_device
    top = spec.layers + 1
    fixed = None if cpu_moe is None else Placement(gpu_layers=top, cpu_moe=cpu_moe).clamp(spec).cpu_moe
    if not has_host_tier(machine):
        return [Placement(gpu_layers=top, cpu_moe=fixed or 0, kv_on_device=kv)]
    if fixed is not None:
        return [Placement(gpu_layers=g, cpu_moe=fixed, kv_on_device=kv) for g in range(top, -1, -1)]
    experts = spec.layers if spec.is_moe else 0
    path = [Placement(gpu_layers=top, cpu_moe=k, kv_on_device=kv) for k in range(experts + 1)]
    path += [Placement(gpu_layers=g, cpu_moe=experts, kv_on_device=kv) for g in range(top - 1, -1, -1)]
    return path


def first_true(count: int, ok: Callable[[int], bool]) -> int:
    """Smallest i in [0, count) with ok(i), ``ok`` monotone (False then True); count if none."""
    low, high = 0, count
    while low < high:
        mid = (low + high) // 2
        if ok(mid):
            high = mid
        else:
            low = mid + 1
    return low


def fit_placement(spec: ModelSpec, machine: MachineProfile, workload: Workload, *,
                  context_length: int | None = None, batch: int | None = None,
                  cpu_moe: int | None = None, kv_on_device: bool = True) -> Fit:
    """The fastest placement on ``placement_path`` whose bill fits both memories, for sequences of
    ``context_length`` tokens (default: context + prompt + answer) at ``batch``; ``cpu_moe``
    (None: fitted) and ``kv_on_device`` are the user's flags it keeps (see the module docstring)."""
    path = placement_path(spec, machine, cpu_moe=cpu_moe, kv_on_device=kv_on_device)
    # a dense model has no experts to keep: --n-cpu-moe given changes nothing there
    kept = " ".join(([f"--n-cpu-moe {path[0].cpu_moe}"] if cpu_moe is not None and spec.is_moe else [])
                    + ([] if kv_on_device else ["--no-kv-offload"]))

    def bill(i: int) -> MemoryPlan:
        return plan_memory(spec, machine, workload, path[i], context_length=context_length, batch=batch)

    i = min(first_true(len(path), lambda j: bill(j).device.fits), len(path) - 1)
    # past the end: not even -ngl 0 leaves the device enough room, the path's end comes closest;
    # otherwise it fits unless the host overflows
    return Fit(placement=path[i], memory=bill(i), chosen=True, kept=kept)


def choose(spec: ModelSpec, machine: MachineProfile, workload: Workload,
           placement: Placement | Fit | None = None) -> Fit:
    """The user's ``placement`` with its bill, or, when None, ``fit_placement``'s choice; a
    ``Fit`` already made (``PlacementChoice.fit``: -ngl fitted around the user's other flags)
    as it is."""
    if isinstance(placement, Fit):
        return placement
    if placement is None:
        return fit_placement(spec, machine, workload)
    clamped = placement.clamp(spec)
    return Fit(placement=clamped, memory=plan_memory(spec, machine, workload, clamped), chosen=False)


def placement_for_offload(spec: ModelSpec, machine: MachineProfile, fraction: float) -> Placement:
    """The -ngl whose host share of the weight bytes is nearest ``fraction`` (the workload's old
    ``offload_fraction``, a share of the bytes, in llama.cpp's layers)."""
    full = Placement.all_on_device(spec)
    if fraction <= 0 or not has_host_tier(machine):
        return full
    w = Workload()
    best, gap = full, 2.0
    for g in range(full.gpu_layers, -1, -1):
        p = Placement(gpu_layers=g)
        s = plan_memory(spec, machine, w, p).split
        share = s.host.weight_bytes / max(s.host.weight_bytes + s.device.weight_bytes, 1.0)
        if abs(share - fraction) < gap:
            best, gap = p, abs(share - fraction)
    return best


def largest_context(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement,
                    batch: int | None = None) -> int:
    """Most tokens per sequence (context + prompt + answer) that ``placement`` holds at ``batch``
    (the workload's), up to the trained context (16M when unknown); 0 when none fits."""
    cap = spec.context_length or MAX_TOKENS

    def fits(length: int) -> bool:
        return plan_memory(spec, machine, workload, placement, context_length=length, batch=batch).fits

    if not fits(1):
        return 0
    return first_true(cap, lambda n: not fits(n + 1))  # the last length that fits: cap when all do


def largest_batch(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement,
                  context_length: int | None = None) -> int:
    """Most sequences of ``context_length`` tokens (default context + prompt + answer) that
    ``placement`` holds, up to 65,536; 0 when not even one fits."""

    def fits(b: int) -> bool:
        return plan_memory(spec, machine, workload, placement, context_length=context_length, batch=b).fits

    if not fits(1):
        return 0
    return first_true(MAX_BATCH, lambda b: not fits(b + 1))


SUGGESTED_KV_TYPES: tuple[str, ...] = ("q8_0", "q4_0")     # the cache types llama.cpp users pick


def _smaller_kv_types(kv_type: str) -> list[str]:
    """Of ``SUGGESTED_KV_TYPES``, those with fewer bytes per value than ``kv_type``, largest first."""
    own = kv_bytes_per_value(kv_type)
    return [k for k in SUGGESTED_KV_TYPES if k in KV_TYPES and kv_bytes_per_value(k) < own]


def suggestions(spec: ModelSpec, machine: MachineProfile, workload: Workload, fit: Fit,
                alternatives: Mapping[str, ModelSpec] | None = None) -> tuple[str, ...]:
    """What to change so the model fits, or fits with more of it on the device: the placement
    auto-fit finds (for a hand-set one, or one fitted around the user's flags, that does not
    fit), a smaller cache type, a shorter context or smaller batch, and any of
    ``alternatives`` (weight format -> model, e.g. the same catalogue model at q4_k_m) that
    fits better. Empty when all is on the device."""
    full = Placement.all_on_device(spec)
    if fit.fits and fit.placement == full:
        return ()
    out: list[str] = []
    free = fit.chosen and not fit.kept              # rooflab chose it all: it is auto-fit's own
    auto = fit if free else fit_placement(spec, machine, workload)
    if not free and not fit.fits and auto.fits:
        out.append(f"put {describe(spec, auto.placement, machine)} ({auto.placement.flags()})")
    elif fit.kept and auto.fits and _on_device(auto) > _on_device(fit):
        # fitted around the user's flags: auto-fit without them keeps more on the device
        out.append(f"without {fit.kept}, auto-fit puts {describe(spec, auto.placement, machine)} "
                   f"({auto.placement.flags()})")
    elif not fit.fits:
        out.append("no placement fits: less context, a smaller batch, a smaller cache type or smaller "
                   "weights")
    for kv in _smaller_kv_types(workload.kv_type)[:2]:
        other = fit_placement(spec, machine, dataclasses.replace(workload, kv_type=kv))
        if other.fits and (not auto.fits or _on_device(other) > _on_device(auto)):
            out.append(f"a {kv} cache (--kv-type {kv}) fits with {describe(spec, other.placement, machine)}")
            break
    if not auto.fits:
        length = largest_context(spec, machine, workload, auto.placement)
        if length:
            out.append(f"at most {length:,} tokens per sequence fit with {describe(spec, auto.placement, machine)}")
        elif workload.batch > 1 and largest_batch(spec, machine, workload, auto.placement):
            out.append(f"a batch of {largest_batch(spec, machine, workload, auto.placement):,} fits")
    for name, other_spec in (alternatives or {}).items():
        other = fit_placement(other_spec, machine, workload)
        if other.fits and (not auto.fits or _on_device(other) > _on_device(auto)):
            out.append(f"{name} weights ({other_spec.weight_bytes / GB:,.1f} GB) fit with "
                       f"{describe(other_spec, other.placement, machine)}")
    return tuple(out)


def _on_device(fit: Fit) -> float:
    """Share of the weight bytes a fit keeps on the device (ranks two fits)."""
    s = fit.memory.split
    return s.device.weight_bytes / max(s.device.weight_bytes + s.host.weight_bytes, 1.0)

