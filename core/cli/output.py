"""What the command line prints: the stable JSON objects (documented in the README), CSV, and
aligned text tables in the lessons' layout. GB = 10^9 bytes."""

from __future__ import annotations

import csv
import io
import math
import sys
from collections.abc import Sequence
from typing import Any

from rooflab.core.app.figures import Figures
from rooflab.core.app.tables import Tables
from rooflab.core.cli.placement import placement_dict, placement_lines
from rooflab.core.files.safe_json import dumps_json
from rooflab.core.io.textfile import printable
from rooflab.core.predict.host_part import host_flops, host_fp32_flops
from rooflab.core.predict.roofline import balance
from rooflab.core.predict.speculative import speculative
from rooflab.core.predict.work import weight_bytes_read_per_token
from rooflab.core.report.tables import grouped_rows
from rooflab.core.report.text import GIB, capacity_text, long_duration
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS, Workload

GB = 1e9


PRETTY_JSON_BYTES = 1 << 20    # larger documents are written compact: indenting runs in pure Python


def peak_text(machine: MachineProfile, dtype: str | None) -> str:
    """"165.20 TFLOP/s"; a CPU's int8 path as "4.10 TOP/s int8" (its multiply-adds are integer)."""
    flops = machine.flops(dtype)
    if machine.applied_dtype(dtype) == "int8":
        return f"{flops / 1e12:,.2f} TOP/s int8"
    return f"{flops / 1e12:,.2f} TFLOP/s"


def _host_peaks(m: MachineProfile) -> dict[str, float | None]:
    """The processor that computes what the second tier holds: its FP32 peak (TFLOP/s) and the
    int8 path its quantized multiplies run on (TOP/s; None for a unified machine's GPU)."""
    if m.kind == "gpu":
        return {"peak_tflops": host_fp32_flops(m) / 1e12, "int8_path_tops": host_flops(m) / 1e12}
    if m.kind == "cpu":
        return {"peak_tflops": m.flops("fp32") / 1e12, "int8_path_tops": m.flops("int8") / 1e12}
    return {"peak_tflops": host_flops(m) / 1e12, "int8_path_tops": None}


def print_json(obj: Any) -> None:
    """``obj`` as strict JSON on stdout: a non-finite number (which JSON cannot hold) is null.
    Indented for a person, unless it is over ``PRETTY_JSON_BYTES`` compact (a 100,000-row grid
    took a minute to indent; a program reads it the same either way)."""
    text = dumps_json(obj)
    if len(text) <= PRETTY_JSON_BYTES:
        text = dumps_json(obj, indent=2)
    sys.stdout.write(text + "\n")


def _num(x: float) -> float | None:
    """JSON has no infinity: an unreached crossover is null."""
    return None if not math.isfinite(x) else float(x)


def _whole_bytes(x: float) -> int:
    """A byte count as a whole number in JSON and CSV alike: ``4671768832``, not
    ``4671768832.0`` (an MoE step's expected bytes are fractional; a byte is not)."""
    return round(float(x))


def inspect_dict(spec: ModelSpec, kv_type: str = "f16") -> dict[str, Any]:
    full, window = spec.kv_bytes_per_token(kv_type)
    groups = grouped_rows(spec)
    return {
        "name": spec.name,
        "architecture": spec.architecture,
        "source": spec.source,
        "weights_format": spec.weights_format,
        "layers": spec.layers,
        "hidden": spec.hidden,
        "vocab": spec.vocab,
        "context_length": spec.context_length,
        "params_total": spec.params_total,
        "params_per_token": int(round(spec.params_per_token)),
        "file_bytes": spec.file_bytes,
        "weight_bytes": spec.weight_bytes,
        "weight_bytes_read_per_token": int(round(weight_bytes_read_per_token(spec))),
        "tied_embeddings": spec.tied_embeddings,
        "kv_type": kv_type,
        "kv_bytes_per_token": int(round(full)),
        "kv_bytes_per_token_windowed": int(round(window)),
        "sliding_window": spec.attention.sliding_window or None,
        # sliding layers with a cache of their own (Gemma 3n's last layers read an earlier one's)
        "sliding_layers": sum(1 for i, s in enumerate(spec.attention.sliding) if s and spec.attention.kv_heads[i]),
        "experts": spec.experts,
        "experts_used": spec.experts_used,
        "groups": [{"name": g.group.name.value, "types": list(g.group.types), "params": g.group.params,
                    "bytes": g.group.bytes, "bytes_read_per_token": int(round(g.bytes_read_per_token)),
                    "tensors": g.group.tensors} for g in groups],
        "warnings": list(spec.warnings),
    }


