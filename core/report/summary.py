"""The headline figures of one scenario (the numbers panel and the report's summary.csv), each
straight from a prediction function, in SI units."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from rooflab.core.predict.batching import (
    batch_crossover,
    cache_resident,
    max_batch_that_fits,
    memory_resident,
)
from rooflab.core.predict.clocks import Pass, decode_pass, prefill_pass
from rooflab.core.predict.crossover import prefill_crossover
from rooflab.core.predict.placement import has_host_tier
from rooflab.core.predict.request import RequestEstimate, request
from rooflab.core.predict.roofline import balance
from rooflab.core.predict.speculative import SpeculativeEstimate, speculative
from rooflab.core.report.chart_types import Chart, Scenario
from rooflab.core.report.charts import build_charts, not_running_charts
from rooflab.core.report.passes import On, largest_batch_on
from rooflab.core.report.placed import PlacedSummary, machine_as_placed, placed_as_chosen, placed_crossovers


@dataclass(frozen=True, slots=True, kw_only=True)
class Clocks:
    """One pass's two clocks as plain floats (seconds, bytes, FLOP)."""

    seconds: float
    memory_seconds: float
    compute_seconds: float
    bytes: float
    cache_bytes: float
    flops: float
    bound: str

    @classmethod
    def of(cls, p: Pass) -> Clocks:
        return cls(seconds=float(p.seconds), memory_seconds=float(p.memory_seconds),
                   compute_seconds=float(p.compute_seconds), bytes=float(p.bytes),
                   cache_bytes=float(p.cache_bytes), flops=float(p.flops), bound=str(p.bound()))


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    estimate: RequestEstimate
    prefill: Clocks                 # the whole prompt (all sequences of the batch)
    decode: Clocks                  # the first decode step, at context + prompt
    prefill_crossover: float        # n*, tokens, at the workload's batch and context (inf: never)
    batch_crossover: float          # sequences (inf: never)
    max_batch: int                  # largest batch whose caches fit at full length
    resident_bytes: float           # weights + caches at full length
    cache_bytes: float              # the batch's caches at full length
    memory: float                   # the machine's memory, bytes
    speculative: SpeculativeEstimate | None
    balance: float                  # FLOP/byte
    # how the model sits when it does not fit on the device at once (or --offload moved
    # weights, or the user placed it or spread it over devices): llama.cpp's placement (or the
    # devices'), whose request is then the headline ``estimate``
    placed: PlacedSummary | None = None
    # where the charts stand (``PlacedSummary.stands_on``: the placement, on one device or
    # several with host memory, or the devices sharing every layer; None: one memory, or a
    # placement that does not run, whose charts draw nothing as if it ran), and the limits as
    # placed there: the crossovers (``placed.placed_crossovers``; NaN for one that does not
    # fit: it cannot run, so no crossover is reached) and the largest batch its bills hold
    drawn_on: On = None
    placed_prefill_crossover: float = math.inf
    placed_batch_crossover: float = math.inf
    placed_max_batch: int = 0

    @property
    def fits(self) -> bool:
        return self.resident_bytes <= self.memory

    @property
    def runs(self) -> bool:
        """Whether the headline's request can run here (a placement that does not fit cannot:
        no figure is shown for it, and the charts draw nothing as if it ran)."""
        return self.placed is None or self.placed.fits

    @property
    def headline_prefill_crossover(self) -> float:
        """n* of the prefill the headline stands on: the placement's when there is one."""
        return self.placed_prefill_crossover if self._runs_placed else self.prefill_crossover

    @property
    def headline_batch_crossover(self) -> float:
        """The batch crossover the headline stands on: the placement's when there is one."""
        return self.placed_batch_crossover if self._runs_placed else self.batch_crossover

    @property
    def headline_max_batch(self) -> int:
        """The largest batch the headline's placement holds (its bills: weights placed, KV,
        compute buffers, reserves; on several devices, each device's); the one-memory count when
        the device holds the model whole."""
        return self.placed_max_batch if self._runs_placed else self.max_batch

    @property
    def _runs_placed(self) -> bool:
        return self.placed is not None


