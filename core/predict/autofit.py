"""Auto-fit: the placement rooflab chooses when the user does not, the largest context and batch
a placement holds, and what to change when a model does not fit.

The search follows llama.cpp's fit (common/fit.cpp, ``common_params_fit_impl``):

- Each device's target is its free memory less a margin: the bill's reserve
  (``footprint.runtime_reserve``) is the back end's context, which is gone before llama.cpp reads
  what is free, and the search leaves ``--fit-target``'s 1 GiB free besides
  (``footprint.fit_margin``). The margin is the search's target only: a placement given by hand
  runs when its bill fits, margin or not, as llama.cpp runs it.
- It fits at the context llama.cpp allocates: the workload's length, as ``-c`` gives it, but
  never less than ``--fit-ctx``'s 4,096 tokens (``FIT_MIN_CONTEXT``; at most the trained
  context), the least llama.cpp shrinks an unset context to before it moves any layer (step 2).
- A dense model sheds whole layers (-ngl, step 3). A mixture of experts first moves the routed
  experts of one layer after another to the host with every layer on the device (steps 3-4:
  "dense-only" layers converted back to full ones until the device is full), then sheds whole
  layers with the experts of all but one device layer on the host. In both llama.cpp keeps one
  layer's experts on the device (its partial layers are the last n_part of the device's
  n_layer, the output among them: n_part - 1 real ones), so at most L - 1 layers' experts move.
- Having moved experts, it tries to fit part of one more layer (step 4): of the last layer whose
  experts left, its up projections ("up"), then also its gate projections ("gate"); when not
  even "up" fits, that layer's whole feed-forward block goes ("attn"). See
  ``placement.Placement.partial``. Its test is strict (used < target), as llama.cpp's is.

The first placement on that path that fits is the fastest one on it, since every step puts more
of each token's bytes on the slower memory. The path's device bill falls and its host bill
grows step by step, so a bisection finds it (llama.cpp's false-position search finds the same
last placement that fits).

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

from rooflab.core.predict.footprint import MemoryPlan, compute_buffer_bytes, fit_margin, plan_memory, runtime_reserve
from rooflab.core.predict.layer_split import layer_units
from rooflab.core.predict.placement import Placement, describe, has_host_tier, input_on_host
from rooflab.core.predict.work import kv_bytes_held, padded
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.quant import KV_TYPES, kv_bytes_per_value
from rooflab.core.values.readable import byte_text
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS, Workload

FIT_MIN_CONTEXT = 4096        # llama.cpp's --fit-ctx default (common.h fit_params_min_ctx)


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
        paged = self.memory.host.paged
        tail = f" ({byte_text(paged)} of its host weights paged from disk: mmap)" if paged > 0 else ""
        return f"fits with {describe(spec, self.placement, machine)}{tail}"


def shortfall(plan: MemoryPlan) -> str:
    """What overflows, in words: "needs 64.5 GB of 25.8 GB on NVIDIA ... and 4.9 GB of 64 GB on host"
    (amounts as every front end reads them: ``values.readable.byte_text``, "102 TB" not "102,395.7 GB")."""
    parts = []
    for use in (plan.device, plan.host):
        if use.used > 0 and (not use.fits or use is plan.device):
            parts.append(f"{byte_text(use.used)} of {byte_text(use.capacity)} on {use.name}")
    return "needs " + " and ".join(parts)


def placement_path(spec: ModelSpec, machine: MachineProfile, *, cpu_moe: int | None = None,
                   kv_on_device: bool = True, devices: int = 1) -> list[Placement]:
    """Placements from fastest to slowest, as llama.cpp's fit walks them: all on the device;
    (MoE) the experts of layers 0..k-1 on the host, k = 1..L - 1; then fewer layers on the
    device (-ngl L, ..., 0), the experts of all device layers but one on the host (see the
    module docstring). Only the first without a host tier. ``cpu_moe`` given: the experts of
    exactly that many layers stay on the host and only -ngl walks (L + 1, ..., 0);
    ``kv_on_device``: where every placement on the path keeps the cache; ``devices``: how many
    identical devices share the device's layers."""
    kv, n = kv_on_device, devices
    top = spec.layers + 1
    fixed = None if cpu_moe is None else Placement(gpu_layers=top, cpu_moe=cpu_moe).clamp(spec).cpu_moe
    if not has_host_tier(machine):
        return [Placement(gpu_layers=top, cpu_moe=fixed or 0, kv_on_device=kv, devices=n)]
    if fixed is not None:
        return [Placement(gpu_layers=g, cpu_moe=fixed, kv_on_device=kv, devices=n) for g in range(top, -1, -1)]
    experts = max(spec.layers - 1, 0) if spec.is_moe else 0
    path = [Placement(gpu_layers=top, cpu_moe=k, kv_on_device=kv, devices=n) for k in range(experts + 1)]
    path += [Placement(gpu_layers=g, cpu_moe=experts, kv_on_device=kv, devices=n) for g in range(top - 1, -1, -1)]
    return path