def _gb(x: float) -> str:
    return f"{x / GB:,.3f} GB"


def inspect_text(spec: ModelSpec, kv_type: str = "f16", tensors: bool = False) -> str:
    d = inspect_dict(spec, kv_type)
    w = weight_bytes_read_per_token(spec)
    lines = [
        f"{spec.name}  ({spec.architecture}, {spec.weights_format or 'mixed types'})",
        f"  source            {spec.source}",
        f"  layers            {spec.layers}   hidden {spec.hidden}   vocab {spec.vocab:,}",
        f"  parameters        {spec.params_total:,} total, {d['params_per_token']:,} multiplied per decode token",
        f"  file              {spec.file_bytes:,} bytes ({_gb(spec.file_bytes)})",
        f"  read per token    {d['weight_bytes_read_per_token']:,} bytes ({_gb(w)}, "
        f"{100 * w / max(spec.file_bytes, 1):.0f} % of the file)",
        f"  {'KV cache (' + kv_type + ')':<18}{d['kv_bytes_per_token']:,} bytes/token in full-attention layers"
        + (f", {d['kv_bytes_per_token_windowed']:,} in {d['sliding_layers']} sliding layers "
           f"(window {spec.attention.sliding_window:,})" if spec.attention.sliding_window else ""),
    ]
    if spec.experts:
        lines.append(f"  experts           {spec.experts_used} of {spec.experts} routed per token"
                     + (", plus shared experts" if spec.shared_experts else ""))
    lines.append("")
    lines.append(f"  {'group':<15} {'types':<22} {'params':>16} {'bytes in file':>16} {'read per token':>16}")
    for row in grouped_rows(spec):
        g = row.group
        lines.append(f"  {g.name.value:<15} {', '.join(g.types)[:22]:<22} {g.params:>16,} {g.bytes:>16,} "
                     f"{row.bytes_read_per_token:>16,.0f}")
    lines.append(f"  {'total':<15} {'':<22} {spec.params_total:>16,} {spec.weight_bytes:>16,} {w:>16,.0f}")
    if tensors:
        lines.append("")
        for t in spec.tensors:
            lines.append(f"  {printable(t.name):<40} {printable(t.type_name):<8} {str(list(t.shape)):<24} "
                         f"{t.nbytes:>14,}  {t.role.value}")
    for warning in spec.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def machine_dict(m: MachineProfile) -> dict[str, Any]:
    return {
        "name": m.name,
        "bandwidth_gb_per_s": m.bandwidth / GB,
        "peak_tflops": m.flops() / 1e12,
        "peak_tflops_by_dtype": {k: v / 1e12 for k, v in m.peak_flops.items()},
        "default_dtype": m.default_dtype,
        "memory_gb": m.memory / GB,
        "memory_gib": m.memory / GIB,
        "balance_flop_per_byte": balance(m),
        "offload": {"name": m.offload_name, "bandwidth_gb_per_s": m.offload_bandwidth / GB,
                    "memory_gb": m.offload_memory / GB,
                    # the processor computing what is kept there; not stated: the desktop default
                    **_host_peaks(m), "peak_stated": m.kind != "gpu" or m.offload_flops > 0,
                    } if m.has_offload else None,
        "host_link": None if m.host_link is None else {
            "name": m.host_link.name, "pcie_generation": m.host_link.generation, "lanes": m.host_link.lanes,
            "bandwidth_gb_per_s": m.host_link.bandwidth / GB},
        "efficiency": {"bandwidth": m.efficiency.bandwidth, "compute": m.efficiency.compute,
                       "step_overhead_s": m.efficiency.step_overhead,
                       "kv_read_factor": m.efficiency.kv_read_factor},
    }


