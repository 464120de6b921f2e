"""Measurements people already have: llama.cpp's ``llama-bench`` output (JSON array, JSONL,
CSV or its markdown table) and ``llama-batched-bench`` tables (markdown or JSONL), read into
``MeasuredPoint``s the calibration and the plots use.

llama-bench: a "pp" row (n_prompt > 0, n_gen = 0) times one prompt of n_prompt tokens on top of
n_depth cached ones -> a prefill point; a "tg" row (n_gen > 0, n_prompt = 0) times n_gen steps
from depth n_depth -> a decode point per step, at the steps' middle context. Rows that do both
("pg") cannot be split into phases and are skipped with a warning. Where per-repeat samples
are present (samples_ns) the best repeat is kept and the median beside it, as rooflab's own
measurements do; otherwise the average.

llama-batched-bench: each row is B sequences of PP prompt tokens then TG steps; T_PP is the
prefill of all of them (one shared prompt when N_KV = PP + B x TG), T_TG / TG one step for B
sequences at the steps' middle context -> a prefill point and a batch point."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rooflab.core.errors import ModelFileError, SpecError
from rooflab.core.files.safe_json import JsonError, parse_json
from rooflab.core.io.bench_model import BenchModel, cell_quantity, logged_model, row_model
from rooflab.core.io.textfile import printable, read_text_capped, shown
from rooflab.core.values.measured import ALL_LAYERS, MAX_SECONDS, EngineSettings, MeasuredPoint, bench_point, bench_test
from rooflab.core.values.workload import MAX_TOKENS

MAX_BYTES = 16 << 20          # thousands of rows are a few MB; parsed JSON takes 20-60x its text
# llama-bench fields that, when they differ between rows, make separate series
_SERIES_FIELDS = ("model_type", "backends", "n_threads", "n_gpu_layers", "n_batch", "n_ubatch", "type_k",
                  "flash_attn", "n_cpu_moe")


@dataclass(frozen=True, kw_only=True)
class BenchImport:
    """Points read from one benchmark file, grouped into series (one per model and setting)."""

    path: str
    tool: str                                    # "llama-bench" or "llama-batched-bench"
    series: Mapping[str, tuple[MeasuredPoint, ...]]
    models: tuple[str, ...] = ()                 # model file names or types named in the file
    kv_type: str = "f16"
    metadata: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    model: BenchModel = BenchModel()

    @property
    def points(self) -> tuple[MeasuredPoint, ...]:
        return tuple(p for pts in self.series.values() for p in pts)


def read_benchmark(path: str | Path) -> BenchImport:
    """Read a llama-bench or llama-batched-bench output file; ModelFileError if it is neither."""
    file = Path(path)
    text = read_text_capped(file, MAX_BYTES, "a benchmark output")
    try:
        return parse_benchmark(text, str(file))
    except SpecError as exc:
        raise ModelFileError(file, str(exc)) from exc


def parse_benchmark(text: str, name: str = "<text>") -> BenchImport:
    """Parse benchmark output held in a string (format detected from its content); what the
    rows say about the model, completed by llama.cpp's load log where the file holds it."""
    bench = _parse(text, name)
    logged = logged_model(text)
    if not logged.named:
        return bench
    have = bench.model
    model = BenchModel(description=have.description or logged.description,
                       architecture=have.architecture or logged.architecture,
                       weight_format=have.weight_format or logged.weight_format,
                       params=have.params or logged.params, size=have.size or logged.size)
    return replace(bench, model=model)


