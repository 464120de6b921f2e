"""Expected figures for machines nobody here owns: llama.cpp's rates on each back end (CUDA,
Metal, ROCm, Vulkan by GPU vendor, CPU), fitted to public llama-bench results
(``io.public_bench``) in the calibration model form (``public_fit``) and checked out of sample.

A row's ceiling is rooflab's own prediction for its test at identity efficiency, on a machine
built from the row's bandwidth B and peak C (``predict.clocks``):

    tgN: N decode steps of one sequence at contexts d..d+N-1;  tokens/s = N / sum_t step(t)
    ppN: one prefill of N tokens after d cached tokens;         tokens/s = N / prefill(N)

A fit gives each group its shares of B and C (dense multiplies and routed experts apart), its
fixed seconds per pass and per layer and the overlap of the two clocks; a prediction runs the
same clocks with the ``Efficiency`` those make for the model (``predict.expected``). Out of
sample (``public_score``): each source, model family or machine predicted by a fit without it.
A row's -ub and -fa are part of its workload (rows per multiply and the attention kernel's rate).
Left out: builds (rows of one machine with either count alike), partial offload and several
devices (the placement model's), CPU thread counts."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from rooflab.core.calibration import public_fit
from rooflab.core.errors import ResourceError
from rooflab.core.io.catalogue import get_entry, load_entry
from rooflab.core.io.public_bench import (
    BACKENDS,
    PublicBenchmarks,
    PublicMachine,
    PublicRow,
    read_public_benchmarks,
)
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.expected import EXPERTS, efficiency_for
from rooflab.core.values.calibration import Rates
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import DEFAULT_UBATCH, Workload

_CAPACITY = 1e15               # bytes; memory size plays no part in a ceiling, MachineProfile wants one


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
    """A MachineProfile with the row machine's bandwidth (bytes/s) and peak (FLOP/s): a GPU's
    stated one, a CPU's FP32 and int8 ones, the int8 path its default (``compute_peak``)."""
    cpu = machine.backend == "cpu"
    flops = {"fp32": machine.peak_fp16, "int8": machine.compute_peak} if cpu else {"fp16": machine.peak_fp16}
    return MachineProfile(name=machine.name, bandwidth=machine.bandwidth, peak_flops=flops,
                          memory=_CAPACITY, default_dtype="int8" if cpu else "fp16", kind="cpu" if cpu else "gpu",
                          efficiency=efficiency or Efficiency(), key=machine.key,
                          cores=(machine.cores or 0) if cpu else 0)


def tokens_per_second(data: PublicBenchmarks, row: PublicRow, efficiency: Efficiency | None = None) -> float:
    """rooflab's tokens/s for ``row``'s test on its machine; the ceiling at identity efficiency.

    tgN = N / sum of decode_pass seconds at contexts d..d+N-1 (batch 1, d the row's depth);
    ppN = N / prefill_pass seconds for N tokens after d cached ones. KV cache F16, compute at
    the machine's peak (a GPU's FP16, a CPU's int8 path: ``machine_profile``)."""
    spec = spec_of(data, row)
    machine = machine_profile(data.machine(row.machine), efficiency)
    n, depth = int(row.test.tokens), int(row.source.depth)
    workload = workload_of(row, machine.kind == "cpu")
    if row.test.kind == "decode":
        steps = decode_pass(spec, machine, workload, context=depth + np.arange(n, dtype=np.float64), batch=1)
        return n / float(np.sum(steps.seconds))
    return n / float(prefill_pass(spec, machine, workload, prompt=n, context=depth).seconds)


def workload_of(row: PublicRow, cpu: bool = False) -> Workload:
    """The workload ``row`` ran: its prompt, llama-bench's -ub (at most its -b) and -fa (unstated:
    512, 2048 and off, llama-bench's defaults when most rows were published), and on a ``cpu``
    its -t (unstated: llama.cpp's default, the physical cores)."""
    s = row.source
    ubatch = min(s.ubatch or DEFAULT_UBATCH, s.batch or public_fit.DEFAULT_BATCH)
    return Workload(prompt=max(1, int(row.test.tokens)), ubatch=ubatch, flash_attention=bool(s.flash_attention),
                    threads=s.threads if cpu else None)


