"""How well vLLM's published calibration (``core/calibration/vllm_public.py``) holds, scored out
of sample on the published vLLM runs (resources/placed/vllm-public.json): one GPU and tensor
parallel over NVLink, one request and benchmark_latency's batches.

The four terms (bandwidth share, compute share, seconds a layer, seconds a routed-expert layer)
are refitted without the rows scored: leaving one machine out first (a GPU, every device count
of it), then one source out, then in sample. Printed by kind of run (benchmark_latency's
end-to-end seconds; one request's decode rate) and device count: the median error over
machines (each one's median) and over rows, and the band (``vllm_public.held_out_bands``: h
from the other folds' runs of the same kind, one device or tensor parallel, each priced by a
fit without their fold and the scored one, each fold one vote at the conformal 68 (n + 1) / n
percentile; in sample, the other runs at the whole fit): its median width (high / low) and the
share of rows inside. Then the run the fit does not take (the MI300X: the calibration is not applied to AMD
GPUs), the TTFTs set apart (through an HTTP client), every measurement against its ceiling, the
residual by device count (what the link's all-reduces leave) and the worst rows.

    python benchmarks/accuracy/bench_vllm_accuracy.py            # the matrix (about 10 s)
    python benchmarks/accuracy/bench_vllm_accuracy.py --rows     # also every run
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable, Sequence

from rooflab.core.calibration import vllm_public as v

KINDS = (("latency", "benchmark_latency"), ("tg", "decode rate"))


def error(predicted: float, measured: float) -> float:
    return abs(predicted / measured - 1.0)


def cell(runs: Sequence[v.Run], predicted: Sequence[float], bands: Sequence[tuple[float, float]]) -> str:
    if not runs:
        return "     -     -      -     -    0"
    by: dict[str, list[float]] = {}
    for r, p in zip(runs, predicted, strict=True):
        by.setdefault(r.machine, []).append(error(p, r.measured))
    machines = statistics.mean(statistics.median(e) for e in by.values())
    rows = statistics.median(error(p, r.measured) for r, p in zip(runs, predicted, strict=True))
    width = statistics.median(hi / lo for lo, hi in bands)
    held = sum(lo <= r.measured <= hi for r, (lo, hi) in zip(runs, bands, strict=True)) / len(runs)
    return f"  {machines:4.0%}  {rows:4.0%}  x{width:4.2f}  {held:4.0%}  {len(runs):3d}"


def matrix(name: str, runs: Sequence[v.Run], predicted: Sequence[float],
           band: Sequence[tuple[float, float]]) -> list[str]:
    lines = []
    groups = [(label, lambda r, k=kind: r.test == k) for kind, label in KINDS]
    groups += [("one device", lambda r: r.devices == 1), ("tensor parallel", lambda r: r.devices > 1),
               ("all", lambda r: True)]
    for label, keep in groups:
        idx = [i for i, r in enumerate(runs) if keep(r)]
        lines.append(f"  {name:<24} {label:<18}" + cell([runs[i] for i in idx], [predicted[i] for i in idx],
                                                         [band[i] for i in idx]))
        name = ""
    return lines


def terms_text(t: v.Terms) -> str:
    return (f"bandwidth {t.bandwidth:.2f}, compute {t.compute:.2f}, {t.layer_seconds * 1e6:.0f} us a layer, "
            f"{t.expert_seconds * 1e6:.0f} us a routed-expert layer")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="store_true", help="also print every run")
    args = ap.parse_args(argv)
    every = list(v.load_runs())
    runs = [r for r in every if r.fitted]
    apart = [r for r in every if not r.fitted]
    print(f"{v.data_path().name}: {len(every)} rows, {len({r.source for r in every})} sources, "
          f"{len({r.machine for r in every})} GPUs; fitted {len(runs)} rows on {len({r.machine for r in runs})} "
          f"GPUs ({sum(r.devices > 1 for r in runs)} tensor parallel, all over NVLink/NVSwitch); "
          f"scored apart: {len(apart)}")
    whole = v.fit(runs)
    print(f"fitted on every row: {terms_text(whole)}")
    print()
    print("median |expected - measured| / measured over machines (each one's median) and over rows; band: exp(+-h), "
          "h from the other folds' held-out runs of the same kind (one device / tensor parallel), 68 % at the "
          "conformal rank, each fold one vote: median width (high / low), share of rows inside")
    print(f"  {'protocol':<24} {'runs':<18} machines  rows   band   held rows")
    protocols: list[tuple[str, Callable[[v.Run], str] | None]] = [
        ("leave one machine out", lambda r: r.machine), ("leave one source out", lambda r: r.source),
        ("in sample", None)]
    ranges = []
    lomo: list[float] = []
    lomo_terms: dict[str, v.Terms] = {}
    fast = 0
    for name, fold in protocols:
        if fold is None:
            predicted, fits = [r.parts.seconds(whole) for r in runs], {}
            band = v.in_sample_bands(runs, whole)
        else:
            predicted, fits = v.held_out_seconds(runs, fold)
            band = v.held_out_bands(runs, fold)
        lomo = lomo or predicted
        lomo_terms = lomo_terms or fits
        fast += sum(lo < r.parts.ceiling * (1 - 1e-9) for r, (lo, _) in zip(runs, band, strict=True))
        for line in matrix(name, runs, predicted, band):
            print(line)
        if fits:
            ranges.append(f"{name}, {len(fits)} fits: " + ", ".join(
                f"{label} {min(getattr(t, k) for t in fits.values()) * s:g}-"
                f"{max(getattr(t, k) for t in fits.values()) * s:g}"
                for k, label, s in (("bandwidth", "bandwidth", 1), ("compute", "compute", 1),
                                    ("layer_seconds", "us a layer", 1e6),
                                    ("expert_seconds", "us an expert layer", 1e6))))
    print()
    for line in ranges:
        print(line)
    res = v.residuals(runs, lomo)
    for label, keep in (("one device", lambda r: r.devices == 1), ("2-8 devices over NVLink", lambda r: r.devices > 1)):
        xs = [math.exp(x) for r, x in zip(runs, res, strict=True) if keep(r)]
        print(f"measured / expected leaving one machine out, {label}: median {statistics.median(xs):.2f} "
              f"({min(xs):.2f}..{max(xs):.2f}, {len(xs)} rows)")
    for several, label in ((False, "one device"), (True, "tensor parallel")):
        h = v.shipped_half_width(runs, lomo_terms, several)
        print(f"the band `rooflab predict` shows, {label} (what machines the fit left out ran, each one vote, 68 % at "
              f"the conformal rank): the expected seconds x{math.exp(-h):.2f}..x{math.exp(h):.2f}, its fast end "
              "never past the ceiling")
    print(f"band fast ends faster than their ceiling, all protocols: {fast}")
    print()
    for r in apart:
        p = r.parts.seconds(whole)
        print(f"scored apart, {r.apart}: {r.machine} {r.label}: measured / expected {r.measured / p:.2f}")
    above = [r for r in every if r.measured < r.parts.ceiling]
    print(f"measurements faster than their ceiling: {len(above)} of {len(every)}")
    for r in above:
        print(f"  {r.machine} {r.label}: {r.measured:.4g} s < ceiling {r.parts.ceiling:.4g} s [{r.source}]")
    print()
    print("worst 5 rows, leave one machine out (expected / measured seconds):")
    for i in sorted(range(len(runs)), key=lambda i: -error(lomo[i], runs[i].measured))[:5]:
        r = runs[i]
        print(f"  {r.machine:<22} {r.label:<62} {lomo[i]:8.4f} / {r.measured:8.4f}  [{r.source}]")
    if args.rows:
        print()
        for r in every:
            print(f"  {r.machine:<22} {r.label:<62} measured {r.measured:9.4f}  ceiling {r.parts.ceiling:9.4f}  "
                  f"expected {r.parts.seconds(whole):9.4f}  [{r.source}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
