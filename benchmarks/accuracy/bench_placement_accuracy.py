"""How well the placement model predicts public llama-bench rows that the one-device fit never saw:
several devices (a layer split) and partial offload, beside the one-device rows scored the same way.

Reads resources/benchmarks/*.json. Every back end's factors are fitted as the expected figures fit
them (``measure.public.fit_groups`` on the rows ``public_fit.fittable`` keeps: one device, every
weight on it), so a row on several devices or with weights in host memory is out of sample by
construction; ``--leave-source-out`` refits without the row's whole source as well (its one-device
rows of the same machines and models too). A row is then priced by the placement model's clocks on
a machine made of its published bandwidth and FP16 peak at those factors (``expected.efficiency_for``):

- several devices: llama.cpp's placement (-ngl, --n-cpu-moe) over N devices, ``offload.placed_prefill``
  and ``placed_decode``: the devices in turn with the hidden state's hops, a prompt of several
  ubatches pipelined across them (``layer_split.pipeline_share``); the link is the row machine's
  preset's when rooflab has one (``parallel.device_link``), else PCIe 4.0 x16;
- offloaded: the same clocks with the host part (host memory from the row, else dual-channel DDR5,
  at llama.cpp's CPU factors);
- on device: the fitted rows scored leaving their machine out (``public_score.held_out``), and the
  one-device rows the fit leaves out that still hold every weight (a CPU at -ngl 0).

Prints median and worst |predicted - measured| / measured by category x tg/pp, the several-device
rows by device count and by prompt length, the pipelining's effect, and the worst rows. No
measurement, no GPU; about a minute.

    python benchmarks/accuracy/bench_placement_accuracy.py
    python benchmarks/accuracy/bench_placement_accuracy.py --leave-source-out

Targets (issue 17): several devices within 20 % (median), offloaded within 25 %, on device 15 %.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from rooflab.core.calibration import public, public_fit, public_score
from rooflab.core.errors import RooflabError
from rooflab.core.io.presets import load_machine
from rooflab.core.io.public_bench import PublicBenchmarks, PublicRow
from rooflab.core.predict.expected import efficiency_for
from rooflab.core.predict.layer_split import pipelines
from rooflab.core.predict.offload import placed_decode, placed_prefill
from rooflab.core.predict.parallel import Parallel, parallel_decode, parallel_prefill
from rooflab.core.predict.placement import Placement
from rooflab.core.values.calibration import Rates
from rooflab.core.values.links import HostLink
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

CATEGORIES = ("on device", "offloaded", "several devices")
PCIE4 = HostLink(generation=4, lanes=16)
HOST_BANDWIDTH = 89.6e9          # bytes/s: dual-channel DDR5-5600, when a row does not state its host memory
HOST_MEMORY = 1e12               # bytes: room plays no part in a speed
MIN_UBATCH = public_fit.MIN_UBATCH


@dataclass(frozen=True, slots=True)
class Scored:
    """One row predicted out of sample: its category, tokens/s measured and predicted, and for a
    pipelined prefill the figure without the pipelining (NaN otherwise)."""

    row: int
    category: str
    measured: float
    predicted: float
    sequential: float = math.nan

    @property
    def error(self) -> float:
        return abs(self.predicted - self.measured) / self.measured


def category(data: PublicBenchmarks, row: PublicRow) -> str | None:
    """Where the row's weights sit: "several devices", "offloaded" (some in host memory), "on
    device"; None for a row left out (a -ub below ``MIN_UBATCH`` on one device, whose weights are
    re-read per ubatch: not a term of the clocks)."""
    s, layers = row.source, public.spec_of(data, row).layers
    if (s.devices or 1) > 1:
        return "several devices"
    on_gpu = data.machine(row.machine).backend != "cpu"
    if s.partial_offload or (on_gpu and s.ngl is not None and s.ngl <= layers):
        return "offloaded"
    small = row.test.kind != "decode" and s.ubatch is not None and s.ubatch < min(MIN_UBATCH, row.test.tokens)
    return None if small else "on device"


@functools.lru_cache(maxsize=64)
def _link_of(key: str) -> MachineProfile | None:
    try:
        return load_machine(key)
    except RooflabError:
        return None


def priced_machine(data: PublicBenchmarks, row: PublicRow, rates: Rates, host: Rates | None) -> MachineProfile:
    """The row's machine (published B and FP16 peak) at ``rates``, with a host tier and the links
    of rooflab's preset of the same key (else PCIe 4.0 x16 both to the host and between devices)."""
    spec = public.spec_of(data, row)
    bare = public.machine_profile(data.machine(row.machine))
    preset = _link_of(row.machine)
    link = {"interconnect_bandwidth": PCIE4.bandwidth, "interconnect_name": PCIE4.name, "interconnect_kind": "pcie",
            "interconnect_devices": 0, "host_link": PCIE4}
    if preset is not None and preset.host_link is not None:
        link = {name: getattr(preset, name) for name in link}
    machine = dataclasses.replace(bare, offload_bandwidth=row.source.host_bandwidth or HOST_BANDWIDTH,
                                  offload_memory=HOST_MEMORY, offload_name="host memory", **link)
    eff = efficiency_for(spec, machine, rates, dtype="fp16", relative=True, host=host)
    return dataclasses.replace(machine, efficiency=eff)


