"""vLLM's own efficiency, fitted to its published runs (``resources/placed/vllm-public.json``):
the calibration a tensor-parallel expected figure takes where no vLLM run was timed here.

A run is priced with the same clocks as every tensor-parallel figure (``parallel_prefill`` and
``parallel_decode`` on the preset, its link's all-reduces included), at four fitted terms:

    pass = max(W / (B x beta), F / (C x phi)) + link's all-reduces + L x t_layer + E x t_expert

beta: the share of the memory bandwidth a decode step's weights and cache stream at; phi: the
share of the peak FLOP/s the multiplies reach; t_layer: seconds every layer adds to a pass
(kernel launches and gaps between them); t_expert: seconds a routed-expert layer adds beside
(router, top-k, gather, the fused-MoE kernels). A benchmark_latency row is one prefill of b
prompts and answer - 1 decode steps at batch b; a decode-rate row the mean step of one
sequence; a TTFT row (measured through an HTTP client, request handling in it) and a server's
decode rate under concurrency (its steps also run other requests' prefills, which a decode step
of b sequences does not price) are printed and never fitted.

The four terms are fitted on a grid, the mean over machines (each one's median) of
|log(expected / measured)| minimised, so a GPU with many rows weighs as one with few.

The band is what a new machine meets: the expected seconds times exp(+-h), h the size
|log(measured / expected)| of the runs each machine ran against the fit that left it out, at
the 68th percentile raised to 68 (n + 1) / n over the n machines (each one vote; the conformal
rank, so a machine outside them falls inside about as often as theirs did). Only the size is
carried over, not the direction: two machines' batched runs missed by up to 4x, one each way
(the compute share is 0.1 on one GPU's fused-MoE kernels, 0.45 on another's). One device and
tensor parallel have a band each: the runs over several devices missed by up to 4x, those on
one by 30 %. Every published tensor-parallel run all-reduced over NVLink or NVSwitch, and every
run but one was an NVIDIA GPU, so the calibration is applied to NVIDIA GPUs, one device or several
over NVLink, and nowhere else (``not_applied`` says why)."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rooflab.core.errors import ResourceError, RooflabError
from rooflab.core.files.resources import resources_dir
from rooflab.core.predict.expected import expert_layers
from rooflab.core.predict.parallel import Parallel, device_link, parallel_decode, parallel_prefill
from rooflab.core.values.calibration import BAND, Accuracy, EngineCalibration, Rates
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

BANDWIDTH = tuple(float(v) for v in np.round(np.arange(0.30, 1.0001, 0.02), 2))
COMPUTE = tuple(float(v) for v in np.round(np.arange(0.10, 1.0001, 0.05), 2))
LAYER_SECONDS = tuple(float(v) * 1e-6 for v in range(0, 151, 6))
EXPERT_SECONDS = tuple(float(v) * 1e-6 for v in range(0, 401, 25))
DECODE_POINTS = 8            # contexts a run's decode steps are priced at (their mean is the step)
FITTED_BACKENDS = ("cuda",)   # back ends with published runs on more than one GPU (NVIDIA's)
BAND_LEVEL = 68.0            # share of a new machine's runs the band is meant to hold (16-84 %)
REPLICATES = 12              # the band's replicates (``predict.expected.MAX_REPLICATES`` keeps them all)
TESTS = ("latency", "tg", "ttft")
MAX_FACTOR = 1.0             # a share of a peak (``public_fit.MAX_FACTOR``): the ceiling
MAX_LOG_SCALE = math.log(100.0)   # the farthest a run's terms are scaled to meet it (``term_scale``)


def data_path() -> Path:
    return Path(resources_dir()) / "placed" / "vllm-public.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Terms:
    """The four fitted terms: shares of the peaks, seconds a pass adds per layer and per
    routed-expert layer."""

    bandwidth: float
    compute: float
    layer_seconds: float
    expert_seconds: float

    def scaled(self, factor: float) -> Terms:
        """The terms of a run ``factor`` times faster, as ``public_fit.scaled`` makes a
        replicate: each share times ``factor`` but never above 1 (a band's fast end stops at the
        ceiling), the fixed seconds divided by it."""
        return Terms(bandwidth=min(MAX_FACTOR, self.bandwidth * factor), compute=min(MAX_FACTOR, self.compute * factor),
                     layer_seconds=self.layer_seconds / factor, expert_seconds=self.expert_seconds / factor)

    def rates(self) -> Rates:
        """As relative rates (a published calibration's: factors of the machine's B and C)."""
        return Rates(bandwidth={"float": self.bandwidth}, prefill_flops={"float": self.compute},
                     decode_flops={"float": self.compute}, cache_bandwidth=self.bandwidth,
                     layer_seconds=self.layer_seconds, expert_layer_seconds=self.expert_seconds)


@dataclass(frozen=True, slots=True, eq=False)
class Parts:
    """A run's passes at the preset's peaks: each pass's memory and compute clocks and its
    link seconds, how many times it counts (``weight``), and the layers that pay the fixed
    terms."""

    memory: np.ndarray
    compute: np.ndarray
    link: np.ndarray
    weight: np.ndarray
    layers: int
    expert_layers: int

    def seconds(self, t: Terms) -> float:
        """The run's seconds at ``t``: sum of weight x (max(memory / beta, compute / phi) + link
        + layers x t_layer + expert layers x t_expert)."""
        per_pass = np.maximum(self.memory / t.bandwidth, self.compute / t.compute) + self.link
        fixed = self.layers * t.layer_seconds + self.expert_layers * t.expert_seconds
        return float(np.sum(self.weight * (per_pass + fixed)))

    @property
    def ceiling(self) -> float:
        """Seconds at the peaks, no fixed cost: the fastest the run could have gone."""
        return float(np.sum(self.weight * (np.maximum(self.memory, self.compute) + self.link)))


@dataclass(frozen=True, slots=True, eq=False)
class Run:
    """One published vLLM run: who measured it, on what, and its passes."""

    source: str
    machine: str          # the GPU preset's name (every device count of it is one machine)
    backend: str
    devices: int
    link: str             # the kind of link its all-reduces took ("" on one device)
    test: str
    label: str
    measured: float       # seconds (a decode rate as seconds per token)
    parts: Parts
    batch: int = 1        # requests at once (a server run's max concurrency)

    @property
    def fitted(self) -> bool:
        """Whether the fit takes it: a benchmark_latency run, or one request's decode rate, on a
        GPU of a fitted maker. Scored, not fitted (``apart``): a TTFT through an HTTP client, a
        server's decode rate under concurrency (other requests' prefills run in its steps, which
        a decode step of ``batch`` sequences does not price), the one MI300X run."""
        return not self.apart

    @property
    def apart(self) -> str:
        """Why the fit leaves the run out, in words ("" where it takes it)."""
        if self.test == "ttft":
            return "TTFT through an HTTP client"
        if self.test == "tg" and self.batch > 1:
            return "a server's decode rate under concurrency (other requests' prefills in its steps)"
        if self.backend not in FITTED_BACKENDS:
            return "not fitted (AMD: not applied)"
        return ""


def _identity(machine: MachineProfile) -> MachineProfile:
    return dataclasses.replace(machine, efficiency=Efficiency())


def parts_of(spec: Any, machine: MachineProfile, devices: int, test: str, batch: int, prompt: int,
             answer: int) -> Parts:
    """A run's passes priced at ``machine``'s peaks: the prefill of ``batch`` prompts of
    ``prompt`` tokens, and the decode steps as ``test`` counts them (``TESTS``)."""
    m = _identity(machine)
    p = Parallel.on(m, devices, "tensor") if devices > 1 else Parallel(devices=1)
    w = Workload(prompt=prompt, answer=max(answer, 1), context=0, batch=batch, kv_type="f16")
    mem: list[np.ndarray] = []
    comp: list[np.ndarray] = []
    link: list[np.ndarray] = []
    weight: list[np.ndarray] = []
    if test in ("latency", "ttft"):
        pre = parallel_prefill(spec, m, w, p, prompt=prompt, batch=batch, context=0)
        mem.append(np.atleast_1d(pre.device.memory_seconds))
        comp.append(np.atleast_1d(pre.device.compute_seconds))
        link.append(np.atleast_1d(pre.communication))
        weight.append(np.ones(1))
    steps = answer - 1 if test == "latency" else (1 if test == "tg" else 0)
    if steps > 0:
        last = prompt + max(answer - 1, 1)
        contexts = np.linspace(prompt, last, DECODE_POINTS)
        dec = parallel_decode(spec, m, w, p, context=contexts, batch=batch)
        mem.append(np.asarray(dec.device.memory_seconds, dtype=np.float64))
        comp.append(np.asarray(dec.device.compute_seconds, dtype=np.float64))
        link.append(np.asarray(dec.communication, dtype=np.float64))
        weight.append(np.full(DECODE_POINTS, steps / DECODE_POINTS))
    return Parts(memory=np.concatenate(mem), compute=np.concatenate(comp), link=np.concatenate(link),
                 weight=np.concatenate(weight), layers=int(spec.layers), expert_layers=int(expert_layers(spec)))


def _row_seconds(row: dict[str, Any]) -> float:
    if row["test"] == "tg":
        return 1.0 / float(row["tokens_per_second"])
    return float(row["seconds"])


@functools.lru_cache(maxsize=2)
def load_runs(path: str | None = None) -> tuple[Run, ...]:
    """The runs of the published file (``data_path`` by default), each priced at its preset's
    peaks; a ResourceError naming the file and the row for anything it cannot price."""
    from rooflab.core.files.safe_json import read_json
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine

    where = Path(path) if path else data_path()
    try:
        data = read_json(where, what="the published vLLM runs")
        rows = data["rows"]
        sources = {s["id"] for s in data["sources"]}
    except (OSError, RooflabError, KeyError, TypeError) as exc:
        raise ResourceError(f"{where}: cannot read the published vLLM runs ({exc})") from exc
    runs = []
    for i, row in enumerate(rows):
        try:
            if row["source"] not in sources or row["test"] not in TESTS:
                raise ValueError(f"source {row['source']!r} or test {row['test']!r} unknown")
            measured = _row_seconds(row)
            if not (math.isfinite(measured) and measured > 0):
                raise ValueError("measured figure must be > 0")
            machine = load_machine(row["gpu"])
            spec = load_model(row["model"], weights=row["weights"])
            devices = int(row["devices"])
            parts = parts_of(spec, machine, devices, row["test"], int(row["batch"]), int(row["prompt"]),
                             int(row["answer"]))
        except (RooflabError, KeyError, TypeError, ValueError) as exc:
            raise ResourceError(f"{where}: row {i + 1}: {exc}") from exc
        link = device_link(machine, devices)[2].kind if devices > 1 else ""
        label = (f"{row['model']} {row['weights']} {row['test']} b{row['batch']} {row['prompt']}+{row['answer']} "
                 f"TP{devices}")
        runs.append(Run(source=row["source"], machine=machine.name, backend=machine.backend, devices=devices,
                        link=link, test=row["test"], label=label, measured=measured, parts=parts,
                        batch=int(row["batch"])))
    return tuple(runs)


# ---- the fit -------------------------------------------------------------------------------


def _table(run: Run) -> np.ndarray:
    """log(expected / measured) of ``run`` over the whole grid (bandwidth x compute x layer x
    expert seconds): its passes' clocks are one outer maximum, the fixed terms a sum."""
    p = run.parts
    b = np.asarray(BANDWIDTH)[:, None, None]
    c = np.asarray(COMPUTE)[None, :, None]
    clocks = np.sum(p.weight * (np.maximum(p.memory / b, p.compute / c) + p.link), axis=-1)
    total = float(np.sum(p.weight))
    fixed = (total * p.layers * np.asarray(LAYER_SECONDS)[:, None]
             + total * p.expert_layers * np.asarray(EXPERT_SECONDS)[None, :])
    return np.log((clocks[:, :, None, None] + fixed[None, None, :, :]) / run.measured).astype(np.float32)


