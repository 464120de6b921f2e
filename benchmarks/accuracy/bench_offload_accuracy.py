"""How well the placed model's expected figures hold on published runs with weights in host
memory behind a GPU (resources/placed/llamacpp-offload-public.json), scored out of sample.

For each row the machine is the GPU preset (with the row's overrides) and the host it names
(``host_bandwidth``, PCIe as the preset states), the model the catalogue's at the row's weight
format, the placement the row's -ngl and --n-cpu-moe, the workload its test, -ub and cache type.
The ceiling and the expected figure are both priced (``offload.placed_prefill`` /
``placed_decode``, the expected one at the published llama.cpp calibration of the GPU's back
end, host at the CPU back end's, with ``offload_terms``' constants).

Printed: each row (measured, ceiling, expected with its band); whether every measurement is
under its ceiling; and, for the two fitted constants of ``offload_terms``
(HOST_EXPERT_DECODE_SHARE, PCIE_STREAM_SHARE), the in-sample fit and a leave-one-source-out
score: each source's rows priced with the constants fitted on the other sources. Median error
per row and per machine beside it, and how often the band holds the measurement.

    python benchmarks/accuracy/bench_offload_accuracy.py          # score with the shipped constants
    python benchmarks/accuracy/bench_offload_accuracy.py --fit    # also fit the constants (grid) and score LOSO

``--several`` also prices the published runs on several devices (resources/benchmarks rows with
devices > 1, layer split), which the one-device fit leaves out: the back end's fitted factors on
each device, the layer split's hops and pipelined prompt (``offload``), scored against each
row. Those rows were never fitted, so the figure is out of sample for them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rooflab.core.calibration.expectations import expected_on
from rooflab.core.files.resources import resources_dir
from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from rooflab.core.predict import offload_terms
from rooflab.core.predict.offload import placed_decode, placed_prefill
from rooflab.core.predict.placement import Placement
from rooflab.core.report.expected import band
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

DATA = Path(resources_dir()) / "placed" / "llamacpp-offload-public.json"
SHARES = np.round(np.arange(0.30, 1.001, 0.02), 2)


@dataclass(frozen=True)
class Row:
    source: str
    url: str
    label: str
    machine_id: str
    kind: str                  # "pp" or "tg"
    measured: float            # tokens/s
    price: Callable[[MachineProfile], float]      # tokens/s on a machine (ceiling or expected)
    machine: MachineProfile


def _machine(row: dict[str, Any]) -> MachineProfile:
    base = load_machine(row["gpu"])
    over = row.get("gpu_overrides") or {}
    changes: dict[str, Any] = {"offload_bandwidth": float(row["host_bandwidth"])}
    if over:
        peaks = dict(base.peak_flops)
        peaks.update({"fp16": float(over["fp16"]), "bf16": float(over["fp16"])})
        changes |= {"name": over["name"], "bandwidth": float(over["bandwidth"]), "memory": float(over["memory"]),
                    "peak_flops": peaks, "key": "", "published_twin": ""}
    return dataclasses.replace(base, **changes)


def _rows() -> list[Row]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    urls = {s["id"]: s["url"] for s in data["sources"]}
    out = []
    for r in data["rows"]:
        spec = load_model(r["model"], weights=r["weights"])
        machine = _machine(r)
        n = int(r["test"][2:])
        kind = r["test"][:2]
        w = Workload(prompt=n if kind == "pp" else 512, answer=n if kind == "tg" else 1, context=int(r["depth"]),
                     ubatch=int(r["ub"]), kv_type=r.get("kv_type", "f16"))
        placement = Placement(gpu_layers=min(int(r["ngl"]), spec.layers + 1), cpu_moe=int(r["n_cpu_moe"]))

        def price(m: MachineProfile, w: Workload = w, spec: Any = spec, p: Placement = placement,
                  kind: str = kind, n: int = n) -> float:
            if kind == "pp":
                return n / float(placed_prefill(spec, m, w, p, prompt=n, context=w.context).seconds)
            # a tgN rate averages the steps as the cache grows from depth to depth + N
            steps = np.linspace(w.context, w.context + n - 1, 8)
            return 1.0 / float(np.mean(placed_decode(spec, m, w, p, context=steps).seconds))

        label = f"{r['model']} {r['weights']} {r['test']} -ub {r['ub']} -ngl {r['ngl']} --n-cpu-moe {r['n_cpu_moe']}"
        out.append(Row(source=r["source"], url=urls[r["source"]], label=label,
                       machine_id=f"{machine.name} + {r['cpu']}", kind=kind, measured=float(r["tokens_per_second"]),
                       price=price, machine=machine))
    return out


@contextmanager
def constants(host: float, link: float) -> Iterator[None]:
    """``offload_terms``' fitted constants set to (host, link) for the block."""
    old = offload_terms.HOST_EXPERT_DECODE_SHARE, offload_terms.PCIE_STREAM_SHARE
    offload_terms.HOST_EXPERT_DECODE_SHARE, offload_terms.PCIE_STREAM_SHARE = host, link
    try:
        yield
    finally:
        offload_terms.HOST_EXPERT_DECODE_SHARE, offload_terms.PCIE_STREAM_SHARE = old


