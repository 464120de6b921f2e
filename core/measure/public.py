"""Expected figures for machines nobody here owns: how far below rooflab's ceiling llama.cpp
runs on each back end (CUDA, Metal, ROCm, Vulkan, CPU), fitted to public llama-bench results
(``io.public_bench``) and checked out of sample.

A row's ceiling is rooflab's own prediction for its test at identity efficiency, on a machine
built from the row's bandwidth B and peak C (``predict.clocks``):

    tgN: N decode steps of one sequence at contexts 0..N-1;  tokens/s = N / sum_t step(t)
    ppN: one prefill of N tokens on an empty cache;          tokens/s = N / prefill(N)

Its efficiency is measured / ceiling. A batch-1 step is memory-bound, so a tg row measures the
bandwidth factor; a 512-token prefill is compute-bound on every machine in the file, so a pp row
measures the compute factor. Per back end each machine gets one vote, the median of its rows'
efficiencies (a machine with twelve rows must not outweigh one with two); the factor is the
median of the votes and its band their 16th to 84th percentile. A prediction runs the same
clocks with ``Efficiency(bandwidth=eb, compute=ec)``. Left out: a fixed per-step overhead
(folded into eb), differences between llama.cpp builds, and flash attention on or off (both
tables count as rows of one machine)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from rooflab.core.errors import ResourceError, SpecError
from rooflab.core.io.catalogue import get_entry, load_entry
from rooflab.core.io.public_bench import (
    BACKENDS,
    PublicBenchmarks,
    PublicMachine,
    PublicRow,
    read_public_benchmarks,
)
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.values.calibration import BAND  # the per-machine factors' band, as every band
from rooflab.core.values.machine import Efficiency, MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

_CAPACITY = 1e15               # bytes; memory size plays no part in a ceiling, MachineProfile wants one


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendEfficiency:
    """One back end's factors (dimensionless, 1.0 = rooflab's ceiling). ``bandwidth`` scales
    B in batch-1 decode (from tg rows), ``compute`` scales C in prefill (from pp rows); each
    with the 16th-84th percentile band of the per-machine values."""

    backend: str
    bandwidth: float
    bandwidth_low: float
    bandwidth_high: float
    compute: float
    compute_low: float
    compute_high: float
    machines: int
    rows: int
    sources: tuple[str, ...]      # the pages the rows were read from


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """One row predicted by a fit that did not see it."""

    row: int                      # index into PublicBenchmarks.rows
    measured: float               # tokens/s
    predicted: float              # tokens/s

    @property
    def error(self) -> float:
        """|predicted - measured| / measured."""
        return abs(self.predicted - self.measured) / self.measured


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorSummary:
    """Median and worst relative error of predicted tokens/s over ``rows`` (NaN when none)."""

    median: float
    worst: float
    rows: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendValidation:
    """Out-of-sample errors of one back end, per test kind ("tg" generation, "pp" prompt)."""

    backend: str
    machine_out_tg: ErrorSummary      # each machine predicted by a fit without it
    machine_out_pp: ErrorSummary
    model_out_tg: ErrorSummary        # each model and weight format predicted without it
    model_out_pp: ErrorSummary


# --- data and ceilings ------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def load_public() -> PublicBenchmarks:
    """The shipped public results, read once (nothing is read at import)."""
    return read_public_benchmarks()


@functools.lru_cache(maxsize=32)
def model_spec(catalogue: str, weights: str) -> ModelSpec:
    """The catalogue entry ``catalogue`` converted to ``weights`` (rooflab's own recipes)."""
    entry = get_entry(catalogue)
    if entry is None:
        raise ResourceError(f"public benchmarks: no catalogue entry {catalogue!r}")
    return load_entry(entry, weights)


def machine_profile(machine: PublicMachine, efficiency: Efficiency | None = None) -> MachineProfile:
    """A MachineProfile with the row machine's bandwidth (bytes/s) and FP16 peak (FLOP/s)."""
    return MachineProfile(name=machine.name, bandwidth=machine.bandwidth, peak_flops={"fp16": machine.peak_fp16},
                          memory=_CAPACITY, default_dtype="fp16", kind="cpu" if machine.backend == "cpu" else "gpu",
                          efficiency=efficiency or Efficiency(), key=machine.key)


def tokens_per_second(data: PublicBenchmarks, row: PublicRow, efficiency: Efficiency | None = None) -> float:
    """rooflab's tokens/s for ``row``'s test on its machine; the ceiling at identity efficiency.

    tgN = N / sum of decode_pass seconds at contexts 0..N-1 (batch 1); ppN = N / prefill_pass
    seconds for N tokens on an empty cache. KV cache F16, compute at the FP16 peak."""
    spec = model_spec(data.model(row.model).catalogue, row.weights)
    machine = machine_profile(data.machine(row.machine), efficiency)
    n = int(row.test.tokens)
    if row.test.kind == "decode":
        steps = decode_pass(spec, machine, Workload(), context=np.arange(n, dtype=np.float64), batch=1)
        return n / float(np.sum(steps.seconds))
    return n / float(prefill_pass(spec, machine, Workload(prompt=n), prompt=n, context=0).seconds)


@functools.lru_cache(maxsize=8)
def row_efficiencies(data: PublicBenchmarks) -> tuple[float, ...]:
    """measured / ceiling for every row, in file order."""
    return tuple(r.tokens_per_second / tokens_per_second(data, r) for r in data.rows)


# --- the fit ----------------------------------------------------------------------------------

def _kind(row: PublicRow) -> str:
    return "tg" if row.test.kind == "decode" else "pp"


def machine_votes(data: PublicBenchmarks, rows: Iterable[int], kind: str) -> dict[str, float]:
    """Each machine's median efficiency over the given rows of test kind ``kind`` ("tg"/"pp")."""
    eff = row_efficiencies(data)
    per: dict[str, list[float]] = {}
    for i in rows:
        if _kind(data.rows[i]) == kind:
            per.setdefault(data.rows[i].machine, []).append(eff[i])
    return {m: float(np.median(v)) for m, v in per.items()}


def _factor(votes: Sequence[float]) -> tuple[float, float, float]:
    """(median, low, high) of the per-machine votes; NaNs when there are none."""
    if not votes:
        return math.nan, math.nan, math.nan
    low, high = np.percentile(votes, BAND)
    return float(np.median(votes)), float(low), float(high)


def _backend_rows(data: PublicBenchmarks, backend: str) -> list[int]:
    return [i for i, r in enumerate(data.rows) if data.machine(r.machine).backend == backend]


def backend_efficiency(backend: str, data: PublicBenchmarks | None = None) -> BackendEfficiency:
    """The fitted factors of ``backend`` (cuda, metal, rocm, vulkan, cpu) from all its rows."""
    data = data or load_public()
    name = backend.lower()
    rows = _backend_rows(data, name)
    if not rows:
        raise SpecError(f"backend must be one with public results ({', '.join(backends(data))}), got {backend!r}")
    tg, pp = (_factor(list(machine_votes(data, rows, k).values())) for k in ("tg", "pp"))
    urls = sorted({data.rows[i].source.url for i in rows})
    return BackendEfficiency(backend=name, bandwidth=tg[0], bandwidth_low=tg[1], bandwidth_high=tg[2],
                             compute=pp[0], compute_low=pp[1], compute_high=pp[2],
                             machines=len({data.rows[i].machine for i in rows}), rows=len(rows), sources=tuple(urls))


def backends(data: PublicBenchmarks | None = None) -> tuple[str, ...]:
    """The back ends with rows, in BACKENDS order."""
    data = data or load_public()
    present = {m.backend for m in data.machines if any(r.machine == m.key for r in data.rows)}
    return tuple(b for b in BACKENDS if b in present)


# --- out of sample ----------------------------------------------------------------------------

def _held_out(data: PublicBenchmarks, group: Callable[[PublicRow], object]) -> tuple[Prediction, ...]:
    """Within each back end, each group of rows (by ``group``) predicted by factors fitted to the
    back end's other rows. A row with no training rows of its kind is not predicted."""
    out = []
    for backend in backends(data):
        rows = _backend_rows(data, backend)
        for key in dict.fromkeys(group(data.rows[i]) for i in rows):
            test = [i for i in rows if group(data.rows[i]) == key]
            train = [i for i in rows if group(data.rows[i]) != key]
            eb, ec = (_factor(list(machine_votes(data, train, k).values()))[0] for k in ("tg", "pp"))
            for i in test:
                needed = eb if _kind(data.rows[i]) == "tg" else ec
                if math.isnan(needed):
                    continue
                fitted = Efficiency(bandwidth=eb if not math.isnan(eb) else 1.0,
                                    compute=ec if not math.isnan(ec) else 1.0)
                out.append(Prediction(row=i, measured=data.rows[i].tokens_per_second,
                                      predicted=tokens_per_second(data, data.rows[i], fitted)))
    return tuple(out)


def leave_one_machine_out(data: PublicBenchmarks | None = None) -> tuple[Prediction, ...]:
    """Every row predicted by its back end's factors fitted without its machine."""
    return _held_out(data or load_public(), lambda r: r.machine)


def leave_one_model_out(data: PublicBenchmarks | None = None) -> tuple[Prediction, ...]:
    """Every row predicted by its back end's factors fitted without its model and weight format."""
    return _held_out(data or load_public(), lambda r: (r.model, r.weights))


def summarise(predictions: Iterable[Prediction]) -> ErrorSummary:
    """Median and worst relative error of ``predictions``."""
    errors = [p.error for p in predictions]
    if not errors:
        return ErrorSummary(median=math.nan, worst=math.nan, rows=0)
    return ErrorSummary(median=float(np.median(errors)), worst=float(np.max(errors)), rows=len(errors))


def validate(data: PublicBenchmarks | None = None) -> tuple[BackendValidation, ...]:
    """Out-of-sample errors per back end: leave one machine out and leave one model out, each
    for generation (tg) and prompt processing (pp) rows."""
    data = data or load_public()
    by_machine, by_model = leave_one_machine_out(data), leave_one_model_out(data)

    def pick(preds: tuple[Prediction, ...], backend: str, kind: str) -> ErrorSummary:
        return summarise(p for p in preds if _kind(data.rows[p.row]) == kind
                         and data.machine(data.rows[p.row].machine).backend == backend)

    return tuple(BackendValidation(backend=b, machine_out_tg=pick(by_machine, b, "tg"),
                                   machine_out_pp=pick(by_machine, b, "pp"),
                                   model_out_tg=pick(by_model, b, "tg"), model_out_pp=pick(by_model, b, "pp"))
                 for b in backends(data))