Tables = dict[int, np.ndarray]


def fit(runs: Sequence[Run], tables: Tables | None = None) -> Terms:
    """The grid point with the least mean over machines of each one's median |log(expected /
    measured)| over its fitted runs (``tables``: their ``_table``s by id, worked out once)."""
    by_machine: dict[str, list[np.ndarray]] = {}
    for r in runs:
        if r.fitted:
            table = tables[id(r)] if tables is not None and id(r) in tables else np.abs(_table(r))
            by_machine.setdefault(r.machine, []).append(table)
    if not by_machine:
        raise ResourceError("no published vLLM run to fit")
    cost = np.mean([np.median(np.stack(tables), axis=0) for tables in by_machine.values()], axis=0)
    i, j, k, e = np.unravel_index(int(np.argmin(cost)), cost.shape)
    return Terms(bandwidth=BANDWIDTH[i], compute=COMPUTE[j], layer_seconds=LAYER_SECONDS[k],
                 expert_seconds=EXPERT_SECONDS[e])


def held_out_seconds(runs: Sequence[Run], fold: Callable[[Run], str]) -> tuple[list[float], dict[str, Terms]]:
    """Each run's expected seconds from the terms fitted without its fold (``fold``: the source
    or the machine), and each fold's terms."""
    folds = sorted({fold(r) for r in runs})
    tables = {id(r): np.abs(_table(r)) for r in runs if r.fitted}
    terms = {f: fit([r for r in runs if fold(r) != f], tables) for f in folds}
    return [r.parts.seconds(terms[fold(r)]) for r in runs], terms


