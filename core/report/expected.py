"""Expected figures beside the ceiling, for the command line's JSON and CSV and for reports:
the same sweeps priced on the calibrated profile, with the 16th-84th percentile band over the
calibration's replicates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rooflab.core.predict.expected import Expected
from rooflab.core.predict.offload import placed_decode, placed_prefill, placed_request
from rooflab.core.predict.parallel import Parallel, parallel_decode, parallel_estimate, parallel_prefill
from rooflab.core.predict.placement import Placement
from rooflab.core.predict.request import RequestEstimate, request
from rooflab.core.predict.sweep import decode_grid, prefill_sweep
from rooflab.core.report.units import fmt, fmt_range
from rooflab.core.values.calibration import EngineCalibration, band
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

#: Where a request's figures stand: one device holding the model (None), a placement across a
#: device and host memory, or several devices sharing it.
StandsOn = Placement | Parallel | None


def calibration_dict(cal: EngineCalibration, notes: Sequence[str] = ()) -> dict[str, Any]:
    """Where the expected figures come from: engine, settings, date, models, accuracy."""
    return {"machine_key": cal.machine_key, "machine": cal.machine_name, "engine": cal.engine_label,
            "engine_key": cal.engine_key, "settings": dict(cal.settings), "date": cal.date,
            "models": list(cal.models), "source": cal.source,
            "accuracy": {p: {k: a.to_dict() for k, a in v.items()} for p, v in cal.accuracy.items()
                         if p != "in_sample"},
            "fit_quality_in_sample": {k: a.to_dict() for k, a in cal.accuracy.get("in_sample", {}).items()},
            "notes": [*cal.notes, *notes]}


def _banded(name: str, central: np.ndarray, low: np.ndarray, high: np.ndarray, i: Any) -> dict[str, float]:
    return {name: float(central[i]), f"{name}_low": float(low[i]), f"{name}_high": float(high[i])}


def decode_step_seconds(spec: ModelSpec, m: MachineProfile, workload: Workload, contexts: Sequence[int],
                        batches: Sequence[int], on: StandsOn = None) -> np.ndarray:
    """Seconds of one decode step at every (context, batch), shape (contexts, batches), on ``on``:
    one memory (None), a placement across the device and host memory, or several devices. The
    ceiling's rows and their expected twins are both priced here, so each twin stands on the
    placement its ceiling does."""
    t = np.asarray(contexts, dtype=np.float64).reshape(-1, 1)
    b = np.asarray(batches, dtype=np.float64).reshape(1, -1)
    if isinstance(on, Parallel):
        seconds = parallel_decode(spec, m, workload, on, context=t, batch=b).seconds
    elif isinstance(on, Placement):
        seconds = placed_decode(spec, m, workload, on, context=t, batch=b).seconds
    else:
        seconds = decode_grid(spec, m, workload, contexts, batches).step_seconds
    return np.broadcast_to(seconds, (t.size, b.size))


def prefill_seconds(spec: ModelSpec, m: MachineProfile, workload: Workload, prompts: Sequence[int],
                    on: StandsOn = None) -> np.ndarray:
    """Seconds of a prefill of each prompt length (one sequence after the workload's context)
    on ``on``, as ``decode_step_seconds``."""
    n = np.array([max(1, p) for p in prompts], dtype=np.float64)
    if isinstance(on, Parallel):
        return np.asarray(parallel_prefill(spec, m, workload, on, prompt=n, batch=1).seconds)
    if isinstance(on, Placement):
        return np.asarray(placed_prefill(spec, m, workload, on, prompt=n, batch=1).seconds)
    return np.asarray(prefill_sweep(spec, m, workload, n).seconds)


def expected_decode_rows(spec: ModelSpec, ex: Expected, workload: Workload, contexts: Sequence[int],
                         batches: Sequence[int], on: StandsOn = None) -> list[dict[str, float]]:
    """Per (context, batch), in ``decode_grid``'s order: expected seconds per step and rates,
    each with _low / _high (the slow end of the seconds is the low end of the rates), on ``on``
    (see ``decode_step_seconds``)."""
    def seconds(m: MachineProfile) -> np.ndarray:
        return decode_step_seconds(spec, m, workload, contexts, batches, on)

    central = seconds(ex.machine)
    low, high = ex.curve_band(seconds)
    b = np.asarray(batches, dtype=np.float64).reshape(1, -1)
    # each figure's grid once (made per row, they made a 100,000-row grid take minutes)
    grids = (("expected_seconds", central, low, high),
             ("expected_tokens_per_second_per_sequence", 1 / central, 1 / high, 1 / low),
             ("expected_tokens_per_second_total", b / central, b / high, b / low))
    return [{key: value for name, mid, lo, hi in grids for key, value in _banded(name, mid, lo, hi, (i, j)).items()}
            for i in range(len(contexts)) for j in range(len(batches))]


def expected_prefill_rows(spec: ModelSpec, ex: Expected, workload: Workload,
                          prompts: Sequence[int], on: StandsOn = None) -> list[dict[str, float]]:
    """Per prompt length: expected seconds and prompt tokens/s, each with _low / _high, on ``on``."""
    n = np.array([max(1, p) for p in prompts], dtype=np.float64)

    def seconds(m: MachineProfile) -> np.ndarray:
        return prefill_seconds(spec, m, workload, prompts, on)

    central = seconds(ex.machine)
    low, high = ex.curve_band(seconds)
    return [{**_banded("expected_seconds", central, low, high, i),
             **_banded("expected_tokens_per_second", n / central, n / high, n / low, i)} for i in range(n.size)]


def expected_request(spec: ModelSpec, ex: Expected, workload: Workload,
                     placement: StandsOn = None) -> dict[str, float]:
    """TTFT, TPOT and end-to-end of the workload's request, expected, with bounds; on
    ``placement`` (layers and experts across GPU and host, or several devices) when given, as
    the headline is. On several devices each runs at the calibrated rates and the link at its
    stated bandwidth: no calibration has timed a link."""
    def estimate(m: MachineProfile) -> RequestEstimate:
        if isinstance(placement, Parallel):       # each device at the calibrated rates, the link as stated
            return parallel_estimate(spec, m, workload, placement)
        return request(spec, m, workload) if placement is None else placed_request(spec, m, workload, placement)

    central = estimate(ex.machine)
    spread = [estimate(m) for m in ex.replicas]
    out: dict[str, float] = {}
    for name in ("ttft", "tpot", "end_to_end"):
        value = float(getattr(central, name))
        low, high = band(value, [getattr(r, name) for r in spread])
        out |= {f"expected_{name}_seconds": value, f"expected_{name}_seconds_low": float(low),
                f"expected_{name}_seconds_high": float(high)}
    return out


def with_expected(d: dict[str, Any], spec: ModelSpec, ex: Expected, workload: Workload, contexts: Sequence[int],
                  batches: Sequence[int], prompts: Sequence[int], placement: StandsOn = None,
                  runs: bool = True, rows_on: StandsOn = None) -> dict[str, Any]:
    """``d`` (``predict``'s JSON: request, decode rows, prefill rows) with each ceiling figure's
    expected twin beside it, and where the expectation comes from. The request's twins are on
    ``placement`` when given (the headline's); the rows' on ``rows_on`` (default ``placement``),
    where the rows' placed figures are priced (``PlacedSummary.priced_on``), so no expected
    figure stands on another placement than its ceiling. ``runs``: False for a model that does
    not fit here, whose request gets no expected twin."""
    on = placement if rows_on is None else rows_on
    for row, more in zip(d["decode"], expected_decode_rows(spec, ex, workload, contexts, batches, on), strict=True):
        row.update(more)
    for row, more in zip(d["prefill"], expected_prefill_rows(spec, ex, workload, prompts, on), strict=True):
        row.update(more)
    if runs:         # a model that cannot run here has no expected request (nor a reachable ceiling)
        d["request"].update(expected_request(spec, ex, workload, placement))
    d["calibration"] = calibration_dict(ex.calibration, ex.notes)
    return d


def published_origin(cal: EngineCalibration) -> str:
    """What a published calibration was fitted on: llama.cpp's back ends on their published
    llama-bench results, vLLM on its own published runs."""
    if cal.engine_key == "vllm-published":
        return "vLLM's published runs"
    return "published benchmarks of the back end"


def expected_text(spec: ModelSpec, ex: Expected, workload: Workload, placement: StandsOn = None) -> str:
    """Lines for ``predict``'s text output: the expected request beside where it comes from."""
    r = expected_request(spec, ex, workload, placement)
    cal = ex.calibration
    origin = {"public": published_origin(cal), "none": "no calibration: the ceiling"}.get(
        cal.source, f"calibrated {cal.date[:10]}")
    lines = [f"expected with {cal.engine_label} ({origin}):"]
    for label, key in (("time to first token", "expected_ttft_seconds"),
                       ("time per output token", "expected_tpot_seconds")):
        # in a person's units, as every other figure ("7.62 s", not "7622.65 ms")
        band = fmt_range(r[key + "_low"], r[key + "_high"], "s")
        lines.append(f"  {label:<22} {fmt(r[key], 's'):>10}  (band {band})")
    moe = ex.machine.efficiency.expert_overhead
    if moe > 0:        # a small-active MoE model's step is more than its bytes: say how much more
        lines.append(f"  {'of each step':<22} {fmt(moe, 's'):>10}  the routed-expert layers' fixed cost (router, "
                     "gather, the experts' kernels)")
    for phase, label in (("prefill", "prompt processing"), ("decode", "generation"), ("batch", "batched decode")):
        phrase = accuracy_phrase(cal, phase)
        if phrase:
            lines.append(f"  {label}: {phrase}")
    lines += [f"  note: {n}" for n in ex.notes]
    return "\n".join(lines)


def accuracy_phrase(cal: EngineCalibration, phase: str) -> str:
    """"off by 9% (median, worst 21%) on models the calibration did not see" for ``phase``:
    leave-one-model-out for a calibration timed here, leave-one-machine-out for a back end's
    published factors; "" when there is no out-of-sample score for it. Never the in-sample fit."""
    for protocol, what in (("leave_one_model_out", "models"), ("leave_one_machine_out", "machines")):
        if cal.source == "public" and protocol == "leave_one_model_out":
            continue
        found = cal.accuracy.get(protocol, {}).get(phase)
        if found is not None:
            return f"off by {found.median:.0%} (median, worst {found.worst:.0%}) on {what} the calibration did not see"
    return ""


def expected_csv(spec: ModelSpec, ex: Expected, workload: Workload, header: Sequence[str],
                 placement: StandsOn = None) -> str:
    """The report's expected.csv: the request's expected TTFT, TPOT and end to end with their
    band (on ``placement``, the headline's, when given), after a header naming the calibration
    and its out-of-sample accuracy."""
    from rooflab.core.report.csv_files import number

    cal = ex.calibration
    lines = [f"# {line}" for line in header]
    lines.append(f"# expected with {cal.engine_label} ({cal.source}, {cal.date[:10]}; models: {', '.join(cal.models)})")
    for phase in ("prefill", "decode", "batch"):
        phrase = accuracy_phrase(cal, phase)
        if phrase:
            lines.append(f"# {phase}: {phrase}")
    lines += [f"# note: {n}" for n in ex.notes]
    lines.append("figure,expected,low,high,unit")
    r = expected_request(spec, ex, workload, placement)
    for name in ("ttft", "tpot", "end_to_end"):
        key = f"expected_{name}_seconds"
        lines.append(f"{name},{number(r[key])},{number(r[key + '_low'])},{number(r[key + '_high'])},s")
    return "\n".join(lines) + "\n"