def placement_of(data: PublicBenchmarks, row: PublicRow) -> Placement:
    """llama.cpp's placement flags of the row: -ngl (999: every layer), --n-cpu-moe, devices."""
    s, spec = row.source, public.spec_of(data, row)
    ngl = spec.layers + 1 if s.ngl is None else min(s.ngl, spec.layers + 1)
    return Placement(gpu_layers=ngl, cpu_moe=s.n_cpu_moe or 0, devices=s.devices or 1)


def placed_rate(data: PublicBenchmarks, row: PublicRow, machine: MachineProfile, ubatch: int) -> float:
    """tokens/s of the row's test as placed: tgN = N / the sum of N decode steps at contexts
    d..d+N-1; ppN = N / one prefill of N tokens after d, in ubatches of ``ubatch``. Every layer
    on the devices (one or several): a layer split's own clocks (``parallel``); else the
    placement's (``offload``)."""
    spec, placement = public.spec_of(data, row), placement_of(data, row)
    n, depth = row.test.tokens, row.source.depth
    workload = Workload(prompt=n, ubatch=ubatch)
    contexts = depth + np.arange(n, dtype=np.float64)
    if pipelines(spec, placement) or placement == Placement.all_on_device(spec):
        p = Parallel.on(machine, placement.devices, "layer")
        if row.test.kind == "decode":
            return n / float(np.sum(parallel_decode(spec, machine, workload, p, context=contexts, batch=1).seconds))
        return n / float(parallel_prefill(spec, machine, workload, p, prompt=n, context=depth, batch=1).seconds)
    if row.test.kind == "decode":
        return n / float(np.sum(placed_decode(spec, machine, workload, placement, context=contexts, batch=1).seconds))
    return n / float(placed_prefill(spec, machine, workload, placement, prompt=n, context=depth, batch=1).seconds)


Fits = Callable[[PublicRow], tuple[dict[str, public_fit.Factors], float]]


def score_placed(data: PublicBenchmarks, fits_for: Fits) -> list[Scored]:
    """Every row outside the one-device fit, but the left-out ones, priced as placed."""
    out = []
    for i, row in enumerate(data.rows):
        where = category(data, row)
        if where is None or public_fit.fittable(row, public.spec_of(data, row).layers, data.machine(row.machine)):
            continue
        fits, ratio = fits_for(row)
        group = public_fit.group_of(data.machine(row.machine))
        if group not in fits:
            continue
        host = fits["cpu"].rates(ratio) if "cpu" in fits and group != "cpu" else None
        machine = priced_machine(data, row, fits[group].rates(ratio), host)
        ubatch = row.source.ubatch or 512
        predicted = placed_rate(data, row, machine, ubatch)
        sequential = math.nan
        if row.test.kind != "decode" and (row.source.devices or 1) > 1 and row.test.tokens > ubatch:
            sequential = placed_rate(data, row, machine, row.test.tokens)      # one ubatch: nothing to pipeline
        out.append(Scored(row=i, category=where, measured=row.tokens_per_second, predicted=predicted,
                          sequential=sequential))
    return out


def standard_fits(data: PublicBenchmarks) -> Fits:
    fits = public.fit_groups(data)
    ratio = public.expert_ratio(fits)
    return lambda row: (fits, ratio)


def source_out_fits(data: PublicBenchmarks) -> Fits:
    @functools.lru_cache(maxsize=64)
    def without(source: str) -> tuple[dict[str, public_fit.Factors], float]:
        fits = public.fit_groups(data, lambda r: public_score.source(data, r) == source)
        return fits, public.expert_ratio(fits)

    return lambda row: without(public_score.source(data, row))


def on_device(data: PublicBenchmarks) -> list[Scored]:
    """The fitted one-device rows, each predicted by a fit without its machine."""
    return [Scored(row=p.row, category="on device", measured=p.measured, predicted=p.predicted)
            for p in public_score.held_out(data, "machine")]


def scaling_check(data: PublicBenchmarks, scored: list[Scored], fits_for: Fits) -> list[Scored]:
    """The several-device rows whose source also ran the same test on one of the same devices,
    as speed-ups over that one device: measured (N devices / one) against predicted (the same
    clocks at N and at 1). Whatever the fit gets wrong about the device cancels, so this scores
    the placement's own terms (pipelining, hops, latencies)."""
    twins = {(r.machine, r.model, r.weights, r.test.name, public_score.source(data, r)): r
             for r in data.rows if (r.source.devices or 1) == 1}
    out = []
    for s in scored:
        row = data.rows[s.row]
        twin = twins.get((row.machine, row.model, row.weights, row.test.name, public_score.source(data, row)))
        if s.category != "several devices" or twin is None:
            continue
        fits, ratio = fits_for(row)
        machine = priced_machine(data, row, fits[public_fit.group_of(data.machine(row.machine))].rates(ratio), None)
        alone = placed_rate(data, twin, machine, twin.source.ubatch or 512)
        out.append(Scored(row=s.row, category=s.category, measured=row.tokens_per_second / twin.tokens_per_second,
                          predicted=s.predicted / alone, sequential=s.sequential / alone))
    return out