def _decode_rows(t: Tables) -> list[dict[str, Any]]:
    """One dict per (context, batch): the one-memory figures under their own keys, the placed
    ones under ``placed_*`` (both priced by ``app.tables``)."""
    g, p = t.decode, t.placed_decode
    rows = []
    for i, ctx in enumerate(t.contexts):
        for j, b in enumerate(t.batches):
            step = float(p.step_seconds[i, j])
            rows.append({
                "context": int(ctx), "batch": int(b),
                "bytes_per_step": _whole_bytes(g.bytes_per_step[i, j]),
                "kv_bytes_per_step": _whole_bytes(g.cache_bytes_per_step[i, j]),
                "flops_per_step": float(g.flops_per_step[i, j]),
                "step_seconds": float(g.step_seconds[i, j]),
                "tokens_per_second_per_sequence": float(g.per_sequence[i, j]),
                "tokens_per_second_total": float(g.total[i, j]),
                "kv_share": float(g.kv_share[i, j]),
                "experts_touched_per_layer": float(g.experts_touched[i, j]),
                "memory_bytes": _whole_bytes(g.memory[i, j]),
                "fits": bool(g.fits[i, j]),
                "bound": "compute" if g.compute_bound[i, j] else "memory",
                "placed_step_seconds": step,
                "placed_tokens_per_second_per_sequence": 1.0 / step,
                "placed_tokens_per_second_total": float(b) / step,
                "placed_memory_bytes": _whole_bytes(p.memory[i, j]),
                "placed_fits": bool(p.fits[i, j]),
                "placed_bound": "compute" if p.compute_bound[i, j] else "memory",
            })
    return rows


def _prefill_rows(t: Tables) -> list[dict[str, Any]]:
    s, p = t.prefill, t.placed_prefill
    return [{"prompt": int(n), "seconds": float(s.seconds[i]), "tokens_per_second": float(s.tokens_per_second[i]),
             "flops": float(s.flops[i]), "attention_flops": float(s.attention_flops[i]),
             "bound": "compute" if s.compute_bound[i] else "memory",
             "placed_seconds": float(p.seconds[i]),
             "placed_tokens_per_second": float(t.prompts[i]) / float(p.seconds[i]), "placed_bound": p.bounds[i]}
            for i, n in enumerate(s.prompts)]


def predict_dict(figures: Figures, t: Tables) -> dict[str, Any]:
    """``rooflab predict --json``'s object (before the expected figures): the one-memory limits at
    the top level, the headline request and the placement as placed, the rows both ways."""
    sc, s = figures.scenario, figures.summary
    spec, machine, workload = sc.model, sc.machine, sc.workload
    est = s.estimate
    spec_est = s.speculative or speculative(spec, machine, workload)    # without drafts: cost 1, speed-up 1
    return {
        "model": inspect_dict(spec, workload.kv_type),
        "machine": machine_dict(machine),
        "workload": {"prompt": workload.prompt, "answer": workload.answer, "context": workload.context,
                     "batch": workload.batch, "kv_type": workload.kv_type,
                     "offload_fraction": workload.offload_fraction, "ubatch": workload.ubatch,
                     "flash_attention": workload.flash_attention, "threads": workload.threads},
        "prefill_crossover_tokens": _num(s.prefill_crossover),
        "batch_crossover": _num(s.batch_crossover),
        "max_batch_that_fits": s.max_batch,
        "request": {"ttft_seconds": est.ttft, "tpot_seconds": est.tpot, "end_to_end_seconds": est.end_to_end,
                    "prefill_bound": est.prefill_bound, "decode_bound": est.decode_bound,
                    "decode_ceiling_tokens_per_second": est.decode_ceiling,
                    "prompt_tokens_per_second": est.prompt_rate, "kv_share": est.kv_share},
        "speculative": {"draft_tokens": workload.draft_tokens, "acceptance": workload.acceptance,
                        "verify_cost": spec_est.verify_cost, "expected_tokens": spec_est.expected_tokens,
                        "speedup": spec_est.speedup},
        "decode": _decode_rows(t),
        "prefill": _prefill_rows(t),
        **placement_dict(figures),
    }


