"""Several identical devices sharing the device's layers, as llama.cpp's layer split (``-sm
layer``, its default) places them, with whatever does not fit left in host memory.

llama.cpp gives each device a contiguous run of the device's layers (llama-model.cpp,
``load_tensors``): layer il of the device's act = -ngl layers (the output last) goes to the
first device whose cumulative share of the split passes (il - start) / act. The split is ``-ts``
(here ``Placement.tensor_split``, layers per device); without one, llama.cpp splits by each
device's free memory, evenly for identical devices. Its fit (common/fit.cpp) sets ``-ts`` to the
layers it managed to fill each device with, front to back: ``fill_split`` packs the layers in
order, each device up to its bill's capacity, the output with the last.

The devices run their layers in turn, each reading its share at its own bandwidth, so the
device part's clocks are one device's with all of them (``offload``), plus the hidden state's
hop from one device to the next (``parallel.hop_seconds``). A decode step stays that sequence.

A prompt of several ubatches is pipelined (llama-context.cpp, ``pipeline_parallel``): while
device 2 runs ubatch 1 through its layers, device 1 starts ubatch 2. llama.cpp turns this on
only with more than one device, every layer and the output on them (-ngl above the layer
count), split mode layer, the cache on the devices and no tensor override (``--n-cpu-moe`` is
one). With k ubatches (n / -ub, the last one a fraction) over N devices whose stage is s = one
device's share of a ubatch (T / (k N), T the sequential time), the pipeline fills in N stages
and then delivers a ubatch every max(1, N / c) stages, c = 4 ubatches in flight
(``GGML_SCHED_MAX_COPIES``, ggml-backend.cpp: the scheduler keeps that many copies of a
split's inputs):

    t = s x (N + (k - 1) x max(1, N / c)) = T x (N + (k - 1) max(1, N / c)) / (k N)

One ubatch (k = 1) gains nothing; many ubatches on up to 4 devices approach N times faster.
The hidden state's hops ride in the stages and scale alike. An expected figure keeps
``pipeline_kept(N)`` of the saving, more of it the more devices (published runs fall between no
pipeline and the ideal one); a ceiling keeps all of it. Left out: llama.cpp's fit filling
a device's last layer in part with overflow to the next device (one device only here), and
uneven stages (the device with the output layer does a little more)."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict.placement import Part, Placement, device_layer_start, split, sub_spec
from rooflab.core.predict.work import Array
from rooflab.core.values.model import ModelSpec, Tensor

SCHED_COPIES = 4          # ubatches in flight in a pipelined prefill (ggml's GGML_SCHED_MAX_COPIES)
# Share of the ideal pipeline's saving an expected figure keeps, 1 - exp(-(N - 1) / PIPELINE_DEVICES)
# over N devices (``pipeline_kept``): stages are uneven (the output's device does more) and each
# waits for its copy of the hidden state and the scheduler's events. Published runs of one model at
# pp512 (one ubatch: no pipeline) and pp4096-8192 on the same devices isolate the saving from the
# devices' own speed: with the published fit as it stood before 2026-12-07's refit, two devices kept
# about a quarter of the ideal saving, four about 0.6, six and eight 0.75-0.8, so one share for every
# count (0.6, before) put two devices' prompts 20 % too fast and eight's 20 % too slow; with 6.0,
# two keep 0.15, four 0.39, eight 0.69. Fitted by benchmarks/accuracy/bench_offload_accuracy.py on the published
# layer-split runs (none of them fitted elsewhere), each machine weighing one: 3.5, then 6.0 once the
# published fit was refitted on the rows added on 2026-12-07 (its long-prompt rates moved); 2.5 once
# a placement's device part priced its prompt's attention at the attention's own factor, as one
# device does (2026-12-07, second session: the long prompts' rates moved again).
PIPELINE_DEVICES = 2.5


def pipeline_kept(devices: int) -> float:
    """The share of the ideal pipeline's saving an expected figure keeps over ``devices``
    devices: 1 - exp(-(N - 1) / ``PIPELINE_DEVICES``), 0 for one device."""
    return 1.0 - math.exp(-max(0, devices - 1) / PIPELINE_DEVICES)


def pipelines(spec: ModelSpec, placement: Placement) -> bool:
    """Whether llama.cpp pipelines a prompt's ubatches across ``placement``'s devices: several
    devices holding every layer and the output, the cache with them, no tensor override
    (``--n-cpu-moe`` and a partial layer are overrides)."""
    p = placement.clamp(spec)
    return (p.devices > 1 and p.gpu_layers > spec.layers and p.kv_on_device and not p.cpu_moe
            and not p.partial)


def pipeline_share(tokens: ArrayLike, ubatch: int, devices: int, kept: float = 1.0) -> Array:
    """The share of its sequential time a prefill of ``tokens`` tokens (all sequences) takes
    when llama.cpp pipelines its ubatches of ``ubatch`` over ``devices`` devices in a layer
    split: (N + (k - 1) max(1, N / c)) / (k N), k = max(1, tokens / ubatch) (module docstring);
    1 on one device or for one ubatch. ``kept``: the share of that ideal saving the figure keeps,
    1 - kept x (1 - ideal) (a ceiling 1; an expected figure ``pipeline_kept``)."""
    k = np.maximum(1.0, np.asarray(tokens, dtype=np.float64) / float(ubatch))
    n = float(devices)
    if devices <= 1:
        return np.ones_like(k)
    ideal = (n + (k - 1.0) * max(1.0, n / SCHED_COPIES)) / (k * n)
    return 1.0 - kept * (1.0 - ideal)


def device_of_layers(spec: ModelSpec, placement: Placement) -> list[int]:
    """The device (0..N-1) holding each of layers start..L (L: the output) of the device part,
    by llama.cpp's rule (see the module docstring)."""
    p = placement.clamp(spec)
    start = device_layer_start(spec, p)
    act = spec.layers + 1 - start
    counts = p.tensor_split or (1,) * p.devices
    cuts = np.cumsum(counts, dtype=np.float64) / float(sum(counts))
    owners = []
    for il in range(start, spec.layers + 1):
        where = int(np.searchsorted(cuts, (il - start) / act, side="right"))
        owners.append(min(where, p.devices - 1))
    return owners


