"""What each plot of the window draws: the ``Chart`` of every tab, built from the predictions.

The GUI and the report writers only draw or write these; every number in them comes from the
prediction functions. A ``Chart`` is one plot tab: a few ``Panel``s sharing an x axis, each
holding the curves, reference lines and current-workload markers of one quantity (the types
are in ``chart_types``).
"""

from __future__ import annotations

import math
from typing import TypedDict

import numpy as np

from rooflab.core.predict.autofit import largest_batch
from rooflab.core.predict.batching import (
    batch_crossover,
    batch_sweep,
    cache_resident,
    max_batch_that_fits,
    memory_resident,
)
from rooflab.core.predict.clocks import Pass, decode_pass, prefill_pass
from rooflab.core.predict.crossover import prefill_crossover
from rooflab.core.predict.footprint import memory_grid, plan_memory
from rooflab.core.predict.offload import (
    PlacedPass,
    host_flops,
    placed_batch_crossover,
    placed_batch_sweep,
    placed_decode,
    placed_prefill,
    placed_prefill_crossover,
    placed_request,
)
from rooflab.core.predict.placement import Placement, has_host_tier, memory_words
from rooflab.core.predict.request import request
from rooflab.core.predict.roofline import attainable, balance, phase_points
from rooflab.core.predict.work import Array
from rooflab.core.report.chart_types import Chart, Curve, CurveRole, Panel, Scenario
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS

ROOFLINE, PREFILL, DECODE, BATCHING, MEMORY = "roofline", "prefill", "decode", "batching", "memory"
CHART_KEYS: tuple[str, ...] = (ROOFLINE, PREFILL, DECODE, BATCHING, MEMORY)
CHART_TITLES: dict[str, str] = {ROOFLINE: "Roofline", PREFILL: "Prefill / TTFT", DECODE: "Decode vs context",
                                BATCHING: "Batching", MEMORY: "Memory"}


def _pts(*values: float) -> Array:
    """A few literal values as a float array (markers, reference lines)."""
    return np.array(values, dtype=np.float64)


# --- sweeps ------------------------------------------------------------------------------------

def log_tokens(low: float, high: float, count: int = 160) -> Array:
    """Distinct integers from ``low`` to ``high`` spaced evenly on a log scale (both included)."""
    low, high = max(1.0, low), max(low, high)
    values = np.unique(np.round(np.logspace(math.log10(low), math.log10(high), count)))
    return values.astype(np.float64)


class _Axes(TypedDict):
    x_name: str
    x_unit: str
    y_name: str
    y_unit: str


def _axes(x_name: str, x_unit: str, y_name: str, y_unit: str) -> _Axes:
    """What a curve's x and y are, and their SI units."""
    return _Axes(x_name=x_name, x_unit=x_unit, y_name=y_name, y_unit=y_unit)


def _finite_or(value: float, default: float) -> float:
    return value if math.isfinite(value) else default


def _x_marker(key: str, label: str, x: float, name: str, unit: str, role: CurveRole) -> Curve:
    return Curve(key=key, label=label, x=_pts(x), y=_pts(), x_name=name, x_unit=unit, y_name="", y_unit="",
                 kind="vline", role=role)


def _y_marker(key: str, label: str, y: float, name: str, unit: str, role: CurveRole = "limit") -> Curve:
    return Curve(key=key, label=label, x=_pts(), y=_pts(y), x_name="", x_unit="", y_name=name, y_unit=unit,
                 kind="hline", role=role)


# --- roofline ----------------------------------------------------------------------------------