# --- the fit ----------------------------------------------------------------------------------

def kind(row: PublicRow) -> str:
    """"tg" (generation) or "pp" (prompt processing)."""
    return "tg" if row.test.kind == "decode" else "pp"


def spec_of(data: PublicBenchmarks, row: PublicRow) -> ModelSpec:
    """The catalogue model of ``row`` at its weight format."""
    return model_spec(data.model(row.model).catalogue, row.weights)


@functools.lru_cache(maxsize=8)
def group_rows(data: PublicBenchmarks) -> dict[str, tuple[int, ...]]:
    """The rows the one-device form describes, by group (``public_fit.group_of``), in
    ``GROUPS`` order: ``public_fit.fittable`` ones but those ``past_ceiling``."""
    found: dict[str, list[int]] = {}
    beyond = set(past_ceiling(data))
    for i in _one_device(data):
        if i not in beyond:
            found.setdefault(public_fit.group_of(data.machine(data.rows[i].machine)), []).append(i)
    return {g: tuple(found[g]) for g in sorted(found, key=_group_order)}


@functools.lru_cache(maxsize=8)
def _one_device(data: PublicBenchmarks) -> tuple[int, ...]:
    """The rows ``public_fit.fittable`` keeps, in order (``group_rows`` and ``past_ceiling`` read them)."""
    return tuple(i for i, r in enumerate(data.rows)
                 if public_fit.fittable(r, spec_of(data, r).layers, data.machine(r.machine)))


@functools.lru_cache(maxsize=8)
def past_ceiling(data: PublicBenchmarks) -> tuple[int, ...]:
    """The one-device rows (``public_fit.fittable``) that ran faster than their ceiling (the
    machine's stated peaks at identity efficiency): the file's peak is not the unit the row ran
    on, so no factor of it can describe the row and it is not fitted (the accuracy script lists
    them). Until CPUs were priced on their int8 path (``MachineProfile``'s INT8_PATH) there were
    eleven, all CPU prompts: Graviton3, Grace and M2 Max quantized prompts up to 1.8x the FP32
    peak, and a Ryzen 9 7950X Q4_0 one at its boost clock. Since then, none."""
    return tuple(i for i in _one_device(data) if data.rows[i].tokens_per_second > tokens_per_second(data, data.rows[i]))


@functools.lru_cache(maxsize=8)
def row_groups(data: PublicBenchmarks) -> dict[int, str]:
    """The group of each fitted row (index into ``data.rows``), from ``group_rows``."""
    return {i: g for g, members in group_rows(data).items() for i in members}


def _group_order(group: str) -> tuple[int, str]:
    backend = group.split("-")[0]
    return (BACKENDS.index(backend) if backend in BACKENDS else len(BACKENDS), group)


@functools.lru_cache(maxsize=32)
def design(data: PublicBenchmarks, group: str) -> public_fit.GroupData:
    """A group's design, built once per data set (the fit and its held-out refits share it)."""
    return public_fit.group_data(data, group_rows(data)[group], functools.partial(spec_of, data), group)


def fit_groups(data: PublicBenchmarks, leave_out: Callable[[PublicRow], bool] | None = None,
               groups: Sequence[str] | None = None) -> dict[str, public_fit.Factors]:
    """Each group's factors (of ``groups``; None: all), fitted to its rows but those ``leave_out``
    picks (``fit_group``: unified GPUs' prompts apart); a group left with no row of a kind it
    needs is left out."""
    out = {}
    for g in group_rows(data):
        if groups is not None and g not in groups:
            continue
        gd = design(data, g)
        keep = np.array([not (leave_out and leave_out(data.rows[i])) for i in gd.rows])
        if keep.all():
            out[g] = whole_fit(data, g)       # a fold that leaves none of the group's rows out
        elif keep.any() and (keep & gd.design.prefill & ~_unified_prompts(data, g)).any() \
                and (keep & ~gd.design.prefill).any():
            out[g] = fit_group(data, g, keep)
    return out


