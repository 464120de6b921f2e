"""Expected figures: what a calibrated engine will do with a model it never ran.

A calibration (``values.calibration.EngineCalibration``) holds the engine's rates by weight
format on one machine. For a model, the rates mix by what the model is made of: a decode step
spends W_f / bandwidth[f] on the bytes of each format class f, so the model's effective
bandwidth is 1 / sum_f(share_f / bandwidth[f]) with share_f its share of the bytes one token
reads; the FLOP rates mix the same way by share of the multiply-adds. The result is an
``Efficiency`` for that model on that machine, so every clock, sweep and chart prices the
expected figure with the same formulas as the ceiling. Replicates of the fit give the band."""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from rooflab.core.predict import work
from rooflab.core.predict.offload_terms import spread_host
from rooflab.core.values.calibration import EngineCalibration, Rates, band, format_class
from rooflab.core.values.efficiency import FACTOR_RANGE, Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec, Role

T = TypeVar("T")
MAX_REPLICATES = 12          # replicates priced per figure (the band's cost grows with them)


def byte_shares(spec: ModelSpec) -> dict[str, float]:
    """Share of the weight bytes one decode token reads, by format class (sums to 1)."""
    read: dict[str, float] = defaultdict(float)
    for t in spec.tensors:
        read[format_class(t.type_name)] += work.bytes_read_per_token(spec, t.role, t.nbytes, t.row_bytes)
    return _normalised(read)


EXPERTS = "routed experts"      # the FLOP class of routed-expert multiplies, whatever their format


def flop_shares(spec: ModelSpec) -> dict[str, float]:
    """Share of the multiply-adds one token does, by the format class of the weights it
    multiplies, routed experts apart (``EXPERTS``: many small multiplies, one per expert and
    the tokens routed to it, run at their own rate): a routed expert counts used/count of its
    parameters, an embedding lookup none (a tied embedding counts as the head)."""
    done: dict[str, float] = defaultdict(float)
    for t in spec.tensors:
        if (t.role is Role.EMBEDDING and not spec.tied_embeddings) or t.role in (Role.PER_LAYER_EMBEDDING,
                                                                                   Role.UNREAD):
            continue
        if t.role is Role.EXPERTS:
            done[EXPERTS] += t.params * spec.expert_fraction
        else:
            done[format_class(t.type_name)] += t.params
    return _normalised(done)


@functools.lru_cache(maxsize=64)
def expert_layers(spec: ModelSpec) -> int:
    """The layers of ``spec`` that hold routed experts: each adds a router, a gather and its
    experts' kernels to a pass, a fixed cost beside its bytes (0 for a dense model; a model
    whose first layers are dense, as GLM-4.5's and DeepSeek's, counts only the others)."""
    return len({t.layer for t in spec.tensors if t.role is Role.EXPERTS})


def _normalised(values: dict[str, float]) -> dict[str, float]:
    total = sum(values.values())
    if total <= 0:
        return {"float": 1.0}
    return {k: v / total for k, v in values.items() if v > 0}


# a format class needs this share of some model's bytes or FLOPs to get its own rates in a
# calibration fit; below it, it rides with the model's largest class (the fit and this file alike)
MINOR_SHARE = 0.05


def _mixed(rates: Rates, kind: str, shares: dict[str, float], missing: set[str], floats: float = 1.0) -> float:
    """1 / sum(share / rate): the rate at which a mix of classes goes through. A minor class the
    rates do not cover (F32 norms and routers beside K-quants) goes at the model's largest
    class's rate, as the fit counted it; a major one at the pooled rate, noted in ``missing``.
    ``floats``: the share of the rate the float class's multiplies reach (a CPU's FP32 rate
    beside the int8 path its peak is, ``MachineProfile.float_share``)."""
    table: dict[str, float] = getattr(rates, kind)
    largest = max(shares, key=lambda k: shares[k])
    inverse = 0.0
    for klass, share in shares.items():
        original = klass
        if klass not in table and share < MINOR_SHARE and largest in table:
            klass = largest
        rate, seen = rates.rate(kind, klass)
        if not seen:
            missing.add(klass)
        inverse += share / (rate * (floats if original == "float" else 1.0))
    return 1.0 / inverse


def _factor(value: float) -> float:
    return float(min(FACTOR_RANGE[1], max(FACTOR_RANGE[0], value)))


@dataclass(frozen=True, slots=True)
class Shares:
    """A model's ``byte_shares`` and ``flop_shares``, computed once per model."""

    bytes: dict[str, float]
    flops: dict[str, float]

    @classmethod
    def of(cls, spec: ModelSpec) -> Shares:
        """``spec``'s shares, worked out once per model: each is a pass over every tensor, and
        ``rooflab compare`` prices a model on dozens of machines (issue 15)."""
        return _shares_of(spec)


@functools.lru_cache(maxsize=64)
def _shares_of(spec: ModelSpec) -> Shares:
    return Shares(bytes=byte_shares(spec), flops=flop_shares(spec))


