"""How well rooflab's expected figures hold when the model is not on one GPU, scored out of
sample: published runs with weights in host memory behind a GPU (resources/placed/
llamacpp-offload-public.json, beside wholly-on-GPU runs of the same rigs), and the published
layer-split runs on several devices (resources/benchmarks rows with devices > 1).

Placed runs: the machine is the GPU preset (with the row's overrides) and the host it names
(``host_bandwidth``, PCIe as the preset states), the model the catalogue's at the row's weight
format, the placement the row's -ngl and --n-cpu-moe, the workload its test, -ub and cache type.
The ceiling and the expected figure are both priced (``offload.placed_prefill`` /
``placed_decode``; the expected one at the published llama.cpp calibration of the GPU's back
end, the host at the CPU back end's, with ``offload_terms``' constants). Layer split: each
device at its back end's fitted factors, the split's hops and pipelined prompt (``offload``),
the pipeline keeping ``layer_split.pipeline_kept`` of its ideal saving (more the more devices).

Each row's host is priced at its stated memory and its CPU's peak (``hosts`` in the data: cores
the run used x max boost clock x fp32 FLOP a cycle, the machine's offload flops). The fitted
constants (HOST_EXPERT_DECODE_SHARE and HOST_EXPERT_DECODE_COMPUTE together on generation rows,
PCIE_STREAM_SHARE on prompt rows, PIPELINE_DEVICES on layer-split prompt rows; each on a grid, the
mean over machines of each one's median |log(expected / measured)| minimised, so a machine with
many rows weighs as one with few; of values that fit alike, the nearest the shipped) are
refitted without the rows scored: leaving one source out (printed first), one machine out
(GPU + host; a layer split's machine x devices), and in sample at the shipped values. Printed
per placement category (on device / offloaded / several devices / vLLM) and kind (tg, pp): the
median error over machines (each one's median) and over rows, and the band: built, as in the
one-device fit, from the other folds' residuals (16-84 %, each fold weighing as one; in sample
from the other rows'), its median width (high / low) and the share of rows inside. Then every
measurement against its ceiling (a row above its ceiling means the model or the profile is
wrong), and the worst rows left out by source.

Prompt rows whose engine moved weights as the placed model does not price (ik_llama.cpp before
-ooae copied every expert whole; below 32 x experts / used tokens a ubatch it multiplies host
experts on the host) are set apart: printed, not scored, not fitted.

    python benchmarks/accuracy/bench_offload_accuracy.py            # the matrix (about 20 s)
    python benchmarks/accuracy/bench_offload_accuracy.py --rows     # also every placed row

``--fit`` and ``--several`` are what this script always does now (kept for the commands quoted
elsewhere).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rooflab.core.calibration.expectations import expected_on
from rooflab.core.files.resources import resources_dir
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict import layer_split, offload_terms
from rooflab.core.predict.offload import placed_decode, placed_prefill
from rooflab.core.predict.placement import Placement
from rooflab.core.report.expected import band
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

DATA = Path(resources_dir()) / "placed" / "llamacpp-offload-public.json"
SHARES = tuple(float(s) for s in np.round(np.arange(0.30, 1.001, 0.02), 2))
COMPUTE = tuple(float(s) for s in np.round(np.arange(0.02, 0.601, 0.02), 2))
KEPT = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 8.0, 11.0, 16.0)   # PIPELINE_DEVICES
CATEGORIES = ("on device", "offloaded", "several devices", "vLLM")
NO_VLLM = ("scored by benchmarks/accuracy/bench_vllm_accuracy.py on resources/placed/vllm-public.json "
           "(vLLM's own calibration, not these constants)")
MIN_BAND_ROWS = 8        # residuals a category's own band needs (else the kind's pooled ones)


@dataclass(frozen=True)
class Scored:
    """One published run: who measured it, on what, and how rooflab prices it."""
    source: str
    machine: str               # GPU + host; a layer split's machine x devices
    category: str              # one of CATEGORIES
    kind: str                  # "pp" or "tg"
    label: str
    measured: float            # tokens/s
    ceiling: float             # tokens/s
    predict: Callable[[float, float, float], float]   # tokens/s expected at (host share, link share, compute)
    calibration_band: tuple[float, float] = (float("nan"), float("nan"))
    unpriced: str = ""         # why the engine did something the placed model does not price ("": it prices it)


@contextmanager
def constants(host: float, link: float, compute: float) -> Iterator[None]:
    """``offload_terms``' fitted constants set to (host, link, compute) for the block."""
    names = ("HOST_EXPERT_DECODE_SHARE", "PCIE_STREAM_SHARE", "HOST_EXPERT_DECODE_COMPUTE")
    old = tuple(getattr(offload_terms, n) for n in names)
    for n, v in zip(names, (host, link, compute), strict=True):
        setattr(offload_terms, n, v)
    try:
        yield
    finally:
        for n, v in zip(names, old, strict=True):
            setattr(offload_terms, n, v)