@functools.lru_cache(maxsize=32)
def whole_fit(data: PublicBenchmarks, group: str) -> public_fit.Factors:
    """The group's factors fitted to all its rows (``fit_group``), once per data set: every fold
    that leaves none of them out (most folds of every protocol, for all but one group) reuses it."""
    return fit_group(data, group, np.ones(len(design(data, group).rows), dtype=bool))


def fit_group(data: PublicBenchmarks, group: str, keep: np.ndarray) -> public_fit.Factors:
    """``group``'s factors fitted to the rows ``keep`` picks, but unified GPUs' prompts
    (``unified``). Those ran at a seventh to two thirds of what the discrete GPUs of their back
    end reach of their stated peaks (the 2026-12-07 rows); fitted with them, ROCm's dense share
    fell from 0.48 to 0.23 and every discrete Radeon's prompt was expected at half its speed.
    Their level is ``unified_share``'s. What they show of a term the discrete rows could not see
    is kept: a second fit takes them in at their own level (``unified_levels``), and the term's
    ratio to the dense rate there fills the first fit's gap (Vulkan on AMD's routed experts in a
    fold without the Radeon Pro VII's two MoE prompt rows: its others are all the Ryzen AI Max+
    395's; without the second fit it would borrow the other back ends' ratio, 0.20)."""
    gd = design(data, group)
    prompts = _unified_prompts(data, group)
    first = public_fit.fit_factors(gd, keep & ~prompts)
    if not (keep & prompts).any() or None not in (first.experts, first.attention, first.flash_attention):
        return first
    levels = unified_levels(data, group, first, keep & prompts)
    second = public_fit.fit_factors(dataclasses.replace(
        gd, design=dataclasses.replace(gd.design, flops=gd.design.flops / levels[:, None])), keep)

    def filled(mine: float | None, theirs: float | None) -> float | None:
        if mine is not None or theirs is None or second.dense <= 0:
            return mine
        return min(public_fit.MAX_FACTOR, first.dense * theirs / second.dense)

    return dataclasses.replace(first, experts=filled(first.experts, second.experts),
                               attention=filled(first.attention, second.attention),
                               flash_attention=filled(first.flash_attention, second.flash_attention))


def unified_levels(data: PublicBenchmarks, group: str, first: public_fit.Factors, rows: np.ndarray) -> np.ndarray:
    """(rows of ``group``,): each row's level, 1 but for the prompt rows ``rows`` picks, where it
    is their machine's geometric median of measured / ``first`` over its dense models' rows among
    them (all of them where it has none): its MoE and deep rows then carry what their experts and
    attention cost beside its dense multiplies to the second fit."""
    gd = design(data, group)
    rates = first.rates(1.0)
    logs: dict[tuple[str, bool], list[float]] = {}
    for j in np.flatnonzero(rows):
        row = data.rows[gd.rows[j]]
        logs.setdefault((row.machine, spec_of(data, row).is_moe), []).append(
            math.log(row.tokens_per_second / predict_row(data, row, rates)))
    level = {m: math.exp(float(np.median(logs.get((m, False), v)))) for (m, _), v in logs.items()}
    return np.array([level[data.rows[i].machine] if rows[j] else 1.0 for j, i in enumerate(gd.rows)])


@functools.lru_cache(maxsize=32)
def _unified_prompts(data: PublicBenchmarks, group: str) -> np.ndarray:
    """(rows of ``group``,): whether each is a unified GPU's prompt row, once per data set (every
    fold's fit asks)."""
    gd = design(data, group)
    out = np.array([bool(gd.design.prefill[j]) and unified(data, data.rows[i].machine)
                    for j, i in enumerate(gd.rows)], dtype=bool)
    out.flags.writeable = False
    return out


