"""A calibration of one (machine, engine, settings): the rates that engine reaches on that
machine, by weight format, fitted from models it timed and applicable to any model.

The model form (``calibration.engine_calibration`` fits it, ``predict.expected`` applies it) names each term
after what it costs:

- ``bandwidth[f]``: bytes/s at which the engine streams weights of format class f in a decode
  step (a CPU dequantising K-quants does not stream like one reading Q8_0 or f16);
- ``prefill_flops[f]`` / ``decode_flops[f]``: FLOP/s of a prefill's big multiplies and of a
  decode step's few-row multiplies on weights of class f;
- ``cache_bandwidth``: bytes/s at which a decode step's attention gets through the cache (an
  attention kernel slower than memory shows as a rate below the memory's);
- ``cache_pair_seconds`` / ``cache_value_seconds``: what the attention spends beside the bytes
  on each (query head, cached token) pair it walks and on each value of those pairs (a CPU's
  flash attention walks the cache once per query head: per pair an exponential and the loop,
  per value a multiply-add), so that a model whose cached heads each serve more query heads
  reads its cache at a lower rate per byte (``Rates.cache_rate``);
- ``pass_seconds`` + ``layer_seconds`` x layers + ``expert_layer_seconds`` x routed-expert
  layers: the fixed cost of one forward pass (a mixture of experts' layer adds a router, a
  gather and its experts' kernels, whatever their bytes);
- ``overlap``: the share of the shorter clock (memory or compute) hidden under the longer;
- ``attention_flops`` / ``flash_attention_flops``: FLOP/s of a prefill's attention arithmetic
  without and with flash attention;
- ``rows_half``: the rows per multiply at which a prefill's multiplies reach half their rate
  (routed experts get ubatch x used / count rows each);
- ``batch_flops[f]``: FLOP/s of the arithmetic each sequence beyond the first adds to a
  batched decode step, taken after the overlap (a CPU hides one sequence's arithmetic under
  the weights' streaming, not sixteen's); empty: every sequence's arithmetic in the compute
  clock, the roofline's max(W / B, b x F / C);
- ``serial_share``: on a CPU, the share of a pass's arithmetic its threads do not share
  (``Efficiency.serial_share``: n threads reach n / (1 + s x (n - 1)) of one thread's rate).

A format class the fit never saw takes the geometric mean of the classes it did (and says
so). Replicates (the fit redone on resampled data) carry the uncertainty."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rooflab.core.errors import SpecError

#: ggml types grouped by how an engine handles them: one efficiency per group.
_CLASSES: dict[str, tuple[str, ...]] = {
    "float": ("F32", "F16", "BF16", "F64"),
    "q8": ("Q8_0", "Q8_1", "Q8_K"),
    "k-quant": ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"),
    "legacy": ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL"),
    "i-quant": ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_XS"),
    "mxfp4": ("MXFP4",),
    "ternary": ("TQ1_0", "TQ2_0"),
}
FORMAT_CLASS: dict[str, str] = {t: name for name, types in _CLASSES.items() for t in types}
FORMAT_CLASSES: tuple[str, ...] = tuple(_CLASSES)


def format_class(type_name: str) -> str:
    """The efficiency group of a ggml type name ("Q4_K" -> "k-quant"); unknown types are
    their own group (lower case)."""
    return FORMAT_CLASS.get(type_name.upper(), type_name.lower())


def _rates(data: Any, name: str) -> dict[str, float]:
    if not isinstance(data, Mapping) or not data:
        raise SpecError(f"calibration.{name} must be a non-empty object of format: rate")
    return {str(k): _positive(v, f"{name}.{k}") for k, v in data.items()}


def _positive(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SpecError(f"calibration.{name} must be a positive number, got {value!r}")
    return float(value)


def _seconds(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 60:
        raise SpecError(f"calibration.{name} must be in [0, 60) s, got {value!r}")
    return float(value)


BAND = (16.0, 84.0)          # percentiles of the replicates: a one-sigma band


def band(central: ArrayLike, values: Sequence[ArrayLike]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(low, high): the ``BAND`` percentiles of ``values`` (replicates of a figure, or of a curve
    point by point), widened to hold ``central``; ``central`` twice when there are none."""
    c = np.asarray(central, dtype=np.float64)
    if len(values) == 0:
        return c, c
    low, high = np.percentile(np.asarray(values, dtype=np.float64), BAND, axis=0)
    return np.minimum(low, c), np.maximum(high, c)