def summarise(sc: Scenario) -> Summary:
    """Every headline figure for one (model, machine, workload): what the numbers panel, the
    report's summary.csv and ``rooflab predict`` show, each from its one prediction function.
    The scenario's placement choice, when it places the model by hand or on several devices, is
    the headline as ``rooflab predict``'s --gpu-layers/--cpu-moe/--no-kv-offload/--devices give it
    (SpecError: several devices on a machine that states no interconnect)."""
    spec, m, w = sc.model, sc.machine, sc.workload
    start = w.context + w.prompt
    length = start + w.answer
    resident = float(memory_resident(spec, length, w.batch, w.kv_type, w.ubatch))
    placed = _placed(sc, resident)
    crossovers, most = (math.inf, math.inf), 0
    if placed is not None:
        crossovers = placed_crossovers(spec, m, w, placed) or (math.nan, math.nan)
        # the bills of a placement are priced even when it does not fit ("at most 3 would"); a
        # one-device placement without host memory cannot be
        if placed.fits or has_host_tier(m) or placed.parallel is not None:
            most = largest_batch_on(spec, m, w, placed.priced_on, length)
    return Summary(
        estimate=placed.estimate if placed is not None else request(spec, m, w),
        placed=placed,
        drawn_on=None if placed is None else placed.stands_on,
        placed_prefill_crossover=crossovers[0],
        placed_batch_crossover=crossovers[1],
        placed_max_batch=most,
        prefill=Clocks.of(prefill_pass(spec, m, w)),
        decode=Clocks.of(decode_pass(spec, m, w, context=start)),
        prefill_crossover=prefill_crossover(spec, m, w),
        batch_crossover=batch_crossover(spec, m, w, context=start),
        max_batch=max_batch_that_fits(spec, m, length, w.kv_type, w.ubatch),
        resident_bytes=resident,
        cache_bytes=float(cache_resident(spec, length, w.batch, w.kv_type, w.ubatch)),
        memory=m.memory,
        speculative=speculative(spec, m, w) if w.draft_tokens else None,
        balance=balance(m, w.compute_dtype),
    )


def _placed(sc: Scenario, resident: float) -> PlacedSummary | None:
    """The placed headline of ``sc``, None when it keeps the one-memory request: a placement by
    hand or several devices always place it; otherwise a model the device holds whole keeps
    the one-memory request (as 'rooflab predict' does) and one it cannot hold (or an offload
    share) is placed as llama.cpp would: auto-fit, or the offload share."""
    m, w = sc.machine, sc.workload
    if sc.placement.is_auto and resident <= m.memory and w.offload_fraction == 0:
        return None
    return placed_as_chosen(sc.model, m, w, sc.placement)


def headline_charts(sc: Scenario, s: Summary | None = None) -> dict[str, Chart]:
    """Every chart of ``sc`` standing on its headline: as placed (on one device or several), the
    crossovers and the largest batch taken from ``s`` (``summarise(sc)`` when not given) rather
    than bisected again; a placement that does not run draws no curve as if it ran, only its
    memory and a line saying why and what would make it fit."""
    s = summarise(sc) if s is None else s
    if not s.runs and s.placed is not None:       # only a placement can fail to run
        return not_running_charts(sc, s.placed.priced_on, not_running_note(sc, s.placed))
    on_machine = dataclasses.replace(sc, machine=machine_as_placed(sc.machine, s.placed))
    return build_charts(on_machine, prefill_crossover=s.headline_prefill_crossover,
                        batch_crossover=s.headline_batch_crossover, max_batch=s.headline_max_batch,
                        placement=s.drawn_on, tpot=s.estimate.tpot)


