"""The Serving chart: a continuous-batching server's latency percentiles and throughput against
the number of concurrent requests or the request rate (Poisson arrivals), as the serving
simulation predicts them (``predict.serving``) at the ceiling and, where the machine has a
calibration, as the calibrated engine is expected to run, with the band of that expectation;
measured levels of a real server (``measure.loadtest.run``) are drawn over them as points.

The window, reports and the command line read one builder (``serving_figures`` for the levels,
``serving_chart`` for the curves). On the concurrency axis the levels are the powers of two up
to twice the slots that fit (at most 256); on the rate axis, rates from a sixteenth of the
saturation rate to a quarter past it, and every rate measured."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from rooflab.core.errors import SpecError
from rooflab.core.predict.autofit import largest_batch
from rooflab.core.predict.expected import Expected, spread_out
from rooflab.core.predict.parallel import Parallel, parallel_largest_batch
from rooflab.core.predict.placement import Placement
from rooflab.core.predict.serving import MAX_RATE, Lengths, Load, Serving, ServingPlan, serve
from rooflab.core.predict.serving_clock import On
from rooflab.core.predict.serving_stats import ServingLevel
from rooflab.core.report.chart_types import BAND_HIGH, BAND_LOW, Chart, Curve, CurveKind, CurveRole, Panel, Scenario
from rooflab.core.values.calibration import band

SERVING = "serving"
SERVING_TITLE = "Serving"
AXES = ("concurrency", "rate")
MAX_SLOTS_SHOWN = 256
MAX_LEVEL = 512
BAND_REPLICAS = 4            # replicas simulated for the expected curves' band (each costs a simulation)
RATE_POINTS = 9              # predicted rates on the rate axis, log-spaced
RATE_REQUESTS = 200          # requests per rate level drawn (the default's 20 s of arrivals ran to 1,000)
X_AXIS = {"concurrency": ("Concurrent requests", "requests", "concurrency"),
          "rate": ("Request rate", "requests/s", "request rate")}


def serving_plan(sc: Scenario, on: On = None) -> ServingPlan:
    """The plan the chart simulates: the workload's prompt and answer, as many slots as
    sequences of that length fit as placed (1 when none does, at most 256), 2,048 tokens a step."""
    if isinstance(on, Parallel):
        fit = parallel_largest_batch(sc.model, sc.machine, sc.workload, on)
    else:
        placement = on if on is not None else Placement.all_on_device(sc.model)
        fit = largest_batch(sc.model, sc.machine, sc.workload, placement)
    slots = max(1, min(fit, MAX_SLOTS_SHOWN))
    return ServingPlan(prompt=Lengths(mean=sc.workload.prompt), answer=Lengths(mean=sc.workload.answer),
                       slots=slots, step_tokens=max(2048, slots))


def levels_for(plan: ServingPlan) -> tuple[Load, ...]:
    """Concurrency 1, 2, 4, ... up to twice the slots (past them requests only queue)."""
    top = min(MAX_LEVEL, 2 * plan.slots)
    return tuple(Load(mode="concurrency", level=1 << i) for i in range(top.bit_length()) if 1 << i <= top)


def rates_for(saturation: float, measured: Sequence[float] = ()) -> tuple[Load, ...]:
    """Request rates from saturation / 16 to 1.25 x saturation, log-spaced (three significant
    digits), and every rate in ``measured``; ascending."""
    rates = set(float(r) for r in measured if 0 < r <= MAX_RATE)
    if math.isfinite(saturation) and saturation > 0:
        for r in np.geomspace(saturation / 16, 1.25 * saturation, RATE_POINTS):
            rates.add(float(f"{min(r, MAX_RATE):.3g}"))
    return tuple(Load(mode="rate", level=r) for r in sorted(rates))


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingFigures:
    """What the Serving chart and its CSV show on one ``axis`` ("concurrency" or "rate"): the
    predicted levels at the ceiling, expected (None without a calibration) and on the
    calibration's replicates (``spread``, for the band); the measured levels of this axis that
    completed requests; ``marker``: where the current workload's batch stands on the axis."""

    axis: str
    plan: ServingPlan
    ceiling: Serving
    expected: Serving | None
    spread: tuple[Serving, ...]
    measured: tuple[ServingLevel, ...]
    measured_label: str
    marker: float
    expected_label: str = "expected"