def pooled(rates: Mapping[str, float]) -> float:
    """The geometric mean of ``rates``: the stand-in for a class the fit did not see."""
    return math.exp(sum(math.log(v) for v in rates.values()) / len(rates))


@dataclass(frozen=True, slots=True, kw_only=True)
class Rates:
    """One set of fitted rates (SI: bytes/s, FLOP/s, seconds)."""

    bandwidth: Mapping[str, float]
    prefill_flops: Mapping[str, float]
    decode_flops: Mapping[str, float]
    cache_bandwidth: float
    pass_seconds: float = 0.0
    layer_seconds: float = 0.0
    overlap: float = 1.0
    attention_flops: float | None = None     # FLOP/s of a prefill's attention arithmetic (None: as the rest)
    flash_attention_flops: float | None = None   # the same with flash attention (None: ``attention_flops``)
    rows_half: float = 0.0                   # rows per multiply at which a prefill multiply reaches half its rate
    batch_flops: Mapping[str, float] = field(default_factory=dict)   # each added sequence's (empty: none fitted)
    kv_chunks: int = 0                       # threads the engine splits one query's cache over (0: none)
    cache_pair_seconds: float = 0.0          # seconds per (query head, cached token) pair beside the bytes
    cache_value_seconds: float = 0.0         # seconds per value of those pairs (d_k + d_v a pair)
    expert_layer_seconds: float = 0.0        # fixed seconds a routed-expert layer adds to a pass
    serial_share: float = 0.0                # a CPU pass's arithmetic its threads do not share (Amdahl)

    def __post_init__(self) -> None:
        for name in ("bandwidth", "prefill_flops", "decode_flops"):
            object.__setattr__(self, name, MappingProxyType(_rates(getattr(self, name), name)))
        if not isinstance(self.batch_flops, Mapping):
            raise SpecError("calibration.batch_flops must be an object of format: rate")
        object.__setattr__(self, "batch_flops", MappingProxyType(
            _rates(self.batch_flops, "batch_flops") if self.batch_flops else {}))
        _positive(self.cache_bandwidth, "cache_bandwidth")
        _seconds(self.pass_seconds, "pass_seconds")
        _seconds(self.layer_seconds, "layer_seconds")
        _seconds(self.expert_layer_seconds, "expert_layer_seconds")
        for name in ("attention_flops", "flash_attention_flops"):
            if getattr(self, name) is not None:
                _positive(getattr(self, name), name)
        if isinstance(self.rows_half, bool) or not isinstance(self.rows_half, (int, float)) \
                or not 0 <= self.rows_half <= 1e6:
            raise SpecError(f"calibration.rows_half must be in [0, 1e6] rows, got {self.rows_half!r}")
        if isinstance(self.serial_share, bool) or not isinstance(self.serial_share, (int, float)) \
                or not 0 <= self.serial_share <= 1:
            raise SpecError(f"calibration.serial_share must be in [0, 1], got {self.serial_share!r}")
        if isinstance(self.overlap, bool) or not isinstance(self.overlap, (int, float)) or not 0 <= self.overlap <= 1:
            raise SpecError(f"calibration.overlap must be in [0, 1], got {self.overlap!r}")
        for name in ("cache_pair_seconds", "cache_value_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1e-3:
                raise SpecError(f"calibration.{name} must be in [0, 1e-3] s, got {value!r}")
        if isinstance(self.kv_chunks, bool) or not isinstance(self.kv_chunks, int) or not 0 <= self.kv_chunks <= 4096:
            raise SpecError(f"calibration.kv_chunks must be a whole number of threads in [0, 4096], "
                            f"got {self.kv_chunks!r}")

    def rate(self, kind: str, klass: str) -> tuple[float, bool]:
        """(rate of ``kind`` for format class ``klass``, whether the fit saw that class); nan
        when ``kind`` has no rates at all (``batch_flops`` of a fit without batched points)."""
        table: Mapping[str, float] = getattr(self, kind)
        if klass in table:
            return table[klass], True
        return (pooled(table) if table else math.nan), False

    def cache_rate(self, walk: tuple[float, float]) -> float:
        """Bytes/s at which a model's attention gets through its cache, ``walk`` its (query
        heads, query-head values) per cached byte (``work.attention_walk_per_cache_byte``):
        1 / (1 / cache_bandwidth + cache_pair_seconds x heads + cache_value_seconds x values)."""
        pairs, values = (max(0.0, x) for x in walk)
        return 1.0 / (1.0 / self.cache_bandwidth + self.cache_pair_seconds * pairs + self.cache_value_seconds * values)

    def to_dict(self) -> dict[str, Any]:
        return {"bandwidth": dict(self.bandwidth), "prefill_flops": dict(self.prefill_flops),
                "decode_flops": dict(self.decode_flops), "cache_bandwidth": self.cache_bandwidth,
                "pass_seconds": self.pass_seconds, "layer_seconds": self.layer_seconds, "overlap": self.overlap,
                **{k: v for k, v in (("attention_flops", self.attention_flops),
                                     ("flash_attention_flops", self.flash_attention_flops)) if v is not None},
                **({"rows_half": self.rows_half} if self.rows_half else {}),
                **({"batch_flops": dict(self.batch_flops)} if self.batch_flops else {}),
                **({"kv_chunks": self.kv_chunks} if self.kv_chunks else {}),
                **{k: v for k, v in (("cache_pair_seconds", self.cache_pair_seconds),
                                     ("cache_value_seconds", self.cache_value_seconds),
                                     ("expert_layer_seconds", self.expert_layer_seconds),
                                     ("serial_share", self.serial_share)) if v}}

    @classmethod
    def from_dict(cls, data: Any) -> Rates:
        if not isinstance(data, Mapping):
            raise SpecError("calibration rates must be an object")
        try:
            return cls(bandwidth=data["bandwidth"], prefill_flops=data["prefill_flops"],
                       decode_flops=data["decode_flops"], cache_bandwidth=data["cache_bandwidth"],
                       pass_seconds=data.get("pass_seconds", 0.0), layer_seconds=data.get("layer_seconds", 0.0),
                       overlap=data.get("overlap", 1.0), attention_flops=data.get("attention_flops"),
                       flash_attention_flops=data.get("flash_attention_flops"),
                       rows_half=data.get("rows_half", 0.0), batch_flops=data.get("batch_flops") or {},
                       kv_chunks=data.get("kv_chunks", 0), cache_pair_seconds=data.get("cache_pair_seconds", 0.0),
                       cache_value_seconds=data.get("cache_value_seconds", 0.0),
                       expert_layer_seconds=data.get("expert_layer_seconds", 0.0),
                       serial_share=data.get("serial_share", 0.0))
        except KeyError as exc:
            raise SpecError(f"calibration rates lack {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Accuracy:
    """Relative errors |measured - predicted| / measured of one phase under one protocol."""

    median: float
    worst: float
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "worst": self.worst, "count": self.count}


#: How accuracy is scored. All but "in_sample" (fit quality) are accuracy; a whole architecture
#: left out is scored only when the models span two or more.
PROTOCOLS: tuple[str, ...] = ("in_sample", "leave_one_model_out", "extrapolation", "leave_one_architecture_out")
PHASES: tuple[str, ...] = ("prefill", "decode", "batch")


@dataclass(frozen=True, kw_only=True)
class EngineCalibration:
    """The calibration of ``engine_key`` on ``machine_key``: central rates, replicates for the
    uncertainty, where they came from and how well they predict what they did not see.

    machine_bandwidth / machine_flops: the profile's B and C when fitted (factors are rates
    over these). models: the calibration models timed. accuracy[protocol][phase]. source:
    "measured" (timed here) or "public" (fitted to published benchmarks of a back end)."""

    machine_key: str
    machine_name: str
    engine_key: str
    engine_label: str
    settings: Mapping[str, Any]
    date: str
    models: tuple[str, ...]
    machine_bandwidth: float
    machine_flops: float
    central: Rates
    replicates: tuple[Rates, ...] = ()
    accuracy: Mapping[str, Mapping[str, Accuracy]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    source: str = "measured"
    points: int = 0
    model_keys: tuple[str, ...] = ()       # the store's keys of ``models`` (what the fit saw)

    def bands(self) -> list[tuple[str, str, float, float, float]]:
        """(name, unit, central, low, high) of every fitted term: the central fit and the 16th
        and 84th percentiles over the replicates (the central value when there are none)."""
        rows: list[tuple[str, str, float, float, float]] = []
        reps = self.replicates

        def add(name: str, unit: str, get: Any) -> None:
            central = float(get(self.central))
            values = [float(get(r)) for r in reps]
            low, high = band(central, [v for v in values if math.isfinite(v)])
            rows.append((name, unit, central, float(low), float(high)))

        for kind, label, unit in (("bandwidth", "weights streamed", "B/s"), ("prefill_flops", "prefill multiplies",
                                                                             "FLOP/s"),
                                  ("decode_flops", "decode multiplies", "FLOP/s"),
                                  ("batch_flops", "each added sequence's multiplies", "FLOP/s")):
            for klass in getattr(self.central, kind):
                add(f"{label}, {klass}", unit, lambda r, k=kind, c=klass: r.rate(k, c)[0])
        if self.central.attention_flops is not None:
            add("a prompt's attention arithmetic", "FLOP/s",
                lambda r: math.nan if r.attention_flops is None else r.attention_flops)
        add("attention over the cache", "B/s", lambda r: r.cache_bandwidth)
        if self.central.cache_pair_seconds > 0 or self.central.cache_value_seconds > 0:
            add("attention per query head and cached token", "s", lambda r: r.cache_pair_seconds)
            add("attention per value of those", "s", lambda r: r.cache_value_seconds)
        add("fixed cost per pass", "s", lambda r: r.pass_seconds)
        add("fixed cost per layer", "s", lambda r: r.layer_seconds)
        if self.central.expert_layer_seconds > 0:
            add("fixed cost per routed-expert layer", "s", lambda r: r.expert_layer_seconds)
        add("overlap of memory and compute", "", lambda r: r.overlap)
        return rows

    def describe(self) -> str:
        """One line: what ran, where, when, on what."""
        return (f"{self.engine_label} — {self.machine_name}, calibrated {self.date[:10]} from "
                f"{len(self.models)} model{'s' if len(self.models) != 1 else ''}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": 1, "machine_key": self.machine_key, "machine_name": self.machine_name,
                "engine_key": self.engine_key, "engine_label": self.engine_label, "settings": dict(self.settings),
                "date": self.date, "models": list(self.models), "machine_bandwidth": self.machine_bandwidth,
                "machine_flops": self.machine_flops, "central": self.central.to_dict(),
                "replicates": [r.to_dict() for r in self.replicates],
                "accuracy": {p: {k: a.to_dict() for k, a in v.items()} for p, v in self.accuracy.items()},
                "notes": list(self.notes), "source": self.source, "points": self.points,
                "model_keys": list(self.model_keys)}

    @classmethod
    def from_dict(cls, data: Any) -> EngineCalibration:
        """From ``to_dict``'s form; SpecError naming what is wrong."""
        if not isinstance(data, Mapping):
            raise SpecError("a calibration must be an object")
        try:
            accuracy = {str(p): {str(k): Accuracy(median=float(a["median"]), worst=float(a["worst"]),
                                                  count=int(a["count"])) for k, a in v.items()}
                        for p, v in dict(data.get("accuracy") or {}).items()}
            return cls(machine_key=str(data["machine_key"]), machine_name=str(data["machine_name"]),
                       engine_key=str(data["engine_key"]), engine_label=str(data["engine_label"]),
                       settings=dict(data.get("settings") or {}), date=str(data["date"]),
                       models=tuple(str(m) for m in data["models"]),
                       machine_bandwidth=_positive(data["machine_bandwidth"], "machine_bandwidth"),
                       machine_flops=_positive(data["machine_flops"], "machine_flops"),
                       central=Rates.from_dict(data["central"]),
                       replicates=tuple(Rates.from_dict(r) for r in data.get("replicates") or ()),
                       accuracy=accuracy, notes=tuple(str(n) for n in data.get("notes") or ()),
                       source=str(data.get("source", "measured")), points=int(data.get("points", 0)),
                       model_keys=tuple(str(k) for k in data.get("model_keys") or ()))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SpecError(f"calibration record is malformed: {exc!r}") from None
