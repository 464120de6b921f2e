"""Whether a machine measurement can be trusted, checked before its profile is kept or used.

A figure of a busy machine is not a ceiling: a 256 x 256 multiply timed while other programs
ran once gave an "fp32 peak" of 1.7 GFLOP/s beside roofline points of 30 GFLOP/s from the same
run, and every prediction built on it was 10x too slow. The checks:

- the peak is a ceiling: no empirical-roofline multiply beats its dtype's peak by more than
  ``ROOF_TOLERANCE``;
- bandwidth and peak are plausible against each other: the default dtype's peak over the
  bandwidth (FLOP per byte, the machine balance) lies in ``BALANCE_RANGE``, which spans every
  CPU and GPU from a laptop without AVX to an accelerator's tensor cores;
- the fp32 peak is possible on this processor: no more than its cores, clock and vector units
  allow (``sysinfo.cpu_fp32_bound``, from its own description);
- the run is not short of an earlier one of the same machine (same processor, threads and torch):
  no headline figure (the fastest streaming kernel's median, each dtype's peak) more than
  ``SPREAD_LIMIT`` below the best an accepted run reached (``short_of``). A timing cannot run
  faster than the hardware allows, so the higher figure is the nearer the ceiling: a run made
  while neighbours held the memory or the cores all along agrees with itself and passes every
  other check (an fp32 peak of 30 GFLOP/s where the quiet machine gives 67), and only this one
  tells it.

A run that fails says why in one line (``MachineMeasurement.disturbed``); the workflow keeps it
apart and never makes it "this machine, measured".

What only says the machine moved while it ran is not a refusal (``unsteadiness``): runs of one
figure more than ``SPREAD_LIMIT`` apart, or the load average rising by more than
``trust.LOAD_RISE_LIMIT``. On a shared cloud VM the bandwidth runs move 40-80 % with the
neighbours, and refusing them left a user there with no measured machine at all; such a figure
is the median of its faster runs (``values.machine_run.settled``), and the run says so in
``unsteady``. No torch here."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from rooflab.core.measure.machine.trust import LOAD_RISE_LIMIT
from rooflab.core.values.machine_run import GB, STEADY_SPREAD, MachineMeasurement

#: (fastest - slowest) / median of one figure's runs above which the runs disagree.
SPREAD_LIMIT = STEADY_SPREAD
#: How far an empirical-roofline multiply may beat its dtype's peak (timing noise), no more.
ROOF_TOLERANCE = 0.10
#: Plausible peak / bandwidth, FLOP per byte (an old laptop near 0.5, an accelerator's tensor
#: cores a few hundred).
BALANCE_RANGE = (0.25, 2000.0)
#: Reasons named in the one line; more are counted.
SHOWN = 2


def problems(run: MachineMeasurement, earlier: Iterable[MachineMeasurement] = ()) -> list[str]:
    """What makes ``run`` implausible, most telling first; empty when it passes every check.
    ``earlier``: accepted runs it must not fall short of (``short_of``)."""
    return _roof_problems(run) + _balance_problems(run) + _bound_problems(run) + short_of(run, earlier)


def unsteadiness(run: MachineMeasurement) -> list[str]:
    """What moved while ``run`` went on: figures whose runs are more than ``SPREAD_LIMIT`` apart
    (the faster half's median is taken) and a rising load. Kept and said, never refused."""
    found = [f"{r.kernel} bandwidth runs differ by {r.spread:.0%}" for r in run.bandwidth if r.spread > SPREAD_LIMIT]
    found += [f"{m.dtype} matmul runs differ by {m.spread:.0%}" for m in run.matmul if m.spread > SPREAD_LIMIT]
    if run.load_start is not None and run.load_end is not None and run.load_end - run.load_start > LOAD_RISE_LIMIT:
        found.append(f"the load average rose from {run.load_start:.2f} to {run.load_end:.2f}")
    if not found:
        return []
    return found[:SHOWN] + ([f"{len(found) - SHOWN} more"] if len(found) > SHOWN else []) + [
        "each such figure is the median of its faster runs"]


def _roof_problems(run: MachineMeasurement) -> list[str]:
    peaks = run.peak_flops()
    found = []
    for dtype, peak in peaks.items():
        beating = [s for s in run.roofline if s.dtype == dtype and s.achieved > peak * (1.0 + ROOF_TOLERANCE)]
        if beating:
            top = max(beating, key=lambda s: s.achieved)
            found.append(f"a {top.m}-row {dtype} multiply reached {top.achieved / 1e9:.1f} GFLOP/s, above the "
                         f"{dtype} peak of {peak / 1e9:.1f} GFLOP/s")
    return found


def _bound_problems(run: MachineMeasurement) -> list[str]:
    fp32 = run.peak_flops().get("fp32")
    if fp32 is None or not run.fp32_bound or fp32 <= run.fp32_bound:
        return []
    return [f"an fp32 peak of {fp32 / 1e9:.1f} GFLOP/s is above the {run.fp32_bound / 1e9:.1f} GFLOP/s "
            f"this processor's cores, clock and vector units allow: the timing is wrong"]


def _balance_problems(run: MachineMeasurement) -> list[str]:
    peaks = run.peak_flops()
    if not run.bandwidth or not peaks:
        return []
    bandwidth = max(r.figure for r in run.bandwidth)
    dtype = run.default_dtype if run.default_dtype in peaks else max(peaks, key=lambda k: peaks[k])
    balance = peaks[dtype] / bandwidth
    low, high = BALANCE_RANGE
    if low <= balance <= high:
        return []
    return [f"a {dtype} peak of {peaks[dtype] / 1e9:.1f} GFLOP/s beside {bandwidth / GB:.1f} GB/s is "
            f"{balance:.2g} FLOP per byte (machines have {low:g} to {high:g})"]


def same_machine(a: MachineMeasurement, b: MachineMeasurement) -> bool:
    """Whether ``a`` and ``b`` measured one machine the same way: device, processor, threads and
    torch (a new torch may multiply at another speed, fewer threads surely do)."""
    return (a.device, a.device_name, a.threads, a.torch_version) == (b.device, b.device_name, b.threads,
                                                                      b.torch_version)


def headline(run: MachineMeasurement) -> dict[str, tuple[float, str]]:
    """The figures a profile is made of, by name: "bandwidth" (the fastest streaming kernel's
    median, bytes/s) and "<dtype> peak" (FLOP/s), each with its unit for the one line."""
    figures = {f"{dtype} peak": (value, "GFLOP/s") for dtype, value in run.peak_flops().items()}
    if run.bandwidth:
        figures["bandwidth"] = (max(r.figure for r in run.bandwidth), "GB/s")
    return figures


def short_of(run: MachineMeasurement, earlier: Iterable[MachineMeasurement]) -> list[str]:
    """Each headline figure of ``run`` more than ``SPREAD_LIMIT`` below the best that an accepted
    (not disturbed) run of ``earlier`` on the same machine reached, with that run's date."""
    best: dict[str, tuple[float, str]] = {}
    for other in earlier:
        if other.disturbed or not same_machine(run, other):
            continue
        for name, (value, _) in headline(other).items():
            if value > best.get(name, (0.0, ""))[0]:
                best[name] = (value, other.date)
    found = []
    for name, (value, unit) in headline(run).items():
        top, date = best.get(name, (0.0, ""))
        if top and value < top * (1.0 - SPREAD_LIMIT):
            found.append(f"its {name} of {value / 1e9:.1f} {unit} is {1.0 - value / top:.0%} below the "
                         f"{top / 1e9:.1f} {unit} of this machine's run of {date[:16].replace('T', ' ')}")
    return found


def disturbance(run: MachineMeasurement, earlier: Iterable[MachineMeasurement] = ()) -> str:
    """One line saying why ``run`` cannot be trusted, "" when it can."""
    found = problems(run, earlier)
    if len(found) > SHOWN:
        return "; ".join(found[:SHOWN]) + f"; {len(found) - SHOWN} more"
    return "; ".join(found)


def judge_machine(run: MachineMeasurement, earlier: Iterable[MachineMeasurement] = ()) -> MachineMeasurement:
    """``run`` with ``disturbed`` set from the checks (cleared when it passes them) and
    ``unsteady`` from what moved while it ran."""
    return dataclasses.replace(run, disturbed=disturbance(run, tuple(earlier)), unsteady="; ".join(unsteadiness(run)))