def priced_apart(kind: str, backend: str) -> bool:
    """Whether a machine of ``kind`` on ``backend`` is a GPU on the host's memory and power budget
    outside Metal (an AMD APU's iGPU, NVIDIA's GB10 and Orin), whose prompts are priced at
    ``unified_share``: Metal's machines are all unified, so its fit is theirs."""
    return kind == "unified" and backend != "metal"


def unified(data: PublicBenchmarks, machine: str) -> bool:
    """``priced_apart`` for the published machine ``machine``."""
    m = data.machine(machine)
    return priced_apart(m.kind, m.backend)


def unified_groups(data: PublicBenchmarks) -> frozenset[str]:
    """The groups with a unified GPU's rows (``unified``): the fits ``unified_share`` reads."""
    return frozenset(g for i, g in row_groups(data).items() if unified(data, data.rows[i].machine))


MIN_UNIFIED_MACHINES = 1        # unified GPUs with prompt rows before the share is fitted (else None)


def unified_ratios(data: PublicBenchmarks, fits: dict[str, public_fit.Factors],
                   leave_out: Callable[[PublicRow], bool] | None = None) -> dict[str, list[float]]:
    """{unified GPU off Metal: log(measured / predicted by its group's fit) of each of its prompt
    rows, but those ``leave_out`` picks}."""
    rates = {g: group_rates(fits, g) for g in fits}
    logs: dict[str, list[float]] = {}
    for i, g in row_groups(data).items():
        row = data.rows[i]
        if g not in fits or kind(row) != "pp" or not unified(data, row.machine) \
                or (leave_out is not None and leave_out(row)):
            continue
        logs.setdefault(row.machine, []).append(math.log(row.tokens_per_second / predict_row(data, row, rates[g])))
    return logs


def unified_share(data: PublicBenchmarks, fits: dict[str, public_fit.Factors],
                  leave_out: Callable[[PublicRow], bool] | None = None) -> float | None:
    """What a unified GPU off Metal reaches of the prompt rate its back end's discrete GPUs do:
    for each such machine with prompt rows (``unified_ratios``) the geometric median of measured
    / predicted by its group's fit, then the geometric median over machines, each one vote (one
    chip swept 250 ways weighs as one), at most 1; None without one.

    Why a share of its own: an integrated GPU shares the package's power with the CPU (the
    Ryzen AI Max+ 395's 40 CUs and 16 cores have 55-120 W between them, the Radeon 890M's 16 CUs
    15-54 W with 12 cores) and its stated peak is at its boost clock; a long multiply holds
    a lower clock, and reads through the host's memory controller. Measured, not assumed: it
    applies to every unified GPU alike, so a chip whose rows differ (a GB10 or an Orin, whose
    stated peaks are at other clocks) is off by what its own rows would show."""
    logs = unified_ratios(data, fits, leave_out)
    if len(logs) < MIN_UNIFIED_MACHINES:
        return None
    return min(1.0, math.exp(float(np.median([np.median(v) for v in logs.values()]))))


def expert_ratio(fits: dict[str, public_fit.Factors]) -> float:
    """The routed experts' rate as a share of the dense rate, the median over the groups whose
    rows had experts: what a group without MoE rows is assumed to reach (1 without any)."""
    ratios = [f.experts / f.dense for f in fits.values() if f.experts is not None and f.dense > 0]
    return float(np.median(ratios)) if ratios else 1.0


def expert_layer_total(fits: dict[str, public_fit.Factors]) -> float:
    """The whole fixed seconds of a routed-expert layer in a decode step, its per-layer cost
    plus its own (router, gather, the experts' kernels), the median over the groups whose
    decode rows had experts (0 without any)."""
    seen = [f.layer_seconds + f.expert_layer_seconds for f in fits.values() if f.expert_layer_seconds is not None]
    return float(np.median(seen)) if seen else 0.0


