"""What each plot of the window draws: the ``Chart`` of every tab, built from the predictions.

The GUI and the report writers only draw or write these; every number in them comes from the
prediction functions. A ``Chart`` is one plot tab: a few ``Panel``s sharing an x axis, each
holding the curves, reference lines and current-workload markers of one quantity (the types
are in ``chart_types``). Every chart stands where the headline does (``passes.On``): one
memory, a placement across the device(s) and host memory, or several devices sharing the model.
The batching and memory charts are in ``capacity_charts``.
"""

from __future__ import annotations

import math

import numpy as np

from rooflab.core.predict.crossover import prefill_crossover
from rooflab.core.predict.offload import host_flops, placed_prefill_crossover
from rooflab.core.predict.parallel import Parallel
from rooflab.core.predict.passes import On, crossovers_on, decode_on, prefill_on, request_on
from rooflab.core.predict.placement import Placement, has_host_tier
from rooflab.core.predict.roofline import attainable, balance, phase_points
from rooflab.core.report.capacity_charts import batching_chart, memory_chart, memory_panels
from rooflab.core.report.chart_parts import (
    BATCHING,
    CHART_KEYS,
    CHART_TITLES,
    DECODE,
    MEMORY,
    PREFILL,
    ROOFLINE,
    axes,
    context_range,
    finite_or,
    log_tokens,
    pts,
    x_marker,
    y_marker,
)
from rooflab.core.report.chart_types import Chart, Curve, Panel, Scenario, devices_text
from rooflab.core.values.workload import MAX_TOKENS

__all__ = ["BATCHING", "CHART_KEYS", "CHART_TITLES", "DECODE", "MEMORY", "PREFILL", "ROOFLINE", "batching_chart",
           "build_charts", "decode_chart", "log_tokens", "memory_chart", "n_star_on", "not_running_charts",
           "prefill_chart", "roofline_chart"]


def _where(on: On) -> str:
    """How a series' label says where it stands: " as placed (-ngl 19)", " on 2 × tensor parallel"."""
    if isinstance(on, Parallel):
        return f" on {devices_text(on.devices, on.mode)}"
    if isinstance(on, Placement):
        return f" as placed ({on.flags()})"
    return ""


def _link_curve(x: np.ndarray, seconds: np.ndarray, name: str, unit: str) -> list[Curve]:
    """The link's seconds between devices, when there are several."""
    if not np.any(seconds > 0):
        return []
    return [Curve(key="link", label="link between devices", x=x, y=seconds, role="link",
                  **axes(name, unit, "seconds", "s"))]


# --- roofline ----------------------------------------------------------------------------------

def _points(sc: Scenario, on: On) -> list[tuple[str, str, float, float]]:
    """(key, label, intensity FLOP/byte, achieved FLOP/s) of prefill and decode: on several
    devices each device's FLOPs over its bytes and its achieved rate, under its own roof."""
    m, w = sc.machine, sc.workload
    if not isinstance(on, Parallel):
        found = phase_points(sc.model, m, w, on)
        return [(key, p.label, p.intensity, p.achieved) for key, p in zip(("prefill", "decode"), found, strict=True)]
    pre = prefill_on(sc.model, m, w, on)
    dec = decode_on(sc.model, m, w, on, context=w.context + w.prompt)
    each = f", each of {on.devices} devices"
    return [("prefill", f"prefill {w.prompt} tok{each}", float(pre.flops / pre.bytes), float(pre.flops / pre.seconds)),
            ("decode", f"decode batch {w.batch}{each}", float(dec.flops / dec.bytes), float(dec.flops / dec.seconds))]


def roofline_chart(sc: Scenario, placement: On = None) -> Chart:
    """Attainable FLOP/s = min(C, I x B) against intensity I, with this workload's prefill and
    decode placed at the FLOP/s their predicted time implies, and the balance point C / B.
    ``placement``: the phases as placed across the device and host memory, under the host
    memory's own roof min(C_host, I x B_host) drawn beside the device's; or on several devices,
    each device's share under its roof."""
    m, w = sc.machine, sc.workload
    peak, bandwidth = m.flops(w.compute_dtype), m.bandwidth
    points = _points(sc, placement)
    knee = balance(m, w.compute_dtype)
    low = min(0.1, min(p[2] for p in points) / 3)
    high = max(1e4, max(p[2] for p in points) * 3, knee * 30)
    intensity = np.logspace(math.log10(low), math.log10(high), 256)
    ax = axes("intensity", "FLOP/byte", "attainable", "FLOP/s")
    curves = [Curve(key="roof", label="roof: min(C, I × B)", x=intensity,
                    y=attainable(intensity, peak, bandwidth), role="main", **ax)]
    if not m.efficiency.is_identity:
        curves.append(Curve(key="effective_roof", label="roof at the machine's efficiency", x=intensity,
                            y=attainable(intensity, m.effective_flops(w.compute_dtype), m.effective_bandwidth),
                            role="secondary", **ax))
    if isinstance(placement, Placement) and has_host_tier(m):
        curves.append(Curve(key="host_roof", label="roof of the host memory: min(C, I × B)", x=intensity,
                            y=attainable(intensity, host_flops(m, w.compute_dtype), m.offload_bandwidth),
                            role="secondary", **ax))
    curves.append(x_marker("balance", "balance C / B", knee, "intensity", "FLOP/byte", "crossover"))
    for key, label, at, achieved in points:
        curves.append(Curve(key=key, label=label, x=pts(at), y=pts(achieved), kind="points", role="marker", **ax))
    panel = Panel(key="roofline", title="Roofline" + (" of one device" if isinstance(placement, Parallel) else ""),
                  x_label="Arithmetic intensity", x_unit="FLOP/byte", y_label="Attainable compute", y_unit="FLOP/s",
                  curves=tuple(curves), log_x=True, log_y=True)
    return Chart(key=ROOFLINE, title=CHART_TITLES[ROOFLINE], panels=(panel,), description=(
        "A kernel can go no faster than the machine's peak arithmetic C, nor faster than its "
        "memory delivers bytes times the FLOPs it does per byte (intensity x bandwidth B). "
        "The roof bends at the balance point C / B."))