def predict_csv(t: Tables) -> str:
    """Two CSV blocks (decode rows, then prefill rows), each with its own header line: the JSON's
    rows, one-memory and placed columns alike."""
    out = io.StringIO()
    for rows in (_decode_rows(t), _prefill_rows(t)):
        writer = csv.DictWriter(out, fieldnames=["table", *rows[0].keys()], lineterminator="\n")
        writer.writeheader()
        table = "decode" if "batch" in rows[0] else "prefill"
        for row in rows:
            writer.writerow({"table": table, **{k: _csv_cell(k, v) for k, v in row.items()}})
    return out.getvalue()


def _csv_cell(key: str, value: Any) -> Any:
    """Byte counts as whole numbers: ``4671768832``, not ``4671768832.0`` (an MoE step's expected
    bytes are fractional; a byte is not)."""
    if "bytes" in key.split("_") and isinstance(value, float) and math.isfinite(value):
        return round(value)
    return value


def predict_text(figures: Figures, t: Tables) -> str:
    """The text report: the placement, the headline as placed (a model that does not fit says
    so before any figure), the one-memory limits said to be so, and the rows as placed."""
    sc, s = figures.scenario, figures.summary
    spec, machine, workload = sc.model, sc.machine, sc.workload
    placed, est = figures.placed, s.estimate
    eff = machine.efficiency
    request = (f"request: prompt {workload.prompt}, answer {workload.answer}, context {workload.context}, "
               f"batch {workload.batch}")
    lines = [
        f"{spec.name} on {machine.name}: {machine.bandwidth / GB:,.1f} GB/s, "
        f"{peak_text(machine, workload.compute_dtype)}, {capacity_text(machine.memory)}"
        + ("" if eff.is_identity else f"  (efficiency: bandwidth x{eff.bandwidth:.2f}, compute x{eff.compute:.2f}, "
                                      f"+{eff.step_overhead * 1e3:.2f} ms/step, cache x{eff.kv_read_factor:.2f})"),
        f"W = {weight_bytes_read_per_token(spec) / GB:.3f} GB read per token; KV "
        f"{spec.kv_bytes_per_token(workload.kv_type)[0]:,.0f} bytes/token ({workload.kv_type})",
        *placement_lines(figures),
        "",
        request if placed.fits else "does NOT fit, so none of these figures can be reached; " + request,
        f"  TTFT {_duration(est.ttft, 1)} ({est.prefill_bound}-bound), TPOT "
        f"{_duration(est.tpot, 2)} ({est.decode_bound}-bound), end to end "
        f"{_duration(est.end_to_end, 2, ms=False)}",
        # the one-memory figures of the JSON's top level, said to be so (the placement's are above)
        "  on the device alone (every byte there, nothing reserved): "
        f"prefill turns compute-bound at n* = {_fmt_cross(_num(s.prefill_crossover), MAX_TOKENS)} tokens; "
        + (f"decode at batch {_fmt_cross(_num(s.batch_crossover), MAX_BATCH)}" if math.isfinite(s.batch_crossover)
           else f"decode stays bandwidth-bound at every batch up to {MAX_BATCH:,}")
        + f" (at {workload.context + workload.prompt:,} tokens of context); {s.max_batch:,} "
        f"sequences of {workload.context + workload.prompt + workload.answer:,} tokens fit",
        "",
        "decode ceiling, tokens/s per sequence / total, GB read per step, as placed (memory: both memories, "
        "reserves and buffers included)",
        f"{'context':>8} {'batch':>6} {'per seq':>9} {'total':>9} {'GB/step':>8} {'KV %':>5} "
        f"{'memory GB':>10} {'fits':>5} {'bound':>8}" + (f" {'experts':>8}" if spec.is_moe else ""),
    ]
    for row in _decode_rows(t):
        lines.append(
            f"{row['context']:>8,} {row['batch']:>6} {row['placed_tokens_per_second_per_sequence']:>9.1f} "
            f"{row['placed_tokens_per_second_total']:>9.0f} {row['bytes_per_step'] / GB:>8.2f} "
            f"{100 * row['kv_share']:>5.0f} {row['placed_memory_bytes'] / GB:>10.1f} "
            f"{'yes' if row['placed_fits'] else 'NO':>5} {row['placed_bound']:>8}"
            + (f" {row['experts_touched_per_layer']:>8.1f}" if spec.is_moe else ""))
    lines += ["", "prefill", f"{'prompt':>8} {'seconds':>10} {'tokens/s':>10} {'bound':>8}"]
    for row in _prefill_rows(t):
        lines.append(f"{row['prompt']:>8,} {row['placed_seconds']:>10.4f} {row['placed_tokens_per_second']:>10.0f} "
                     f"{row['placed_bound']:>8}")
    if workload.draft_tokens and s.speculative is not None:
        sp = s.speculative
        lines += ["", f"speculative: verify {workload.draft_tokens} drafts costs {sp.verify_cost:.2f} steps, "
                      f"yields {sp.expected_tokens:.2f} tokens, speed-up x{sp.speedup:.2f}"]
    for w in spec.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def _fmt_cross(x: float | None, limit: int) -> str:
    """A crossover, or "never" below the largest value searched (16M tokens, 65,536 sequences)."""
    return f"never (below {limit:,})" if x is None else f"{x:,.1f}"