def roofline_chart(sc: Scenario, placement: Placement | None = None) -> Chart:
    """Attainable FLOP/s = min(C, I x B) against intensity I, with this workload's prefill and
    decode placed at the FLOP/s their predicted time implies, and the balance point C / B.
    ``placement``: the phases as placed across the device and host memory, under the host
    memory's own roof min(C_host, I x B_host) drawn beside the device's."""
    m, w = sc.machine, sc.workload
    peak, bandwidth = m.flops(w.compute_dtype), m.bandwidth
    points = phase_points(sc.model, m, w, placement)
    knee = balance(m, w.compute_dtype)
    low = min(0.1, min(p.intensity for p in points) / 3)
    high = max(1e4, max(p.intensity for p in points) * 3, knee * 30)
    intensity = np.logspace(math.log10(low), math.log10(high), 256)
    axes = _axes("intensity", "FLOP/byte", "attainable", "FLOP/s")
    curves = [Curve(key="roof", label="roof: min(C, I × B)", x=intensity,
                    y=attainable(intensity, peak, bandwidth), role="main", **axes)]
    if not m.efficiency.is_identity:
        curves.append(Curve(key="effective_roof", label="roof at the machine's efficiency", x=intensity,
                            y=attainable(intensity, m.effective_flops(w.compute_dtype), m.effective_bandwidth),
                            role="secondary", **axes))
    if placement is not None and has_host_tier(m):
        curves.append(Curve(key="host_roof", label="roof of the host memory: min(C, I × B)", x=intensity,
                            y=attainable(intensity, host_flops(m, w.compute_dtype), m.offload_bandwidth),
                            role="secondary", **axes))
    curves.append(_x_marker("balance", "balance C / B", knee,
                            "intensity", "FLOP/byte", "crossover"))
    for key, p in zip(("prefill", "decode"), points, strict=True):
        curves.append(Curve(key=key, label=p.label, x=_pts(p.intensity), y=_pts(p.achieved), kind="points",
                            role="marker", **axes))
    panel = Panel(key="roofline", title="Roofline", x_label="Arithmetic intensity", x_unit="FLOP/byte",
                  y_label="Attainable compute", y_unit="FLOP/s", curves=tuple(curves), log_x=True, log_y=True)
    return Chart(key=ROOFLINE, title=CHART_TITLES[ROOFLINE], panels=(panel,), description=(
        "A kernel can go no faster than the machine's peak arithmetic C, nor faster than its "
        "memory delivers bytes times the FLOPs it does per byte (intensity x bandwidth B). "
        "The roof bends at the balance point C / B."))


# --- prefill -----------------------------------------------------------------------------------

def prefill_chart(sc: Scenario, n_star: float | None = None, placement: Placement | None = None) -> Chart:
    """TTFT = max(2 x N x n / C + attention's n² term / C, W / B) against prompt length n, with
    both clocks, n* (``crossover.prefill_crossover``, computed unless given) and the current
    prompt; below it the prompt rate n x b / TTFT. ``placement``: the headline's when the
    device cannot hold the model; the passes, their clocks (each summed over the device's part
    and the host's) and n* are then the placement's (``offload.placed_prefill``)."""
    w, spec, m = sc.workload, sc.model, sc.machine
    if n_star is None:
        n_star = prefill_crossover(spec, m, w) if placement is None else placed_prefill_crossover(spec, m, w,
                                                                                                  placement)
    high = min(float(MAX_TOKENS), max(32768.0, 4.0 * w.prompt, 4.0 * _finite_or(n_star, 0.0)))
    prompts = log_tokens(1, high)
    p: Pass | PlacedPass
    here: Pass | PlacedPass
    if placement is None:
        p, here = prefill_pass(spec, m, w, prompt=prompts), prefill_pass(spec, m, w)
        names = ("TTFT (slower clock)", "memory clock (W / B)", "compute clock (2 N n / C)")
    else:
        p, here = placed_prefill(spec, m, w, placement, prompt=prompts), placed_prefill(spec, m, w, placement)
        names = (f"TTFT as placed ({placement.flags()})", "memory clocks, GPU + host", "compute clocks, GPU + host")
    axes = _axes("prompt", "tokens", "seconds", "s")
    ttft = [
        Curve(key="ttft", label=names[0], x=prompts, y=p.seconds, **axes),
        Curve(key="memory_clock", label=names[1], x=prompts, y=p.memory_seconds, role="memory", **axes),
        Curve(key="compute_clock", label=names[2], x=prompts, y=p.compute_seconds, role="compute", **axes),
    ]
    if math.isfinite(n_star):
        ttft.append(_x_marker("n_star", "n*", n_star, "prompt", "tokens", "crossover"))
    ttft.append(Curve(key="current", label="current workload", x=_pts(w.prompt), y=_pts(float(here.seconds)),
                      kind="points", role="marker", **axes))
    rate_axes = _axes("prompt", "tokens", "prompt rate", "tokens/s")
    rate = (Curve(key="prompt_rate", label="prompt tokens/s", x=prompts, y=prompts * w.batch / p.seconds,
                  **rate_axes),
            Curve(key="current", label="current workload", x=_pts(w.prompt),
                  y=_pts(w.prompt * w.batch / float(here.seconds)), kind="points", role="marker", **rate_axes))
    return Chart(key=PREFILL, title=CHART_TITLES[PREFILL], panels=(
        Panel(key="ttft", title="Time to first token", x_label="Prompt length", x_unit="tokens",
              y_label="Time to first token", y_unit="s", curves=tuple(ttft), log_x=True, log_y=True),
        Panel(key="rate", title="Prompt processing rate", x_label="Prompt length", x_unit="tokens",
              y_label="Prompt rate", y_unit="tokens/s", curves=rate, log_x=True, log_y=True),
    ), description=(
        "Prefill reads the weights once (memory clock W / B) and multiplies every prompt token "
        "through them (compute clock 2 x N x n / C); the slower clock is the time to first token. "
        "Past n* the arithmetic decides."))


