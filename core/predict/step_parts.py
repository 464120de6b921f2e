"""Where a placed pass's time goes: the one split of a decode step (or a prompt's prefill) into
named parts, each in seconds and as a share of the pass, that sum to the pass's own seconds.

    t = GPU weights + GPU cache (or GPU arithmetic) + host weights + host cache (or host
        arithmetic) + PCIe streaming + round trips + link between devices + per-step overhead
        + routed-expert layers' fixed cost

Each part is read off the pass as ``offload`` priced it, never priced again:

- a side (the device's part, the host's) bound by its memory clock is split between its weights
  and its cache by their share of the bytes it reads; a side bound by its arithmetic is one
  part, its arithmetic (the bytes hide under it);
- of the host's seconds, those its weights spend crossing the PCIe host link in the ubatches
  llama.cpp streams to the GPU (``host_part.HostPass.link_seconds``) are the streaming part;
  the rest of a streamed ubatch (the weights' arithmetic on the GPU, attention over the host's
  cache) is the host's arithmetic;
- the GPU <-> host crossings (``offload_terms.crossing_seconds``, 0 in a ceiling) are the round
  trips, counted as ``crossings`` per graph pass x ``passes`` x ``CROSSING_SECONDS``; the rest
  of the communication is the hidden state's hops between devices;
- the efficiency's fixed seconds per step are the overhead, the part a model's routed-expert
  layers add (router, gather, the experts' kernels: ``Efficiency.expert_overhead``) apart.

Left out: any overlap between parts (the model adds them, so the split is exact), and which of
a memory-bound side's bytes wait on which (a proportional split of its seconds)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooflab.core.predict.clocks import Pass, decode_pass, prefill_pass
from rooflab.core.predict.host_part import HostPass
from rooflab.core.predict.offload import PlacedPass, placed_decode, placed_prefill
from rooflab.core.predict.offload_terms import CROSSING_SECONDS, crossings
from rooflab.core.predict.parallel import Parallel, ParallelPass, parallel_decode, parallel_prefill
from rooflab.core.predict.placement import Placement, memory_words, split
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec, Role
from rooflab.core.values.workload import Workload


@dataclass(frozen=True, slots=True, kw_only=True)
class StepPart:
    """One named part of a pass: ``key`` (stable, for JSON and tests), ``label`` (words for a
    person: "experts on the CPU") and its seconds."""

    key: str
    label: str
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StepParts:
    """A pass split into its parts (those that take any time), in the order they are told.
    ``seconds``: the pass as priced, which the parts sum to; ``crossings``: GPU <-> host
    crossings per graph pass; ``passes``: the graph passes whose crossings the round trips pay
    (a decode step: one; a prompt: its ubatches)."""

    phase: str                    # "decode" or "prefill"
    seconds: float
    parts: tuple[StepPart, ...]
    crossings: int = 0
    passes: float = 0.0

    def share(self, part: StepPart) -> float:
        """``part``'s share of the pass (0 to 1)."""
        return part.seconds / self.seconds if self.seconds > 0 else 0.0

    def seconds_of(self, key: str) -> float:
        """Seconds of the part ``key`` (0 when the pass has none)."""
        return sum(p.seconds for p in self.parts if p.key == key)


def _scalar(x: object) -> float:
    return float(np.asarray(x, dtype=np.float64).reshape(-1)[0])


def _side(p: Pass, seconds: float, where: str, weights: str) -> list[StepPart]:
    """A side's ``seconds``: weights and cache by their share of its bytes when its memory clock
    bounds it, else its arithmetic."""
    if seconds <= 0:
        return []
    w, c = _scalar(p.weight_bytes), _scalar(p.cache_bytes)
    if _scalar(p.compute_seconds) > _scalar(p.memory_seconds) or w + c <= 0:
        # the host's is told by what it computes ("arithmetic of the experts on the CPU"): its
        # decode unpacks and multiplies them, which a host's cores can bound before its DRAM
        label = f"arithmetic of the {weights}" if where == "host" else f"arithmetic {weights.split(' ', 1)[1]}"
        return [StepPart(key=f"{where}_arithmetic", label=label, seconds=seconds)]
    cached = seconds * c / (w + c)
    return [StepPart(key=f"{where}_weights", label=weights, seconds=seconds - cached),
            StepPart(key=f"{where}_cache", label=f"cache {weights.split(' ', 1)[1]}", seconds=cached)]