def _pct(x: float) -> str:
    return "    n/a" if math.isnan(x) else f"{100 * x:6.0f}%"


def table(title: str, groups: dict[str, list[Scored]]) -> None:
    print(f"\n{title}")
    print(f"  {'':28} {'rows':>5} {'median':>7} {'worst':>7} {'meas/pred':>10}")
    for name, scored in groups.items():
        if not scored:
            print(f"  {name:28} {0:5d}     (no public rows)")
            continue
        errors = [s.error for s in scored]
        ratio = float(np.median([s.measured / s.predicted for s in scored]))
        print(f"  {name:28} {len(scored):5d} {_pct(float(np.median(errors)))} {_pct(float(np.max(errors)))} "
              f"{ratio:10.2f}")


def kind(data: PublicBenchmarks, s: Scored) -> str:
    return public.kind(data.rows[s.row])


def by(items: Iterable[Scored], key: Callable[[Scored], str]) -> dict[str, list[Scored]]:
    out: dict[str, list[Scored]] = {}
    for s in items:
        out.setdefault(key(s), []).append(s)
    return dict(sorted(out.items()))


def report(data: PublicBenchmarks, scored: list[Scored]) -> None:
    cells = {f"{c} {k}": [s for s in scored if s.category == c and kind(data, s) == k]
             for c in CATEGORIES for k in ("tg", "pp")}
    table("by category (out of sample), |predicted - measured| / measured", cells)
    several = [s for s in scored if s.category == "several devices"]
    table("several devices, by device count and test", by(
        several, lambda s: f"{data.rows[s.row].source.devices} devices {kind(data, s)}"))
    table("several devices, prompt processing by prompt length", by(
        [s for s in several if kind(data, s) == "pp"], lambda s: f"pp{data.rows[s.row].test.tokens:>5}"))
    piped = [s for s in several if not math.isnan(s.sequential)]
    if piped:
        seq = float(np.median([abs(s.sequential - s.measured) / s.measured for s in piped]))
        now = float(np.median([s.error for s in piped]))
        print(f"\n  pipelined prompts ({len(piped)} rows of several ubatches): median error {_pct(now).strip()} "
              f"with llama.cpp's pipelining, {_pct(seq).strip()} without it (the devices strictly in turn)")
    print("\nworst rows outside the one-device fit (predicted / measured tokens/s):")
    for s in sorted((s for s in scored if s.category != "on device"), key=lambda s: -s.error)[:10]:
        r = data.rows[s.row]
        print(f"  {r.machine:18} {r.model:16} {r.weights:7} x{r.source.devices or 1} {r.test.name:7} "
              f"{s.predicted:9.1f} / {s.measured:9.1f}  {r.source.source or r.source.url}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leave-source-out", action="store_true",
                        help="also fit without each row's whole source (its one-device rows too)")
    args = parser.parse_args()
    start = time.perf_counter()
    data = public.load_public()
    left = sum(1 for r in data.rows if category(data, r) is None)
    fits = source_out_fits(data) if args.leave_source_out else standard_fits(data)
    placed = score_placed(data, fits)
    print(f"public llama-bench results: {len(data.rows)} rows; {len(placed)} outside the one-device fit priced as "
          f"placed ({'fit without their source' if args.leave_source_out else 'fit without them'}); "
          f"{left} one-device rows at -ub below {MIN_UBATCH} left out")
    report(data, on_device(data) + placed)
    speedups = scaling_check(data, placed, fits)
    table("several devices over one of them (same source and test; speed-up measured against predicted)",
          by(speedups, lambda s: f"{data.rows[s.row].source.devices} devices {kind(data, s)}"))
    for k in ("tg", "pp"):
        cell = [s for s in speedups if kind(data, s) == k]
        if cell:
            print(f"  all {k}: median error {_pct(float(np.median([s.error for s in cell]))).strip()} over {len(cell)} "
                  f"rows (the fit's own error on the device cancels)")
    table("  pipelined prompts' speed-ups, by model", by(
        [s for s in speedups if not math.isnan(s.sequential)], lambda s: f"{data.rows[s.row].model} pp"))
    piped = [s for s in speedups if not math.isnan(s.sequential)]
    if piped:
        seq = float(np.median([abs(s.sequential - s.measured) / s.measured for s in piped]))
        print(f"  their median error {_pct(float(np.median([s.error for s in piped]))).strip()} with the pipelining, "
              f"{_pct(seq).strip()} with the devices strictly in turn")
    print(f"\ntook {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