def serving_figures(sc: Scenario, on: On = None, *, expected: Expected | None = None,
                    measured: Sequence[ServingLevel] = (), measured_label: str = "measured server",
                    axis: str = "concurrency", replicas: int = BAND_REPLICAS) -> ServingFigures:
    """The simulated levels of ``sc`` (placed as ``on``) on ``axis``: the ceiling, and with
    ``expected`` (a calibration's) its central profile and up to ``replicas`` of its replicates."""
    if axis not in AXES:
        raise SpecError(f"the serving axis is one of {', '.join(AXES)}, got {axis!r}")
    plan = serving_plan(sc, on)
    mine = tuple(lv for lv in measured if lv.mode == axis and lv.completed)
    central = expected.machine if expected is not None else sc.machine
    batch = Load(mode="concurrency", level=sc.workload.batch)
    if axis == "concurrency":
        loads, marker = levels_for(plan), float(sc.workload.batch)
    else:
        # the rates the engine keeps up (as expected where calibrated), and where the batch stands on them
        found = serve(sc.model, central, sc.workload, plan, (batch,), on)
        loads = rates_for(found.saturation_rate, [lv.level for lv in mine])
        marker = found.levels[0].requests_per_second
        plan = replace(plan, requests=RATE_REQUESTS)
    ceiling = serve(sc.model, sc.machine, sc.workload, plan, loads, on)
    central_run = spread = None
    if expected is not None:
        central_run = serve(sc.model, central, sc.workload, plan, loads, on)
        spread = tuple(serve(sc.model, m, sc.workload, plan, loads, on)
                       for m in spread_out(expected.replicas, replicas))
    return ServingFigures(axis=axis, plan=plan, ceiling=ceiling, expected=central_run, spread=spread or (),
                          measured=mine, measured_label=measured_label, marker=marker,
                          expected_label=_expected_label(expected))


def _expected_label(expected: Expected | None) -> str:
    if expected is None:
        return "expected"
    return f"expected, {expected.calibration.engine_label.split(',')[0]}"


LATENCIES = (("ttft_p50", "TTFT p50", "ttft", "p50"), ("ttft_p90", "TTFT p90", "ttft", "p90"),
             ("ttft_p99", "TTFT p99", "ttft", "p99"), ("tpot_p50", "TPOT p50", "tpot", "p50"))
THROUGHPUT = (("total", "all sequences", "output_tokens_per_second"),
              ("per_sequence", "each sequence (1 / TPOT)", "tokens_per_second_per_sequence"))
#: the ceiling's curves drawn apart (four latencies on one panel in one pen could not be told apart):
#: the median in the main pen, p90 in the second quantity's, p99 as a limit's dash-dot, TPOT (a decode
#: step, bound by memory) in the memory clock's; the total rate in the second quantity's, as Batching does
ROLES: dict[str, CurveRole] = {"ttft_p90": "secondary", "ttft_p99": "limit", "tpot_p50": "memory",
                               "total": "secondary"}


def _figure(lv: ServingLevel, key: str) -> float:
    """One plotted figure of a level by its curve key (``LATENCIES``, ``THROUGHPUT``)."""
    for k, _, which, q in LATENCIES:
        if k == key:
            return float(getattr(getattr(lv, which), q))
    return float(getattr(lv, next(attr for k, _, attr in THROUGHPUT if k == key)))


def _curves(levels: Sequence[ServingLevel], axis: str, *, prefix: str, label: str, role: CurveRole,
            kind: CurveKind = "line", spread: Sequence[Serving] = ()) -> tuple[tuple[Curve, ...], tuple[Curve, ...]]:
    """(latency curves, throughput curves) of ``levels`` against ``axis``; each with its band
    (``BAND_LOW``/``BAND_HIGH`` extras) over the levels of ``spread`` when given."""
    x = np.array([lv.level for lv in levels], dtype=np.float64)
    _, x_unit, x_name = X_AXIS[axis]

    def curve(key: str, name: str, y_name: str, y_unit: str) -> Curve:
        y = np.array([_figure(lv, key) for lv in levels], dtype=np.float64)
        extras = {}
        if spread:
            low, high = band(y, [[_figure(lv, key) for lv in s.levels] for s in spread])
            extras = {BAND_LOW: low, BAND_HIGH: high}
        return Curve(key=prefix + key, label=name + label, x=x, y=y, x_name=x_name, x_unit=x_unit, y_name=y_name,
                     y_unit=y_unit, kind=kind, role=ROLES.get(key, role) if role == "main" else role, extras=extras)

    latency = tuple(curve(key, name, "seconds", "s") for key, name, _, _ in LATENCIES)
    throughput = tuple(curve(key, name, "output rate", "tokens/s") for key, name, _ in THROUGHPUT)
    return latency, throughput