def _parse(text: str, name: str) -> BenchImport:
    stripped = text.strip().lstrip("\ufeff")
    if not stripped:
        raise SpecError("the file is empty")
    if stripped.startswith("["):
        try:
            rows = parse_json(stripped)
        except JsonError as exc:
            raise SpecError(str(exc)) from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise SpecError("a JSON benchmark file must be an array of objects")
        return _from_rows(rows, name)
    table = _markdown(stripped)
    if table:
        return _from_markdown(table, name)
    if any(line.lstrip().startswith("{") for line in stripped.splitlines()):
        return _from_rows(_jsonl(stripped), name)
    first = stripped.splitlines()[0]
    if "," in first and ("n_prompt" in first or "avg_ts" in first):
        return _from_rows(_csv_rows(stripped), name)
    raise SpecError("not llama-bench output (JSON, JSONL, CSV or markdown) nor a llama-batched-bench table")


def _csv_rows(text: str) -> list[dict[str, Any]]:
    """The rows of a CSV table; csv's field limit (128 KB) and its other refusals are one line."""
    try:
        return list(csv.DictReader(io.StringIO(text)))
    except csv.Error as exc:
        raise SpecError(f"not CSV llama-bench can have written ({str(exc)[:100]})") from None


def _jsonl(text: str) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue                         # batched-bench mixes log lines with its records
        try:
            row = parse_json(line)
        except JsonError as exc:
            raise SpecError(f"line {number} {exc}") from None
        if not isinstance(row, dict):
            raise SpecError(f"line {number} is not a JSON object")
        rows.append(row)
    return rows