# --- prefill -----------------------------------------------------------------------------------

def n_star_on(sc: Scenario, on: On) -> float:
    """n* where ``sc``'s model stands: one memory, a placement or several devices."""
    spec, m, w = sc.model, sc.machine, sc.workload
    if isinstance(on, Parallel):
        return crossovers_on(spec, m, w, on)[0]
    return prefill_crossover(spec, m, w) if on is None else placed_prefill_crossover(spec, m, w, on)


def _clock_names(sc: Scenario, on: On, total: str, memory: str, compute: str) -> tuple[str, str, str]:
    """The legend names of a pass and its two clocks where it stands: a placement's clocks are
    the GPU's and the host's only where the host holds part of the model, and a CPU has no
    -ngl to show."""
    if isinstance(on, Parallel):
        share = "the devices in turn" if on.mode == "layer" else "each device's share"
        return f"{total}{_where(on)}", f"memory clock, {share}", f"compute clock, {share}"
    if isinstance(on, Placement) and sc.machine.kind != "cpu":
        if on.clamp(sc.model) == Placement.all_on_device(sc.model):
            return f"{total}{_where(on)}", memory, compute
        return f"{total}{_where(on)}", "memory clocks, GPU + host", "compute clocks, GPU + host"
    return f"{total} (slower clock)", memory, compute


def prefill_chart(sc: Scenario, n_star: float | None = None, placement: On = None) -> Chart:
    """TTFT = max(2 x N x n / C + attention's n² term / C, W / B) against prompt length n, with
    both clocks, n* (``crossover.prefill_crossover``, computed unless given) and the current
    prompt; below it the prompt rate n x b / TTFT. ``placement``: where the headline stands
    (``passes.On``); the passes, their clocks and n* are then the placement's or the devices',
    with the link's time between devices."""
    w, spec, m = sc.workload, sc.model, sc.machine
    n_star = n_star_on(sc, placement) if n_star is None else n_star
    high = min(float(MAX_TOKENS), max(32768.0, 4.0 * w.prompt, 4.0 * finite_or(n_star, 0.0)))
    prompts = log_tokens(1, high)
    p, here = prefill_on(spec, m, w, placement, prompt=prompts), prefill_on(spec, m, w, placement)
    names = _clock_names(sc, placement, "TTFT", "memory clock (W / B)", "compute clock (2 N n / C)")
    ax = axes("prompt", "tokens", "seconds", "s")
    ttft = [
        Curve(key="ttft", label=names[0], x=prompts, y=p.seconds, **ax),
        Curve(key="memory_clock", label=names[1], x=prompts, y=p.memory_seconds, role="memory", **ax),
        Curve(key="compute_clock", label=names[2], x=prompts, y=p.compute_seconds, role="compute", **ax),
        *_link_curve(prompts, p.link_seconds, "prompt", "tokens"),
    ]
    if math.isfinite(n_star):
        ttft.append(x_marker("n_star", "n*", n_star, "prompt", "tokens", "crossover"))
    ttft.append(Curve(key="current", label="current workload", x=pts(w.prompt), y=pts(float(here.seconds)),
                      kind="points", role="marker", **ax))
    rate_ax = axes("prompt", "tokens", "prompt rate", "tokens/s")
    rate = (Curve(key="prompt_rate", label="prompt tokens/s", x=prompts, y=prompts * w.batch / p.seconds, **rate_ax),
            Curve(key="current", label="current workload", x=pts(w.prompt),
                  y=pts(w.prompt * w.batch / float(here.seconds)), kind="points", role="marker", **rate_ax))
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

