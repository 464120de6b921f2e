"""The charts of what fits: Batching (rates, memory and experts against the batch) and Memory
(each memory's bill at the chosen length, and how it grows with the context), standing where
the headline does (``passes.On``): several devices draw each device's bill, a placement its
device(s) and host memory, each against its own size."""

from __future__ import annotations

import math

import numpy as np

from rooflab.core.predict.batching import (
    batch_crossover,
    batch_sweep,
    cache_resident,
    max_batch_that_fits,
    memory_resident,
)
from rooflab.core.predict.footprint import MemoryUse, memory_grid
from rooflab.core.predict.offload import placed_batch_crossover, placed_batch_sweep
from rooflab.core.predict.parallel import Parallel, device_memory
from rooflab.core.predict.passes import On, bills_on, crossovers_on, decode_on, experts_touched, largest_batch_on
from rooflab.core.predict.placement import Placement, memory_words
from rooflab.core.predict.work import Array
from rooflab.core.report.chart_parts import (
    BATCHING,
    CHART_TITLES,
    MEMORY,
    Axes,
    axes,
    context_range,
    finite_or,
    log_tokens,
    pts,
    x_marker,
    y_marker,
)
from rooflab.core.report.chart_types import Chart, Curve, Panel, Scenario
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import MAX_BATCH


def _held(m: MachineProfile, on: On, x: Array, device: Array, host: Array, ax: Axes) -> tuple[Curve, ...]:
    """Each memory's bill against its own size: the device's (on several devices, the fullest
    one's), and the host's when the placement keeps anything there."""
    device_word, host_word = memory_words(m)
    if isinstance(on, Parallel):
        device_word = f"on each of {on.devices} devices"
    elif isinstance(on, Placement) and on.devices > 1:
        device_word = f"on the fullest of {on.devices} devices"
    held = "weights + batch × cache" if on is None else f"held {device_word}, as placed"
    curves: tuple[Curve, ...] = (Curve(key="resident", label=held, x=x, y=device, **ax),
                                 y_marker("capacity", f"{m.name} memory", m.memory, "memory", "B"))
    if float(np.max(host)) > 0:
        curves += (Curve(key="resident_host", label=f"held {host_word}, as placed", x=x, y=host, role="secondary",
                         **ax),
                   y_marker("capacity_host", m.offload_name or "host memory", m.offload_memory, "memory", "B"))
    return curves


def _memory_at(sc: Scenario, on: On, lengths: Array, batches: Array) -> tuple[Array, Array]:
    """(device bytes, host bytes) over ``lengths`` x ``batches`` (broadcast) where the model stands."""
    spec, m, w = sc.model, sc.machine, sc.workload
    shape = np.broadcast(lengths, batches).shape
    if on is None:
        return np.broadcast_to(memory_resident(spec, lengths, batches, w.kv_type), shape), np.zeros(shape)
    if isinstance(on, Parallel):
        pairs = np.broadcast_arrays(lengths, batches)
        used = [device_memory(spec, m, w, on, length=int(n), batch=int(b)).used
                for n, b in zip(pairs[0].ravel(), pairs[1].ravel(), strict=True)]
        return np.reshape(np.array(used, dtype=np.float64), shape), np.zeros(shape)
    device, host, _fits = memory_grid(spec, m, w, on, lengths, batches)
    return np.broadcast_to(device, shape), np.broadcast_to(host, shape)


def crossover_label(cross: float, fits: int) -> str:
    """"compute crossover", or "crossover, beyond what fits" when no batch that runs reaches it
    (short: the label sits beside a line near the chart's edge)."""
    return "crossover, beyond what fits" if 0 < fits < cross else "compute crossover"