def shipped_constants() -> tuple[float, float, float]:
    return (offload_terms.HOST_EXPERT_DECODE_SHARE, offload_terms.PCIE_STREAM_SHARE,
            offload_terms.HOST_EXPERT_DECODE_COMPUTE)


@contextmanager
def kept(value: float) -> Iterator[None]:
    """``layer_split.PIPELINE_DEVICES`` set to ``value`` for the block."""
    old = layer_split.PIPELINE_DEVICES
    layer_split.PIPELINE_DEVICES = value
    try:
        yield
    finally:
        layer_split.PIPELINE_DEVICES = old


def _machine(row: dict[str, Any], hosts: dict[str, Any]) -> MachineProfile:
    base = load_machine(row["gpu"])
    over = row.get("gpu_overrides") or {}
    changes: dict[str, Any] = {"offload_bandwidth": float(row["host_bandwidth"]),
                               "offload_flops": float(hosts[row["cpu"]]["flops"])}
    if over:
        peaks = dict(base.peak_flops)
        peaks.update({"fp16": float(over["fp16"]), "bf16": float(over["fp16"])})
        changes |= {"name": over["name"], "bandwidth": float(over["bandwidth"]), "memory": float(over["memory"]),
                    "peak_flops": peaks, "key": "", "published_twin": ""}
    return dataclasses.replace(base, **changes)