def _duration(seconds: float, ms_decimals: int, *, ms: bool = True) -> str:
    """Milliseconds under a second (when ``ms``), then seconds, then ``long_duration``'s hours
    or days: a TTFT of 93 days read '8,051,521,381.6 ms'."""
    if ms and seconds < 1:
        return f"{seconds * 1e3:,.{ms_decimals}f} ms"
    return long_duration(seconds) or f"{seconds:,.2f} s"


def past_training(spec: ModelSpec, workload: Workload, contexts: Sequence[int] = (),
                  prompts: Sequence[int] = (), *, contexts_flag: str = "--contexts") -> list[str]:
    """What goes past the context ``spec`` was trained for: the request (context + prompt +
    answer), and the largest of the ``contexts`` and ``prompts`` asked for (the tables' rows);
    a model then answers at a quality nothing here predicts."""
    trained = spec.context_length
    if not trained:
        return []
    past = f"past the {trained:,} {spec.name} was trained for"
    length = workload.context + workload.prompt + workload.answer
    out = [f"{length:,} tokens is {past}"] if length > trained else []
    for name, values in ((contexts_flag, contexts), ("--prompts", prompts)):
        if values and max(values) > trained:
            out.append(f"{name} reaches {max(values):,} tokens, {past}")
    return out


def warn_past_training(spec: ModelSpec, workload: Workload, contexts: Sequence[int] = (),
                       prompts: Sequence[int] = (), *, contexts_flag: str = "--contexts") -> None:
    """``past_training``'s lines on stderr, before any figure (in every output form)."""
    for line in past_training(spec, workload, contexts, prompts, contexts_flag=contexts_flag):
        print(f"rooflab: warning: {line}", file=sys.stderr)
    sys.stderr.flush()