def _host_words(spec: ModelSpec, placement: Placement | None, host: str) -> str:
    """"experts on the CPU" when the host holds routed experts only, else "layers on the CPU"."""
    if placement is None:
        return f"weights {host}"
    sub = split(spec, placement).host.spec
    experts_only = sub is not None and all(t.role is Role.EXPERTS for t in sub.tensors
                                           if t.role is not Role.EMBEDDING)
    return f"experts {host}" if experts_only and spec.is_moe else f"layers {host}"


def step_parts(spec: ModelSpec, machine: MachineProfile, placement: Placement | None,
               p: PlacedPass | ParallelPass | Pass, *, phase: str) -> StepParts:
    """``p`` (one point: a decode step or a prefill, as ``offload.placed_decode`` /
    ``placed_prefill``, ``parallel.parallel_decode`` / ``parallel_prefill`` or ``clocks``
    priced it on ``machine``; ``placement``: where it stands, None on one memory or with the
    devices sharing every layer) split into its named parts."""
    device_word, host_word = memory_words(machine)
    overhead = machine.efficiency.step_overhead
    parts: list[StepPart] = []
    count, passes = 0, 0.0
    if isinstance(p, PlacedPass):
        several = placement is not None and placement.devices > 1
        parts += _side(p.device, _scalar(p.device.seconds), "device",
                       f"weights on the {placement.devices if placement else 1} devices" if several
                       else f"weights {device_word}")
        host = _scalar(p.host.seconds)
        streamed = _scalar(p.host.link_seconds) if isinstance(p.host, HostPass) else 0.0
        if streamed > 0:
            parts.append(StepPart(key="streaming", label="PCIe streaming of the host's weights", seconds=streamed))
            parts.append(StepPart(key="host_arithmetic", label="arithmetic of the host's weights and cache",
                                  seconds=max(host - streamed, 0.0)))
        else:
            parts += _side(p.host, host, "host", _host_words(spec, placement, host_word))
        trips = _scalar(p.round_trips)
        if trips > 0 and placement is not None:
            count = crossings(spec, placement)
            passes = trips / (count * CROSSING_SECONDS) if count else 0.0
            parts.append(StepPart(key="round_trips", label="round trips", seconds=trips))
        parts.append(StepPart(key="link", label="link between devices", seconds=_scalar(p.communication) - trips))
    elif isinstance(p, ParallelPass):
        parts += _side(p.device, _scalar(p.device.seconds), "device", "weights on each device")
        parts.append(StepPart(key="link", label="link between devices", seconds=_scalar(p.communication)))
    else:
        parts += _side(p, _scalar(p.seconds) - overhead, "device", f"weights {device_word}")
    experts = min(machine.efficiency.expert_overhead, overhead)
    parts.append(StepPart(key="overhead", label="per-step overhead", seconds=overhead - experts))
    parts.append(StepPart(key="expert_overhead", label="expert layers' overhead", seconds=experts))
    return StepParts(phase=phase, seconds=_scalar(p.seconds), parts=tuple(x for x in parts if x.seconds > 0),
                     crossings=count, passes=passes)


def decode_parts(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                 on: Placement | Parallel | None, *, context: float | None = None) -> StepParts:
    """One decode step of the workload's batch at ``context`` tokens (the workload's by
    default) on ``on`` (a placement across GPU and host, several devices sharing every layer,
    or one memory), split into its parts."""
    t = workload.context if context is None else context
    p: PlacedPass | ParallelPass | Pass
    if isinstance(on, Parallel):
        p, on = parallel_decode(spec, machine, workload, on, context=t), None
    elif on is not None:
        p = placed_decode(spec, machine, workload, on, context=t)
    else:
        p = decode_pass(spec, machine, workload, context=t)
    return step_parts(spec, machine, on, p, phase="decode")


def prefill_parts(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                  on: Placement | Parallel | None) -> StepParts:
    """The workload's prefill (its prompt for every sequence) on ``on``, split into its parts."""
    p: PlacedPass | ParallelPass | Pass
    if isinstance(on, Parallel):
        p, on = parallel_prefill(spec, machine, workload, on), None
    elif on is not None:
        p = placed_prefill(spec, machine, workload, on)
    else:
        p = prefill_pass(spec, machine, workload)
    return step_parts(spec, machine, on, p, phase="prefill")