def weighted_percentiles(values: Sequence[float], groups: Sequence[str], q: Sequence[float]) -> list[float]:
    """Percentiles ``q`` of ``values`` with each group weighing as one (its values share it)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return [0.0 for _ in q]
    counts: dict[str, int] = {}
    for g in groups:
        counts[g] = counts.get(g, 0) + 1
    w = np.asarray([1.0 / counts[g] for g in groups])
    order = np.argsort(v)
    cum = (np.cumsum(w[order]) - 0.5 * w[order]) / np.sum(w)
    return [float(np.interp(x / 100.0, cum, v[order])) for x in q]


def residuals(runs: Sequence[Run], predicted: Sequence[float]) -> list[float]:
    """log(measured / expected) of each run (positive: the run was slower than expected)."""
    return [math.log(r.measured / p) for r, p in zip(runs, predicted, strict=True)]


def tensor_parallel(run: Run) -> bool:
    """The band's kind of run: several devices (tensor parallel) or one."""
    return run.devices > 1


def term_scale(run: Run, terms: Terms) -> float:
    """log f: how many times faster than ``terms`` (``Terms.scaled``) the run went, found by
    bisection (its seconds fall as f grows); the band's unit, since a band scales the terms and
    leaves the link's all-reduces as the link prices them. +-``MAX_LOG_SCALE`` where no f within
    it makes the measured seconds (a run faster than its ceiling and all-reduces allow)."""
    lo, hi = -MAX_LOG_SCALE, MAX_LOG_SCALE
    if run.parts.seconds(terms.scaled(math.exp(hi))) > run.measured:
        return hi
    if run.parts.seconds(terms.scaled(math.exp(lo))) < run.measured:
        return lo
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if run.parts.seconds(terms.scaled(math.exp(mid))) > run.measured:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def half_width(sizes: Sequence[float], groups: Sequence[str]) -> float:
    """h, the band's half-width in log: the ``BAND_LEVEL`` percentile of ``sizes`` (|``term_scale``|
    of held-out runs), each group one vote, at the conformal level 68 (n + 1) / n for
    n groups (the largest where that passes 100), so a run of a group none of them is inside
    exp(+-h) about as often as theirs were. 0 with no runs."""
    n = len(set(groups))
    if n == 0:
        return 0.0
    return weighted_percentiles(sizes, groups, [min(100.0, BAND_LEVEL * (n + 1) / n)])[0]