def expert_layer_seconds(fits: dict[str, public_fit.Factors], group: str | None = None) -> float:
    """What a routed-expert layer adds to a decode step of ``group``, a group without MoE decode
    rows: the whole fixed cost of such a layer the other groups showed (``expert_layer_total``)
    less ``group``'s own per-layer cost, at least 0.

    The whole, not the added part: where a group fits its per-layer cost and the routed-expert
    layer's after it, the MoE rows (Qwen3-30B-A3B's 48 layers) set much of the per-layer cost
    and leave the expert layer's own a small remainder (on the 2026-12-07 rows, ROCm's 106 us a
    layer and 0.3 us an expert layer were 0 and 0 without its MoE rows), so the added parts'
    median said little of what such a layer costs (each back end's MoE generation rows left
    out in turn, its machines known, and predicted each way: docs/accuracy.md). A back end
    whose dense layers cost little (CUDA's graphs) is thus priced at the other back ends' MoE
    layer, not at its own dense one. Pooled over every group, not by kind of back end: the
    split of a group's fixed cost between pass and layer is loosely held by its rows, and one
    group of a kind moved the kind's median by a factor of five as rows were added. What it
    leaves out: the experts a token uses (4 or 8: one cost), the batch."""
    total = expert_layer_total(fits)
    own = fits[group].layer_seconds if group is not None and group in fits else 0.0
    return max(0.0, total - own)


def attention_ratio(fits: dict[str, public_fit.Factors]) -> float | None:
    """A prompt's attention rate (without flash attention) as a share of the dense rate, the
    median over the GPU groups whose rows showed it: what a GPU group without such rows is
    assumed to reach (None without any). A CPU is left at its dense rate: its attention runs
    on the cores its multiplies run on, not through a GPU's separate kernel."""
    ratios = [f.attention / f.dense for g, f in fits.items()
              if g != "cpu" and f.attention is not None and f.dense > 0]
    return float(np.median(ratios)) if ratios else None


def group_rates(fits: dict[str, public_fit.Factors], group: str) -> Rates:
    """``group``'s factors as ``Rates``, a term its rows did not show taken from the other
    groups (``expert_ratio``, ``expert_layer_seconds`` for ``group``, ``attention_ratio`` for a
    GPU group)."""
    return fits[group].rates(expert_ratio(fits), expert_layer_seconds(fits, group),
                             None if group == "cpu" else attention_ratio(fits))


def predict_row(data: PublicBenchmarks, row: PublicRow, rates: Rates, offset: Offset | None = None) -> float:
    """tokens/s the factors ``rates`` (a relative ``Rates``) expect for ``row``, priced by the
    clocks every expected figure uses; ``offset``: its machine's own (``machine_offsets``)."""
    machine = machine_profile(data.machine(row.machine))
    if offset is not None:
        rates = public_fit.scaled(rates, *offset)
    eff = efficiency_for(spec_of(data, row), machine, rates, relative=True)
    return tokens_per_second(data, row, eff)


Offset = tuple[float, float, float]     # (generation, prompt processing, routed experts' prompt rate): its
#                                         machine's measured / its group's figure (the third on top of the second)
SHRINK = 1.0                      # sources of a machine's own that weigh as much as its group's figure
EXPERT_STEPS = 8                  # secant steps that find a machine's routed-expert factor
MIN_EXPERTS = 0.05                # the least routed-expert factor a machine's rows may give