def _number(row: Mapping[str, Any], key: str, default: float | None = None) -> float:
    value = row.get(key, default)
    if value is None or value == "":
        if default is not None:
            return default
        raise SpecError(f"a row has no {key!r}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise SpecError(f"{key!r} is not a number: {shown(value)}") from None
    if not math.isfinite(number) or number < 0:
        raise SpecError(f"{key!r} must be a finite number >= 0, got {shown(value)}")
    return number


def _count(row: Mapping[str, Any], key: str, default: float | None = None) -> int:
    """A token or sequence count: a whole number no workload exceeds (MAX_TOKENS)."""
    number = _number(row, key, default)
    if number != int(number) or number > MAX_TOKENS:
        raise SpecError(f"{key!r} must be a whole number up to {MAX_TOKENS:,}, got {shown(row.get(key))}")
    return int(number)


def _samples(row: Mapping[str, Any]) -> list[float]:
    """Per-repeat seconds from samples_ns (a JSON list, or a CSV cell like "[1, 2]")."""
    raw = row.get("samples_ns")
    if isinstance(raw, str):
        try:
            raw = parse_json(raw)
        except JsonError:
            return []
    if not isinstance(raw, list):
        return []
    return [float(x) / 1e9 for x in raw if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0]


# --- llama-bench rows (JSON, JSONL, CSV) --------------------------------------------------------

def _from_rows(rows: list[dict[str, Any]], name: str) -> BenchImport:
    if not rows:
        raise SpecError("no benchmark rows")
    if "t_pp" in rows[0] or "pl" in rows[0]:
        return _batched_rows(rows, name)
    varying = [f for f in _SERIES_FIELDS if len({str(r.get(f, "")) for r in rows}) > 1]
    series: dict[str, list[MeasuredPoint]] = {}
    warnings: list[str] = []
    for row in rows:
        reason = _skip_reason(row)
        if reason:
            warnings.append(reason)
            continue
        label = _series_label(row, varying)
        series.setdefault(label, []).append(_bench_row_point(row, label))
    return _result(name, "llama-bench", series, rows, warnings)


def _skip_reason(row: Mapping[str, Any]) -> str:
    """Why a llama-bench row gives no point ("" when it gives one)."""
    n_prompt, n_gen = _count(row, "n_prompt", 0.0), _count(row, "n_gen", 0.0)
    if n_prompt and n_gen:
        return f"pp{n_prompt}+tg{n_gen} row skipped: a combined run cannot be split into phases"
    if not (n_prompt or n_gen):
        return "a row with neither n_prompt nor n_gen was skipped"
    return ""


def _bench_row_point(row: Mapping[str, Any], label: str) -> MeasuredPoint:
    """The prefill (pp) or per-step decode (tg) point of a usable llama-bench row: the mean over
    repetitions (llama-bench's own statistic) with their standard deviation, and the best and
    median where the samples are given."""
    n_prompt, n_gen = _count(row, "n_prompt", 0.0), _count(row, "n_gen", 0.0)
    depth = _count(row, "n_depth", 0.0)
    tokens = n_prompt or n_gen
    samples = _samples(row)
    kind = "prefill" if n_prompt else "decode"
    if samples:                        # the in-process timing's own statistic, from the same samples
        return bench_point(kind, tokens, depth, samples, source=label)
    if row.get("avg_ns") not in (None, ""):
        mean = median = _number(row, "avg_ns") / 1e9
        stdev = _number(row, "stddev_ns", 0.0) / 1e9
    else:
        rate = _number(row, "avg_ts")
        if rate <= 0:
            raise SpecError("avg_ts must be > 0")
        mean = median = tokens / rate
        stdev = mean * _number(row, "stddev_ts", 0.0) / rate        # to first order in the spread
    if mean <= 0:
        raise SpecError("a row has a time of zero")
    per = 1 if n_prompt else n_gen                                  # a tg row's figures are per step
    return MeasuredPoint(kind=kind, prompt=n_prompt or 1, context=depth + (0 if n_prompt else (n_gen - 1) // 2),
                         batch=1, seconds=mean / per, median=median / per, stdev=min(stdev / per, MAX_SECONDS),
                         source=label, test=bench_test(kind, tokens, depth))


def _series_label(row: Mapping[str, Any], varying: Iterable[str]) -> str:
    model = str(row.get("model_filename") or row.get("model_type") or "model")
    model = printable(model.replace("\\", "/").split("/")[-1], 120)
    extras = [f"{f}={printable(row.get(f), 40)}" for f in varying if f != "model_type"]
    return "llama-bench: " + model + (f" ({', '.join(extras)})" if extras else "")


def _result(name: str, tool: str, series: Mapping[str, list[MeasuredPoint]], rows: list[dict[str, Any]],
            warnings: list[str]) -> BenchImport:
    if not series:
        raise SpecError("no prompt-processing or generation rows that can be used"
                        + (f" ({warnings[0]})" if warnings else ""))
    first = rows[0] if rows else {}
    keep = ("build_commit", "cpu_info", "gpu_info", "backends", "model_type", "model_size", "model_n_params",
            "n_threads", "n_gpu_layers", "type_k", "type_v", "n_batch", "n_ubatch", "flash_attn")
    meta = {k: printable(first[k]) for k in keep if k in first}
    models = tuple(dict.fromkeys(printable(r.get("model_filename") or r.get("model_type") or "") for r in rows
                                 if r.get("model_filename") or r.get("model_type")))
    kv = printable(first.get("type_k") or "f16", 20).lower()
    return BenchImport(path=name, tool=tool, series={k: tuple(v) for k, v in series.items()}, models=models,
                       kv_type=kv, metadata=meta, warnings=tuple(dict.fromkeys(warnings)), model=row_model(first))


# --- llama-batched-bench ------------------------------------------------------------------------

def _batched_point_pair(pp: int, tg: int, b: int, n_kv: int, t_pp: float, t_tg: float, shared: bool | None,
                        label: str) -> list[MeasuredPoint]:
    if shared is None:
        shared = b > 1 and n_kv == pp + b * tg
    out = []
    if pp and t_pp > 0:
        out.append(MeasuredPoint(kind="prefill", prompt=pp, context=0, batch=1 if shared else b, seconds=t_pp,
                                 source=label))
    if tg and t_tg > 0:
        out.append(MeasuredPoint(kind="batch", prompt=1, context=pp + (tg - 1) // 2, batch=b, seconds=t_tg / tg,
                                 source=label))
    return out


def _batched_row_points(row: Mapping[str, Any], label: str) -> list[MeasuredPoint]:
    pp, tg, b = _count(row, "pp"), _count(row, "tg"), _count(row, "pl")
    if b < 1:
        raise SpecError("pl (sequences) must be >= 1")
    shared = bool(_number(row, "is_pp_shared", 0.0)) if "is_pp_shared" in row else None
    return _batched_point_pair(pp, tg, b, _count(row, "n_kv", 0.0), _number(row, "t_pp"),
                               _number(row, "t_tg"), shared, label)


def _batched_rows(rows: list[dict[str, Any]], name: str) -> BenchImport:
    label = "llama-batched-bench"
    points: list[MeasuredPoint] = []
    for row in rows:
        points += _batched_row_points(row, label)
    return _result(name, "llama-batched-bench", {label: points} if points else {}, rows, [])


# --- markdown tables ----------------------------------------------------------------------------

def _markdown(text: str) -> list[list[str]]:
    """Rows of the first pipe table in ``text`` (header first, separator dropped)."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            continue
        rows.append(cells)
    return rows if len(rows) >= 2 else []


_TEST = re.compile(r"^(pp|tg)\s*(\d{1,9})(?:\s*@\s*d\s*(\d{1,9}))?$")


def _from_markdown(table: list[list[str]], name: str) -> BenchImport:
    header = [h.lower() for h in table[0]]
    if "pp" in header and "tg" in header and "b" in header:
        return _batched_markdown(header, table[1:], name)
    if "test" not in header or "t/s" not in header:
        raise SpecError("a markdown table without llama-bench's 'test' and 't/s' columns "
                        "or llama-batched-bench's PP, TG and B columns")
    col = {h: i for i, h in enumerate(header)}
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    for cells in table[1:]:
        if len(cells) != len(header):
            raise SpecError(f"a table row has {len(cells)} cells for {len(header)} columns")
        test = cells[col["test"]].strip()
        match = _TEST.match(test)
        if not match:
            warnings.append(f"test {shown(test, 40)} skipped: only ppN and tgN (@ dN) rows can be split into "
                            "phases")
            continue
        rate, _, stdev = cells[col["t/s"]].partition("±")
        tokens, depth = int(match.group(2)), int(match.group(3) or 0)
        row = {"model_type": cells[col["model"]] if "model" in col else "model", "avg_ts": rate.strip(),
               "stddev_ts": stdev.strip(), "n_prompt": tokens if match.group(1) == "pp" else 0,
               "n_gen": tokens if match.group(1) == "tg" else 0, "n_depth": depth}
        for key, column in (("model_size", "size"), ("model_n_params", "params")):
            quantity = cell_quantity(cells[col[column]]) if column in col else None
            if quantity is not None:
                row[key] = quantity
        for key, column in (("n_threads", "threads"), ("n_gpu_layers", "ngl"), ("n_batch", "n_batch"),
                            ("backends", "backend"), ("n_ubatch", "n_ubatch")):
            if column in col:
                row[key] = cells[col[column]]
        rows.append(row)
    if not rows:
        raise SpecError("no ppN or tgN rows in the table" + (f" ({warnings[0]})" if warnings else ""))
    result = _from_rows(rows, name)
    return replace(result, warnings=tuple(dict.fromkeys(warnings + list(result.warnings))))


def _batched_markdown(header: list[str], body: list[list[str]], name: str) -> BenchImport:
    needed = {"pp": "pp", "tg": "tg", "b": "b", "n_kv": "n_kv", "t_pp s": "t_pp", "t_tg s": "t_tg"}
    col = {h: i for i, h in enumerate(header)}
    missing = [h for h in needed if h not in col]
    if missing:
        raise SpecError(f"llama-batched-bench table lacks the column(s) {', '.join(missing)}")
    rows = []
    for cells in body:
        if len(cells) != len(header):
            raise SpecError(f"a table row has {len(cells)} cells for {len(header)} columns")
        rows.append({key: cells[col[h]] for h, key in needed.items()} | {"pl": cells[col["b"]]})
    return _batched_rows(rows, name)


# --- one row at a time (a run being read as it streams) -----------------------------------------

def points_from_row(row: Mapping[str, Any], settings: EngineSettings | None = None) -> tuple[MeasuredPoint, ...]:
    """The points of one output row, as a JSONL line of ``llama-bench -o jsonl`` or
    ``llama-batched-bench --output-format jsonl`` decodes to.

    llama-bench: one prefill (pp) or decode (tg) point, none for a combined or empty row;
    llama-batched-bench: a prefill and a batch point. With ``settings``, every point carries
    them, updated by what the row itself records (build, back end, threads, GPU layers, experts
    kept on the CPU, flash attention, KV types, batch sizes). SpecError when the row is malformed."""
    if not isinstance(row, Mapping):
        raise SpecError("a row must be a JSON object")
    if "t_pp" in row or "pl" in row:
        points = _batched_row_points(row, "llama-batched-bench")
    elif _skip_reason(row):
        return ()
    else:
        points = [_bench_row_point(row, _series_label(row, ()))]
    if settings is not None:
        stamped = _row_settings(row, settings)
        points = [replace(p, settings=stamped) for p in points]
    return tuple(points)


# back-end names as llama.cpp registers them (ggml_backend_reg_name), lower-cased; the CPU and its
# BLAS helpers mean the weights were computed on the CPU
_CPU_BACKENDS = frozenset({"cpu", "blas", "accelerate", "zendnn", "kleidiai", "amx"})
_BACKEND_DEVICE = {"hip": "rocm", "mtl": "metal"}


def _row_device(backends: str) -> str:
    for name in backends.split(","):
        key = name.strip().lower()
        if key and key not in _CPU_BACKENDS:
            return printable(_BACKEND_DEVICE.get(key, key))
    return "cpu"


def _row_int(row: Mapping[str, Any], key: str) -> int | None:
    value = row.get(key)
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):
        return None


def _row_flag(value: Any) -> bool | None:
    """flash_attn: true/false in older builds, 1/0/-1 (on/off/auto) since Aug 2025; None for auto."""
    text = str(value).strip().lower()
    return {"true": True, "1": True, "false": False, "0": False}.get(text)


def _row_settings(row: Mapping[str, Any], base: EngineSettings) -> EngineSettings:
    """``base`` updated by the settings a llama-bench or llama-batched-bench row records."""
    found: dict[str, Any] = {}
    number, commit = _row_int(row, "build_number"), str(row.get("build_commit") or "").strip()
    if number is not None and commit:
        found["version"] = printable(f"b{number} ({commit})")            # as llama.cpp names its releases
    elif number is not None or commit:
        found["version"] = printable(f"b{number}" if number is not None else commit)
    if row.get("backends"):
        found["device"] = _row_device(str(row["backends"]))
    for key, name in (("n_threads", "threads"), ("n_cpu_moe", "cpu_moe"), ("n_batch", "batch_size"),
                      ("n_ubatch", "ubatch_size"), ("n_gpu_layers", "gpu_layers")):
        value = _row_int(row, key)
        if value is not None and 0 <= value <= 1_000_000:
            found[name] = value
        elif value is not None and name == "gpu_layers":
            found[name] = ALL_LAYERS  # -1: every layer (llama.cpp's default since Aug 2025), as -ngl 999
    flash = _row_flag(row.get("flash_attn"))
    if flash is not None:
        found["flash_attention"] = flash
    type_k, type_v = str(row.get("type_k") or "").lower(), str(row.get("type_v") or "").lower()
    if type_k:
        found["kv_type"] = printable(type_k if type_v in ("", type_k) else f"{type_k}/{type_v}")
    settings = replace(base, **found)
    if settings.device == "cpu" and settings.gpu_layers:
        settings = replace(settings, gpu_layers=0)    # a CPU build offloads nothing, whatever -ngl says
    return settings