def band_seconds(parts: Parts, terms: Terms, h: float) -> tuple[float, float]:
    """(fast, slow) ends of a run's band: its seconds at ``terms`` exp(h) times faster and
    exp(h) times slower (``Terms.scaled``: the fast end never below the ceiling)."""
    return parts.seconds(terms.scaled(math.exp(h))), parts.seconds(terms.scaled(math.exp(-h)))


def held_out_bands(runs: Sequence[Run], fold: Callable[[Run], str]) -> list[tuple[float, float]]:
    """Each run's band, scored out of sample: around its seconds from the terms fitted without
    its fold, h (``half_width``) from the fitted runs of the other folds of its kind (one device
    or tensor parallel, ``tensor_parallel``), each of those priced by a fit without both its own
    fold and the scored one. Neither the run nor its fold shapes the band it is scored against."""
    tables = {id(r): np.abs(_table(r)) for r in runs if r.fitted}
    fits: dict[frozenset[str], Terms] = {}

    def without(*folds: str) -> Terms:
        key = frozenset(folds)
        if key not in fits:
            fits[key] = fit([r for r in runs if fold(r) not in key], tables)
        return fits[key]

    out = []
    for r in runs:
        f = fold(r)
        others = [o for o in runs if o.fitted and fold(o) != f and tensor_parallel(o) == tensor_parallel(r)]
        sizes = [abs(term_scale(o, without(f, fold(o)))) for o in others]
        out.append(band_seconds(r.parts, without(f), half_width(sizes, [fold(o) for o in others])))
    return out


def in_sample_bands(runs: Sequence[Run], terms: Terms) -> list[tuple[float, float]]:
    """Each run's band at ``terms`` (fitted on every run), h from the other fitted runs of its
    kind at the same terms, each run one vote: what the fit's own spread would claim."""
    out = []
    for r in runs:
        others = [o for o in runs if o is not r and o.fitted and tensor_parallel(o) == tensor_parallel(r)]
        sizes = [abs(term_scale(o, terms)) for o in others]
        out.append(band_seconds(r.parts, terms, half_width(sizes, [str(i) for i in range(len(others))])))
    return out