def not_running_note(sc: Scenario, placed: PlacedSummary) -> str:
    """One line for the charts of a placement that does not fit: what overflows and what would
    make it fit (the numbers panel's suggestions)."""
    to_fit = "; ".join(placed.suggestions) or (
        "fewer sequences, a shorter context, a smaller KV type or weight format, or a machine with more memory")
    head = placed.headline(sc.model, sc.machine)
    return f"Nothing to draw: {head[0].lower()}{head[1:]}. To fit: {to_fit}."


NEVER = "never"       # summary.csv's value for a crossover no size reaches (the pass stays memory-bound)
NOT_RUN = "does not fit"   # summary.csv's value for a placed crossover of a placement that cannot run


def _crossover(value: float) -> float | str:
    if math.isnan(value):
        return NOT_RUN
    return NEVER if math.isinf(value) else value


def _byte_count(value: float) -> int | float:
    """Bytes as a whole number (an MoE step's expected bytes are fractional; a byte is not)."""
    return round(value) if math.isfinite(value) else value


def summary_rows(s: Summary) -> list[tuple[str, float | int | str, str]]:
    """(name, value, unit) rows for summary.csv, SI units; byte counts and sequence counts are
    integers, and a crossover that is never reached is ``NEVER``."""
    e = s.estimate
    rows: list[tuple[str, float | int | str, str]] = [
        ("ttft", e.ttft, "s"), ("tpot", e.tpot, "s"), ("end_to_end", e.end_to_end, "s"),
        ("decode_ceiling", e.decode_ceiling, "tokens/s"), ("decode_rate", e.decode_rate, "tokens/s"),
        ("total_rate", e.total_rate, "tokens/s"), ("prompt_rate", e.prompt_rate, "tokens/s"),
        ("prefill_bound", e.prefill_bound, ""), ("decode_bound", e.decode_bound, ""),
        ("prefill_memory_seconds", s.prefill.memory_seconds, "s"),
        ("prefill_compute_seconds", s.prefill.compute_seconds, "s"),
        ("decode_memory_seconds", s.decode.memory_seconds, "s"),
        ("decode_compute_seconds", s.decode.compute_seconds, "s"),
        ("decode_bytes_per_step", _byte_count(s.decode.bytes), "B"), ("kv_share", e.kv_share, "1"),
        ("prefill_crossover", _crossover(s.prefill_crossover), "tokens"),
        ("batch_crossover", _crossover(s.batch_crossover), "sequences"),
        ("max_batch_that_fits", s.max_batch, "sequences"), ("resident_bytes", _byte_count(s.resident_bytes), "B"),
        ("cache_bytes", _byte_count(s.cache_bytes), "B"),
        ("machine_memory", _byte_count(s.memory), "B"), ("fits", "yes" if s.fits else "no", ""),
        ("balance", s.balance, "FLOP/byte"),
    ]
    if s.placed is not None:
        # the headline above is the placement's (the rows before keep their one-memory meaning)
        p = s.placed
        rows += [("placement", p.placement.flags() if p.fits else "does NOT fit", ""),
                 ("placement_fits", "yes" if p.fits else "no", ""),
                 ("placed_device_bytes", _byte_count(p.fit.memory.device.used), "B"),
                 ("placed_host_bytes", _byte_count(p.fit.memory.host.used), "B"),
                 ("placed_prefill_crossover", _crossover(s.placed_prefill_crossover), "tokens"),
                 ("placed_batch_crossover", _crossover(s.placed_batch_crossover), "sequences"),
                 ("placed_max_batch_that_fits", s.placed_max_batch, "sequences")]
        if p.parallel is not None:
            # several devices: the headline is theirs (the placed_* rows above describe one)
            par = p.parallel
            rows += [("devices", par.devices, ""), ("parallel", par.parallel.mode, ""),
                     ("communication_seconds_per_token", par.communication_seconds_per_token, "s")]
    if s.speculative is not None:
        rows += [("speculative_expected_tokens", s.speculative.expected_tokens, "tokens"),
                 ("speculative_verify_cost", s.speculative.verify_cost, "1"),
                 ("speculative_speedup", s.speculative.speedup, "1")]
    return rows
