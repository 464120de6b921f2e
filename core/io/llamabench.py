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
sequences at the steps' middle context -> a prefill point and a batch point. One row's reading
(also for a run read as it streams): ``io.llamabench_rows``."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rooflab.core.errors import ModelFileError, SpecError
from rooflab.core.files.safe_json import JsonError, parse_json
from rooflab.core.io.bench_model import BenchModel, cell_quantity, logged_model, row_model
from rooflab.core.io.llamabench_rows import batched_row_points, bench_row_point, row_label, skip_reason
from rooflab.core.io.textfile import printable, read_text_capped, shown
from rooflab.core.values.measured import MeasuredPoint

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
        reason = skip_reason(row)
        if reason:
            warnings.append(reason)
            continue
        label = row_label(row, varying)
        series.setdefault(label, []).append(bench_row_point(row, label))
    return _result(name, "llama-bench", series, rows, warnings)


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

def _batched_rows(rows: list[dict[str, Any]], name: str) -> BenchImport:
    label = "llama-batched-bench"
    points: list[MeasuredPoint] = []
    for row in rows:
        points += batched_row_points(row, label)
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