def expected(row: Row) -> tuple[float, float, float]:
    """(expected, low, high) tokens/s of ``row`` at the current constants."""
    ex = expected_on(load_model_cached(row), row.machine)
    if ex is None:
        return float("nan"), float("nan"), float("nan")
    value = row.price(ex.machine)
    low, high = band(value, [row.price(m) for m in ex.replicas])
    return value, float(low), float(high)


def load_model_cached(row: Row) -> Any:
    return row.price.__defaults__[1]  # type: ignore[index]     # the row's spec, bound as a default


def error(predicted: float, measured: float) -> float:
    return abs(predicted / measured - 1.0)


def fit(rows: list[Row]) -> tuple[float, float]:
    """The constants minimising the median error over ``rows`` (tg rows fit the host share,
    pp rows the link share; each on a grid of 0.30-1.00). A row above its own ceiling is left
    out of the fit: its stated set-up cannot have produced it (a memory faster than stated, say)."""
    rows = [r for r in rows if r.measured <= r.price(r.machine)]
    best = []
    for kind, pick in (("tg", lambda s: (s, offload_terms.PCIE_STREAM_SHARE)),
                       ("pp", lambda s: (offload_terms.HOST_EXPERT_DECODE_SHARE, s))):
        subset = [r for r in rows if r.kind == kind]
        if not subset:
            best.append(offload_terms.HOST_EXPERT_DECODE_SHARE if kind == "tg" else offload_terms.PCIE_STREAM_SHARE)
            continue
        scores = []
        for s in SHARES:
            with constants(*pick(float(s))):
                scores.append((statistics.median(error(expected(r)[0], r.measured) for r in subset), float(s)))
        best.append(min(scores)[1])
    return best[0], best[1]


def report(rows: list[Row], predicted: dict[int, tuple[float, float, float]], title: str) -> None:
    errors = [error(predicted[i][0], r.measured) for i, r in enumerate(rows)]
    inside = [predicted[i][1] <= r.measured <= predicted[i][2] for i, r in enumerate(rows)]
    by_machine: dict[str, list[float]] = {}
    for e, r in zip(errors, rows, strict=True):
        by_machine.setdefault(r.machine_id, []).append(e)
    machines = [statistics.median(v) for v in by_machine.values()]
    for kind in ("pp", "tg"):
        ks = [e for e, r in zip(errors, rows, strict=True) if r.kind == kind]
        if ks:
            print(f"  {title} {kind}: {len(ks)} rows, median error {statistics.median(ks):.0%}, worst {max(ks):.0%}")
    print(f"  {title} all: row median {statistics.median(errors):.0%}, machine median "
          f"{statistics.median(machines):.0%} ({len(machines)} machines), band holds {sum(inside)} of {len(rows)}")


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


KEPT = np.round(np.arange(0.0, 1.001, 0.1), 1)