def batching_chart(sc: Scenario, placement: On = None, *, crossover: float | None = None,
                   largest: int | None = None) -> Chart:
    """Decode at batch b for sequences starting at context + prompt: per-sequence and total
    tokens/s, memory resident for full-length sequences against the machine, experts touched.
    ``placement``: where the headline stands (``passes.On``); the rates, the crossover and the
    largest batch are then the placement's or the devices', and memory is each memory's bill
    (weights placed there, KV, compute buffer, reserve; each device's on several) against its
    capacity. ``crossover``, ``largest``: those two limits when the caller has them
    (``Summary``'s ``headline_*``), so no bisection runs twice."""
    spec, m, w = sc.model, sc.machine, sc.workload
    t = w.context + w.prompt
    length = t + w.answer
    if placement is None:
        cross = batch_crossover(spec, m, w, context=t) if crossover is None else crossover
        fits = max_batch_that_fits(spec, m, length, w.kv_type) if largest is None else largest
    else:
        if crossover is None:
            cross = crossovers_on(spec, m, w, placement)[1] if isinstance(placement, Parallel) else \
                placed_batch_crossover(spec, m, w, placement, context=t)
        else:
            cross = crossover
        fits = largest_batch_on(spec, m, w, placement, length) if largest is None else largest
    high = min(float(MAX_BATCH), max(256.0, 4.0 * w.batch, 2.0 * finite_or(cross, 0.0), 1.5 * min(fits, 4096)))
    batches = log_tokens(1, high, 120)
    everywhere = np.append(batches, float(w.batch))
    if isinstance(placement, Placement):
        swept = placed_batch_sweep(spec, m, w, placement, everywhere, context=t, context_length=length)
        device, host = swept.device_memory, swept.host_memory
        step = swept.sweep.step_seconds
    else:
        step = decode_on(spec, m, w, placement, context=t, batch=everywhere).seconds
        if placement is None:
            device, host = batch_sweep(spec, m, w, everywhere, context=t, context_length=length).memory, \
                np.zeros_like(everywhere)
        else:
            device, host = _memory_at(sc, placement, np.full_like(everywhere, length), everywhere)
    per_sequence, total = 1.0 / step, everywhere / step
    touched = experts_touched(spec, everywhere)
    marks = []
    if math.isfinite(cross):
        marks.append(x_marker("crossover", crossover_label(cross, fits), cross, "batch", "sequences", "crossover"))
    if 0 < fits < MAX_BATCH:
        marks.append(x_marker("max_fit", "largest batch that fits", fits, "batch", "sequences", "limit"))
    rate = axes("batch", "sequences", "decode rate", "tokens/s")
    mem = axes("batch", "sequences", "memory", "B")
    rates = (Curve(key="per_sequence", label="tokens/s per sequence", x=batches, y=per_sequence[:-1], **rate),
             Curve(key="total", label="tokens/s total", x=batches, y=total[:-1], role="secondary", **rate),
             *marks,
             Curve(key="current_total", label="current workload", x=pts(w.batch), y=total[-1:], kind="points",
                   role="marker", **rate),
             Curve(key="current", label="current workload", x=pts(w.batch), y=per_sequence[-1:], kind="points",
                   role="marker", **rate))
    memory = (*_held(m, placement, batches, device[:-1], host[:-1], mem),
              *marks,
              Curve(key="current", label="current workload", x=pts(w.batch), y=device[-1:], kind="points",
                    role="marker", **mem))
    panels = [
        Panel(key="rate", title="Decode rate", x_label="Batch", x_unit="sequences", y_label="Decode rate",
              y_unit="tokens/s", curves=rates, log_x=True, log_y=True),
        Panel(key="memory", title="Memory resident", x_label="Batch", x_unit="sequences", y_label="Memory",
              y_unit="B", curves=memory, log_x=True),
    ]
    if spec.is_moe:
        ex = axes("batch", "sequences", "experts", "experts")
        panels.append(Panel(key="experts", title="Experts touched per layer", x_label="Batch",
                            x_unit="sequences", y_label="Experts per layer", y_unit="experts", log_x=True,
                            curves=(Curve(key="touched", label="experts read per layer", x=batches, y=touched[:-1],
                                          **ex),
                                    y_marker("experts", "all experts", spec.experts, "experts", "experts"),
                                    *marks,
                                    Curve(key="current", label="current workload", x=pts(w.batch), y=touched[-1:],
                                          kind="points", role="marker", **ex))))
    return Chart(key=BATCHING, title=CHART_TITLES[BATCHING], panels=tuple(panels), description=(
        "b sequences share one read of the weights, so the total rate grows almost b-fold while "
        "the step stays memory-bound; each sequence's cache, the machine's memory and the compute "
        "clock (2 x N x b / C) stop it. A mixture of experts reads more experts as b grows."))


# --- memory ------------------------------------------------------------------------------------

