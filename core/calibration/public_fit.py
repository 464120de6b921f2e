"""Published llama-bench results fitted to the model form every calibration uses
(``values.calibration``), as factors of each machine's own peaks.

A local calibration (``calibration_fit``) fits absolute rates on one machine. Published rows
come from many machines, so here each row's bytes are divided by its machine's bandwidth B and
its FLOPs by its FP16 peak C before the same linear fit:

    t = o + o_L x L + o_E x L_E + a x sum_f(W_f / (eta_f B)) + a x K / (eta_kv B)
          + c x [sum_g(F_g x (1 + r0 / r_g) / (kappa_g C)) + A / (alpha_fa C)]

with ``eta_f`` the share of B that weights of format class f stream at in a decode step,
``eta_kv`` the cache's, ``kappa_g`` the share of C that multiplies on weights of class g reach
at many rows (routed experts apart: llama.cpp's expert multiply runs below dense rates),
``r_g`` the rows each multiply of the pass gets (the ubatch's tokens, min(n, -ub); a routed
expert ubatch x used / count of them) and ``r0`` the rows at which a multiply reaches half its
rate (chosen on a grid, as the overlap is), ``A`` a prefill's attention arithmetic at
``alpha_fa``, its rate with or without flash attention as the row ran, ``o`` a fixed cost per
pass in seconds (Apple chips pay milliseconds a token), ``o_L`` one per layer and ``o_E`` one per
routed-expert layer (``L_E`` of them: ``moe_layer_seconds``). A row's
time is the test's: a tgN row is one decode step at the mean context of its N steps (and its
depth), a ppN row one prefill of N tokens after its depth. Rows are fitted per group: the back
end, and Vulkan per GPU vendor (NVIDIA's Vulkan driver reaches several times Intel Arc's share
of the peak).

What the fit gives is a ``Rates`` of factors (``source == "public"`` calibrations are read as
factors of the machine's B and C by ``predict.expected``), so a preset and a machine the user
calibrated are priced by one set of terms. A factor is capped at 1: no fitted rate is above the
memory or the unit it ran on. Rows the form cannot describe (weights partly in host memory,
several devices) are left to the placement model and not fitted here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from rooflab.core.calibration.solver import (
    OVERLAPS,
    ROWS_HALF,
    Design,
    Unknowns,
    design_seconds,
    fit_at,
    mostly_in,
)
from rooflab.core.errors import SpecError
from rooflab.core.io.public_bench import PublicBenchmarks, PublicMachine, PublicRow
from rooflab.core.predict import work
from rooflab.core.predict.expected import EXPERTS, Shares, expert_layers
from rooflab.core.values.calibration import FORMAT_CLASSES, Rates
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import DEFAULT_UBATCH

Array = NDArray[np.float64]
MAX_FACTOR = 1.0          # a fitted share of a peak; above it the machine's figure is wrong, not the fit
KV_TYPE = "f16"           # llama-bench's default cache type
ATTENTION_SHARE = 0.1     # a prefill's attention share of its FLOPs that lets the fit see attention's own rate
DEFAULT_BATCH = 2048      # llama-bench's -b where a row does not say (its -ub: ``DEFAULT_UBATCH``, 512)
CACHE_SHARE = 0.15        # a decode step's cache share of its bytes that lets the fit see the cache's own rate


def group_of(machine: PublicMachine) -> str:
    """The group a machine's rows are fitted in: its back end, Vulkan split by GPU vendor
    ("vulkan-nvidia", "vulkan-amd", "vulkan-intel")."""
    if machine.backend == "vulkan" and machine.vendor:
        return f"vulkan-{machine.vendor}"
    return machine.backend


MIN_UBATCH = 256          # a ubatch below this re-reads the weights several times a prompt: not a term yet


def fittable(row: PublicRow, layers: int, machine: PublicMachine | None = None) -> bool:
    """Whether the one-device form describes ``row`` of a model of ``layers`` layers: every
    weight on the one device (-ngl not given, or at least the layers plus the output layer; on a
    CPU ``machine`` any -ngl, as there is no GPU to offload to), a prompt read in ubatches of at
    least ``MIN_UBATCH`` (a sweep down to -ub 1 reads the weights once per ubatch, hundreds of
    times a prompt: the form prices one read), and on a CPU a decode step on at least half its
    cores (``MIN_DECODE_CORES``; on fewer, what each core streams binds, not the memory:
    the Ryzen 9 7950X's f16 generation read 0.40 of its memory's peak on one thread, 0.76 on
    four; not a term yet)."""
    s = row.source
    small_ubatch = row.test.kind != "decode" and s.ubatch is not None and s.ubatch < min(MIN_UBATCH, row.test.tokens)
    cpu = machine is not None and machine.backend == "cpu"
    few_cores = (cpu and row.test.kind == "decode" and machine is not None and bool(machine.cores)
                 and row_threads(machine, row)[1] < MIN_DECODE_CORES)
    return (not s.partial_offload and (s.devices or 1) == 1 and (cpu or s.ngl is None or s.ngl > layers)
            and not small_ubatch and not few_cores)


MIN_DECODE_CORES = 0.5    # the share of a CPU's cores a decode row must run on to be fitted


@dataclass(frozen=True, slots=True)
class RowPass:
    """The one pass a row's time stands for: bytes (weights and cache) and FLOPs, routed
    experts' FLOPs apart, not yet divided by the machine's peaks."""

    seconds: float
    bytes: float              # weights (and, in a prefill, the cache written)
    cache: float              # bytes of the cache a decode step reads
    dense_flops: float        # FLOPs of the weight multiplies but the routed experts'
    expert_flops: float
    attention_flops: float    # a prefill's attention arithmetic (its n² term)
    prefill: bool
    layers: float
    flash: bool               # the row ran with flash attention (-fa 1; unstated: off, llama-bench's old default)
    rows: float               # rows per dense multiply of a prefill pass: min(n, -ub, -b)
    expert_rows: float        # rows per routed expert: rows x used / count
    byte_shares: dict[str, float]    # the weights' bytes by format class (sums to 1)
    flop_shares: dict[str, float]    # the dense multiplies' FLOPs by format class (sums to 1)
    threads: float = 1.0      # a CPU's cores the row computed on (``row_threads``); 1 on a GPU
    thread_share: float = 1.0   # those cores' share of the machine's (its peak is theirs)


def row_threads(machine: PublicMachine, row: PublicRow) -> tuple[int, float]:
    """(cores computing, their share of the machine's) for ``row`` on a CPU: min(-t, cores),
    all the cores where the row gives no -t (llama-bench's default); (1, 1.0) on a GPU or where
    the file states no cores."""
    if machine.backend != "cpu" or not machine.cores:
        return 1, 1.0
    used = min(row.source.threads or machine.cores, machine.cores)
    return used, used / machine.cores


def row_pass(spec: ModelSpec, row: PublicRow, shares: Shares,
             threads: tuple[int, float] = (1, 1.0)) -> RowPass:
    """The pass of ``row`` for ``spec``: a tgN row one decode step at the mean context of its N
    steps after its depth, a ppN row one prefill of N tokens after its depth (``threads``: as
    ``row_threads`` gives them)."""
    n, depth = int(row.test.tokens), int(row.source.depth)
    if row.test.kind == "decode":
        context = depth + (n - 1) / 2.0
        w, k = work.decode_bytes(spec, context, 1, KV_TYPE, 1.0)
        nbytes, cache, seconds = float(w), float(k), 1.0 / row.tokens_per_second
        flops = float(work.decode_flops(spec, context, 1))
    else:
        nbytes, cache = float(work.prefill_bytes(spec, n, depth, KV_TYPE, 1)), 0.0
        flops, seconds = float(work.prefill_flops(spec, n, depth, 1)), n / row.tokens_per_second
    attention = float(work.attention_flops(spec, n, depth)) if row.test.kind != "decode" else 0.0
    experts = shares.flops.get(EXPERTS, 0.0)
    rows = float(min(n, row.source.ubatch or DEFAULT_UBATCH, row.source.batch or DEFAULT_BATCH))
    spread = spec.expert_fraction
    return RowPass(seconds=seconds, bytes=nbytes, cache=cache, dense_flops=(flops - attention) * (1.0 - experts),
                   expert_flops=(flops - attention) * experts, attention_flops=attention,
                   prefill=row.test.kind != "decode", layers=float(spec.layers),
                   flash=bool(row.source.flash_attention), rows=rows, expert_rows=max(1.0, rows * spread),
                   byte_shares=dict(shares.bytes), flop_shares=_without_experts(shares.flops),
                   threads=float(threads[0]), thread_share=float(threads[1]))


def _without_experts(flops: dict[str, float]) -> dict[str, float]:
    dense = {k: v for k, v in flops.items() if k != EXPERTS}
    total = sum(dense.values())
    return {k: v / total for k, v in dense.items()} if total > 0 else {"float": 1.0}


@dataclass(frozen=True, slots=True)
class GroupData:
    """The rows of one group as the fit reads them: relative columns, one row per result."""

    group: str
    rows: tuple[int, ...]             # indices into PublicBenchmarks.rows
    design: Design                    # byte columns: ``byte_classes``; FLOP columns: ``flop_classes`` (dense
    #                                   multiplies by format class), routed experts, attention, attention with -fa
    multiply_rows: NDArray[np.float64]   # (n, 2): rows per dense multiply and per routed expert
    byte_classes: tuple[str, ...] = ("any",)
    flop_classes: tuple[str, ...] = ("any",)
    machines: tuple[str, ...] = ()    # each row's machine key
    expert_layers: NDArray[np.float64] | None = None   # (n,): each row's routed-expert layers (None: all 0)
    threads: NDArray[np.float64] | None = None         # (n,): a CPU row's cores computing (None: all 1)

    @property
    def experts_column(self) -> int:
        return len(self.flop_classes)

    @property
    def serial_shares(self) -> tuple[float, ...]:
        """The serial shares the fit chooses among: ``SERIAL_SHARES`` where some row ran on
        several CPU cores, else none but 0."""
        return SERIAL_SHARES if self.threads is not None and bool(np.any(self.threads > 1)) else (0.0,)

    def at_rows_half(self, rows_half: float, mask: NDArray[np.bool_] | None = None, serial: float = 0.0) -> Design:
        """The design with each multiply's FLOPs weighted by 1 + r0 / rows and, on a CPU, every
        FLOP by 1 + s x (cores - 1) (``serial``: Amdahl's serial share; ``mask``: only those rows)."""
        d = self.design
        if rows_half > 0 or (serial > 0 and self.threads is not None):
            flops = d.flops.copy()
            e = self.experts_column
            if rows_half > 0:
                flops[:, :e] *= (1.0 + rows_half / self.multiply_rows[:, 0])[:, None]
                flops[:, e] *= 1.0 + rows_half / self.multiply_rows[:, 1]
            if serial > 0 and self.threads is not None:
                flops *= (1.0 + serial * (self.threads - 1.0))[:, None]
            d = dataclasses.replace(d, flops=flops)
        return d if mask is None else d.subset(mask)


# Amdahl's serial share of a CPU pass's arithmetic, chosen on this grid as r0 is: llama.cpp's
# threads meet at a barrier after every op and some work runs on one thread, so 64 cores reach
# far less of their peak than 4 (the published EPYC and Threadripper prompts ran at 0.3-0.6 of
# the FP32 peak their cores state, laptops' four cores at 0.8-0.9)
SERIAL_SHARES = (0.0, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05)

MIN_CLASS_ROWS = 8      # rows of a group mostly in one format class before that class gets its own rate
MIN_CLASS_MACHINES = 3  # ... on this many machines: a format's effect shows on several, a machine's on one


def own_classes(shares: Sequence[dict[str, float]], machines: Sequence[str]) -> tuple[str, ...]:
    """The format classes that get their own column: those ``_supported`` by the rows of
    ``shares`` (each row's bytes or FLOPs by class); at least one (the most held), sorted."""
    names = sorted({k for sh in shares for k in sh})
    columns = np.array([[sh.get(k, 0.0) for k in names] for sh in shares]).reshape(len(shares), len(names))
    held = mostly_in(columns, np.ones(len(shares), dtype=bool))
    own = _supported(held, machines)
    if own.any():
        return tuple(n for n, keep in zip(names, own, strict=True) if keep)
    counts = held.sum(axis=0)
    return (names[int(np.argmax(counts))] if counts.any() else "any",)


def _supported(held: NDArray[np.bool_], machines: Sequence[str]) -> NDArray[np.bool_]:
    """(k,): the classes ``held`` (``mostly_in``) by ``MIN_CLASS_ROWS`` rows on
    ``MIN_CLASS_MACHINES`` machines."""
    return np.array([held[:, j].sum() >= MIN_CLASS_ROWS
                     and len({m for m, h in zip(machines, held[:, j], strict=True) if h}) >= MIN_CLASS_MACHINES
                     for j in range(held.shape[1])], dtype=bool)


def class_columns(shares: dict[str, float], classes: tuple[str, ...]) -> Array:
    """``shares`` over ``classes``: a class without a column of its own goes to the row's
    largest class that has one (to the first where it has none)."""
    out = np.array([shares.get(k, 0.0) for k in classes])
    rest = 1.0 - out.sum()
    if rest > 1e-12:
        out[int(np.argmax(out)) if out.sum() > 0 else 0] += rest
    return out


def path_columns(shares: dict[str, float], classes: tuple[str, ...], slow: float) -> Array:
    """``class_columns`` with the float class's share ``slow`` times over: its multiplies run
    at 1 / ``slow`` of the peak the columns are divided by (a CPU's FP32 rate beside its int8
    path), in the column it goes to (its own, else the row's largest)."""
    out = class_columns(shares, classes)
    share = shares.get("float", 0.0)
    if slow == 1.0 or share <= 0:
        return out
    if "float" in classes:
        at = classes.index("float")
    else:
        own = np.array([shares.get(k, 0.0) for k in classes])
        at = int(np.argmax(own)) if own.sum() > 0 else 0
    out = out.copy()
    out[at] += (slow - 1.0) * share
    return out


def group_data(data: PublicBenchmarks, rows: Sequence[int], spec_of: Callable[[PublicRow], ModelSpec],
               group: str = "") -> GroupData:
    """The design of ``rows``: each row's bytes over its machine's B, FLOPs over its C. One byte
    column for the weights, one for the cache a decode step reads (only where some row reads
    enough of it, ``CACHE_SHARE``, to tell the two apart; else the cache rides with the weights)
    and three FLOP columns (dense multiplies, routed experts, attention)."""
    if not rows:
        raise SpecError(f"no published rows to fit{f' for {group}' if group else ''}")
    passes = []
    for i in rows:
        spec = spec_of(data.rows[i])
        row = data.rows[i]
        passes.append(row_pass(spec, row, Shares.of(spec), row_threads(data.machine(row.machine), row)))
    machines = [data.machine(data.rows[i].machine) for i in rows]
    b = np.array([m.bandwidth for m in machines])
    c = np.array([m.compute_peak * p.thread_share for m, p in zip(machines, passes, strict=True)])
    # a batch-1 decode step does ~2 FLOP a weight byte: its arithmetic never binds on these
    # machines, so its rows carry no FLOP column (the decode rate is taken to be the dense one)
    keys = [data.rows[i].machine for i in rows]
    byte_classes = own_classes([p.byte_shares for p in passes if not p.prefill],
                               [m for m, p in zip(keys, passes, strict=True) if not p.prefill])
    flop_classes = own_classes([p.flop_shares for p in passes if p.prefill],
                               [m for m, p in zip(keys, passes, strict=True) if p.prefill])
    k = len(flop_classes)
    # on a CPU, whose peak is its int8 path, float multiplies and attention run at its FP32 rate:
    # they count 1 / float_share times the work, so their factors are of that rate
    slow = [1.0 / m.float_share for m in machines]
    flops = np.array([[*(p.dense_flops * path_columns(p.flop_shares, flop_classes, r)), p.expert_flops,
                       0.0 if p.flash else p.attention_flops * r, p.attention_flops * r if p.flash else 0.0]
                      if p.prefill else [0.0] * (k + 3) for p, r in zip(passes, slow, strict=True)]) / c[:, None]
    total = flops.sum(axis=1)
    for column in (k + 1, k + 2):
        if not np.any(flops[:, column] > ATTENTION_SHARE * total):
            # no row spends enough on this attention to tell its rate apart: it rides with the dense ones
            dense = flops[:, :k].sum(axis=1, keepdims=True)
            split = np.where(dense > 0, flops[:, :k] / np.maximum(dense, 1e-300), 1.0 / k)   # each class's share
            flops[:, :k] += split * flops[:, column:column + 1]
            flops[:, column] = 0.0
    weights, cache = np.array([p.bytes for p in passes]), np.array([p.cache for p in passes])
    if not np.any(cache > CACHE_SHARE * (weights + cache)):
        weights, cache = weights + cache, np.zeros_like(cache)
    by_class = np.array([class_columns(p.byte_shares, byte_classes) for p in passes]) * (weights / b)[:, None]
    multiply_rows = np.array([[p.rows, p.expert_rows] for p in passes], dtype=np.float64)
    design = Design(seconds=np.array([p.seconds for p in passes]), weights=by_class, cache=cache / b,
                    flops=flops, prefill=np.array([p.prefill for p in passes]),
                    layers=np.array([p.layers for p in passes]),
                    model=np.zeros(len(passes), dtype=np.int64), small=np.zeros(len(passes), dtype=bool),
                    weight=_balanced(data, rows), rows=multiply_rows,
                    batch=np.ones(len(passes)), cache_model=np.zeros((len(passes), 0)),
                    walk=np.zeros((len(passes), 2)))
    moe_layers = np.array([expert_layers(spec_of(data.rows[i])) for i in rows], dtype=np.float64)
    threads = np.array([p.threads for p in passes], dtype=np.float64)
    return GroupData(group=group, rows=tuple(rows), design=design, multiply_rows=multiply_rows,
                     byte_classes=byte_classes, flop_classes=flop_classes, machines=tuple(keys),
                     expert_layers=moe_layers, threads=threads if np.any(threads > 1) else None)


def _balanced(data: PublicBenchmarks, rows: Sequence[int]) -> Array:
    """Row weights giving each (machine, source) pair one vote per test kind, however many rows
    it has: one page that swept a chip 500 ways must not outweigh ten pages of one row each."""
    keys = [(data.rows[i].machine, data.rows[i].source.url, data.rows[i].test.kind) for i in rows]
    counts: dict[tuple[str, str, str], int] = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    return np.array([1.0 / counts[k] for k in keys])


@dataclass(frozen=True, slots=True)
class Factors:
    """One group's fitted terms: shares of B and C, fixed seconds, and the clocks' overlap.
    ``experts`` is None when no fitted row had routed experts."""

    bandwidth: float
    cache: float              # the cache's share of B (the weights' where no row could tell)
    dense: float
    experts: float | None
    attention: float | None   # a prefill's attention arithmetic; None: no fitted row had enough of it
    flash_attention: float | None   # the same with flash attention
    decode: float             # the decode step's FLOP/s share: the dense one (batch-1 rows cannot tell)
    pass_seconds: float
    layer_seconds: float
    overlap: float
    rows_half: float = 0.0    # r0: rows per multiply at half rate
    class_bandwidth: Mapping[str, float] = field(default_factory=dict)   # format classes with rows of their own
    class_dense: Mapping[str, float] = field(default_factory=dict)
    expert_layer_seconds: float | None = None   # a routed-expert layer's fixed cost; None: no MoE decode row
    serial_share: float = 0.0  # a CPU pass's arithmetic its cores do not share (Amdahl; ``SERIAL_SHARES``)

    def rates(self, expert_ratio: float, expert_layer_seconds: float = 0.0,
              attention_ratio: float | None = None) -> Rates:
        """As the calibration form's ``Rates`` of factors: each format class with rows of its
        own at its bandwidth and dense rate, the others at the group's (``bandwidth``,
        ``dense``: its most common class's), routed experts at their own (without rows of them,
        at ``expert_ratio`` times the dense rate, the ratio other groups showed), a
        routed-expert layer's fixed cost its own (without MoE decode rows,
        ``expert_layer_seconds``, what other groups showed), and a prompt's attention at its
        own rate (without rows that spend enough on attention, with or without flash
        attention, at ``attention_ratio`` times the dense rate where given: a deep prompt's
        attention is not the dense multiplies' kernel, and pricing it at their rate made deep
        prompts on back ends without deep rows several times too fast)."""
        experts = self.experts if self.experts is not None else self.dense * expert_ratio
        attention = self.attention
        if attention is None and self.flash_attention is None and attention_ratio is not None:
            attention = min(MAX_FACTOR, self.dense * attention_ratio)
        moe_layer = self.expert_layer_seconds if self.expert_layer_seconds is not None else expert_layer_seconds
        every = dict.fromkeys(FORMAT_CLASSES, 0.0)
        return Rates(bandwidth={k: self.class_bandwidth.get(k, self.bandwidth) for k in every},
                     prefill_flops={**{k: self.class_dense.get(k, self.dense) for k in every}, EXPERTS: experts},
                     decode_flops={**{k: self.decode for k in every}, EXPERTS: self.decode},
                     cache_bandwidth=self.cache, pass_seconds=self.pass_seconds,
                     layer_seconds=self.layer_seconds, overlap=self.overlap, attention_flops=attention,
                     flash_attention_flops=self.flash_attention, rows_half=self.rows_half,
                     expert_layer_seconds=moe_layer, serial_share=self.serial_share)


def fit_factors(g: GroupData, mask: NDArray[np.bool_] | None = None) -> Factors:
    """The terms fitted to ``g``'s rows (``mask``: only those), r0 and the overlap chosen on
    ``ROWS_HALF`` x ``OVERLAPS`` as the first with the least summed relative error (``_chosen``).
    A format class gets a rate of its own only where those rows hold it as ``own_classes`` asks
    (else it rides with the group's main class and is priced at the group's rate): a fit without
    some rows decides it as the shipped fit does."""
    keep = np.ones(len(g.rows), dtype=bool) if mask is None else mask
    machines = [m for m, k in zip(g.machines, keep, strict=True) if k] if g.machines else ["?"] * int(keep.sum())
    u, overlap, rows_half, serial = _chosen(g, mask, machines)
    d, byte_classes, flop_classes = _merged(g, g.at_rows_half(rows_half, mask, serial), machines)
    at = Unknowns.of(d)
    pre = u[at.prefill]
    e = len(flop_classes)
    seen_experts = bool((d.flops[:, e] * d.prefill).sum() > 0)
    seen = d.flops[:, e + 1:e + 3].sum(axis=0) > 0      # attention columns only where ``group_data`` kept them
    saw_cache = bool(d.cache.sum() > 0)
    bandwidth = _by_class(byte_classes, u[at.bandwidth], d.weights.sum(axis=0))
    dense = _by_class(flop_classes, pre[:e], (d.flops[:, :e] * d.prefill[:, None]).sum(axis=0))
    main_b, main_d = (max(x, key=lambda k: x[k][1]) if x else "" for x in (bandwidth, dense))
    pooled_b = bandwidth[main_b][0] if bandwidth else MAX_FACTOR
    pooled_d = dense[main_d][0] if dense else MAX_FACTOR
    return Factors(bandwidth=pooled_b, cache=_factor(u[at.cache]) if saw_cache else pooled_b, dense=pooled_d,
                   experts=_factor(pre[e]) if seen_experts else None, decode=pooled_d,
                   attention=_factor(pre[e + 1]) if seen[0] else None,
                   flash_attention=_factor(pre[e + 2]) if seen[1] else None,
                   pass_seconds=float(min(u[at.pass_seconds], 1.0)),
                   layer_seconds=float(min(u[at.layer_seconds], 0.01)), overlap=overlap, rows_half=rows_half,
                   class_bandwidth={k: v[0] for k, v in bandwidth.items()},
                   class_dense={k: v[0] for k, v in dense.items()},
                   expert_layer_seconds=_expert_layer_fit(g, keep, d, u, overlap), serial_share=serial)


def _expert_layer_fit(g: GroupData, keep: NDArray[np.bool_], d: Design, u: Array, overlap: float) -> float | None:
    """``moe_layer_seconds`` of the decode rows of ``keep`` (``d``: their design) whose models
    have routed experts, None where there are none."""
    if g.expert_layers is None:
        return None
    layers = g.expert_layers[keep]
    moe = (layers > 0) & ~d.prefill
    return moe_layer_seconds(d, u, overlap, layers, moe) if moe.any() else None


CHOICE_TOLERANCE = 1e-7    # summed relative errors this close (relative to the least, or absolute below 1) are a tie


@dataclass(frozen=True, slots=True)
class Candidate:
    """One grid point of the fit's choices (the serial share, r0, then the overlap) with its fit and its score."""

    serial: float
    rows_half: float
    overlap: float
    unknowns: Array
    error: float              # the summed, weighted relative error


def _chosen(g: GroupData, mask: NDArray[np.bool_] | None,
            machines: Sequence[str]) -> tuple[Array, float, float, float]:
    """(unknowns, overlap, r0, serial share): every (s, r0, overlap) of ``g.serial_shares`` x
    ``ROWS_HALF`` x ``OVERLAPS`` fitted, and the first in that order whose error ``first_within``
    the least."""
    candidates: list[Candidate] = []
    for s in g.serial_shares:
        for r0 in ROWS_HALF:
            d = _merged(g, g.at_rows_half(r0, mask, s), machines)[0]
            candidates.extend(Candidate(s, r0, o, *fit_at(d, o)) for o in OVERLAPS)
    best = candidates[first_within([c.error for c in candidates])]
    return best.unknowns, best.overlap, best.rows_half, best.serial


def first_within(errors: Sequence[float], tolerance: float = CHOICE_TOLERANCE) -> int:
    """The index of the first of ``errors`` within ``tolerance`` of the least (relative to it,
    absolute below 1). The grid's choices must not move with the last bits of a processor's
    linear algebra (a fit of inputs moved by 1e-16 moves its figures by 1e-14): on the shipped
    data two candidates score either the same to 1e-14 (the rows cannot tell them apart: r0
    where every multiply has many rows, an overlap where no pass is near its turn) or at least
    3e-5 apart, so a tie at 1e-7 is one on every processor and the grid's order decides it."""
    least = min(errors)
    limit = least + tolerance * max(abs(least), 1.0)
    return next(i for i, e in enumerate(errors) if e <= limit)


MAX_EXPERT_LAYER_SECONDS = 0.01     # s; as the per-layer cost's cap: beyond it a row is not one device's


def moe_layer_seconds(d: Design, u: Array, overlap: float, layers: NDArray[np.float64],
                      rows: NDArray[np.bool_]) -> float:
    """The fixed seconds a routed-expert layer adds to a decode step: a router (a small
    multiply, a softmax and a top-k), a gather of the chosen experts and a kernel per expert
    matrix, which at batch 1 cost launches and synchronisation whatever their bytes. Fitted
    after the other terms (``u`` at ``overlap``, fitted to every row of ``d``), to the decode
    rows ``rows`` of models with experts (``layers``: each row's routed-expert layers): the
    o >= 0 with the least summed weighted relative error of prediction + o x layers, the
    weighted median of (measured - predicted) / layers, weights w x layers / measured; so it
    is what the MoE rows miss after the shared terms did what they could, a lower bound of the
    cost (rows made with 300 us a layer give about 220 us, made with 60 us nearly nothing: the
    per-layer and per-pass costs take the rest). Fitted together with the others instead, the terms trade: ROCm's
    per-layer cost moved onto the expert layers and its dense generation out of sample went
    from 9.6 % to 13.9 % median; fitted after the others without the MoE rows, the dense
    terms were worse determined (20 %). A prompt's pass is far too long to show it. What it
    leaves out: the experts a
    token uses (one cost whatever 4 or 8 run, as llama.cpp's one indirect multiply per matrix
    launches once for all of them), the batch (a cost per pass, so batched decoding spreads
    it), and the bytes the experts' rows stream below the dense rate."""
    measured, w, n = d.seconds[rows], d.weight[rows], layers[rows]
    per_layer = (measured - design_seconds(d, u, overlap)[rows]) / n
    order = np.argsort(per_layer, kind="stable")
    weights = (w * n / measured)[order]
    cumulative = np.cumsum(weights)
    median = float(per_layer[order][np.searchsorted(cumulative, 0.5 * cumulative[-1])])
    return float(min(max(median, 0.0), MAX_EXPERT_LAYER_SECONDS))


def _merged(g: GroupData, d: Design, machines: Sequence[str]) -> tuple[Design, tuple[str, ...], tuple[str, ...]]:
    """``d`` with each format-class column its rows do not hold as ``own_classes`` asks added to
    the main class's column; (design, byte classes kept, dense FLOP classes kept)."""
    e = g.experts_column
    weights, bytes_kept = _merge_columns(d.weights, ~d.prefill, machines, g.byte_classes)
    dense, flops_kept = _merge_columns(d.flops[:, :e], d.prefill, machines, g.flop_classes)
    return dataclasses.replace(d, weights=weights, flops=np.hstack([dense, d.flops[:, e:]])), bytes_kept, flops_kept


def _merge_columns(columns: Array, kind: NDArray[np.bool_], machines: Sequence[str],
                   classes: tuple[str, ...]) -> tuple[Array, tuple[str, ...]]:
    kept = [int(j) for j in np.flatnonzero(_supported(mostly_in(columns, kind), machines))]
    weight = columns.sum(axis=0)
    main = max(kept or range(columns.shape[1]), key=lambda j: weight[j])
    kept = kept or [main]
    out = columns[:, kept].copy()
    out[:, kept.index(main)] += columns[:, [j for j in range(columns.shape[1]) if j not in kept]].sum(axis=1)
    return out, tuple(classes[j] for j in kept)


def _by_class(classes: tuple[str, ...], inverse: Array, weight: Array) -> dict[str, tuple[float, float]]:
    """{class: (factor, how much of the rows it held)} for the classes some row holds."""
    return {k: (_factor(x), float(w)) for k, x, w in zip(classes, inverse, weight, strict=True) if w > 0}


def _factor(inverse: float) -> float:
    """A factor from its fitted inverse, capped at ``MAX_FACTOR`` (an inverse of 0: the data
    could not see the term; it then costs nothing beyond the peak)."""
    return MAX_FACTOR if not inverse > 0 else float(min(MAX_FACTOR, 1.0 / inverse))


def scaled(rates: Rates, decode: float, prefill: float, experts: float = 1.0) -> Rates:
    """``rates`` with every decode-side term (bandwidths, decode FLOP/s, fixed costs) times
    ``decode`` and the prefill FLOP/s times ``prefill`` (the routed experts' also times
    ``experts``: a machine's own MoE prompts, ``public.machine_offsets``): a pass bound by either
    then runs that many times faster (its fixed costs divided alike). Every share stays at most
    1: a band's fast edge, or a machine's offset, is never above the ceiling, however far faster
    some rows were."""
    def limit(value: float) -> float:
        return min(MAX_FACTOR, value)

    return Rates(bandwidth={k: limit(v * decode) for k, v in rates.bandwidth.items()},
                 prefill_flops={k: limit(v * prefill * (experts if k == EXPERTS else 1.0))
                                for k, v in rates.prefill_flops.items()},
                 decode_flops={k: limit(v * decode) for k, v in rates.decode_flops.items()},
                 cache_bandwidth=limit(rates.cache_bandwidth * decode), pass_seconds=rates.pass_seconds / decode,
                 layer_seconds=rates.layer_seconds / decode, overlap=rates.overlap,
                 attention_flops=None if rates.attention_flops is None else limit(rates.attention_flops * prefill),
                 flash_attention_flops=None if rates.flash_attention_flops is None
                 else limit(rates.flash_attention_flops * prefill), rows_half=rates.rows_half,
                 expert_layer_seconds=rates.expert_layer_seconds / decode, serial_share=rates.serial_share)
