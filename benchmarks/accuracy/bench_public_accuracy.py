"""How well the published-benchmark fit predicts rows it never saw, and how often its band
holds them.

Reads resources/benchmarks/*.json (public llama-bench results, each row with its source), fits
each group (back end; Vulkan per GPU vendor) in the calibration model form (``public_fit``:
shares of bandwidth and FP16 peak by weight format, routed experts apart, rows per multiply,
attention with and without flash attention, fixed seconds per pass and layer, the clocks'
overlap, each machine's own offset; a unified GPU's prompts at the share the others showed),
and prints for each protocol (leave one machine out first: what a machine rooflab has no rows
for gets; then one source out and one model family out: a known
machine on a new page or a new model) a matrix of out-of-sample median and worst
|predicted - measured| / measured by (group x dense/MoE x tg/pp x short/long) with each cell's
band coverage (the share of its rows inside the 16-84 % band built without them: about 68 % is a
band that means what it says), the totals, and a summary that gives each protocol's median over
machines (each machine's median, then the median of those: one chip swept 500 ways weighs as one)
beside its median over rows (every row one vote: how often a reader of a row meets that error),
and each band's median width (high / low) beside its coverage. Then the worst rows with their
settings. No measurement, no GPU; a few tens of seconds.

    python benchmarks/accuracy/bench_public_accuracy.py
    python benchmarks/accuracy/bench_public_accuracy.py --protocols machine    # one protocol: a third of the time

Targets (issue 16): generation median <= 10 %, prompt processing <= 20 %, no cell with 3+ rows
worse than 35 %, coverage 60-80 %.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time

import numpy as np

from rooflab.core.calibration import public, public_fit, public_score

PROTOCOLS = ("machine", "source", "family")     # the first is the headline: a machine with no rows of its own
NAMES = {"machine": "leave one machine out", "source": "leave one source out",
         "family": "leave one model family out"}


def _pct(x: float) -> str:
    return "   n/a" if math.isnan(x) else f"{100 * x:5.0f}%"


def report(protocol: str, data: public.PublicBenchmarks) -> list[public_score.Prediction]:
    preds = public_score.banded(data, public_score.held_out(data, protocol), protocol)
    print(f"\n{NAMES[protocol]}: {len(preds)} rows predicted")
    print(f"  {'group':14} {'model':5} {'test':4} {'length':6} {'rows':>5} {'median':>7} {'worst':>7} {'in band':>8}")
    for (group, moe, kind, length), c in public_score.matrix(data, preds).items():
        flag = "  <- worse than 35 %" if c.rows >= 3 and c.median > 0.35 else ""
        print(f"  {group:14} {moe:5} {kind:4} {length:6} {c.rows:5d} {_pct(c.median):>7} {_pct(c.worst):>7} "
              f"{_pct(c.coverage):>8}{flag}")
    for kind in ("tg", "pp"):
        mine = [p for p in preds if public.kind(data.rows[p.row]) == kind]
        c = public_score.cell(mine)
        balanced, machines = machine_median(data, mine)
        print(f"  all {kind}: median {_pct(c.median).strip()}, worst {_pct(c.worst).strip()}, {c.rows} rows, "
              f"band holds {_pct(c.coverage).strip()}; median of the {machines} machines' medians "
              f"{_pct(balanced).strip()}")
    return preds


def machine_median(data: public.PublicBenchmarks, preds: list[public_score.Prediction]) -> tuple[float, int]:
    """(the median over machines of each machine's median error, how many machines)."""
    per_machine: dict[str, list[float]] = {}
    for p in preds:
        per_machine.setdefault(data.rows[p.row].machine, []).append(p.error)
    return (float(np.median([np.median(v) for v in per_machine.values()])) if per_machine else math.nan,
            len(per_machine))


def band_width(preds: list[public_score.Prediction]) -> float:
    """The median over ``preds`` of each band's width, high / low (NaN without a band)."""
    widths = [p.high / p.low for p in preds if p.low > 0]
    return float(np.median(widths)) if widths else math.nan


def summary(data: public.PublicBenchmarks, preds: dict[str, list[public_score.Prediction]]) -> None:
    """One line per protocol: for generation and for prompt processing, the median over machines
    of each machine's median error (a chip swept 500 ways weighs as one) beside the median over
    rows (each row one vote), and the band's median width (high / low) beside its coverage (the
    share of rows inside it)."""
    print("\nout of sample, median over machines (each one's median) and over rows; band: median width "
          "(high / low), share of rows inside")
    print(f"  {'protocol':27} {'tg machines':>11} {'rows':>5} {'band':>6} {'held':>5}   "
          f"{'pp machines':>11} {'rows':>5} {'band':>6} {'held':>5}")
    for protocol, ps in preds.items():
        cells = []
        for kind in ("tg", "pp"):
            mine = [p for p in ps if public.kind(data.rows[p.row]) == kind]
            c = public_score.cell(mine)
            width = band_width(mine)
            cells.append(f"{_pct(machine_median(data, mine)[0]).strip():>11} {_pct(c.median).strip():>5} "
                         f"{'n/a' if math.isnan(width) else f'x{width:.2f}':>6} {_pct(c.coverage).strip():>5}")
        print(f"  {NAMES[protocol]:27} {cells[0]}   {cells[1]}")


DEEP = 8192                  # a prompt whose depth plus tokens reach this is "deep": attention is most of it
TARGETS = {"MoE generation": 0.15, "deep prompts": 0.35}     # issue 36's medians


def targeted(data: public.PublicBenchmarks, row: public.PublicRow) -> str:
    """The cell of issue 36's targets ``row`` falls in ("" for none): MoE generation, or a deep
    prompt (depth + tokens >= ``DEEP``)."""
    if public.kind(row) == "tg":
        return "MoE generation" if public.spec_of(data, row).is_moe else ""
    return "deep prompts" if row.source.depth + row.test.tokens >= DEEP else ""


def cells(data: public.PublicBenchmarks, preds: dict[str, list[public_score.Prediction]]) -> None:
    """MoE generation and deep prompts, each protocol: the median error over machines and over
    rows, the median of measured / predicted (below 1: the figure too fast), the band's median
    width and coverage, against issue 36's target."""
    print("\nMoE generation and deep prompts (depth + tokens >= 8192), out of sample: median error over machines / "
          "rows, median measured / predicted, band")
    print(f"  {'protocol':27} {'cell':15} {'rows':>5} {'machines':>8} {'rows':>5} {'meas/pred':>9} {'band':>6} "
          f"{'held':>5} {'target':>6}")
    for protocol, ps in preds.items():
        for name, target in TARGETS.items():
            mine = [p for p in ps if targeted(data, data.rows[p.row]) == name]
            if not mine:
                print(f"  {NAMES[protocol]:27} {name:15} {0:5d}  no rows")
                continue
            c = public_score.cell(mine)
            ratio = float(np.median([p.measured / p.predicted for p in mine]))
            print(f"  {NAMES[protocol]:27} {name:15} {c.rows:5d} {_pct(machine_median(data, mine)[0]).strip():>8} "
                  f"{_pct(c.median).strip():>5} {ratio:9.2f} x{band_width(mine):5.2f} {_pct(c.coverage).strip():>5} "
                  f"{_pct(target).strip():>6}")


def unified_prompts(data: public.PublicBenchmarks, fits: dict[str, public_fit.Factors]) -> None:
    """The unified GPUs' prompt share (``public.unified_share``) and what each such machine ran
    at against its back end's discrete fit: the spread the one share leaves."""
    share = public.unified_share(data, fits)
    if share is None:
        return
    ratios = public.unified_ratios(data, fits)
    each = ", ".join(f"{m} x{math.exp(np.median(v)):.2f} ({len(v)})" for m, v in sorted(ratios.items()))
    print(f"unified GPUs off Metal ({len(ratios)} machines; their prompt rows not in their back end's fit): "
          f"prompts at x{share:.2f} of the discrete fit; each (rows): {each}")


def moe_generation_unseen(data: public.PublicBenchmarks, fits: dict[str, public_fit.Factors]) -> None:
    """Each back end's MoE generation rows left out in turn (its machines' other rows kept, so
    their offsets), priced as a back end without MoE generation rows is: the whole routed-expert
    layer the others showed less its per-layer cost (``public.expert_layer_seconds``),
    beside the median of the others' added parts alone (what such a back end took before)."""
    print("\neach back end's MoE generation left out (its machines known): median error, measured / predicted")
    for g, f in fits.items():
        if f.expert_layer_seconds is None:
            continue

        def unseen(row: public.PublicRow, group: str = g) -> bool:
            return (public.kind(row) == "tg" and public.spec_of(data, row).is_moe
                    and public_fit.group_of(data.machine(row.machine)) == group)

        without = {**fits, **public.fit_groups(data, unseen, [g])}
        rows = [data.rows[i] for i in public.group_rows(data)[g] if unseen(data.rows[i])]
        offsets = public.machine_offsets(data, without, {r.machine for r in rows}, unseen)
        added = float(np.median([x.expert_layer_seconds for k, x in without.items()
                                 if k != g and x.expert_layer_seconds is not None]))
        shown = []
        for how, seconds in (("whole layer", public.expert_layer_seconds(without, g)), ("added parts", added)):
            rates = dataclasses.replace(public.group_rates(without, g), expert_layer_seconds=seconds)
            ratios = np.array([r.tokens_per_second / public.predict_row(data, r, rates, offsets.get(r.machine))
                               for r in rows])
            shown.append(f"{how} {seconds * 1e6:.0f} us: {_pct(float(np.median(np.abs(1 / ratios - 1)))).strip()}"
                         f" (x{np.median(ratios):.2f})")
        print(f"  {g:14} {len(rows):3d} rows  " + "; ".join(shown))


def beyond_ceiling(data: public.PublicBenchmarks) -> None:
    """The one-device rows faster than their ceiling, which the fit leaves out: their machine's
    stated peak is not the unit they ran on."""
    rows = public.past_ceiling(data)
    if not rows:
        print("rows faster than their ceiling: none")
        return
    print(f"rows faster than their ceiling, not fitted (the machine's stated peak is not the unit they ran on): "
          f"{len(rows)}")
    for i in rows:
        r = data.rows[i]
        print(f"  {r.machine:26} {r.model:24} {r.weights:7} {r.test.name:7} {r.tokens_per_second:9.1f} t/s, "
              f"ceiling {public.tokens_per_second(data, r):9.1f}  {r.source.url}")


def worst(data: public.PublicBenchmarks, preds: list[public_score.Prediction], count: int = 8) -> None:
    print(f"\nworst {count} rows, leave one machine out (predicted / measured tokens/s, settings, why likely):")
    for p in sorted(preds, key=lambda p: -p.error)[:count]:
        r = data.rows[p.row]
        s = r.source
        settings = ", ".join(f"{k} {v}" for k, v in (("fa", s.flash_attention), ("ub", s.ubatch), ("d", s.depth),
                                                    ("threads", s.threads)) if v not in (None, 0))
        print(f"  {r.machine:26} {r.model:24} {r.weights:7} {r.test.name:7} {p.predicted:9.1f} / "
              f"{p.measured:9.1f} ({settings or 'defaults'}) {s.url}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", nargs="+", choices=PROTOCOLS, default=list(PROTOCOLS),
                        help="the protocols to score (default: all three; one is a third of the time)")
    args = parser.parse_args()
    start = time.perf_counter()
    data = public.load_public()
    groups = public.group_rows(data)
    print(f"public llama-bench results: {len(data.rows)} rows ({sum(map(len, groups.values()))} on one device, "
          f"fitted), {len(data.machines)} machines, {len(data.sources)} sources")
    fits = public.fit_groups(data)
    print(f"\n{'group':14} {'rows':>5} {'bandwidth':>9} {'cache':>6} {'dense':>6} {'experts':>7} {'attention':>9} "
          f"{'with -fa':>8} {'r0 rows':>7} {'pass ms':>8} {'layer us':>8} {'MoE layer us':>12}")
    for g, f in fits.items():
        experts, attention, flash = ("-" if x is None else f"{x:.3f}" for x in (f.experts, f.attention,
                                                                                f.flash_attention))
        moe = "-" if f.expert_layer_seconds is None else f"{f.expert_layer_seconds * 1e6:.1f}"
        print(f"{g:14} {len(groups[g]):5d} {f.bandwidth:9.3f} {f.cache:6.3f} {f.dense:6.3f} {experts:>7} "
              f"{attention:>9} {flash:>8} {f.rows_half:7.0f} {f.pass_seconds * 1e3:8.2f} {f.layer_seconds * 1e6:8.1f} "
              f"{moe:>12}")
    for g, f in fits.items():
        shown = [f"{name} " + ", ".join(f"{k} {v:.3f}" for k, v in table.items())
                 for name, table in (("bandwidth", f.class_bandwidth), ("dense", f.class_dense)) if len(table) > 1]
        if shown:
            print(f"  {g} by weight format: " + "; ".join(shown))
    print(f"routed experts without rows of their own: {public.expert_ratio(fits):.3f} x the dense rate; "
          f"a routed-expert layer {public.expert_layer_total(fits) * 1e6:.1f} us in all, its per-layer cost and "
          "its own (a back end without MoE generation rows adds that less its per-layer cost)")
    ratio = public.attention_ratio(fits)
    if ratio is not None:
        print(f"a prompt's attention without rows of its own: {ratio:.3f} x the dense rate")
    offsets = public.machine_offsets(data, fits, {data.rows[i].machine for i in public.row_groups(data)})
    tg, pp = (np.array([o[k] for o in offsets.values()]) for k in (0, 1))
    print(f"machines' own offsets ({len(offsets)} machines): generation x{np.min(tg):.2f} .. x{np.max(tg):.2f}, "
          f"prompt processing x{np.min(pp):.2f} .. x{np.max(pp):.2f}")
    serial = {g: f.serial_share for g, f in fits.items() if f.serial_share > 0}
    if serial:
        print("serial share of a pass's arithmetic (Amdahl): " + ", ".join(f"{g} {s:.4f}" for g, s in serial.items()))
    unified_prompts(data, fits)
    beyond_ceiling(data)
    moe_generation_unseen(data, fits)
    preds = {protocol: report(protocol, data) for protocol in PROTOCOLS if protocol in args.protocols}
    if "machine" in preds:
        worst(data, preds["machine"])
        errors = np.array([p.error for p in preds["machine"]])
        print(f"\n{len(errors)} rows, {np.mean(errors <= 0.25):.0%} within 25 % (leave one machine out)")
    cells(data, preds)
    summary(data, preds)
    print(f"took {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
