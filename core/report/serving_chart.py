"""The Serving chart: a continuous-batching server's latency percentiles and throughput against
the number of concurrent requests, as the serving simulation predicts them (``predict.serving``)
at the ceiling and, where the machine has a calibration, as the calibrated engine is expected to
run; measured levels of a real server (``measure.server``) are drawn over them as points.

The window, reports and the command line read one builder; the levels are the powers of two
up to twice the slots that fit (at most 256), each with the default number of requests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rooflab.core.predict.autofit import largest_batch
from rooflab.core.predict.parallel import Parallel
from rooflab.core.predict.parallel import largest_batch as parallel_largest_batch
from rooflab.core.predict.placement import Placement
from rooflab.core.predict.serving import Lengths, Load, Serving, ServingPlan, serve
from rooflab.core.predict.serving_clock import On
from rooflab.core.predict.serving_stats import ServingLevel
from rooflab.core.report.chart_types import Chart, Curve, CurveKind, CurveRole, Panel, Scenario
from rooflab.core.values.machine import MachineProfile

SERVING = "serving"
SERVING_TITLE = "Serving"
MAX_SLOTS_SHOWN = 256
MAX_LEVEL = 512


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


LATENCIES = (("ttft_p50", "TTFT p50", "ttft", "p50"), ("ttft_p90", "TTFT p90", "ttft", "p90"),
             ("ttft_p99", "TTFT p99", "ttft", "p99"), ("tpot_p50", "TPOT p50", "tpot", "p50"))


def _curves(levels: Sequence[ServingLevel], *, prefix: str, label: str, role: CurveRole,
            kind: CurveKind = "line") -> tuple[tuple[Curve, ...], tuple[Curve, ...]]:
    """(latency curves, throughput curves) of ``levels`` against concurrency."""
    x = np.array([lv.level for lv in levels], dtype=np.float64)

    def curve(key: str, name: str, y: list[float], y_name: str, y_unit: str) -> Curve:
        return Curve(key=prefix + key, label=name + label, x=x, y=np.array(y, dtype=np.float64),
                     x_name="concurrency", x_unit="requests", y_name=y_name, y_unit=y_unit, kind=kind, role=role)

    latency = tuple(curve(key, name, [getattr(getattr(lv, which), q) for lv in levels], "seconds", "s")
                    for key, name, which, q in LATENCIES)
    throughput = (curve("total", "all sequences", [lv.output_tokens_per_second for lv in levels],
                        "output rate", "tokens/s"),
                  curve("per_sequence", "each sequence (1 / TPOT)",
                        [lv.tokens_per_second_per_sequence for lv in levels], "output rate", "tokens/s"))
    return latency, throughput


def serving_chart(sc: Scenario, on: On = None, *, expected: MachineProfile | None = None,
                  measured: Sequence[ServingLevel] = (), measured_label: str = "measured server") -> Chart:
    """The Serving chart of ``sc`` (placed as ``on``): ceiling lines, the expected ones on
    ``expected`` (a calibrated profile) when given, ``measured`` concurrency levels as points,
    and the current workload's batch as a marker."""
    plan = serving_plan(sc, on)
    loads = levels_for(plan)
    ceiling = serve(sc.model, sc.machine, sc.workload, plan, loads, on)
    latency, throughput = _curves(ceiling.levels, prefix="", label="", role="main")
    if expected is not None:
        more = _curves(serve(sc.model, expected, sc.workload, plan, loads, on).levels, prefix="expected_",
                       label=" (expected)", role="calibrated")
        latency, throughput = latency + more[0], throughput + more[1]
    points = [lv for lv in measured if lv.mode == "concurrency" and lv.completed]
    if points:
        more = _curves(points, prefix="measured_", label=f" ({measured_label})", role="measured", kind="points")
        latency, throughput = latency + more[0], throughput + more[1]
    marker = Curve(key="batch", label=f"current batch ({sc.workload.batch})",
                   x=np.array([float(sc.workload.batch)]), y=np.zeros(0),
                   x_name="concurrency", x_unit="requests", y_name="", y_unit="", kind="vline", role="marker")
    panels = (
        Panel(key="latency", title="Latency under load", x_label="Concurrent requests", x_unit="requests",
              y_label="Seconds", y_unit="s", curves=(*latency, marker), log_x=True, log_y=True,
              note=f"{plan.slots} slots, {plan.step_tokens:,} tokens per step"),
        Panel(key="throughput", title="Output tokens per second", x_label="Concurrent requests", x_unit="requests",
              y_label="Output rate", y_unit="tokens/s", curves=(*throughput, marker), log_x=True, log_y=True,
              note=f"saturation {_rate(ceiling)}"),
    )
    return Chart(key=SERVING, title=SERVING_TITLE, panels=panels, description=(
        "A continuous-batching server (llama-server, vLLM) simulated step by step: up to the slots "
        "that fit, every step decodes one token per sequence and fills the rest of its token budget "
        "with prompt chunks, so a prompt arriving slows the tokens of those decoding; past the slots "
        "requests queue. Each concurrent client sends its next request when its last one ends."))


def _rate(s: Serving) -> str:
    return f"{s.saturation_rate:.3g} requests/s"