def serving_chart(sc: Scenario, on: On = None, *, expected: Expected | None = None,
                  measured: Sequence[ServingLevel] = (), measured_label: str = "measured server",
                  axis: str = "concurrency") -> Chart:
    """The Serving chart of ``sc`` (placed as ``on``) against ``axis``: ceiling lines, the
    expected ones with their band where ``expected`` (a calibration's) is given, the
    ``measured`` levels of that axis as points, and the current workload's batch as a marker."""
    return chart_of(serving_figures(sc, on, expected=expected, measured=measured, measured_label=measured_label,
                                    axis=axis), sc.workload.batch)


def chart_of(f: ServingFigures, batch: int) -> Chart:
    """The Serving chart drawn from ``f`` (``batch``: the current workload's)."""
    latency, throughput = _curves(f.ceiling.levels, f.axis, prefix="", label="", role="main")
    if f.expected is not None:
        # "TTFT p50, expected": the engine is named once, in the panels' titles (four entries each
        # ending "(expected, llama.cpp CUDA)" were too wide for a legend in two columns)
        more = _curves(f.expected.levels, f.axis, prefix="expected_", label=", expected",
                       role="calibrated", spread=f.spread)
        latency, throughput = latency + more[0], throughput + more[1]
    if f.measured:
        more = _curves(f.measured, f.axis, prefix="measured_", label=f" ({f.measured_label})", role="measured",
                       kind="points")
        latency, throughput = latency + more[0], throughput + more[1]
    _, x_unit, x_name = X_AXIS[f.axis]
    # on the rate axis the batch stands at the requests/s its clients keep (the view appends the x value)
    marker = Curve(key="batch", label=f"current batch ({batch} {'sequence' if batch == 1 else 'sequences'}) at",
                   x=np.array([f.marker]), y=np.zeros(0),
                   x_name=x_name, x_unit=x_unit, y_name="", y_unit="", kind="vline", role="marker")
    panels = _panels(f.axis, (*latency, marker), (*throughput, marker),
                     (f"{f.plan.slots} slots, {f.plan.step_tokens:,} tokens per step", f"saturation {_rate(f)}"),
                     expected_with=f.expected_label if f.expected is not None else "")
    arrivals = ("Each concurrent client sends its next request when its last one ends." if f.axis == "concurrency"
                else "Requests arrive at random (Poisson) at each rate; past the saturation rate they queue, "
                     "and the time to first token grows with the length of the run.")
    band_text = (" The expected curves' band: the 16th to 84th percentile over the calibration's resampled fits."
                 if f.spread else "")
    return Chart(key=SERVING, title=SERVING_TITLE, panels=panels, description=(
        "A continuous-batching server (llama-server, vLLM) simulated step by step: up to the slots "
        "that fit, every step decodes one token per sequence and fills the rest of its token budget "
        "with prompt chunks, so a prompt arriving slows the tokens of those decoding; past the slots "
        f"requests queue. {arrivals}{band_text}"))


def _rate(f: ServingFigures) -> str:
    text = f"{f.ceiling.saturation_rate:.3g} requests/s"
    if f.expected is not None:
        text += f" (expected {f.expected.saturation_rate:.3g})"
    return text


def _panels(axis: str, latency: tuple[Curve, ...], throughput: tuple[Curve, ...],
            notes: tuple[str, str] = ("", ""), expected_with: str = "") -> tuple[Panel, Panel]:
    x_label, x_unit, _ = X_AXIS[axis]
    whose = f" ({expected_with})" if expected_with else ""
    return (Panel(key="latency", title=f"Latency under load{whose}", x_label=x_label, x_unit=x_unit,
                  y_label="Seconds", y_unit="s", curves=latency, log_x=True, log_y=True, note=notes[0]),
            Panel(key="throughput", title=f"Output tokens per second{whose}", x_label=x_label, x_unit=x_unit,
                  y_label="Output rate", y_unit="tokens/s", curves=throughput, log_x=True, log_y=True,
                  note=notes[1]))


def empty_chart(note: str, axis: str = "concurrency") -> Chart:
    """The Serving chart's panels with nothing drawn, and ``note`` saying why."""
    return Chart(key=SERVING, title=SERVING_TITLE, description="", note=note, panels=_panels(axis, (), ()))