def efficiency_for(spec: ModelSpec, machine: MachineProfile, rates: Rates, *, dtype: str | None = None,
                   relative: bool = False, missing: set[str] | None = None,
                   shares: Shares | None = None, host: Rates | None = None) -> Efficiency:
    """The ``Efficiency`` that makes ``machine``'s clocks price ``spec`` at ``rates``.

    relative: the rates are factors of the machine's B and C (a back end's published
    efficiency) rather than absolute bytes/s and FLOP/s. ``missing`` collects format classes
    the rates do not cover (priced at the pooled rate). ``host``: factors (relative rates) of
    the CPU behind a discrete GPU, for the layers kept in host memory (None: its peaks)."""
    missing = set() if missing is None else missing
    b, c = machine.bandwidth, machine.flops(dtype)
    scale_b, scale_c = (b, c) if relative else (1.0, 1.0)
    # relative factors of a CPU's int8 path: its float multiplies and attention go at its FP32 rate
    floats = machine.float_share(dtype) if relative else 1.0
    shares = shares or Shares.of(spec)
    bytes_, flops = shares.bytes, shares.flops
    bandwidth = _mixed(rates, "bandwidth", bytes_, missing) * scale_b
    prefill = _mixed(rates, "prefill_flops", flops, missing, floats) * scale_c
    decode = _mixed(rates, "decode_flops", flops, missing, floats) * scale_c
    cache = rates.cache_rate(work.attention_walk_per_cache_byte(spec)) * scale_b
    host_b = host_c = 1.0
    if host is not None:
        host_b = _factor(_mixed(host, "bandwidth", bytes_, set()))
        host_c = _factor(_mixed(host, "prefill_flops", flops, set()))
    attention = None if rates.attention_flops is None else _factor(rates.attention_flops * floats * scale_c / c)
    if attention is None and floats < 1.0:       # at the dense rate's float share, as the fit counts it
        attention = _factor(_mixed(rates, "prefill_flops", flops, set()) * floats * scale_c / c)
    flash = None if rates.flash_attention_flops is None else \
        _factor(rates.flash_attention_flops * floats * scale_c / c)
    batch = _mixed(rates, "batch_flops", flops, set(), floats) * scale_c if rates.batch_flops else None
    moe = rates.expert_layer_seconds * expert_layers(spec)
    step = min(59.0, rates.pass_seconds + rates.layer_seconds * spec.layers + moe)
    return Efficiency(bandwidth=_factor(bandwidth / b), compute=_factor(prefill / c),
                      decode_compute=_factor(decode / c), kv_read_factor=_factor(bandwidth / cache),
                      step_overhead=step, expert_overhead=min(moe, step),
                      overlap=rates.overlap, host_bandwidth=host_b, host_compute=host_c, attention_compute=attention,
                      flash_attention_compute=flash, batch_compute=None if batch is None else _factor(batch / c),
                      kv_chunks=rates.kv_chunks, serial_share=rates.serial_share, **rows_terms(spec, rates, flops))


def rows_terms(spec: ModelSpec, rates: Rates, flops: dict[str, float]) -> dict[str, float]:
    """The rows-per-multiply terms of ``Efficiency`` for ``spec``: r0 (``rates.rows_half``),
    the routed experts' share of a prefill's compute time at many rows, and the rows each
    expert gets per row of the pass (used / count)."""
    if rates.rows_half <= 0:
        return {}
    times = {k: share / rates.rate("prefill_flops", k)[0] for k, share in flops.items()}
    total = sum(times.values())
    share = times.get(EXPERTS, 0.0) / total if total > 0 else 0.0
    spread = spec.expert_fraction
    return {"rows_half": float(min(1e6, rates.rows_half)), "expert_share": float(min(1.0, share)),
            "expert_spread": float(min(1.0, spread))}


@dataclass(frozen=True, kw_only=True)
class Expected:
    """``machine`` as the calibrated engine runs ``spec``: the central profile, one per
    replicate (for the band), and notes on what the calibration did not cover."""

    calibration: EngineCalibration
    machine: MachineProfile
    replicas: tuple[MachineProfile, ...]
    notes: tuple[str, ...] = ()

    def band(self, figure: Callable[[MachineProfile], float]) -> tuple[float, float, float]:
        """(central, low, high) of ``figure`` (a number priced on a machine): the central
        profile's value and the 16th/84th percentiles over the replicates (the central value
        twice when there are none)."""
        central = float(figure(self.machine))
        low, high = band(central, [figure(m) for m in self.replicas])
        return central, float(low), float(high)

    def curve_band(self, curve: Callable[[MachineProfile], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) arrays of ``curve`` over the replicates, point by point."""
        return band(curve(self.machine), [curve(m) for m in self.replicas])


def expected_for(spec: ModelSpec, machine: MachineProfile, calibration: EngineCalibration, *,
                 dtype: str | None = None, host: Rates | None = None) -> Expected:
    """What ``calibration`` expects of ``spec`` on ``machine`` (``host``: the factors of the CPU
    behind a discrete GPU, as ``efficiency_for`` takes them)."""
    relative = calibration.source == "public"
    missing: set[str] = set()
    shares = Shares.of(spec)
    central = efficiency_for(spec, machine, calibration.central, dtype=dtype, relative=relative, missing=missing,
                             shares=shares, host=host)
    if relative:
        missing.clear()        # a back end's published factors hold for every format alike
    replicas = spread_host([dataclasses.replace(machine, efficiency=efficiency_for(spec, machine, r, dtype=dtype,
                                                                                 relative=relative, shares=shares,
                                                                                 host=host))
                            for r in spread_out(calibration.replicates, MAX_REPLICATES)])
    notes = [f"no {k} among the calibration models: priced at the mean rate of those that were"
             if k == EXPERTS else
             f"no {k} weights among the calibration models: priced at the mean rate of the formats that were"
             for k in sorted(missing)]
    return Expected(calibration=calibration, machine=dataclasses.replace(machine, efficiency=central),
                    replicas=replicas, notes=tuple(notes))


def spread_out(items: Sequence[T], count: int) -> Sequence[T]:
    """At most ``count`` of ``items``, evenly spaced from the first to the last (deterministic)."""
    if count <= 0:
        return ()
    if len(items) <= count:
        return items
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, count).round()]