def placed_rows() -> list[Scored]:
    """The placed runs of ``DATA``, each priced at its placement."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    out = []
    for r in data["rows"]:
        spec = load_model(r["model"], weights=r["weights"])
        machine = _machine(r, data["hosts"])
        n, kind = int(r["test"][2:]), r["test"][:2]
        w = Workload(prompt=n if kind == "pp" else 512, answer=n if kind == "tg" else 1, context=int(r["depth"]),
                     ubatch=int(r["ub"]), kv_type=r.get("kv_type", "f16"))
        placement = Placement(gpu_layers=min(int(r["ngl"]), spec.layers + 1), cpu_moe=int(r["n_cpu_moe"]))
        on_device = placement.gpu_layers > spec.layers and placement.cpu_moe == 0

        def price(m: MachineProfile, w: Workload = w, spec: Any = spec, p: Placement = placement,
                  kind: str = kind, n: int = n) -> float:
            if kind == "pp":
                return n / float(placed_prefill(spec, m, w, p, prompt=n, context=w.context).seconds)
            # a tgN rate averages the steps as the cache grows from depth to depth + N
            steps = np.linspace(w.context, w.context + n - 1, 8)
            return 1.0 / float(np.mean(placed_decode(spec, m, w, p, context=steps).seconds))

        ex = expected_on(spec, machine)
        if ex is None:
            raise SystemExit(f"{DATA.name}: no calibration prices {machine.name}")
        calibrated = ex.machine

        @functools.cache
        def predict(host: float, link: float, compute: float, price: Callable[[MachineProfile], float] = price,
                    m: MachineProfile = calibrated) -> float:
            with constants(host, link, compute):
                return price(m)

        with constants(*shipped_constants()):
            low, high = band(price(calibrated), [price(m) for m in ex.replicas])
        label = (f"{r['model']} {r['weights']} {r['test']}@{r['depth']} -ub {r['ub']} -ngl {r['ngl']} "
                 f"--n-cpu-moe {r['n_cpu_moe']} {r['engine']} ({r['expert_copy']})")
        out.append(Scored(source=r["source"], machine=f"{machine.name} + {r['cpu']}",
                          category="on device" if on_device else "offloaded", kind=kind, label=label,
                          measured=float(r["tokens_per_second"]), ceiling=price(machine), predict=predict,
                          calibration_band=(float(low), float(high)),
                          unpriced="" if on_device or kind == "tg" else unpriced_prompt(r, spec)))
    return out


def unpriced_prompt(row: dict[str, Any], spec: Any) -> str:
    """Why an offloaded prompt row's engine moved weights as the placed model does not price
    (it prices mainline llama.cpp: only the routed-to experts copied, from 32 tokens a ubatch),
    "" when it did as priced: ik_llama.cpp before -ooae copied every expert tensor whole, and it
    multiplies host experts on the host below 32 x experts / used tokens a ubatch (its #698)."""
    if row["expert_copy"] == "all":
        return "every expert tensor copied whole"
    tokens = min(int(row["ub"]), int(row["test"][2:]))        # a ubatch: -ub, or the whole prompt when shorter
    if row["engine"] == "ik_llama.cpp" and spec.is_moe and tokens < 32 * spec.experts / spec.experts_used:
        return "experts multiplied on the host (ik_llama.cpp below 32 x experts / used tokens a ubatch)"
    return ""


def _linked(machine: MachineProfile, key: str) -> MachineProfile:
    """``machine`` with the link between its devices: its preset's when rooflab has one by that
    key, else PCIe 4.0 x16 (32 GB/s per direction; the sources do not state the board)."""
    try:
        preset = load_machine(key)
    except Exception:           # no preset by that key: the published machine alone
        preset = None
    if preset is not None and preset.interconnect_bandwidth > 0:
        return dataclasses.replace(machine, interconnect_bandwidth=preset.interconnect_bandwidth,
                                   interconnect_name=preset.interconnect_name,
                                   interconnect_kind=preset.interconnect_kind,
                                   interconnect_devices=preset.interconnect_devices, host_link=preset.host_link)
    return dataclasses.replace(machine, interconnect_bandwidth=32e9, interconnect_name="PCIe 4.0 x16 (assumed)",
                               interconnect_kind="pcie")


def several_rows() -> list[Scored]:
    """The layer-split runs of the published llama-bench sets (never fitted by the one-device
    fit), each priced at its back end's fitted factors; ``predict(scale, _)`` with the pipeline
    keeping ``layer_split.pipeline_kept`` of its ideal saving at that device scale."""
    from rooflab.core.calibration import public, public_fit, public_score
    from rooflab.core.predict.expected import efficiency_for

    data = public.load_public()
    fits = public.fit_groups(data)
    out = []
    for row in data.rows:
        s = row.source
        if (s.devices or 1) < 2 or (s.split_mode or "layer") != "layer" or s.partial_offload:
            continue
        pm = data.machine(row.machine)
        group = public_fit.group_of(pm)
        if group not in fits:
            continue
        spec = public.spec_of(data, row)
        base = _linked(public.machine_profile(pm), row.machine)
        m = dataclasses.replace(base, efficiency=efficiency_for(spec, base, public.group_rates(fits, group),
                                                                dtype="fp16", relative=True))
        w = public.workload_of(row)
        p = Placement(gpu_layers=spec.layers + 1, devices=int(s.devices or 1))
        n, depth, decode = int(row.test.tokens), int(s.depth), row.test.kind == "decode"

        def price(machine: MachineProfile, w: Workload = w, p: Placement = p, spec: Any = spec, n: int = n,
                  depth: int = depth, decode: bool = decode) -> float:
            if decode:
                steps = placed_decode(spec, machine, w, p, context=depth + np.arange(n, dtype=np.float64))
                return n / float(np.sum(steps.seconds))
            return n / float(placed_prefill(spec, machine, w, p, prompt=n, context=depth).seconds)

        @functools.cache
        def predict(share: float, _unused: float, _unused2: float, price: Callable[[MachineProfile], float] = price,
                    m: MachineProfile = m) -> float:
            with kept(share):
                return price(m)

        kind = public.kind(row)
        out.append(Scored(source=public_score.source(data, row), machine=f"{row.machine} x{s.devices}",
                          category="several devices", kind=kind,
                          label=f"{row.machine} x{s.devices} {row.test.kind} {n}@{depth}",
                          measured=row.tokens_per_second, ceiling=price(base), predict=predict))
    return out


def error(predicted: float, measured: float) -> float:
    return abs(predicted / measured - 1.0)


def shipped(row: Scored) -> tuple[float, float, float]:
    """The shipped constants ``row.predict`` takes."""
    if row.category == "several devices":
        return layer_split.PIPELINE_DEVICES, 0.0, 0.0
    return shipped_constants()


def fit(train: Sequence[Scored]) -> dict[str, float]:
    """The constants minimising the median error over ``train`` (rows above their ceiling left
    out: their stated set-up cannot have produced them): the host share on offloaded generation,
    the link share on offloaded prompts, the pipeline's device scale on layer-split prompts; a
    constant with no training row keeps its shipped value."""
    train = [r for r in train if r.measured <= r.ceiling]
    host, link, compute = shipped_constants()
    best = {"host": host, "link": link, "compute": compute, "kept": layer_split.PIPELINE_DEVICES}

    def pick(rows: list[Scored], grid: Sequence[Any], args: Callable[[Any], tuple[float, float, float]],
             now: Any) -> Any:
        # each machine weighs as one (the mean of its rows' median |log(expected / measured)|); of
        # values that fit as well (a term no training machine is bound by), the one nearest the shipped
        def cost(s: Any) -> tuple[float, float]:
            by: dict[str, list[float]] = {}
            for r in rows:
                by.setdefault(r.machine, []).append(abs(float(np.log(r.predict(*args(s)) / r.measured))))
            miss = float(np.mean([statistics.median(v) for v in by.values()]))
            return round(miss, 4), float(np.sum(np.abs(np.subtract(s, now))))
        return min(grid, key=cost)

    offloaded = [r for r in train if r.category == "offloaded"]
    if tg := [r for r in offloaded if r.kind == "tg"]:
        best["host"], best["compute"] = pick(tg, [(h, c) for h in SHARES for c in COMPUTE],
                                             lambda s: (s[0], link, s[1]), (host, compute))
    if pp := [r for r in offloaded if r.kind == "pp"]:
        best["link"] = pick(pp, SHARES, lambda s: (host, s, compute), link)
    if split := [r for r in train if r.category == "several devices" and r.kind == "pp"]:
        best["kept"] = pick(split, KEPT, lambda s: (s, 0.0, 0.0), layer_split.PIPELINE_DEVICES)
    return best


def predicted_at(row: Scored, consts: dict[str, float]) -> float:
    if row.category == "several devices":
        return row.predict(consts["kept"], 0.0, 0.0)
    return row.predict(consts["host"], consts["link"], consts["compute"])


def held_out(rows: Sequence[Scored], key: Callable[[Scored], str] | None) -> tuple[list[float], list[dict[str, float]]]:
    """Each row's expected figure from constants fitted without its fold (``key``'s value), and
    the folds' fits; ``key`` None: at the shipped constants."""
    if key is None:
        return [r.predict(*shipped(r)) for r in rows], []
    fitted = {f: fit([r for r in rows if key(r) != f]) for f in sorted({key(r) for r in rows})}
    return [predicted_at(r, fitted[key(r)]) for r in rows], list(fitted.values())


@dataclass(frozen=True)
class Cell:
    machines: float     # median over machines of each one's median error
    rows: float         # median error over rows
    width: float        # median band width, high / low
    held: float         # share of rows inside their band
    n: int


def residual_bands(rows: Sequence[Scored], predicted: Sequence[float], fold_of: Callable[[Scored], str] | None
                   ) -> list[tuple[float, float]]:
    """Each row's 16-84 % band: its expected figure times the quantiles of measured / expected
    among rows of the same category and kind in other folds (fewer than ``MIN_BAND_ROWS`` or
    from one fold only: the kind's, all categories); in sample, among the other rows of that
    category and kind. Each fold weighs as one: its rows share its vote."""
    ratios = [float(np.log(r.measured / p)) for r, p in zip(rows, predicted, strict=True)]
    fold = [fold_of(r) if fold_of else str(i) for i, r in enumerate(rows)]
    out = []
    for i, (r, p) in enumerate(zip(rows, predicted, strict=True)):
        def pool(same_category: bool, r: Scored = r, i: int = i) -> list[int]:
            return [j for j, o in enumerate(rows) if o.kind == r.kind and fold[j] != fold[i]
                    and (not same_category or o.category == r.category)]
        chosen = pool(True)
        if len(chosen) < MIN_BAND_ROWS or len({fold[j] for j in chosen}) < 2:
            chosen = pool(False)
        if len(chosen) < MIN_BAND_ROWS:
            out.append((float("nan"), float("nan")))
            continue
        lo, hi = weighted_quantiles([ratios[j] for j in chosen], [fold[j] for j in chosen], (0.16, 0.84))
        out.append((p * float(np.exp(lo)), p * float(np.exp(hi))))
    return out


def host_spread(rows: Sequence[Scored], predicted: Sequence[float], kind: str = "tg") -> tuple[float, float]:
    """The 16th and 84th percentiles of measured / expected over the offloaded rows of ``kind``,
    each machine weighing one: what ``offload_terms.HOST_SPREAD`` ships (generation) and
    ``offload_terms.LINK_SPREAD`` (prompts)."""
    idx = [i for i, r in enumerate(rows) if r.category == "offloaded" and r.kind == kind]
    lo, hi = weighted_quantiles([float(np.log(rows[i].measured / predicted[i])) for i in idx],
                                [rows[i].machine for i in idx], (0.16, 0.84))
    return float(np.exp(lo)), float(np.exp(hi))


def weighted_quantiles(values: Sequence[float], folds: Sequence[str], q: Sequence[float]) -> tuple[float, ...]:
    """Quantiles ``q`` of ``values`` where each fold's values together weigh one."""
    per_fold = {f: folds.count(f) for f in set(folds)}
    order = np.argsort(values)
    v = np.asarray(values, dtype=np.float64)[order]
    w = np.asarray([1.0 / per_fold[folds[i]] for i in order])
    cum = (np.cumsum(w) - 0.5 * w) / w.sum()
    return tuple(float(x) for x in np.interp(q, cum, v))


def cell(rows: Sequence[Scored], predicted: Sequence[float], bands: Sequence[tuple[float, float]]) -> Cell | None:
    if not rows:
        return None
    errors = [error(p, r.measured) for r, p in zip(rows, predicted, strict=True)]
    by_machine: dict[str, list[float]] = {}
    for r, e in zip(rows, errors, strict=True):
        by_machine.setdefault(r.machine, []).append(e)
    banded = [(lo, hi, r.measured) for r, (lo, hi) in zip(rows, bands, strict=True) if lo == lo]
    width = statistics.median(hi / lo for lo, hi, _ in banded) if banded else float("nan")
    held = sum(lo <= m <= hi for lo, hi, m in banded) / len(banded) if banded else float("nan")
    return Cell(machines=statistics.median(statistics.median(v) for v in by_machine.values()),
                rows=statistics.median(errors), width=width, held=held, n=len(rows))


def matrix_lines(name: str, rows: Sequence[Scored], predicted: Sequence[float],
                 fold_of: Callable[[Scored], str] | None) -> list[str]:
    bands = residual_bands(rows, predicted, fold_of)
    lines = []
    for category in CATEGORIES:
        cells = []
        for kind in ("tg", "pp"):
            idx = [i for i, r in enumerate(rows) if r.category == category and r.kind == kind]
            c = cell([rows[i] for i in idx], [predicted[i] for i in idx], [bands[i] for i in idx])
            cells.append("          -     -      -     -     0" if c is None else
                         f"       {c.machines:4.0%}  {c.rows:4.0%}  x{c.width:4.2f}  {c.held:4.0%}  {c.n:4d}")
        empty = not any(r.category == category for r in rows)
        lines.append(f"  {name:<24} {category:<16}" + (f"  {NO_VLLM}" if empty and category == "vLLM"
                                                        else "".join(cells)))
        name = ""
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="store_true", help="also print every placed row")
    ap.add_argument("--fit", action="store_true", help="(always on) fit the constants out of sample")
    ap.add_argument("--several", action="store_true", help="(always on) score the layer-split runs too")
    args = ap.parse_args(argv)
    placed = placed_rows()
    split = several_rows()
    unpriced = [r for r in placed if r.unpriced]
    placed = [r for r in placed if not r.unpriced]
    rows = placed + split
    counts = {c: sum(r.category == c for r in rows) for c in CATEGORIES}
    print(f"{DATA.name}: {len(placed) + len(unpriced)} rows, {len({r.source for r in placed})} sources, "
          f"{len({r.machine for r in placed})} machines; layer split (resources/benchmarks): {len(split)} rows, "
          f"{len({r.source for r in split})} sources, {len({r.machine for r in split})} set-ups")
    print("rows by placement: " + ", ".join(f"{c} {n}" for c, n in counts.items())
          + f"; set apart (the engine moved weights as the placed model does not price): {len(unpriced)}")
    print(f"shipped: HOST_EXPERT_DECODE_SHARE {offload_terms.HOST_EXPERT_DECODE_SHARE}, HOST_EXPERT_DECODE_COMPUTE "
          f"{offload_terms.HOST_EXPERT_DECODE_COMPUTE}, PCIE_STREAM_SHARE {offload_terms.PCIE_STREAM_SHARE}, "
          f"PIPELINE_DEVICES {layer_split.PIPELINE_DEVICES}; bounded, not fitted: "
          f"CROSSING_SECONDS {offload_terms.CROSSING_SECONDS * 1e6:.0f} us, LIVE_EXPERT_FLOOR "
          f"{offload_terms.LIVE_EXPERT_FLOOR}")
    whole = fit(rows)
    print(f"fitted on every row: HOST_EXPERT_DECODE_SHARE {whole['host']}, HOST_EXPERT_DECODE_COMPUTE "
          f"{whole['compute']}, PCIE_STREAM_SHARE {whole['link']}, "
          f"PIPELINE_DEVICES {whole['kept']}")
    print()
    print("median |expected - measured| / measured over machines (each one's median) and over rows; band: the "
          "other folds' residuals, 16-84 %: median width (high / low), share of rows inside")
    print(f"  {'protocol':<24} {'placement':<16}  tg machines  rows   band   held  rows"
          f"   pp machines  rows   band   held  rows")
    protocols: list[tuple[str, Callable[[Scored], str] | None]] = [
        ("leave one source out", lambda r: r.source), ("leave one machine out", lambda r: r.machine),
        ("in sample, shipped", None)]
    loso: list[float] = []
    ranges = []
    for name, key in protocols:
        predicted, fits = held_out(rows, key)
        loso = loso or predicted
        if name == "leave one machine out":
            spread = host_spread(rows, predicted)
            link_spread = host_spread(rows, predicted, "pp")
        for line in matrix_lines(name, rows, predicted, key):
            print(line)
        if fits:
            ranges.append(f"{name} {len(fits)} fits: " + ", ".join(
                f"{label} {min(f[k] for f in fits):g}-{max(f[k] for f in fits):g}"
                for k, label in (("host", "host share"), ("compute", "host compute"), ("link", "link share"),
                                  ("kept", "pipeline devices"))))
    print()
    for line in ranges:
        print(line)
    print(f"offloaded generation, measured / expected leaving one machine out, 16th-84th percentile (each machine "
          f"one vote): {spread[0]:.2f}..{spread[1]:.2f}; shipped HOST_SPREAD {offload_terms.HOST_SPREAD[0]:.2f}.."
          f"{offload_terms.HOST_SPREAD[1]:.2f}")
    print(f"offloaded prompts, the same: {link_spread[0]:.2f}..{link_spread[1]:.2f}; shipped LINK_SPREAD "
          f"{offload_terms.LINK_SPREAD[0]:.2f}..{offload_terms.LINK_SPREAD[1]:.2f}")
    offloaded = [(r, lo <= r.measured <= hi, hi / lo) for r in placed for lo, hi in [r.calibration_band]
                 if r.category == "offloaded"]
    print(f"the calibration's band (what `rooflab predict` shows) holds {sum(h for _, h, _ in offloaded)} of "
          f"{len(offloaded)} offloaded rows, median width x{statistics.median(w for _, _, w in offloaded):.2f}; "
          + ", ".join(f"{'generation' if k == 'tg' else 'prompts'} {sum(h for r, h, _ in offloaded if r.kind == k)} "
                      f"of {sum(r.kind == k for r, _, _ in offloaded)}" for k in ("tg", "pp")))
    for why in sorted({r.unpriced for r in unpriced}):
        apart = [r for r in unpriced if r.unpriced == why]
        ratios = [r.measured / r.predict(*shipped(r)) for r in apart]
        print(f"set apart, {why}: {len(apart)} prompt rows, measured / expected median "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f})")
    every = rows + unpriced
    above = [r for r in every if r.measured > r.ceiling]
    print("measurements above their ceiling: " + ", ".join(
        f"{sum(r.category == c for r in above)} of {sum(r.category == c for r in every)} {c}"
        for c in CATEGORIES if any(r.category == c for r in every)))
    for r in above:
        print(f"  {r.label}: measured {r.measured:.1f} > ceiling {r.ceiling:.1f} [{r.source}]")
    print()
    print("worst 3 rows of each placement, leave one source out (expected / measured tokens/s):")
    for category in CATEGORIES:
        worst = sorted((i for i, r in enumerate(rows) if r.category == category),
                       key=lambda i: -error(loso[i], rows[i].measured))[:3]
        for i in worst:
            r = rows[i]
            print(f"  {category:<15} {r.label:<90} {loso[i]:8.1f} / {r.measured:8.1f}  [{r.source}]")
    if args.rows:
        print()
        for r in placed + unpriced:
            lo, hi = r.calibration_band
            print(f"  {r.label:<96} measured {r.measured:8.1f}  ceiling {r.ceiling:8.1f}  expected "
                  f"{r.predict(*shipped(r)):8.1f} ({lo:.1f}..{hi:.1f})  [{r.source}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
