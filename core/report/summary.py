"""The record of one scenario's figures (``Summary``: the numbers panel, the report's
summary.csv, ``rooflab predict``), its charts standing on its headline and its summary.csv rows,
in SI units. ``app.figures.summarise`` fills it: placed once, every headline figure priced on
that placement."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from rooflab.core.predict.clocks import Pass
from rooflab.core.predict.offload import PlacedPass
from rooflab.core.predict.passes import On
from rooflab.core.predict.placed import PlacedSummary, machine_as_placed
from rooflab.core.predict.request import RequestEstimate
from rooflab.core.predict.speculative import SpeculativeEstimate
from rooflab.core.report.chart_types import Chart, Scenario
from rooflab.core.report.charts import build_charts, not_running_charts


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
class PartClocks:
    """A pass of a model placed across the device and host memory, part by part: each part's
    clocks (without the per-step overhead), the seconds its hidden state spends on the link
    between devices, and the whole pass (parts, link and overhead), seconds."""

    device: Clocks
    host: Clocks
    communication: float
    seconds: float

    @classmethod
    def of(cls, p: PlacedPass) -> PartClocks:
        return cls(device=Clocks.of(p.device), host=Clocks.of(p.host), communication=float(p.communication),
                   seconds=float(p.seconds))


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """Every figure of one scenario. The headline (``estimate``, the ``headline_*`` limits, the
    memory bills) is the placement's: the model as placed (``placed``, auto-fit's or the user's,
    on one device or several), so the numbers, the charts, a pin, a report and ``rooflab
    predict`` give one answer. The one-memory figures beside it (``prefill``, ``decode``, the
    unprefixed crossovers, ``max_batch``, ``resident_bytes``) are the lessons' model on the
    device alone, every byte there and nothing reserved, and are named so wherever shown."""

    estimate: RequestEstimate       # the request as placed
    placed: PlacedSummary           # how the model sits (auto-fit's, or the user's choice)
    prefill: Clocks                 # the whole prompt (all sequences of the batch), on one memory
    decode: Clocks                  # the first decode step, at context + prompt, on one memory
    prefill_crossover: float        # n*, tokens, at the workload's batch and context (inf: never), one memory
    batch_crossover: float          # sequences (inf: never), one memory
    max_batch: int                  # largest batch whose caches fit at full length, one memory
    resident_bytes: float           # weights + caches at full length
    cache_bytes: float              # the batch's caches at full length
    memory: float                   # the machine's memory, bytes
    speculative: SpeculativeEstimate | None
    balance: float                  # FLOP/byte
    # where the charts stand (``PlacedSummary.stands_on``: the placement, on one device or
    # several with host memory, or the devices sharing every layer; None: a placement that does
    # not run, whose charts draw nothing as if it ran), and the limits as placed there: the
    # crossovers (``placed.placed_crossovers``; NaN for one that does not fit: it cannot run, so
    # no crossover is reached) and the largest batch its bills hold
    drawn_on: On = None
    placed_prefill_crossover: float = math.inf
    placed_batch_crossover: float = math.inf
    placed_max_batch: int = 0
    # a one-device placement that runs, part by part (the "why" of its TTFT and TPOT): the
    # prompt, and the first decode step at context + prompt; None on several devices or when
    # it does not run
    placed_prefill: PartClocks | None = None
    placed_decode: PartClocks | None = None

    @property
    def fits(self) -> bool:
        """Whether weights and caches fit the device's memory on their own (one memory, no
        reserve or buffer: ``placed.fits`` is whether the placement runs)."""
        return self.resident_bytes <= self.memory

    @property
    def runs(self) -> bool:
        """Whether the headline's request can run here (a placement that does not fit cannot:
        no figure is shown for it, and the charts draw nothing as if it ran)."""
        return self.placed.fits

    @property
    def headline_prefill_crossover(self) -> float:
        """n* of the prefill the headline stands on: the placement's."""
        return self.placed_prefill_crossover

    @property
    def headline_batch_crossover(self) -> float:
        """The batch crossover the headline stands on: the placement's."""
        return self.placed_batch_crossover

    @property
    def headline_max_batch(self) -> int:
        """The largest batch the headline's placement holds (its bills: weights placed, KV,
        compute buffers, reserves; on several devices, each device's)."""
        return self.placed_max_batch


def headline_charts(sc: Scenario, s: Summary) -> dict[str, Chart]:
    """Every chart of ``sc`` standing on its headline ``s`` (``app.figures.summarise``): as placed
    (on one device or several), the crossovers and the largest batch taken from ``s`` rather
    than bisected again; a placement that does not run draws no curve as if it ran, only its
    memory and a line saying why and what would make it fit."""
    if not s.runs:
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
