"""Public llama-bench results (resources/benchmarks/llamacpp-public.json): what other people's
machines measured, with the peaks of those machines and where every figure came from.

The file holds ``sources`` (the pages read), ``models`` (a benchmark's model name -> a catalogue
entry), ``machines`` (back end, bandwidth in bytes/s, dense FP16 peak in FLOP/s, a source for
each) and ``rows`` (machine, model, weight format, llama-bench test such as "pp512" or "tg128",
tokens/s, and the row's own source: URL, date, build, settings; null where not stated). This
module is the only code that knows those spellings; it returns frozen value objects and
raises ResourceError (one line naming the file and the problem) for anything malformed."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rooflab.core.errors import ModelFileError, ResourceError
from rooflab.core.files.resources import resources_dir
from rooflab.core.files.safe_json import read_json
from rooflab.core.io.textfile import printable, shown

BACKENDS: tuple[str, ...] = ("cuda", "metal", "rocm", "vulkan", "cpu")
MAX_FILE_BYTES = 4 << 20             # the shipped file is ~200 KB
_TEST = re.compile(r"(pp|tg)([1-9][0-9]{0,5})")
_TEST_KINDS = {"pp": "prefill", "tg": "decode"}


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchTest:
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
    """One machine of the tables, with vendor peaks. bandwidth: bytes/s; peak_fp16: FLOP/s."""

    key: str
    name: str
    backend: str
    bandwidth: float
    peak_fp16: float
    sources: tuple[tuple[str, str], ...]       # (figure, where it comes from)
    notes: str = ""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicRow:
    """One published result: ``tokens_per_second`` of ``test`` for ``model`` at ``weights``
    (a catalogue weight format: "q4_0", "q8_0", "f16", "q4_k_m") on ``machine``."""

    machine: str
    model: str
    weights: str
    test: BenchTest
    tokens_per_second: float
    source: RowSource


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicBenchmarks:
    """The whole file. Hashable, so results computed from it can be cached."""

    path: str
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
    """The shipped file, resources/benchmarks/llamacpp-public.json."""
    return Path(resources_dir()) / "benchmarks" / "llamacpp-public.json"


def parse_test(name: str) -> BenchTest:
    """"pp512" -> prefill of 512 tokens, "tg128" -> 128 decode steps; ValueError otherwise."""
    match = _TEST.fullmatch(name)
    if not match:
        raise ValueError(f"test {shown(name)} is not ppN or tgN")
    return BenchTest(name=name, kind=_TEST_KINDS[match.group(1)], tokens=int(match.group(2)))


def read_public_benchmarks(path: str | Path | None = None) -> PublicBenchmarks:
    """Read and check the file (the shipped one by default); ResourceError naming the file and
    the first problem."""
    file = Path(path) if path is not None else default_path()
    try:
        data = read_json(file, max_bytes=MAX_FILE_BYTES, what="a public benchmark file")
        return _parse(data, str(file))
    except ModelFileError as exc:
        raise ResourceError(str(exc)) from exc
    except (ValueError, TypeError) as exc:
        raise ResourceError(f"{file}: {_clean(exc, 300)}") from exc


# --- parsing ----------------------------------------------------------------------------------

def _parse(data: Any, path: str) -> PublicBenchmarks:
    top = _object(data, "the file")
    sources = tuple(_source(_object(s, "a source")) for s in _list(top, "sources"))
    models = tuple(_model(_object(m, "a model")) for m in _list(top, "models"))
    machines = tuple(_machine(_object(m, "a machine")) for m in _list(top, "machines"))
    _unique("source", [s.key for s in sources])
    _unique("model", [m.key for m in models])
    _unique("machine", [m.key for m in machines])
    known = {"machine": {m.key for m in machines}, "model": {m.key for m in models}}
    rows = tuple(_row(_object(r, f"row {i + 1}"), i + 1, known) for i, r in enumerate(_list(top, "rows")))
    if not rows:
        raise ValueError("holds no rows")
    return PublicBenchmarks(path=path, sources=sources, models=models, machines=machines, rows=rows)


def _source(d: Mapping[str, Any]) -> PublicSource:
    return PublicSource(key=_text(d, "id"), url=_url(d, "url"), title=_text(d, "title"),
                        accessed=_text(d, "accessed"), notes=_text(d, "notes", ""))


def _model(d: Mapping[str, Any]) -> PublicModel:
    return PublicModel(key=_text(d, "key"), catalogue=_text(d, "catalogue"), name=_text(d, "name"),
                       notes=_text(d, "notes", ""))


def _machine(d: Mapping[str, Any]) -> PublicMachine:
    key = _text(d, "key")
    backend = _text(d, "backend")
    if backend not in BACKENDS:
        raise ValueError(f"machine {key}: backend {shown(backend)} is not one of {', '.join(BACKENDS)}")
    figures = _object(d.get("sources"), f"machine {key}: sources")
    for needed in ("bandwidth", "peak_fp16"):
        if not str(figures.get(needed) or "").strip():
            raise ValueError(f"machine {key}: no source for {needed}")
    return PublicMachine(key=key, name=_text(d, "name"), backend=backend,
                         bandwidth=_positive(d, "bandwidth", f"machine {key}"),
                         peak_fp16=_positive(d, "peak_fp16", f"machine {key}"),
                         sources=tuple((_clean(k, 40), _clean(v, 600)) for k, v in figures.items()),
                         notes=_text(d, "notes", ""))


def _row(d: Mapping[str, Any], number: int, known: Mapping[str, set[str]]) -> PublicRow:
    where = f"row {number}"
    for field in ("machine", "model"):
        if _text(d, field) not in known[field]:
            raise ValueError(f"{where}: unknown {field} {shown(d.get(field))}")
    try:
        test = parse_test(_text(d, "test"))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    src = _object(d.get("source"), f"{where}: source")
    source = RowSource(url=_url(src, "url", where), source=_text(src, "id", ""), date=_maybe_text(src, "date"),
                       build=_maybe_text(src, "build"), ngl=_maybe_int(src, "ngl", where),
                       threads=_maybe_int(src, "threads", where), flash_attention=_maybe_flag(src, "fa", where),
                       via=_maybe_text(src, "via"), notes=_text(src, "notes", ""))
    return PublicRow(machine=_text(d, "machine"), model=_text(d, "model"), weights=_text(d, "weights").lower(),
                     test=test, tokens_per_second=_positive(d, "tokens_per_second", where), source=source)


# --- field helpers: each raises ValueError with a message that reads after the file name ------

def _clean(value: Any, limit: int) -> str:
    """``value`` as one printable line of at most ``limit`` characters (text from a file)."""
    return str(printable(value, limit))


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object")
    return value


def _list(d: Mapping[str, Any], name: str) -> list[Any]:
    value = d.get(name)
    if not isinstance(value, list):
        raise ValueError(f"field {shown(name)} must be a list")
    return value


def _text(d: Mapping[str, Any], name: str, default: str | None = None) -> str:
    value = d.get(name)
    if default is not None and (value is None or isinstance(value, str)):
        return default if value is None else _clean(value, 2000)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"field {shown(name)} must be non-empty text, got {shown(value)}")
    return _clean(value, 2000)


def _maybe_text(d: Mapping[str, Any], name: str) -> str | None:
    value = d.get(name)
    return None if value is None else _clean(value, 200)


def _url(d: Mapping[str, Any], name: str, where: str = "") -> str:
    value = d.get(name)
    if not isinstance(value, str) or not value.startswith(("https://", "http://")) or len(value) < 12:
        raise ValueError(f"{where + ': ' if where else ''}{name} must be an http(s) URL, got {shown(value)}")
    return _clean(value, 500)


def _positive(d: Mapping[str, Any], name: str, where: str) -> float:
    value = d.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{where}: {name} must be a positive number, got {shown(value)}")
    return float(value)


def _maybe_int(d: Mapping[str, Any], name: str, where: str) -> int | None:
    value = d.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {name} must be a whole number or null, got {shown(value)}")
    return value


def _maybe_flag(d: Mapping[str, Any], name: str, where: str) -> bool | None:
    value = d.get(name)
    if value is None:
        return None
    if value not in (0, 1) or isinstance(value, float):
        raise ValueError(f"{where}: {name} must be 0, 1 or null, got {shown(value)}")
    return bool(value)


def _unique(what: str, keys: list[str]) -> None:
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise ValueError(f"{what} {shown(key)} is listed twice")
        seen.add(key)