def _bar(key: str, label: str, parts: list[tuple[str, float]], capacity: float) -> Curve:
    """One memory's bill as stacked segments, then what is left ("free") up to ``capacity`` or
    the excess above it ("over capacity"). ``extras["base"]``: where each segment starts;
    ``extras["capacity"]``: the memory's size."""
    held = sum(size for _, size in parts)
    rest = ("free", capacity - held, held) if held <= capacity else ("over capacity", held - capacity, capacity)
    names = (*(name for name, _ in parts), rest[0])
    sizes = (*(size for _, size in parts), rest[1])
    bases = (*np.cumsum([0.0, *(size for _, size in parts)])[:-1], rest[2])
    return Curve(key=key, label=label, x=np.arange(float(len(names))), y=pts(*sizes), x_name="part", x_unit="",
                 y_name="memory", y_unit="B", kind="stack", categories=names,
                 extras={"base": pts(*bases), "capacity": np.full(len(names), capacity)})


def _use_bar(key: str, label: str, use: MemoryUse) -> Curve:
    return _bar(key, label, [("weights", use.weights), ("KV cache", use.kv),
                             ("buffers and reserve", use.compute_buffer + use.reserve)], use.capacity)


def memory_breakdown(sc: Scenario, placement: On = None) -> tuple[Curve, ...]:
    """Bytes held at the workload's full length, a stacked bar per memory: on one memory, its
    weights and the batch's KV cache; as placed, each device's bill (weights placed there, KV,
    compute buffer and the back end's reserve; one bar per device when there are several) and
    the host memory's when it holds anything, each against its own size."""
    spec, m, w = sc.model, sc.machine, sc.workload
    if placement is None:
        length = w.context + w.prompt + w.answer
        kv = float(cache_resident(spec, length, w.batch, w.kv_type))
        return (_bar("breakdown", m.name, [("weights", float(spec.file_bytes)), ("KV cache", kv)], m.memory),)
    devices, host = bills_on(spec, m, w, placement)
    device_word, host_word = memory_words(m)
    several = len(devices) > 1
    bars = [_use_bar("breakdown" if i == 0 else f"breakdown_{i}",
                     f"device {i + 1} of {len(devices)}" if several else m.name, use)
            for i, use in enumerate(devices)]
    if host is not None and host.used > 0:
        bars.append(_use_bar("breakdown_host", host.name, host))
    return tuple(bars)


def memory_panels(sc: Scenario, placement: On = None) -> tuple[Panel, Panel]:
    """The memory chart's two panels: each memory's bill at the chosen length, and the bills as
    the context grows (file size + b x cache bytes on one memory)."""
    spec, m, w = sc.model, sc.machine, sc.workload
    t = context_range(sc)
    length = float(w.context + w.prompt + w.answer)
    ax = axes("context", "tokens", "memory", "B")
    device, host = _memory_at(sc, placement, np.append(t, length), np.asarray(float(w.batch)))
    growth = list(_held(m, placement, t, device[:-1], host[:-1], ax))
    if placement is None:
        growth.append(y_marker("weights", "weights", float(spec.file_bytes), "memory", "B", "secondary"))
    growth.append(Curve(key="current", label="current workload", x=pts(length), y=device[-1:], kind="points",
                        role="marker", **ax))
    return (Panel(key="breakdown", title="Memory at the chosen length", x_label="", x_unit="", y_label="Memory",
                  y_unit="B", curves=memory_breakdown(sc, placement)),
            Panel(key="growth", title="Memory as the context grows", x_label="Tokens per sequence",
                  x_unit="tokens", y_label="Memory", y_unit="B", curves=tuple(growth)))


def memory_chart(sc: Scenario, placement: On = None) -> Chart:
    """Weights + KV at the chosen length + free against the machine's memory, and the resident
    bytes as the context grows. ``placement``: each memory's bill as placed, against its own
    size, a bar per device and one for host memory (see ``memory_breakdown``)."""
    return Chart(key=MEMORY, title=CHART_TITLES[MEMORY], panels=memory_panels(sc, placement), description=(
        "Every weight must be resident (a mixture of experts too: the next token may need any expert), "
        "plus each sequence's cache of k bytes per token; what is left is free. A model placed across "
        "devices and host memory shows each one's bill (weights placed there, KV, compute buffer, "
        "the back end's reserve) against its own size."))