def machine_offsets(data: PublicBenchmarks, fits: dict[str, public_fit.Factors], machines: Iterable[str],
                    leave_out: Callable[[PublicRow], bool] | None = None,
                    share: float | None = None) -> dict[str, Offset]:
    """Each of ``machines``' own factors for generation, for prompt processing and for its
    routed experts' prompt rate: how far its fitted rows (but those ``leave_out`` picks) ran from
    its group's fit, the geometric median of measured / predicted shrunk toward its prior by the
    number of sources s that show it, prior x (ratio / prior) ** (s / (s + ``SHRINK``)). A
    machine's chip, clocks and driver, which no group term knows, carry from one page to the next.

    Prompts are read off its dense models' rows where it has any (else all its prompt rows), and
    its MoE prompt rows then give the routed experts' own factor on top: one chip's expert kernel
    path differs from its back end's as much as its clocks do (the Ryzen AI Max+ 395 under Vulkan
    ran its MoE prompts at 1.9x the figure its dense rows set, under ROCm at 0.6x). The experts'
    factor scales their rate only, so it is solved for (``EXPERT_STEPS`` secant steps on its log)
    such that those rows keep (1 - s / (s + SHRINK)) of their gap in log: shrunk as every
    offset is, in what the rows show, not in the factor.
    The prior is 1, but a unified GPU's prompt (``unified``) has ``share`` (``unified_share``;
    None: 1); a machine without rows of its own gets none, but a unified one gets (1, ``share``, 1)."""
    wanted, groups = set(machines), row_groups(data)
    rates = {g: group_rates(fits, g) for g in fits}
    rows: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for i, g in groups.items():
        row = data.rows[i]
        if row.machine not in wanted or g not in fits or (leave_out is not None and leave_out(row)):
            continue
        k = kind(row)
        if k == "pp":
            k = "moe" if spec_of(data, row).is_moe else "dense"
        rows.setdefault((row.machine, k), []).append((i, g))

    def weight(members: list[tuple[int, str]]) -> float:
        s = len({data.rows[i].source.url for i, _ in members})
        return s / (s + SHRINK)

    def ratio(members: list[tuple[int, str]], offset: Offset | None, prior: float, shrink: bool = True) -> float:
        logs = [math.log(data.rows[i].tokens_per_second / predict_row(data, data.rows[i], rates[g], offset))
                for i, g in members]
        return prior * math.exp((float(np.median(logs)) - math.log(prior)) * (weight(members) if shrink else 1.0))

    out = {}
    for m in wanted:
        pp_prior = share if share is not None and unified(data, m) else 1.0
        tg = ratio(rows[(m, "tg")], None, 1.0) if (m, "tg") in rows else 1.0
        prompts = rows.get((m, "dense")) or rows.get((m, "moe"))
        pp = ratio(prompts, None, pp_prior) if prompts else pp_prior
        experts = 1.0
        if (m, "dense") in rows and (m, "moe") in rows:
            moe = rows[(m, "moe")]
            # beyond ``most`` the experts' share passes 1 and ``scaled`` clips it: a larger factor moves nothing
            most = public_fit.MAX_FACTOR / max(rates[moe[0][1]].prefill_flops[EXPERTS] * pp, 1e-9)
            experts = _solve(functools.partial(_gap, ratio, moe, pp), 1.0 - weight(moe), math.log(MIN_EXPERTS),
                             math.log(most))
        if prompts or (m, "tg") in rows or pp_prior != 1.0:
            out[m] = (tg, pp, experts)
    return out


def _gap(ratio: Callable[..., float], members: list[tuple[int, str]], pp: float, log_factor: float) -> float:
    """log(measured / predicted) of ``members`` (``ratio``'s, unshrunk) with the routed experts'
    factor exp(``log_factor``) on top of the prompt offset ``pp``."""
    return math.log(ratio(members, (1.0, pp, math.exp(log_factor)), 1.0, shrink=False))


def _solve(miss: Callable[[float], float], kept: float, low: float, high: float) -> float:
    """exp(x) for the x in [``low``, ``high``] where ``miss(x)`` (a log gap that falls as x grows)
    is ``kept`` of ``miss(0)``: secant steps on x (``EXPERT_STEPS``), the first guess as if the
    gap moved one for one with x."""
    left = kept * miss(0.0)
    x0, g0 = 0.0, miss(0.0) - left
    x1 = min(high, max(low, g0))
    g1 = miss(x1) - left
    for _ in range(EXPERT_STEPS):
        if abs(g1) < 1e-4 or g1 == g0:
            break
        x0, g0, x1 = x1, g1, min(high, max(low, x1 - g1 * (x1 - x0) / (g1 - g0)))
        g1 = miss(x1) - left
    return math.exp(x1)


def backends(data: PublicBenchmarks | None = None) -> tuple[str, ...]:
    """The groups with fitted rows, back end order (Vulkan one per vendor)."""
    return tuple(group_rows(data or load_public()))