def decode_chart(sc: Scenario, placement: On = None, *, tpot: float | None = None) -> Chart:
    """Decode step time max((W + b x k x t) / B, b x 2 x N / C) and its ceiling 1 / step as the
    cache grows to t tokens, with the KV share of the bytes each step reads. ``placement``: where
    the headline stands (``passes.On``); the step, its clocks, the link's share of each step on
    several devices and the TPOT line are then the placement's or the devices'. ``tpot``: the
    headline's, when the caller has it."""
    w, spec, m = sc.workload, sc.model, sc.machine
    t = context_range(sc)
    start = w.context + w.prompt
    p = decode_on(spec, m, w, placement, context=t)
    first = decode_on(spec, m, w, placement, context=start)
    tpot = request_on(spec, m, w, placement).tpot if tpot is None else tpot
    tpot_label = ("TPOT over this answer" if placement is None or m.kind == "cpu"
                  else f"TPOT{_where(placement)}")
    window = spec.attention.sliding_window
    cap = [x_marker("window", "sliding window", window, "context", "tokens", "limit")] \
        if window and any(spec.attention.sliding) else []
    rate_ax = axes("context", "tokens", "decode rate", "tokens/s")
    rate = (Curve(key="ceiling", label="decode ceiling per sequence", x=t, y=1.0 / p.seconds, **rate_ax),
            *cap,
            Curve(key="current", label="current workload", x=pts(start), y=pts(1.0 / float(first.seconds)),
                  kind="points", role="marker", **rate_ax))
    sec = axes("context", "tokens", "seconds", "s")
    names = _clock_names(sc, placement, "time per token", "memory clock ((W + b k t) / B)",
                         "compute clock (b 2 N / C)")
    step = (Curve(key="step", label=names[0], x=t, y=p.seconds, **sec),
            Curve(key="memory_clock", label=names[1], x=t, y=p.memory_seconds, role="memory", **sec),
            Curve(key="compute_clock", label=names[2], x=t, y=p.compute_seconds, role="compute", **sec),
            *_link_curve(t, p.link_seconds, "context", "tokens"),
            *cap,
            y_marker("tpot", tpot_label, tpot, "seconds", "s", "marker"),
            Curve(key="current", label="current workload", x=pts(start), y=pts(float(first.seconds)),
                  kind="points", role="marker", **sec))
    share_ax = axes("context", "tokens", "kv share", "1")
    linked = bool(np.any(p.link_seconds > 0))
    share = (Curve(key="kv_share", label="KV share of bytes read", x=t, y=p.kv_share, **share_ax),
             *([Curve(key="link_share", label="link's share of each step", x=t, y=p.link_share, role="link",
                      **axes("context", "tokens", "link share", "1"))] if linked else []),
             *cap,
             Curve(key="current", label="current workload", x=pts(start), y=pts(float(first.kv_share)),
                   kind="points", role="marker", **share_ax))
    panels = (
        Panel(key="rate", title="Decode ceiling", x_label="Tokens in the cache", x_unit="tokens",
              y_label="Decode rate", y_unit="tokens/s", curves=rate),
        Panel(key="step", title="Time per output token", x_label="Tokens in the cache", x_unit="tokens",
              y_label="Time per token", y_unit="s", curves=step),
        Panel(key="kv_share", title="KV and link shares" if linked else "KV share of bytes read",
              x_label="Tokens in the cache", x_unit="tokens", y_label="Share" if linked else "KV share", y_unit="1",
              curves=share),
    )
    return Chart(key=DECODE, title=CHART_TITLES[DECODE], panels=panels, description=(
        "Each decode step reads the weights W once and every cached token's keys and values "
        "(k bytes per token, t tokens): time = (W + b x k x t) / B while memory-bound. "
        "Sliding-window layers stop growing at their window. Several devices add the link's time."))


def build_charts(sc: Scenario, *, prefill_crossover: float | None = None, batch_crossover: float | None = None,
                 max_batch: int | None = None, placement: On = None, tpot: float | None = None) -> dict[str, Chart]:
    """Every chart for one scenario, keyed and ordered like ``CHART_KEYS``. ``prefill_crossover``,
    ``batch_crossover``, ``max_batch``, ``tpot``: when the caller already has them (bisections:
    worth not repeating; for ``placement``, the placement's); ``placement``: where the headline
    stands (``passes.On``)."""
    return {ROOFLINE: roofline_chart(sc, placement), PREFILL: prefill_chart(sc, prefill_crossover, placement),
            DECODE: decode_chart(sc, placement, tpot=tpot),
            BATCHING: batching_chart(sc, placement, crossover=batch_crossover, largest=max_batch),
            MEMORY: memory_chart(sc, placement)}


def not_running_charts(sc: Scenario, on: Placement | Parallel, note: str) -> dict[str, Chart]:
    """The charts of a placement that does not fit: no curve as if it ran, each panel empty but
    for ``note`` (why, and what would make it fit); the memory chart keeps each memory's bill
    against its size (what shows why), as ``on`` would hold it."""
    charts = build_charts(sc, prefill_crossover=math.inf, batch_crossover=math.inf, max_batch=0, placement=None)
    out: dict[str, Chart] = {}
    for key, chart in charts.items():
        panels = memory_panels(sc, on) if key == MEMORY else tuple(
            Panel(key=p.key, title=p.title, x_label=p.x_label, x_unit=p.x_unit, y_label=p.y_label, y_unit=p.y_unit,
                  curves=(), log_x=p.log_x, log_y=p.log_y) for p in chart.panels)
        out[key] = Chart(key=key, title=chart.title, description=chart.description, panels=panels, note=note)
    return out