# --- decode vs context -------------------------------------------------------------------------

def _context_range(sc: Scenario) -> Array:
    w = sc.workload
    end = w.context + w.prompt + w.answer
    trained = sc.model.context_length or 32768
    high = float(min(MAX_TOKENS, max(trained, 1.25 * end)))
    return np.linspace(0.0, high, 257)


def decode_chart(sc: Scenario, placement: Placement | None = None) -> Chart:
    """Decode step time max((W + b x k x t) / B, b x 2 x N / C) and its ceiling 1 / step as the
    cache grows to t tokens, with the KV share of the bytes each step reads. ``placement``: how
    the model sits across GPU and host when the device cannot hold it (the headline's); the
    step, its clocks and the TPOT line are then the placement's (``offload.placed_decode``)."""
    w, spec = sc.workload, sc.model
    t = _context_range(sc)
    start = w.context + w.prompt
    p: Pass | PlacedPass
    first: Pass | PlacedPass
    if placement is None:
        p = decode_pass(spec, sc.machine, w, context=t)
        first = decode_pass(spec, sc.machine, w, context=start)
        tpot, tpot_label = request(spec, sc.machine, w).tpot, "TPOT over this answer"
    else:
        p = placed_decode(spec, sc.machine, w, placement, context=t)
        first = placed_decode(spec, sc.machine, w, placement, context=start)
        tpot, tpot_label = placed_request(spec, sc.machine, w, placement).tpot, f"TPOT as placed ({placement.flags()})"
    window = spec.attention.sliding_window
    cap = [_x_marker("window", "sliding window", window, "context", "tokens", "limit")] \
        if window and any(spec.attention.sliding) else []
    rate_ax = _axes("context", "tokens", "decode rate", "tokens/s")
    rate = (Curve(key="ceiling", label="decode ceiling per sequence", x=t, y=1.0 / p.seconds, **rate_ax),
            *cap,
            Curve(key="current", label="current workload", x=_pts(start), y=_pts(1.0 / float(first.seconds)),
                  kind="points", role="marker", **rate_ax))
    sec = _axes("context", "tokens", "seconds", "s")
    step = (Curve(key="step", label="time per token (slower clock)" if placement is None else
                  "time per token as placed (GPU + host)", x=t, y=p.seconds, **sec),
            Curve(key="memory_clock", label="memory clock ((W + b k t) / B)", x=t, y=p.memory_seconds,
                  role="memory", **sec),
            Curve(key="compute_clock", label="compute clock (b 2 N / C)", x=t, y=p.compute_seconds,
                  role="compute", **sec),
            *cap,
            _y_marker("tpot", tpot_label, tpot, "seconds", "s", "marker"),
            Curve(key="current", label="current workload", x=_pts(start), y=_pts(float(first.seconds)),
                  kind="points", role="marker", **sec))
    share = (Curve(key="kv_share", label="KV share of bytes read", x=t, y=p.kv_share,
                   **_axes("context", "tokens", "kv share", "1")),
             *cap,
             Curve(key="current", label="current workload", x=_pts(start), y=_pts(float(first.kv_share)),
                   kind="points", role="marker", **_axes("context", "tokens", "kv share", "1")))
    panels = (
        Panel(key="rate", title="Decode ceiling", x_label="Tokens in the cache", x_unit="tokens",
              y_label="Decode rate", y_unit="tokens/s", curves=rate),
        Panel(key="step", title="Time per output token", x_label="Tokens in the cache", x_unit="tokens",
              y_label="Time per token", y_unit="s", curves=step),
        Panel(key="kv_share", title="KV share of bytes read", x_label="Tokens in the cache", x_unit="tokens",
              y_label="KV share", y_unit="1", curves=share),
    )
    return Chart(key=DECODE, title=CHART_TITLES[DECODE], panels=panels, description=(
        "Each decode step reads the weights W once and every cached token's keys and values "
        "(k bytes per token, t tokens): time = (W + b x k x t) / B while memory-bound. "
        "Sliding-window layers stop growing at their window."))


