"""One output row of ``llama-bench`` or ``llama-batched-bench`` read into points (the whole
files: ``io.llamabench``): its numbers checked, a pp or tg row's point, a batched row's prefill
and batch points, and the settings the row records, for a run read as it streams
(``points_from_row``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from rooflab.core.errors import SpecError
from rooflab.core.files.safe_json import JsonError, parse_json
from rooflab.core.io.textfile import printable, shown
from rooflab.core.values.measured import ALL_LAYERS, MAX_SECONDS, EngineSettings, MeasuredPoint, bench_point, bench_test
from rooflab.core.values.workload import MAX_TOKENS


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

def skip_reason(row: Mapping[str, Any]) -> str:
    """Why a llama-bench row gives no point ("" when it gives one)."""
    n_prompt, n_gen = _count(row, "n_prompt", 0.0), _count(row, "n_gen", 0.0)
    if n_prompt and n_gen:
        return f"pp{n_prompt}+tg{n_gen} row skipped: a combined run cannot be split into phases"
    if not (n_prompt or n_gen):
        return "a row with neither n_prompt nor n_gen was skipped"
    return ""


def bench_row_point(row: Mapping[str, Any], label: str) -> MeasuredPoint:
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


def row_label(row: Mapping[str, Any], varying: Iterable[str]) -> str:
    model = str(row.get("model_filename") or row.get("model_type") or "model")
    model = printable(model.replace("\\", "/").split("/")[-1], 120)
    extras = [f"{f}={printable(row.get(f), 40)}" for f in varying if f != "model_type"]
    return "llama-bench: " + model + (f" ({', '.join(extras)})" if extras else "")


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


def batched_row_points(row: Mapping[str, Any], label: str) -> list[MeasuredPoint]:
    pp, tg, b = _count(row, "pp"), _count(row, "tg"), _count(row, "pl")
    if b < 1:
        raise SpecError("pl (sequences) must be >= 1")
    shared = bool(_number(row, "is_pp_shared", 0.0)) if "is_pp_shared" in row else None
    return _batched_point_pair(pp, tg, b, _count(row, "n_kv", 0.0), _number(row, "t_pp"),
                               _number(row, "t_tg"), shared, label)


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
        points = batched_row_points(row, "llama-batched-bench")
    elif skip_reason(row):
        return ()
    else:
        points = [bench_row_point(row, row_label(row, ()))]
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