def fit_context(spec: ModelSpec, workload: Workload) -> int:
    """Tokens per sequence llama.cpp's fit allocates for the workload: its length (context +
    prompt + answer, as ``-c``), at least ``FIT_MIN_CONTEXT`` (at most the trained context)."""
    length = workload.context + workload.prompt + workload.answer
    floor = min(FIT_MIN_CONTEXT, spec.context_length) if spec.context_length else FIT_MIN_CONTEXT
    return max(length, floor)


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
                  cpu_moe: int | None = None, kv_on_device: bool = True, devices: int = 1) -> Fit:
    """The fastest placement on ``placement_path`` whose device bill fits, for sequences of
    ``context_length`` tokens (default: ``fit_context``) at ``batch``, with llama.cpp's partial
    layer when it moved experts; ``cpu_moe`` (None: fitted) and ``kv_on_device`` are the
    user's flags it keeps (see the module docstring). Its bill is for the workload's own
    length (context + prompt + answer), as a placement given by hand is billed. On several
    ``devices`` each placement's layers are split evenly when that fits, else as llama.cpp's
    fit fills the devices in turn (``fill_split``, its -ts)."""
    path = placement_path(spec, machine, cpu_moe=cpu_moe, kv_on_device=kv_on_device, devices=devices)
    # a dense model has no experts to keep: --n-cpu-moe given changes nothing there
    kept = " ".join(([f"--n-cpu-moe {path[0].cpu_moe}"] if cpu_moe is not None and spec.is_moe else [])
                    + ([] if kv_on_device else ["--no-kv-offload"]))
    length = fit_context(spec, workload) if context_length is None else context_length

    def bill(p: Placement) -> MemoryPlan:
        return plan_memory(spec, machine, workload, p, context_length=length, batch=batch)

    margin = fit_margin(machine)

    def placed(p: Placement) -> Placement | None:
        """``p`` as it fits its devices (split evenly, else filled in turn) leaving llama.cpp's
        margin free on each, None when it does not."""
        if bill(p).device.free >= margin:
            return p
        if p.devices == 1:
            return None
        counts = fill_split(spec, machine, workload, p, context_length=length, batch=batch)
        return None if counts is None else dataclasses.replace(p, tensor_split=counts)

    i = min(first_true(len(path), lambda j: placed(path[j]) is not None), len(path) - 1)
    chosen = placed(path[i]) or path[i]
    if cpu_moe is None and i > 0 and chosen.gpu_layers == spec.layers + 1 and chosen.cpu_moe >= 1 \
            and devices == 1:
        chosen = _with_partial_layer(chosen, bill, margin)
    # past the end: not even -ngl 0 leaves the device enough room, the path's end comes closest;
    # otherwise it fits unless the host overflows
    if context_length is None:
        plan = plan_memory(spec, machine, workload, chosen, batch=batch)
    else:
        plan = bill(chosen)
    return Fit(placement=chosen, memory=plan, chosen=True, kept=kept)


def fill_split(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement, *,
               context_length: int | None = None, batch: int | None = None) -> tuple[int, ...] | None:
    """llama.cpp's fit's -ts: the device's layers (``layer_split.layer_units``: weights and KV
    held, the output with the last) packed in order onto ``placement.devices`` devices, each up
    to its room (capacity less the reserve, the fit's margin and a compute buffer); layers per device, None when
    they do not all fit."""
    length = workload.context + workload.prompt + workload.answer if context_length is None else context_length
    b = workload.batch if batch is None else batch
    room = machine.memory - runtime_reserve(machine) - fit_margin(machine) - float(
        compute_buffer_bytes(spec, workload.ubatch, b * padded(length), attention_scores=not workload.flash_attention))
    counts = [0] * placement.devices
    device, held = 0, 0.0
    for unit in layer_units(spec, placement, embedding_on_host=input_on_host(machine)):
        size = unit.weight_bytes + (b * float(kv_bytes_held(unit.spec, length, workload.kv_type, workload.ubatch))
                                    if unit.spec is not None else 0.0)
        while held + size > room:
            device, held = device + 1, 0.0
            if device == placement.devices:
                return None
        counts[device] += 1
        held += size
    return tuple(counts)


def _with_partial_layer(chosen: Placement, bill: Callable[[Placement], MemoryPlan], margin: float) -> Placement:
    """llama.cpp's "try to fit at least part of one more layer": ``chosen`` with layer
    cpu_moe - 1 keeping its up projections, then its gate ones too, on the device when that
    leaves the device below its target (strictly: more than ``margin`` free); when not even the
    up projections fit, that layer's whole feed-forward block on the host (common/fit.cpp, step 4)."""
    up = dataclasses.replace(chosen, partial="up")
    if bill(up).device.free > margin:
        gate = dataclasses.replace(chosen, partial="gate")
        return gate if bill(gate).device.free > margin else up
    attn = dataclasses.replace(chosen, partial="attn")
    return attn if bill(attn).device.free > margin else chosen


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
            out.append(f"{name} weights ({byte_text(other_spec.weight_bytes)}) fit with "
                       f"{describe(other_spec, other.placement, machine)}")
    return tuple(out)


def _on_device(fit: Fit) -> float:
    """Share of the weight bytes a fit keeps on the device (ranks two fits)."""
    s = fit.memory.split
    return s.device.weight_bytes / max(s.device.weight_bytes + s.host.weight_bytes, 1.0)