# --- batching ----------------------------------------------------------------------------------

def _placed_memory(m: MachineProfile, x: Array, device: Array, host: Array, axes: _Axes) -> tuple[Curve, ...]:
    """Each memory's bill as placed against its own size: the device's, and the host's when
    the placement keeps anything there."""
    device_word, host_word = memory_words(m)
    curves: tuple[Curve, ...] = (
        Curve(key="resident", label=f"held {device_word}, as placed", x=x, y=device, **axes),
        _y_marker("capacity", f"{m.name} memory", m.memory, "memory", "B"))
    if float(np.max(host)) > 0:
        curves += (Curve(key="resident_host", label=f"held {host_word}, as placed", x=x, y=host, role="secondary",
                         **axes),
                   _y_marker("capacity_host", m.offload_name or "host memory", m.offload_memory, "memory", "B"))
    return curves


def batching_chart(sc: Scenario, placement: Placement | None = None, *, crossover: float | None = None,
                   largest: int | None = None) -> Chart:
    """Decode at batch b for sequences starting at context + prompt: per-sequence and total
    tokens/s, memory resident for full-length sequences against the machine, experts touched.
    ``placement``: the headline's when the device cannot hold the model (see ``decode_chart``);
    the rates, the crossover and the largest batch are then the placement's, and memory is each
    memory's bill (weights placed there, KV, compute buffer, reserve) against its capacity.
    ``crossover``, ``largest``: those two limits when the caller has them (``Summary``'s
    ``headline_*``), so no bisection runs twice."""
    spec, m, w = sc.model, sc.machine, sc.workload
    t = w.context + w.prompt
    length = t + w.answer
    if placement is None:
        cross = batch_crossover(spec, m, w, context=t) if crossover is None else crossover
        fits = max_batch_that_fits(spec, m, length, w.kv_type) if largest is None else largest
    else:
        cross = placed_batch_crossover(spec, m, w, placement, context=t) if crossover is None else crossover
        fits = largest_batch(spec, m, w, placement, context_length=length) if largest is None else largest
    high = min(float(MAX_BATCH), max(256.0, 4.0 * w.batch, 2.0 * _finite_or(cross, 0.0), 1.5 * min(fits, 4096)))
    batches = log_tokens(1, high, 120)
    resident: tuple[Curve, ...]
    mem = _axes("batch", "sequences", "memory", "B")
    if placement is None:
        s = batch_sweep(spec, m, w, batches, context=t, context_length=length)
        here = batch_sweep(spec, m, w, [w.batch], context=t, context_length=length)
        resident = (Curve(key="resident", label="weights + caches at full length", x=batches, y=s.memory, **mem),
                    _y_marker("capacity", f"{m.name} memory", m.memory, "memory", "B"))
        here_memory = here.memory
    else:
        placed = placed_batch_sweep(spec, m, w, placement, batches, context=t, context_length=length)
        at = placed_batch_sweep(spec, m, w, placement, [w.batch], context=t, context_length=length)
        s, here, here_memory = placed.sweep, at.sweep, at.device_memory
        resident = _placed_memory(m, batches, placed.device_memory, placed.host_memory, mem)
    marks = []
    if math.isfinite(cross):
        marks.append(_x_marker("crossover", "compute crossover", cross, "batch", "sequences",
                               "crossover"))
    if 0 < fits < MAX_BATCH:
        marks.append(_x_marker("max_fit", "largest batch that fits", fits, "batch", "sequences",
                               "limit"))
    rate = _axes("batch", "sequences", "decode rate", "tokens/s")
    rates = (Curve(key="per_sequence", label="tokens/s per sequence", x=batches, y=s.per_sequence, **rate),
             Curve(key="total", label="tokens/s total", x=batches, y=s.total, role="secondary", **rate),
             *marks,
             Curve(key="current_total", label="current workload", x=_pts(w.batch), y=here.total, kind="points",
                   role="marker", **rate),
             Curve(key="current", label="current workload", x=_pts(w.batch), y=here.per_sequence, kind="points",
                   role="marker", **rate))
    memory = (*resident,
              *marks,
              Curve(key="current", label="current workload", x=_pts(w.batch), y=here_memory, kind="points",
                    role="marker", **mem))
    panels = [
        Panel(key="rate", title="Decode rate", x_label="Batch", x_unit="sequences", y_label="Decode rate",
              y_unit="tokens/s", curves=rates, log_x=True, log_y=True),
        Panel(key="memory", title="Memory resident", x_label="Batch", x_unit="sequences", y_label="Memory",
              y_unit="B", curves=memory, log_x=True),
    ]
    if spec.is_moe:
        ex = _axes("batch", "sequences", "experts", "experts")
        panels.append(Panel(key="experts", title="Experts touched per layer", x_label="Batch",
                            x_unit="sequences", y_label="Experts per layer", y_unit="experts", log_x=True,
                            curves=(Curve(key="touched", label="experts read per layer", x=batches,
                                          y=s.experts_touched, **ex),
                                    _y_marker("experts", "all experts", spec.experts,
                                              "experts", "experts"),
                                    *marks,
                                    Curve(key="current", label="current workload", x=_pts(w.batch),
                                          y=here.experts_touched, kind="points", role="marker", **ex))))
    return Chart(key=BATCHING, title=CHART_TITLES[BATCHING], panels=tuple(panels), description=(
        "b sequences share one read of the weights, so the total rate grows almost b-fold while "
        "the step stays memory-bound; each sequence's cache, the machine's memory and the compute "
        "clock (2 x N x b / C) stop it. A mixture of experts reads more experts as b grows."))


