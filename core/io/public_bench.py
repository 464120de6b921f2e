"""Public llama-bench results (resources/benchmarks/*.json, read together): what other people's
machines measured, with the peaks of those machines and where every figure came from.

The file holds ``sources`` (the pages read), ``models`` (a benchmark's model name -> a catalogue
entry), ``machines`` (back end, bandwidth in bytes/s, dense FP16 peak in FLOP/s, a source for
each; ``kind`` "unified" for a GPU on the host's memory and power) and ``rows`` (machine,
model, weight format, llama-bench test such as "pp512" or "tg128", tokens/s, and the row's own
source: URL, date, build, settings; null where not stated). This
module is the only code that knows those spellings; it returns frozen value objects and
raises ResourceError (one line naming the file and the problem) for anything malformed.

Several files are merged: each may use the sources, models and machines another defines, but
no key may be defined in two files. A row's source may also state its run settings (n_ubatch,
n_batch, --n-cpu-moe, -ot, KV cache types, device count, split mode, depth of ``ppN @ dD``)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rooflab.core.errors import ModelFileError, ResourceError
from rooflab.core.files.resources import resources_dir
from rooflab.core.files.safe_json import read_json
from rooflab.core.io import public_bench_rows as f
from rooflab.core.io.public_bench_rows import KV_TYPES, SPLIT_MODES
from rooflab.core.io.textfile import shown
from rooflab.core.values.machine import INT8_PATH

__all__ = ["BACKENDS", "KV_TYPES", "SPLIT_MODES", "PublicBenchmarks", "PublicMachine", "PublicModel",
           "PublicRow", "PublicSource", "PublishedTest", "RowSource", "default_path", "default_paths", "parse_test",
           "read_public_benchmark_files", "read_public_benchmarks"]

BACKENDS: tuple[str, ...] = ("cuda", "metal", "rocm", "vulkan", "cpu")
MAX_FILE_BYTES = 4 << 20             # the shipped files are ~200 KB and ~1 MB
_TEST = re.compile(r"(pp|tg)([1-9][0-9]{0,5})")
_TEST_KINDS = {"pp": "prefill", "tg": "decode"}


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedTest:
    """A llama-bench test: ``kind`` "prefill" (ppN: one prompt of N tokens on an empty cache)
    or "decode" (tgN: N tokens generated one at a time from an empty cache)."""

    name: str          # "pp512", "tg128"
    kind: str          # "prefill" or "decode"
    tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicSource:
    """A page the data was read from."""

    key: str
    url: str
    title: str
    accessed: str
    notes: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicModel:
    """A benchmarked model: ``catalogue`` names the rooflab catalogue entry with its shapes."""

    key: str
    catalogue: str
    name: str
    notes: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicMachine:
    """One machine of the tables, with vendor peaks. bandwidth: bytes/s; peak_fp16: FLOP/s (a
    CPU's FP32 FMA rate); peak_int8: a CPU's int8 dot-product rate, the unit its quantized
    multiplies run on (``MachineProfile``'s INT8_PATH x peak_fp16 where the file states none)."""

    key: str
    name: str
    backend: str
    bandwidth: float
    peak_fp16: float
    sources: tuple[tuple[str, str], ...]       # (figure, where it comes from)
    notes: str = ""
    vendor: str | None = None                  # "nvidia", "amd", "intel", "apple", ...; None: not given
    cores: int | None = None                   # CPUs: physical cores, where known
    threads: int | None = None                 # CPUs: hardware threads, where known
    kind: str = "gpu"                          # "gpu" (its own memory), "unified" (a GPU on the host's memory and
    #                                            power: Apple, AMD APUs, DGX Spark) or "cpu"; as MachineProfile.kind
    peak_int8: float | None = None             # CPUs: multiply-add ops/s of the int8 path

    @property
    def compute_peak(self) -> float:
        """The peak the fit and the ceiling divide a row's arithmetic by: a CPU's int8 path
        (``peak_int8``, else INT8_PATH x its FP32 peak), a GPU's stated peak."""
        if self.backend != "cpu":
            return self.peak_fp16
        return self.peak_int8 or self.peak_fp16 * INT8_PATH

    @property
    def float_share(self) -> float:
        """The share of ``compute_peak`` a CPU's float multiplies reach at most (its FP32 FMA
        rate: F16/BF16 weights, attention over an F16 cache); 1 on a GPU."""
        return self.peak_fp16 / self.compute_peak if self.backend == "cpu" else 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RowSource:
    """Where one row comes from, as stated there; None where the source does not say."""

    url: str
    source: str = ""                # key of a PublicSource
    date: str | None = None         # when the result was posted
    build: str | None = None        # llama.cpp commit or build number
    ngl: int | None = None
    threads: int | None = None
    flash_attention: bool | None = None
    via: str | None = None          # the copy the figure was read from, when not the page itself
    notes: str = ""
    stddev: float | None = None     # tokens/s, llama-bench's spread over its repetitions
    seen: str | None = None         # when the copy named in ``via`` was taken
    ubatch: int | None = None       # -ub
    batch: int | None = None        # -b
    n_cpu_moe: int | None = None    # --n-cpu-moe: layers whose experts stay in host memory
    override_tensors: str | None = None   # -ot pattern
    type_k: str | None = None       # -ctk, one of KV_TYPES
    type_v: str | None = None       # -ctv
    devices: int | None = None      # accelerators used
    split_mode: str | None = None   # -sm, one of SPLIT_MODES
    depth: int = 0                  # tokens already in the cache (``pp512 @ d4096``: 4096)
    host_bandwidth: float | None = None   # bytes/s of the host memory holding offloaded weights

    @property
    def partial_offload(self) -> bool:
        """Some weights stay in host memory: experts kept on the CPU or tensors overridden."""
        return bool(self.n_cpu_moe) or bool(self.override_tensors)


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicRow:
    """One published result: ``tokens_per_second`` of ``test`` for ``model`` at ``weights``
    (a catalogue weight format: "q4_0", "q8_0", "f16", "q4_k_m") on ``machine``."""

    machine: str
    model: str
    weights: str
    test: PublishedTest
    tokens_per_second: float
    source: RowSource


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicBenchmarks:
    """The files read, merged. Hashable, so results computed from it can be cached."""

    path: str                       # the files read, joined by "; "
    sources: tuple[PublicSource, ...]
    models: tuple[PublicModel, ...]
    machines: tuple[PublicMachine, ...]
    rows: tuple[PublicRow, ...]

    def machine(self, key: str) -> PublicMachine:
        for m in self.machines:
            if m.key == key:
                return m
        raise KeyError(key)

    def model(self, key: str) -> PublicModel:
        for m in self.models:
            if m.key == key:
                return m
        raise KeyError(key)


def default_path() -> Path:
    """The first shipped file, resources/benchmarks/llamacpp-public.json."""
    return Path(resources_dir()) / "benchmarks" / "llamacpp-public.json"


def default_paths() -> tuple[Path, ...]:
    """Every shipped file, resources/benchmarks/*.json, in name order."""
    return tuple(sorted((Path(resources_dir()) / "benchmarks").glob("*.json")))


def parse_test(name: str) -> PublishedTest:
    """"pp512" -> prefill of 512 tokens, "tg128" -> 128 decode steps; ValueError otherwise."""
    match = _TEST.fullmatch(name)
    if not match:
        raise ValueError(f"test {shown(name)} is not ppN or tgN")
    return PublishedTest(name=name, kind=_TEST_KINDS[match.group(1)], tokens=int(match.group(2)))


def read_public_benchmarks(path: str | Path | None = None) -> PublicBenchmarks:
    """Read and check one file, or every shipped file merged when ``path`` is None;
    ResourceError naming the file and the first problem."""
    return read_public_benchmark_files(default_paths() if path is None else (Path(path),))


def read_public_benchmark_files(paths: Iterable[str | Path]) -> PublicBenchmarks:
    """Read ``paths`` and merge them. A source, model or machine key defined in two files is a
    ResourceError naming both; rows may use what any of the files defines."""
    parts: list[_Part] = []
    for p in paths:
        file = Path(p)
        parts.append(_guard(file, functools.partial(_read_part, file)))
    if not parts:
        raise ResourceError(f"{Path(resources_dir()) / 'benchmarks'}: no public benchmark file")
    owners: dict[tuple[str, str], str] = {}
    for part in parts:
        for what, keys in (("source", [s.key for s in part.sources]), ("model", [m.key for m in part.models]),
                           ("machine", [m.key for m in part.machines])):
            for key in keys:
                first = owners.setdefault((what, key), part.path)
                if first != part.path:
                    raise ResourceError(f"{part.path}: {what} {shown(key)} is also defined in {first}")
    sources = tuple(s for part in parts for s in part.sources)
    models = tuple(m for part in parts for m in part.models)
    machines = tuple(m for part in parts for m in part.machines)
    known = {"machine": {m.key for m in machines}, "model": {m.key for m in models}}
    rows: list[PublicRow] = []
    for part in parts:
        rows.extend(_guard(Path(part.path), lambda part=part: tuple(
            _row(f.obj(r, f"row {i + 1}"), i + 1, known) for i, r in enumerate(part.rows))))
    return PublicBenchmarks(path="; ".join(part.path for part in parts), sources=sources, models=models,
                            machines=machines, rows=tuple(rows))


# --- parsing ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Part:
    path: str
    sources: tuple[PublicSource, ...]
    models: tuple[PublicModel, ...]
    machines: tuple[PublicMachine, ...]
    rows: tuple[Any, ...]          # checked once every file's machines and models are known


def _read_part(file: Path) -> _Part:
    return _part(read_json(file, max_bytes=MAX_FILE_BYTES, what="a public benchmark file"), str(file))


def _guard(file: Path, read: Any) -> Any:
    """``read()``, its problems turned into one ResourceError line naming ``file``."""
    try:
        return read()
    except ModelFileError as exc:
        raise ResourceError(str(exc)) from exc
    except (ValueError, TypeError) as exc:
        raise ResourceError(f"{file}: {f.clean(exc, 300)}") from exc


def _part(data: Any, path: str) -> _Part:
    top = f.obj(data, "the file")
    sources = tuple(_source(f.obj(s, "a source")) for s in f.listed(top, "sources"))
    models = tuple(_model(f.obj(m, "a model")) for m in f.listed(top, "models"))
    machines = tuple(_machine(f.obj(m, "a machine")) for m in f.listed(top, "machines"))
    f.unique("source", [s.key for s in sources])
    f.unique("model", [m.key for m in models])
    f.unique("machine", [m.key for m in machines])
    rows = tuple(f.listed(top, "rows"))
    if not rows:
        raise ValueError("holds no rows")
    return _Part(path=path, sources=sources, models=models, machines=machines, rows=rows)


def _source(d: Mapping[str, Any]) -> PublicSource:
    return PublicSource(key=f.text(d, "id"), url=f.url(d, "url"), title=f.text(d, "title"),
                        accessed=f.text(d, "accessed"), notes=f.text(d, "notes", ""))


def _model(d: Mapping[str, Any]) -> PublicModel:
    return PublicModel(key=f.text(d, "key"), catalogue=f.text(d, "catalogue"), name=f.text(d, "name"),
                       notes=f.text(d, "notes", ""))


def _machine(d: Mapping[str, Any]) -> PublicMachine:
    key = f.text(d, "key")
    where = f"machine {key}"
    backend = f.text(d, "backend")
    if backend not in BACKENDS:
        raise ValueError(f"{where}: backend {shown(backend)} is not one of {', '.join(BACKENDS)}")
    figures = f.obj(d.get("sources"), f"{where}: sources")
    for needed in ("bandwidth", "peak_fp16"):
        if not str(figures.get(needed) or "").strip():
            raise ValueError(f"{where}: no source for {needed}")
    return PublicMachine(key=key, name=f.text(d, "name"), backend=backend,
                         bandwidth=f.positive(d, "bandwidth", where), peak_fp16=f.positive(d, "peak_fp16", where),
                         sources=tuple((f.clean(k, 40), f.clean(v, 600)) for k, v in figures.items()),
                         notes=f.text(d, "notes", ""), vendor=f.vendor(d, where),
                         cores=f.maybe_int(d, "cores", where, low=1), threads=f.maybe_int(d, "threads", where, low=1),
                         kind=_kind(d, backend, where), peak_int8=_int8(d, backend, figures, where))


def _int8(d: Mapping[str, Any], backend: str, figures: Mapping[str, Any], where: str) -> float | None:
    """A CPU's ``peak_int8`` with its source; None where the file states none."""
    if d.get("peak_int8") is None:
        return None
    if backend != "cpu":
        raise ValueError(f"{where}: peak_int8 is a CPU's int8 path; this is a {backend} machine")
    if not str(figures.get("peak_int8") or "").strip():
        raise ValueError(f"{where}: no source for peak_int8")
    return f.positive(d, "peak_int8", where)


MACHINE_KINDS = ("gpu", "unified", "cpu")


def _kind(d: Mapping[str, Any], backend: str, where: str) -> str:
    """The machine's ``kind``; when absent, "cpu" on the CPU back end, "unified" on Metal (every
    Apple GPU is on the host's memory), else "gpu"."""
    value = d.get("kind")
    if value is None:
        return {"cpu": "cpu", "metal": "unified"}.get(backend, "gpu")
    if value not in MACHINE_KINDS or (value == "cpu") != (backend == "cpu"):
        raise ValueError(f"{where}: kind must be one of {', '.join(MACHINE_KINDS)} (cpu only on the cpu back end), "
                         f"got {shown(value)}")
    return str(value)


def _row(d: Mapping[str, Any], number: int, known: Mapping[str, set[str]]) -> PublicRow:
    where = f"row {number}"
    for field in ("machine", "model"):
        if f.text(d, field) not in known[field]:
            raise ValueError(f"{where}: unknown {field} {shown(d.get(field))}")
    try:
        test = parse_test(f.text(d, "test"))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    src = f.obj(d.get("source"), f"{where}: source")
    source = RowSource(url=f.url(src, "url", where), source=f.text(src, "id", ""), date=f.maybe_text(src, "date"),
                       build=f.maybe_text(src, "build"), ngl=_ngl(src, where),
                       threads=f.maybe_int(src, "threads", where), flash_attention=f.maybe_flag(src, "fa", where),
                       via=f.maybe_text(src, "via"), notes=f.text(src, "notes", ""), **f.settings(src, where))
    return PublicRow(machine=f.text(d, "machine"), model=f.text(d, "model"), weights=f.text(d, "weights").lower(),
                     test=test, tokens_per_second=f.positive(d, "tokens_per_second", where), source=source)


def _ngl(src: Mapping[str, Any], where: str) -> int | None:
    """-ngl as the table prints it; llama-bench's -1 (all layers) is kept as 999."""
    return 999 if src.get("ngl") == -1 else f.maybe_int(src, "ngl", where)
