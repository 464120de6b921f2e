"""A measured forward pass and the engine settings it was measured with: the values every
measurement produces and every fit consumes.

Points of different engines or settings are never mixed: ``EngineSettings.key`` names the
group a point belongs to (llama.cpp at 2 threads with an f16 cache is not llama.cpp on a GPU
with flash attention, nor torch in bf16)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rooflab.core.errors import SpecError
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS

KINDS: tuple[str, ...] = ("prefill", "decode", "batch")
MAX_SECONDS = 1e6          # no one pass takes 11 days: a larger time is a unit or file error
MAX_REPEATS = 1_000_000
ENGINES: tuple[str, ...] = ("llama.cpp", "llama-bench", "torch", "imported")
ALL_LAYERS = 999                # llama.cpp's -ngl for "every layer" (a row's -1 reads as 999)
# What a measurement plan may ask for: past any machine's cores, far below what makes torch
# raise or llama.cpp abort (std::bad_alloc) allocating per-thread state
MAX_THREADS = 1024
MAX_PLAN_REPEATS = 1000         # runs of one point (at a second each, a quarter of an hour)
MAX_PLAN_STEPS = 10_000         # decode steps timed at one point


def _seconds(value: object) -> bool:
    """A time a point may hold: a finite number in [0, MAX_SECONDS]."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and 0 <= value <= MAX_SECONDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSettings:
    """What ran the passes and how: the settings a timing depends on besides the model.

    ``engine``: one of ``ENGINES``; ``version``: the engine's own version string; ``device``:
    where the weights were computed ("cpu", "cuda", "metal", ...); ``threads``: CPU threads
    (0 when not applicable); ``gpu_layers``: layers offloaded to the accelerator (llama.cpp's
    ``-ngl``); ``cpu_moe``: layers whose experts stay on the CPU (``--n-cpu-moe``);
    ``flash_attention``; ``kv_type``: the cache's number format; ``batch_size`` /
    ``ubatch_size``: llama.cpp's logical and physical batch (0 when not applicable);
    ``dtype``: the compute dtype of an engine that converts the weights (torch), "" otherwise."""

    engine: str
    version: str = ""
    device: str = "cpu"
    threads: int = 0
    gpu_layers: int = 0
    cpu_moe: int = 0
    flash_attention: bool = False
    kv_type: str = "f16"
    batch_size: int = 0
    ubatch_size: int = 0
    dtype: str = ""

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise SpecError(f"settings.engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        for name in ("threads", "gpu_layers", "cpu_moe", "batch_size", "ubatch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 1_000_000:
                raise SpecError(f"settings.{name} must be a whole number in [0, 1000000], got {value!r}")
        for name in ("version", "device", "kv_type", "dtype"):
            if len(getattr(self, name)) > 200:
                raise SpecError(f"settings.{name} is longer than 200 characters")

    @property
    def key(self) -> str:
        """A stable name of the group: points with equal keys may be fitted together."""
        parts = [self.engine, self.device]
        if self.threads:
            parts.append(f"t{self.threads}")
        if self.gpu_layers:
            parts.append(f"ngl{self.gpu_layers}")
        if self.cpu_moe:
            parts.append(f"cpumoe{self.cpu_moe}")
        if self.flash_attention:
            parts.append("fa")
        parts.append(f"kv-{self.kv_type}")
        if self.dtype:
            parts.append(self.dtype)
        return " ".join(parts)

    @property
    def kv_chunks(self) -> int:
        """The threads this engine splits one query's cache over (``work.split_context``):
        llama.cpp's flash attention on the CPU, no layer offloaded; 0 for every other engine."""
        if self.engine != "llama.cpp" or self.device != "cpu" or not self.flash_attention or self.gpu_layers:
            return 0
        return max(1, self.threads)

    @property
    def label(self) -> str:
        """Everything that sets a timing apart, for the results: "llama.cpp 0.3.36 cpu,
        2 threads, flash attention, kv f16"."""
        return self._describe(short=False)

    @property
    def legend(self) -> str:
        """The short form for a plot legend: "llama.cpp, 2 threads, FA, kv f16": no version, the
        device only off the CPU, no threads or layer count when every layer is on the GPU; every
        other setting the ``key`` holds is named, so series differ in legend as they differ in key."""
        return self._describe(short=True)

    def _describe(self, *, short: bool) -> str:
        offloaded = short and self.device != "cpu" and self.gpu_layers >= ALL_LAYERS
        bits = [] if short and self.device == "cpu" else [self.device]
        if self.threads and not offloaded:
            bits.append(f"{self.threads} thread{'s' if self.threads != 1 else ''}")
        if self.gpu_layers and not offloaded:
            bits.append(f"ngl {self.gpu_layers}")
        if self.cpu_moe:
            bits.append(f"cpu-moe {self.cpu_moe}")
        if self.flash_attention:
            bits.append("FA" if short else "flash attention")
        bits.append(f"kv {self.kv_type}")
        if self.dtype:
            bits.append(self.dtype)
        if short:
            return ", ".join([self.engine, *bits])
        return f"{f'{self.engine} {self.version}'.strip()} {', '.join(bits)}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EngineSettings:
        try:
            return cls(engine=str(data["engine"]), version=str(data.get("version", "")),
                       device=str(data.get("device", "cpu")), threads=int(data.get("threads", 0)),
                       gpu_layers=int(data.get("gpu_layers", 0)), cpu_moe=int(data.get("cpu_moe", 0)),
                       flash_attention=bool(data.get("flash_attention", False)),
                       kv_type=str(data.get("kv_type", "f16")), batch_size=int(data.get("batch_size", 0)),
                       ubatch_size=int(data.get("ubatch_size", 0)), dtype=str(data.get("dtype", "")))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise SpecError(f"engine settings are malformed: {exc!r}") from exc


def bench_test(kind: str, tokens: int, depth: int = 0) -> str:
    """A test in llama-bench's notation: "pp512" (a prompt of 512 tokens), "tg128" (128 tokens
    generated one by one), with " @ d4096" when it ran on top of 4096 cached tokens."""
    name = f"{'pp' if kind == 'prefill' else 'tg'}{tokens}"
    return f"{name} @ d{depth}" if depth else name


def bench_point(kind: str, tokens: int, depth: int, samples: list[float] | tuple[float, ...], *,
                source: str = "") -> MeasuredPoint:
    """The point of one llama-bench test from the seconds of its repetitions (each a whole
    ppN or tgN run): llama-bench's mean and standard deviation, the best and the median as
    extras; a tgN test's figures per generated token, at its middle step's context."""
    if not samples:
        raise SpecError("a test needs at least one repetition")
    per = 1 if kind == "prefill" else tokens
    stdev = statistics.stdev(samples) if len(samples) > 1 else 0.0
    return MeasuredPoint(kind=kind, prompt=tokens if kind == "prefill" else 1,
                         context=depth + (0 if kind == "prefill" else (tokens - 1) // 2), batch=1,
                         seconds=statistics.fmean(samples) / per, median=statistics.median(samples) / per,
                         stdev=stdev / per, best=min(samples) / per, repeats=len(samples), source=source,
                         test=bench_test(kind, tokens, depth))


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredPoint:
    """One timed pass. ``prompt``: tokens each sequence feeds the pass (1 for decode);
    ``context``: tokens already cached (a tgN test's: its middle step's); ``seconds``: the
    figure the fit takes, the mean over repetitions of a whole test as llama-bench reports it
    (per step for a tgN test; the best repeat for points that kept no mean); ``median``: the
    median repeat (0 when unknown); ``stdev``: the repetitions' standard deviation (0 when
    unknown); ``best``: the fastest repetition, an extra (0 when unknown); ``test``: the test in
    llama-bench's notation ("pp512", "tg128 @ d4096"; "" for other passes), so a point timed in
    process and one imported from llama-bench are one kind of data; ``source``: who measured it
    ("torch 2.13 cpu fp32", "llama-bench"); ``settings``: the engine and its settings (None for
    points saved before they were recorded); ``disturbed``: why the measuring code distrusts the
    point (a wide spread between repeats, a load average that rose while it ran), "" for a
    clean point."""

    kind: str
    prompt: int
    context: int
    batch: int
    seconds: float
    median: float = 0.0
    repeats: int = 1
    source: str = ""
    settings: EngineSettings | None = None
    disturbed: str = ""
    stdev: float = 0.0
    best: float = 0.0
    test: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SpecError(f"point.kind must be one of {', '.join(KINDS)}, got {self.kind!r}"[:200])
        for name, low, high in (("prompt", 1, MAX_TOKENS), ("context", 0, MAX_TOKENS), ("batch", 1, MAX_BATCH),
                                ("repeats", 1, MAX_REPEATS)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise SpecError(f"point.{name} must be a whole number in [{low:,}, {high:,}], got {value!r}"[:200])
        if not _seconds(self.seconds) or self.seconds <= 0:
            raise SpecError(f"point.seconds must be in (0, {MAX_SECONDS:,.0f}], got {self.seconds!r}"[:200])
        for name in ("median", "stdev", "best"):
            if not _seconds(getattr(self, name)):
                raise SpecError(f"point.{name} must be in [0, {MAX_SECONDS:,.0f}], got {getattr(self, name)!r}"[:200])
        if len(self.test) > 40:
            raise SpecError("point.test is longer than 40 characters")

    @property
    def is_decode(self) -> bool:
        return self.kind != "prefill"

    @property
    def rate(self) -> float:
        """Tokens/s the pass delivers, all sequences together."""
        return self.batch * self.prompt / self.seconds

    @property
    def spread(self) -> float:
        """(median - best) / best: run-to-run variation, 0 when unknown (``seconds`` stands for
        the best where a point kept no best of its own)."""
        fastest = self.best or self.seconds
        return max(0.0, self.median / fastest - 1.0) if self.median else 0.0

    @property
    def engine_key(self) -> str:
        """The settings' group key; "" for a point that recorded none."""
        return self.settings.key if self.settings is not None else ""

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.settings is None:
            del out["settings"]
        for name in ("disturbed", "stdev", "best", "test"):
            if not out[name]:
                del out[name]           # records stay as they were for points without them
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MeasuredPoint:
        raw = data.get("settings") if isinstance(data, Mapping) else None
        if raw is not None and not isinstance(raw, Mapping):
            raise SpecError("measured point is malformed: settings must be an object")
        settings = EngineSettings.from_dict(raw) if raw is not None else None
        try:
            return cls(kind=str(data["kind"]), prompt=int(data["prompt"]), context=int(data["context"]),
                       batch=int(data["batch"]), seconds=float(data["seconds"]),
                       median=float(data.get("median", 0.0)), repeats=int(data.get("repeats", 1)),
                       source=str(data.get("source", "")), settings=settings,
                       disturbed=str(data.get("disturbed", ""))[:500], stdev=float(data.get("stdev", 0.0)),
                       best=float(data.get("best", 0.0)), test=str(data.get("test", ""))[:40])
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise SpecError(f"measured point is malformed: {exc!r}") from exc