# --- memory ------------------------------------------------------------------------------------

def memory_breakdown(sc: Scenario, placement: Placement | None = None) -> Curve:
    """Bytes held at the workload's full length, as stacked segments: weights on the fast
    memory, the batch's KV cache, then what is left ("free") up to the machine's memory or the
    excess above it ("over capacity"), and weights offloaded to the slow tier on top.
    ``placement``: the device's bill as placed (weights placed there, KV, compute buffer and
    the back end's reserve), with the host memory's bill on top.

    ``extras["base"]`` is where each segment starts; ``extras["capacity"]`` the machine's memory."""
    spec, m, w = sc.model, sc.machine, sc.workload
    length = w.context + w.prompt + w.answer
    if placement is None:
        kv = float(cache_resident(spec, length, w.batch, w.kv_type))
        offloaded = spec.file_bytes * w.offload_fraction
        parts = [("weights", spec.file_bytes - offloaded), ("KV cache", kv)]
        top = ("weights offloaded", offloaded)
    else:
        bill = plan_memory(spec, m, w, placement)
        device, host = bill.device, bill.host
        parts = [("weights", device.weights), ("KV cache", device.kv),
                 ("buffers and reserve", device.compute_buffer + device.reserve)]
        top = ("in host memory", host.used)
    held = sum(size for _, size in parts)
    if held <= m.memory:
        rest = ("free", m.memory - held, held)
    else:
        rest = ("over capacity", held - m.memory, m.memory)
    names = (*(name for name, _ in parts), rest[0], top[0])
    sizes = (*(size for _, size in parts), rest[1], top[1])
    bases = (*np.cumsum([0.0, *(size for _, size in parts)])[:-1], rest[2], max(held, m.memory))
    return Curve(key="breakdown", label=m.name, x=np.arange(float(len(names))), y=_pts(*sizes), x_name="part",
                 x_unit="", y_name="memory", y_unit="B", kind="stack", categories=names,
                 extras={"base": _pts(*bases), "capacity": np.full(len(names), m.memory)})


