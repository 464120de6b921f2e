"""CSV files of a report: a ``#`` header block that records what was predicted (model,
machine, workload, rooflab version), then one row per point, SI units named in a column."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import fields
from datetime import datetime, timezone
from pathlib import Path

from rooflab.core import __version__
from rooflab.core.predict.work import weight_bytes_read_per_token
from rooflab.core.report.chart_types import Curve, Scenario
from rooflab.core.report.summary import NEVER, Summary, summary_rows
from rooflab.core.report.tables import grouped_rows
from rooflab.core.values.model import ModelSpec

CURVE_COLUMNS: tuple[str, ...] = ("curve", "label", "kind", "x", "x_unit", "y", "y_unit")
SUMMARY_COLUMNS: tuple[str, ...] = ("quantity", "value", "unit")
TENSOR_COLUMNS: tuple[str, ...] = ("role", "name", "type", "shape", "params", "bytes", "bytes_read_per_token")


def number(value: float) -> str:
    """A float as CSV text: 10 significant digits, "inf" for infinity, empty for NaN."""
    if math.isnan(value):
        return ""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.10g}"


def slug(text: str, limit: int = 60) -> str:
    """A file-name-safe form of a label: "Qwen3 8B · RTX 4090" -> "qwen3-8b-rtx-4090", at most
    ``limit`` characters."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")[:limit].strip("-.") or "series"


def header_lines(sc: Scenario, **context: str) -> list[str]:
    """The header block (without the leading "# "): version, time, model, machine, workload,
    then ``context`` (chart, panel, series, ...)."""
    spec, m, w = sc.model, sc.machine, sc.workload
    k_full, k_window = spec.kv_bytes_per_token(w.kv_type)
    eff = m.efficiency
    lines = [
        f"rooflab {__version__} prediction (SI units: bytes, FLOP, seconds, tokens)",
        f"created: {datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}",
        f"model: {spec.name} | architecture {spec.architecture} | source {spec.source} | "
        f"weights {spec.weights_format or '?'} | file_bytes {spec.file_bytes} | params_total {spec.params_total} | "
        f"params_per_token {number(spec.params_per_token)} | weight_bytes_read_per_token "
        f"{number(weight_bytes_read_per_token(spec))} | kv_bytes_per_token {number(k_full)} full, "
        f"{number(k_window)} windowed (window {spec.attention.sliding_window}) | experts "
        f"{spec.experts_used}/{spec.experts}",
        f"machine: {m.name} | key {m.key or '-'} | bandwidth {number(m.bandwidth)} B/s | peak_flops "
        + ", ".join(f"{d} {number(v)}" for d, v in m.peak_flops.items())
        + f" FLOP/s | memory {number(m.memory)} B | offload {number(m.offload_bandwidth)} B/s, "
        f"{number(m.offload_memory)} B | efficiency bandwidth {eff.bandwidth}, compute {eff.compute}, "
        f"step_overhead {eff.step_overhead} s, kv_read_factor {eff.kv_read_factor}",
        "workload: " + ", ".join(f"{f.name} {_workload_value(sc, f.name)}" for f in fields(w)),
    ]
    lines += [f"{key}: {value}" for key, value in context.items()]
    return lines


def _workload_value(sc: Scenario, name: str) -> object:
    """A workload field as the prediction used it: no compute dtype means the machine's default,
    no thread count llama.cpp's default (the physical cores)."""
    value = getattr(sc.workload, name)
    if name == "compute_dtype" and value is None:
        return sc.machine.default_dtype
    if name == "threads" and value is None:
        return f"default ({sc.machine.cores} cores)" if sc.machine.cores else "default"
    return value


def _render(header: Sequence[str], columns: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    buffer = io.StringIO()
    for line in header:
        buffer.write(f"# {line}\n")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue()


def curves_csv(curves: Sequence[Curve], header: Sequence[str]) -> str:
    """One row per point of every curve (a reference line: one row with the other coordinate
    empty; a stack: one row per segment, labelled by its category)."""
    extra_names = sorted({name for c in curves for name in c.extras})
    rows = []
    for c in curves:
        if c.kind == "vline":
            pairs = [(x, math.nan) for x in c.x]
        elif c.kind == "hline":
            pairs = [(math.nan, y) for y in c.y]
        else:
            pairs = list(zip(c.x, c.y, strict=True))
        for i, (x, y) in enumerate(pairs):
            label = c.categories[i] if c.kind == "stack" else c.label
            extras = [number(float(c.extras[n][i])) if n in c.extras else "" for n in extra_names]
            rows.append([c.key, label, c.kind, number(float(x)), c.x_unit, number(float(y)), c.y_unit, *extras])
    return _render(header, [*CURVE_COLUMNS, *extra_names], rows)


def summary_csv(summary: Summary, header: Sequence[str]) -> str:
    """One row per headline figure; the header block says how an unreached crossover reads."""
    rows = [[name, _cell(value), unit] for name, value, unit in summary_rows(summary)]
    note = f"value {NEVER}: a crossover no prompt length or batch reaches (the pass stays memory-bound)"
    return _render([*header, note], SUMMARY_COLUMNS, rows)


def _cell(value: float | int | str) -> str:
    if isinstance(value, str):
        return value
    return str(value) if isinstance(value, int) else number(value)


def tensors_csv(spec: ModelSpec, header: Sequence[str]) -> str:
    rows = []
    for g in grouped_rows(spec):
        for r in g.members:
            t = r.tensor
            rows.append([str(g.group.name), t.name, t.type_name, "x".join(map(str, t.shape)), str(t.params),
                         str(t.nbytes), number(r.bytes_read_per_token)])
    return _render(header, TENSOR_COLUMNS, rows)


def write_text(path: Path, text: str) -> Path:
    """Write a report file (a fresh file in the report folder, so no atomic rename needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
