"""The comparison table: models x machines x weight formats, each row placed as auto-fit places
it (or as a ``PlacementChoice`` asks: the window's "Add current" row carries the placement on
screen, by hand or on several devices), with memory, fit, the request's clocks, decode rates at
several depths, the largest context and the batch's rates. SI units throughout; ``rooflab
compare``, reports and the window's Compare view all build it here.

``expected``: a hook (model, machine) -> the machine as a calibration expects it to run that
model (``Expected.machine``), or None. The command line passes one that reads the store; the
expected columns stay empty (None) without it."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

import numpy as np

from rooflab.core.jobs import Progress, run_job
from rooflab.core.predict.autofit import largest_context, shortfall
from rooflab.core.predict.batching import cache_resident
from rooflab.core.predict.choice import AUTO, PlacementChoice
from rooflab.core.predict.offload import placed_decode, placed_request
from rooflab.core.predict.parallel import (
    Parallel,
    ParallelEstimate,
    parallel_decode,
    parallel_estimate,
    parallel_largest_context,
)
from rooflab.core.predict.placed import PlacedSummary, machine_as_placed, on_link, placed_as_chosen
from rooflab.core.predict.placement import Placement, describe
from rooflab.core.predict.request import RequestEstimate
from rooflab.core.report.chart_types import Description, devices_text, without_format
from rooflab.core.report.chart_types import distinguishing_labels as chart_labels
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.readable import byte_text
from rooflab.core.values.workload import Workload

DEPTHS: tuple[int, ...] = (0, 4096, 32768)
ExpectedHook = Callable[[ModelSpec, MachineProfile], MachineProfile | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompareRow:
    """One row. Figures are None where they do not apply: the clocks of a model that does not
    fit anywhere on the machine, the expected figures without a calibration."""

    model: str
    machine: str
    machine_key: str
    weights: str
    weight_bytes: float                 # resident, all memories
    kv_bytes: float                     # the batch's caches at full length
    fits: bool
    placement: str                      # in words, or what overflows
    flags: str                          # llama.cpp's flags for it ("" when it does not fit, or on several devices)
    device_used: float                  # bytes of the device's memory the placement uses
    device_capacity: float
    ttft: float | None                  # seconds
    tpot: float | None
    expected_ttft: float | None
    expected_tpot: float | None
    decode_rates: tuple[tuple[int, float | None], ...]     # (depth, tokens/s per sequence at batch 1)
    largest_context: int                # tokens per sequence at the batch, this placement
    per_sequence: float | None          # tokens/s each sequence of the batch sees
    total: float | None                 # tokens/s over the batch
    chosen: str = ""                    # the placement asked for ("-ngl 20", "2 × tensor parallel"); "" auto-fit
    expected_per_sequence: float | None = None     # tokens/s: 1 / expected TPOT
    expected_total: float | None = None            # tokens/s: batch / expected TPOT
    offload: str = ""                   # what sits in the second memory: "" nothing, "experts", "layers"


def expected_row_request(spec: ModelSpec, machine: MachineProfile, workload: Workload, placement: Placement | Parallel,
                     expected: ExpectedHook | None, link: Parallel | None = None) -> RequestEstimate | None:
    """The request a calibration expects for ``placement`` (or on ``Parallel``'s devices, each
    at the calibrated rates and the link as stated): the same request on the machine
    ``expected`` returns (with ``link`` between the devices of a layer split with host memory,
    as the placement is priced: ``placed.machine_as_placed``); None without a hook or a
    calibration."""
    calibrated = expected(spec, machine) if expected is not None else None
    if calibrated is None:
        return None
    if isinstance(placement, Parallel):
        return parallel_estimate(spec, calibrated, workload, placement)
    return placed_request(spec, calibrated if link is None else on_link(calibrated, link), workload, placement)


def offload_kind(spec: ModelSpec, placement: Placement) -> str:
    """What of ``spec`` a placement keeps in the second memory, in one word: "" nothing (every
    layer, expert and the cache on the device), "experts" (the routed experts of some layers;
    every layer's attention on the device), "layers" (whole layers, or the cache)."""
    p = placement.clamp(spec)
    if p.gpu_layers < spec.layers + 1 or not p.kv_on_device:
        return "layers"
    return "experts" if p.cpu_moe else ""


def _placed(spec: ModelSpec, machine: MachineProfile, workload: Workload,
            choice: PlacementChoice | None) -> PlacedSummary:
    """Placed as ``choice`` asks when it places the model by hand or on several devices (as the
    window's headline places it: ``report.summary``), else by auto-fit (or the workload's
    offload share)."""
    return placed_as_chosen(spec, machine, workload, AUTO if choice is None else choice, suggest=False)


def compare_row(spec: ModelSpec, machine: MachineProfile, workload: Workload, *, weights: str = "",
                depths: Sequence[int] = DEPTHS, expected: ExpectedHook | None = None,
                choice: PlacementChoice | None = None) -> CompareRow:
    """One row for ``spec`` on ``machine`` at ``workload``, placed by auto-fit, or as ``choice``
    asks when it places the model by hand or on several devices (then the row's figures are
    the window's headline for that choice: the placement given, fitting or not, or the devices'
    estimate and each device's memory)."""
    s = _placed(spec, machine, workload, choice)
    if s.parallel is not None and s.fit.placement.devices == 1:        # the devices share every layer
        return _parallel_row(spec, machine, workload, s.parallel, s.estimate, weights=weights, depths=depths,
                             expected=expected)
    # one device, or a layer split with host memory priced on the link between its devices
    link = None if s.parallel is None else s.parallel.parallel
    fit, est = s.fit, s.estimate
    plan = fit.memory
    ok = fit.fits
    priced = machine_as_placed(machine, s)
    steps = np.atleast_1d(placed_decode(spec, priced, workload, fit.placement, context=list(depths), batch=1).seconds)
    rates = [(int(d), 1.0 / float(s) if ok else None) for d, s in zip(depths, steps, strict=True)]
    exp = expected_row_request(spec, machine, workload, fit.placement, expected, link) if ok else None
    length = workload.context + workload.prompt + workload.answer
    by_hand = s.how == "manual"
    if ok:
        placement = describe(spec, fit.placement, machine) + (", placed by hand" if by_hand else "")
    else:
        placement = f"{fit.placement.flags()} (does NOT fit: {shortfall(plan)})" if by_hand else \
            fit.describe(spec, machine)
    return CompareRow(
        model=spec.name, machine=machine.name, machine_key=machine.key, weights=weights or spec.weights_format,
        weight_bytes=plan.device.weights + plan.host.weights,
        kv_bytes=float(cache_resident(spec, length, workload.batch, workload.kv_type)),
        fits=ok, placement=placement, device_used=plan.device.used,
        flags=fit.placement.flags() if ok and machine.kind != "cpu" else "",     # a CPU has no -ngl to set
        device_capacity=plan.device.capacity,
        ttft=est.ttft if ok else None, tpot=est.tpot if ok else None,
        expected_ttft=None if exp is None else exp.ttft, expected_tpot=None if exp is None else exp.tpot,
        expected_per_sequence=None if exp is None else exp.decode_rate,
        expected_total=None if exp is None else exp.total_rate, decode_rates=tuple(rates),
        largest_context=largest_context(spec, machine, workload, fit.placement) if ok else 0,
        per_sequence=est.decode_rate if ok else None, total=est.total_rate if ok else None,
        chosen="" if choice is None or choice.is_auto else choice.describe(),
        offload=offload_kind(spec, fit.placement) if ok else "")


def _parallel_row(spec: ModelSpec, machine: MachineProfile, workload: Workload, par: ParallelEstimate,
                  est: RequestEstimate, *, weights: str, depths: Sequence[int],
                  expected: ExpectedHook | None) -> CompareRow:
    """The row of a model shared by several devices: their estimate ``est`` (the link's time in
    it), each device's memory, decode rates and the largest context on the devices."""
    p, mem = par.parallel, par.memory
    ok = par.fits
    rates = [(int(d), 1.0 / float(parallel_decode(spec, machine, workload, p, context=d, batch=1).seconds)
              if ok else None) for d in depths]
    exp = expected_row_request(spec, machine, workload, p, expected) if ok else None
    length = workload.context + workload.prompt + workload.answer
    words = devices_text(p.devices, p.mode)
    placement = words if ok else \
        f"{words} (does NOT fit: needs {byte_text(mem.used)} of {byte_text(mem.capacity)} per device)"
    return CompareRow(
        model=spec.name, machine=machine.name, machine_key=machine.key, weights=weights or spec.weights_format,
        weight_bytes=mem.weights * p.devices,
        kv_bytes=float(cache_resident(spec, length, workload.batch, workload.kv_type)),
        fits=ok, placement=placement, flags="", device_used=mem.used, device_capacity=mem.capacity,
        ttft=est.ttft if ok else None, tpot=est.tpot if ok else None,
        expected_ttft=None if exp is None else exp.ttft, expected_tpot=None if exp is None else exp.tpot,
        expected_per_sequence=None if exp is None else exp.decode_rate,
        expected_total=None if exp is None else exp.total_rate, decode_rates=tuple(rates),
        largest_context=parallel_largest_context(spec, machine, workload, p) if ok else 0,
        per_sequence=est.decode_rate if ok else None, total=est.total_rate if ok else None, chosen=words)


def compare_rows(entries: Sequence[tuple[ModelSpec, MachineProfile, str]], workload: Workload, *,
                 depths: Sequence[int] = DEPTHS, expected: ExpectedHook | None = None) -> list[CompareRow]:
    """A row for each (model, machine, weight format) in order, each placed by auto-fit."""
    return run_job(compare_rows_job(entries, workload, depths=depths, expected=expected))


def compare_rows_job(entries: Sequence[tuple[ModelSpec, MachineProfile, str]], workload: Workload, *,
                     depths: Sequence[int] = DEPTHS, expected: ExpectedHook | None = None,
                     ) -> Generator[Progress, None, list[CompareRow]]:
    """``compare_rows`` as a job: a Progress after each row worked out (a few milliseconds
    each, so a thousand rows take seconds). An entry that repeats an earlier one (the same
    model and machine objects, the same weight format) is worked out once."""
    done: dict[tuple[int, int, str], CompareRow] = {}
    rows: list[CompareRow] = []
    for i, (spec, machine, weights) in enumerate(entries):
        key = (id(spec), id(machine), weights)
        if key not in done:
            done[key] = compare_row(spec, machine, workload, weights=weights, depths=depths, expected=expected)
        rows.append(done[key])
        yield Progress(step="compare", message=f"{i + 1:,} of {len(entries):,} rows",
                       fraction=(i + 1) / len(entries))
    return rows


def row_depths(rows: Sequence[CompareRow]) -> tuple[int, ...]:
    """The depths ``rows``' decode-rate columns were worked out at (``DEPTHS`` when there are
    no rows): a table or a chart labels the columns the rows have, not the defaults."""
    return tuple(d for d, _ in rows[0].decode_rates) if rows else DEPTHS


def compare_columns(depths: Sequence[int] = DEPTHS) -> list[tuple[str, str]]:
    """(key, unit) of every column, in order; the keys are the CSV and JSON names."""
    cols = [("model", ""), ("machine", ""), ("weights", ""), ("weight_bytes", "B"), ("kv_bytes", "B"),
            ("fits", ""), ("placement", ""), ("flags", ""), ("device_used_bytes", "B"),
            ("device_capacity_bytes", "B"), ("ttft_seconds", "s"), ("tpot_seconds", "s"),
            ("expected_ttft_seconds", "s"), ("expected_tpot_seconds", "s")]
    cols += [(f"decode_tokens_per_second_at_{d}", "tokens/s") for d in depths]
    cols += [("largest_context_tokens", "tokens"), ("tokens_per_second_per_sequence", "tokens/s"),
             ("tokens_per_second_total", "tokens/s"),
             # added later: at the end, so that a CSV read by position keeps its columns
             ("expected_tokens_per_second_per_sequence", "tokens/s"),
             ("expected_tokens_per_second_total", "tokens/s"), ("offload", "")]
    return cols


def row_dict(row: CompareRow) -> dict[str, str | float | int | bool | None]:
    """The row under ``columns``' keys (SI units; None where a figure does not apply)."""
    d: dict[str, str | float | int | bool | None] = {
        "model": row.model, "machine": row.machine, "weights": row.weights, "weight_bytes": row.weight_bytes,
        "kv_bytes": row.kv_bytes, "fits": row.fits, "placement": row.placement, "flags": row.flags,
        "device_used_bytes": row.device_used, "device_capacity_bytes": row.device_capacity,
        "ttft_seconds": row.ttft, "tpot_seconds": row.tpot, "expected_ttft_seconds": row.expected_ttft,
        "expected_tpot_seconds": row.expected_tpot}
    for depth, rate in row.decode_rates:
        d[f"decode_tokens_per_second_at_{depth}"] = rate
    d.update({"largest_context_tokens": row.largest_context, "tokens_per_second_per_sequence": row.per_sequence,
              "tokens_per_second_total": row.total,
              "expected_tokens_per_second_per_sequence": row.expected_per_sequence,
              "expected_tokens_per_second_total": row.expected_total, "offload": row.offload})
    return d


def _cell(value: str | float | int | bool | None) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "inf" if value > 0 else ""
        return str(round(value)) if value >= 1e6 and value.is_integer() else f"{value:.10g}"
    return str(value)


def compare_csv(rows: Sequence[CompareRow], header: Sequence[str] = (), depths: Sequence[int] | None = None) -> str:
    """The table as CSV: ``#`` header lines, a row of column keys, one line per row (empty
    cells where a figure does not apply; byte counts whole); the decode-rate columns at
    ``depths`` (default: those the rows were worked out at)."""
    depths = row_depths(rows) if depths is None else depths
    out = io.StringIO()
    for line in header:
        out.write(f"# {line}\n")
    keys = [k for k, _ in compare_columns(depths)]
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(keys)
    for row in rows:
        d = row_dict(row)
        writer.writerow([_cell(round(v) if k.endswith("bytes") and isinstance(v, float) else v)
                         for k, v in ((k, d.get(k)) for k in keys)])
    return out.getvalue()


def row_labels(rows: Sequence[CompareRow]) -> list[str]:
    """A label per row as the charts' legends name a series (``chart_types.distinguishing_labels``):
    model with its weight format, machine (its preset key, else its name) and the placement asked
    for ("auto placement" for auto-fit)."""
    return chart_labels([row_description(r) for r in rows])


def row_description(row: CompareRow) -> Description:
    """The row as a series ``Description``: what its label is made of."""
    return Description(model=without_format(row.model, row.weights), machine=row.machine_key or row.machine,
                       weights=row.weights,
                       workload=(("placement", row.chosen or AUTO.describe()),))