def memory_chart(sc: Scenario, placement: Placement | None = None) -> Chart:
    """Weights + KV at the chosen length + free against the machine's memory, and the resident
    bytes as the context grows (file size + b x cache bytes). ``placement``: each memory's
    bill as placed, against its own size (see ``memory_breakdown``)."""
    spec, m, w = sc.model, sc.machine, sc.workload
    t = _context_range(sc)
    length = w.context + w.prompt + w.answer
    ax = _axes("context", "tokens", "memory", "B")
    growth: list[Curve]
    if placement is None:
        growth = [Curve(key="resident", label="weights + batch × cache", x=t,
                        y=memory_resident(spec, t, w.batch, w.kv_type), **ax),
                  _y_marker("capacity", f"{m.name} memory", m.memory, "memory", "B"),
                  _y_marker("weights", "weights", float(spec.file_bytes), "memory", "B", "secondary")]
        if m.has_offload:
            growth.append(_y_marker("capacity_total", "with the second tier",
                                    m.memory + m.offload_memory, "memory", "B", "secondary"))
        here = memory_resident(spec, length, w.batch, w.kv_type)
    else:
        device, host, _fits = memory_grid(spec, m, w, placement, t, w.batch)
        growth = list(_placed_memory(m, t, device, host, ax))
        here = memory_grid(spec, m, w, placement, length, w.batch)[0]
    growth.append(Curve(key="current", label="current workload", x=_pts(length), y=here, kind="points",
                        role="marker", **ax))
    panels = (
        Panel(key="breakdown", title="Memory at the chosen length", x_label="", x_unit="", y_label="Memory",
              y_unit="B", curves=(memory_breakdown(sc, placement),)),
        Panel(key="growth", title="Memory as the context grows", x_label="Tokens per sequence",
              x_unit="tokens", y_label="Memory", y_unit="B", curves=tuple(growth)),
    )
    return Chart(key=MEMORY, title=CHART_TITLES[MEMORY], panels=panels, description=(
        "Every weight must be resident (a mixture of experts too: the next token may need any expert), "
        "plus each sequence's cache of k bytes per token; what is left is free. A model placed across "
        "the device and host memory shows the device's bill (weights placed there, KV, compute buffer, "
        "the back end's reserve) with what host memory holds on top."))


def build_charts(sc: Scenario, *, prefill_crossover: float | None = None, batch_crossover: float | None = None,
                 max_batch: int | None = None, placement: Placement | None = None) -> dict[str, Chart]:
    """Every chart for one scenario, keyed and ordered like ``CHART_KEYS``. ``prefill_crossover``,
    ``batch_crossover``, ``max_batch``: when the caller already has them (bisections: worth not
    repeating; for ``placement``, the placement's); ``placement``: the headline's when the
    device cannot hold the model (see ``decode_chart``)."""
    return {ROOFLINE: roofline_chart(sc, placement), PREFILL: prefill_chart(sc, prefill_crossover, placement),
            DECODE: decode_chart(sc, placement),
            BATCHING: batching_chart(sc, placement, crossover=batch_crossover, largest=max_batch),
            MEMORY: memory_chart(sc, placement)}