def device_parts(spec: ModelSpec, placement: Placement, *, embedding_on_host: bool = True) -> tuple[Part, ...]:
    """What each of the placement's devices holds: the device ``Part`` of ``placement.split``
    cut by layer (one part when there is one device). Cached per (spec, placement)."""
    return _device_parts(spec, placement.clamp(spec), embedding_on_host)


@lru_cache(maxsize=256)
def _device_parts(spec: ModelSpec, placement: Placement, embedding_on_host: bool) -> tuple[Part, ...]:
    whole = split(spec, placement, embedding_on_host=embedding_on_host).device
    if placement.devices == 1:
        return (whole,)
    start = device_layer_start(spec, placement)
    owner = dict(zip(range(start, spec.layers + 1), device_of_layers(spec, placement), strict=True))
    return _cut(spec, placement, whole, owner, placement.devices)


def _cut(spec: ModelSpec, placement: Placement, whole: Part, owner: dict[int, int], count: int) -> tuple[Part, ...]:
    """``whole`` (the device part) cut into ``count`` parts, layer il (L: the output, with the
    head, the output norm and any extra layers) to part ``owner[il]``."""
    n, start = spec.layers, device_layer_start(spec, placement)
    tensors: list[list[Tensor]] = [[] for _ in range(count)]
    for t in whole.spec.tensors if whole.spec is not None else ():
        il = t.layer if t.layer is not None and start <= t.layer < n else n
        tensors[owner[il]].append(t)
    parts = []
    for d in range(count):
        layers = [il for il in range(start, n) if owner[il] == d]
        kv = layers if placement.kv_on_device else []
        experts = sum(1 for il in layers if il >= placement.cpu_moe) if spec.is_moe else 0
        parts.append(Part(spec=sub_spec(spec, tensors[d], kv), embedding_rows=d == 0,
                          embedding_bytes=whole.embedding_bytes if d == 0 else 0.0, layers=len(layers),
                          expert_layers=experts, output=whole.output and owner[n] == d))
    return tuple(parts)


def layer_units(spec: ModelSpec, placement: Placement, *, embedding_on_host: bool = True) -> tuple[Part, ...]:
    """The device part one layer at a time (layers start..L - 1, then the output and what goes
    with it): the units ``fill_split`` packs. Cached per (spec, placement)."""
    return _layer_units(spec, placement.clamp(spec), embedding_on_host)


@lru_cache(maxsize=256)
def _layer_units(spec: ModelSpec, placement: Placement, embedding_on_host: bool) -> tuple[Part, ...]:
    whole = split(spec, placement, embedding_on_host=embedding_on_host).device
    start = device_layer_start(spec, placement)
    owner = {il: il - start for il in range(start, spec.layers + 1)}
    return _cut(spec, placement, whole, owner, len(owner))