def shipped_half_width(runs: Sequence[Run], terms: dict[str, Terms], several: bool) -> float:
    """The half-width of the band ``rooflab predict`` shows for one device (``several`` False)
    or tensor parallel: ``half_width`` of what each machine ran against the fit that left it out
    (``terms``: by machine, ``held_out_seconds``'s), over the fitted runs of that kind."""
    kind = [r for r in runs if r.fitted and tensor_parallel(r) == several]
    return half_width([abs(term_scale(r, terms[r.machine])) for r in kind], [r.machine for r in kind])


def replicate_logs(h: float) -> list[float]:
    """``REPLICATES`` log factors evenly spaced over +-a, a = h / (1 - 2 x 16 %): their 16th and
    84th percentiles (``values.calibration.band``, linear between them) are exactly -h and +h."""
    a = h / (1.0 - 2.0 * BAND[0] / 100.0)
    return [float(x) for x in np.linspace(-a, a, REPLICATES)]


# ---- the calibration ------------------------------------------------------------------------


def _machine_fold(r: Run) -> str:
    return r.machine


def vllm_calibration(devices: int = 2) -> EngineCalibration | None:
    """The published vLLM calibration of ``devices`` GPUs: the terms fitted on every run, and as
    replicates those terms scaled (``public_fit.scaled``: decode and prompt sides alike) over
    exp(+-h), h the half-width of what machines the fit left out ran against it on one device
    or on several (``shipped_half_width``). None when the file cannot be read (logged, never
    raised: the figure is then absent, not wrong)."""
    return _calibration(devices > 1)


@functools.lru_cache(maxsize=2)
def _calibration(several: bool) -> EngineCalibration | None:
    import logging

    from rooflab.core.calibration.public_fit import scaled

    try:
        runs = [r for r in load_runs() if r.fitted]
    except RooflabError as exc:
        logging.getLogger(__name__).warning("published vLLM runs unusable: %s", exc)
        return None
    central = fit(runs)
    predicted, terms = held_out_seconds(runs, _machine_fold)
    h = shipped_half_width(runs, terms, several)
    rates = central.rates()
    replicates = tuple(scaled(rates, math.exp(x), math.exp(x)) for x in replicate_logs(h))
    kind = [(r, p) for r, p in zip(runs, predicted, strict=True) if tensor_parallel(r) == several]
    errors = [abs(p / r.measured - 1.0) for r, p in kind]
    machines = sorted({r.machine for r, _ in kind})
    what = "tensor parallel" if several else "one device"
    return EngineCalibration(
        machine_key="", machine_name="published vLLM machines", engine_key="vllm-published",
        engine_label="vLLM", settings={"engine": "vllm"}, date="2026-12-07",
        models=("published vLLM runs",), machine_bandwidth=1.0, machine_flops=1.0, central=rates,
        replicates=replicates, source="public", points=len(runs),
        accuracy={"leave_one_machine_out": {"run": Accuracy(median=float(np.median(errors)),
                                                            worst=float(np.max(errors)), count=len(errors))}},
        notes=(f"vLLM's published runs: {len(runs)} on {len(set(r.machine for r in runs))} GPUs; streams weights "
               f"at {central.bandwidth:.2f} of the bandwidth, multiplies at {central.compute:.2f} of the peak, "
               f"{central.layer_seconds * 1e6:.0f} us a layer and {central.expert_seconds * 1e6:.0f} us a "
               "routed-expert layer beside; the link's all-reduces as the link prices them",
               f"band ({what}): x{math.exp(-h):.2f}..x{math.exp(h):.2f} of the expected seconds, what "
               f"{len(machines)} machines the fit left out ran ({len(kind)} runs), never faster than the ceiling"))


def not_applied(machine: MachineProfile, devices: int) -> str:
    """Why the published vLLM calibration does not price ``devices`` of ``machine`` ("" when it
    does): it was fitted on NVIDIA GPUs (CUDA), one device or several over NVLink/NVSwitch."""
    backend = getattr(machine, "backend", "")
    if machine.kind == "gpu" and backend == "rocm":
        return ("vLLM's published runs on AMD GPUs are one MI300X decode rate, too few to fit; the NVIDIA fit "
                "is not carried over")
    if machine.kind != "gpu" or backend not in FITTED_BACKENDS:
        return f"vLLM's published runs are NVIDIA GPUs'; none is of {machine.name}"
    if devices > 1:
        link = device_link(machine, devices)[2]
        if link.kind != "nvlink":
            return (f"every published vLLM tensor-parallel run all-reduced over NVLink; {devices} x {machine.name} "
                    f"all-reduce over {link.label}, whose cost in vLLM no published run shows")
    return ""