def several_devices() -> None:
    """The layer-split runs of the published llama-bench sets (never fitted by the one-device
    fit): each priced at its back end's fitted factors with the pipeline keeping ``KEPT`` of its
    ideal saving; the share fitted on every row and leaving one source out, and the errors of
    the shipped ``layer_split.PIPELINE_KEPT`` by test kind and device count."""
    from rooflab.core.calibration import public, public_fit
    from rooflab.core.predict import layer_split
    from rooflab.core.predict.expected import efficiency_for

    data = public.load_public()
    fits = public.fit_groups(data)
    shipped = layer_split.PIPELINE_KEPT
    rows: list[tuple[str, str, int, str, float, dict[float, float]]] = []   # source, kind, N, set-up, measured, by kept
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
        n, depth = int(row.test.tokens), int(s.depth)
        got: dict[float, float] = {}
        for kept in (KEPT if row.test.kind != "decode" else (shipped,)):
            layer_split.PIPELINE_KEPT = float(kept)
            if row.test.kind == "decode":
                steps = placed_decode(spec, m, w, p, context=depth + np.arange(n, dtype=np.float64))
                got[float(kept)] = n / float(np.sum(steps.seconds))
            else:
                got[float(kept)] = n / float(placed_prefill(spec, m, w, p, prompt=n, context=depth).seconds)
        layer_split.PIPELINE_KEPT = shipped
        rows.append((public_score_source(data, row), public.kind(row), int(s.devices or 1),
                     f"{row.machine} x{s.devices}", row.tokens_per_second, got))

    def best(subset: list[tuple[str, str, int, str, float, dict[float, float]]]) -> float:
        scores = [(statistics.median(error(r[5][float(k)], r[4]) for r in subset), float(k)) for k in KEPT]
        return min(scores)[1]

    pp = [r for r in rows if r[1] == "pp"]
    print(f"several devices (layer split): {len(rows)} published rows never fitted, {len({r[0] for r in rows})} "
          f"sources, {len({r[3] for r in rows})} set-ups; PIPELINE_KEPT shipped {shipped}, fitted on every "
          f"prompt row {best(pp)}")
    held = []
    for source in sorted({r[0] for r in pp}):
        train = [r for r in pp if r[0] != source]
        kept = best(train) if train else shipped
        held += [error(r[5][kept], r[4]) for r in pp if r[0] == source]
    print(f"  pp leaving one source out: {len(held)} rows, median error {statistics.median(held):.0%}")
    for kind in ("pp", "tg"):
        for n in sorted({r[2] for r in rows}):
            es = [error(r[5][shipped], r[4]) for r in rows if r[1] == kind and r[2] == n]
            ratios = [r[4] / r[5][shipped] for r in rows if r[1] == kind and r[2] == n]
            if es:
                print(f"  {kind} on {n} devices: {len(es)} rows, median error {statistics.median(es):.0%}, "
                      f"measured / expected {statistics.median(ratios):.2f} (median)")
    every = [error(r[5][shipped], r[4]) for r in rows]
    by_setup: dict[str, list[float]] = {}
    for r, e in zip(rows, every, strict=True):
        by_setup.setdefault(r[3], []).append(e)
    print(f"  all: {len(every)} rows, row median {statistics.median(every):.0%}, set-up median "
          f"{statistics.median(statistics.median(v) for v in by_setup.values()):.0%} ({len(by_setup)} set-ups)")


def public_score_source(data: Any, row: Any) -> str:
    from rooflab.core.calibration import public_score

    return public_score.source(data, row)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="fit the two constants and score leaving one source out")
    ap.add_argument("--several", action="store_true", help="also score the published runs on several devices")
    args = ap.parse_args(argv)
    rows = _rows()
    print(f"{DATA.name}: {len(rows)} rows, {len({r.source for r in rows})} sources, "
          f"{len({r.machine_id for r in rows})} machines")
    print(f"constants: HOST_EXPERT_DECODE_SHARE {offload_terms.HOST_EXPERT_DECODE_SHARE}, PCIE_STREAM_SHARE "
          f"{offload_terms.PCIE_STREAM_SHARE}, CROSSING_SECONDS {offload_terms.CROSSING_SECONDS * 1e6:.0f} us "
          f"(bounded), LIVE_EXPERT_FLOOR {offload_terms.LIVE_EXPERT_FLOOR}")
    beaten = 0
    shipped = {}
    for i, r in enumerate(rows):
        ceiling = r.price(r.machine)
        shipped[i] = expected(r)
        beaten += r.measured > ceiling
        value, low, high = shipped[i]
        print(f"  {r.label:<70} measured {r.measured:8.1f}  ceiling {ceiling:8.1f}  expected {value:8.1f} "
              f"({low:.1f}..{high:.1f})  [{r.source}]")
    print(f"measurements above their ceiling: {beaten} of {len(rows)}")
    report(rows, shipped, "shipped constants, in sample")
    if args.fit:
        host, link = fit(rows)
        print(f"fitted on every row: HOST_EXPERT_DECODE_SHARE {host}, PCIE_STREAM_SHARE {link}")
        held: dict[int, tuple[float, float, float]] = {}
        for source in sorted({r.source for r in rows}):
            train = [r for r in rows if r.source != source]
            with constants(*fit(train)) if train else constants(host, link):
                for i, r in enumerate(rows):
                    if r.source == source:
                        held[i] = expected(r)
        report(rows, held, "leave one source out")
    if args.several:
        several_devices()
    return 0


if __name__ == "__main__":
    sys.exit(main())
