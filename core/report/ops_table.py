"""The operation view as the command line, the report and the window read it: one row per
operation of a pass (``predict.ops_clocks``) as a stable record, as text, as CSV, and the
sentence that says what the rows sum to against the pass."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rooflab.core.files.safe_json import dumps_json
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.expected import Expected
from rooflab.core.predict.ops import DECODE, PREFILL, totals
from rooflab.core.predict.ops_clocks import TimedOperation, timed_operations
from rooflab.core.predict.roofline import balance
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.units import fmt
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

#: The keys of one operation's record, in order (``--json``'s ``ops`` list, ops.csv's columns).
OP_KEYS: tuple[str, ...] = ("name", "layer_kind", "phase", "flops", "bytes", "intensity", "bound",
                            "seconds_ceiling", "seconds_expected", "share", "layers", "kind", "weight_bytes",
                            "cache_bytes", "activation_bytes", "flops_left_out")


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def op_record(t: TimedOperation) -> dict[str, Any]:
    """One operation as a record with ``OP_KEYS`` (SI units; an intensity with no bytes moved,
    a fused softmax's, is None)."""
    o = t.op
    return {"name": o.name, "layer_kind": o.layer_kind, "phase": o.phase, "flops": o.flops, "bytes": o.bytes,
            "intensity": _finite(o.intensity), "bound": t.bound, "seconds_ceiling": t.seconds_ceiling,
            "seconds_expected": t.seconds_expected, "share": t.share, "layers": o.layers, "kind": o.kind,
            "weight_bytes": o.weight_bytes, "cache_bytes": o.cache_bytes, "activation_bytes": o.activation_bytes,
            "flops_left_out": o.flops_left_out}


def pass_sums(spec: ModelSpec, machine: MachineProfile, workload: Workload,
              timed: Sequence[TimedOperation]) -> list[dict[str, Any]]:
    """Per phase: the rows' sums beside the pass's own figures (``clocks``, at the ceiling),
    what the pass leaves out (the activations, the small ops' arithmetic) and the rows' summed
    ceiling against the pass's."""
    peak = replace(machine, efficiency=Efficiency())
    passes = {PREFILL: prefill_pass(spec, peak, workload),
              DECODE: decode_pass(spec, peak, workload, context=workload.context + workload.prompt)}
    out = []
    for phase, p in passes.items():
        rows = [t for t in timed if t.op.phase == phase]
        flops, weights, cache = totals(t.op for t in rows)
        out.append({"phase": phase, "pass_flops": float(p.flops), "pass_bytes": float(p.bytes),
                    "ops_flops": flops, "ops_weight_and_cache_bytes": weights + cache,
                    "flops_left_out": sum(t.op.flops_left_out for t in rows),
                    "activation_bytes": sum(t.op.activation_bytes for t in rows),
                    "pass_seconds_ceiling": float(p.seconds),
                    "ops_seconds_ceiling": sum(t.seconds_ceiling for t in rows),
                    "ops_seconds_expected": None if any(t.seconds_expected is None for t in rows)
                    else sum(t.seconds_expected or 0.0 for t in rows)})
    return out


def ops_dict(spec: ModelSpec, machine: MachineProfile, workload: Workload,
             expected: MachineProfile | None = None, expected_label: str = "") -> dict[str, Any]:
    """``rooflab predict --ops --json``: the scenario, the ``ops`` list and the sums per phase."""
    timed = timed_operations(spec, machine, workload, expected=expected)
    return {"model": spec.name, "machine": machine.name,
            "workload": {"prompt": workload.prompt, "context": workload.context, "batch": workload.batch,
                         "decode_context": workload.context + workload.prompt, "kv_type": workload.kv_type,
                         "flash_attention": workload.flash_attention},
            "expected_by": expected_label or None,
            "ops": [op_record(t) for t in timed],
            "sums": pass_sums(spec, machine, workload, timed)}


def _intensity_text(x: float) -> str:
    return "fused" if not math.isfinite(x) else f"{x:,.2f}" if x < 100 else f"{x:,.0f}"


def ops_text(spec: ModelSpec, machine: MachineProfile, workload: Workload,
             expected: MachineProfile | None = None, expected_label: str = "") -> str:
    """The table ``rooflab predict --ops`` prints: every operation of the prefill and the decode
    step, then what the rows sum to against the pass."""
    timed = timed_operations(spec, machine, workload, expected=expected)
    dtype = machine.applied_dtype(workload.compute_dtype)
    t = workload.context + workload.prompt
    lines = [f"{spec.name} on {machine.name}: {fmt(machine.bandwidth, 'B/s')}, "
             f"{fmt(machine.flops(workload.compute_dtype), 'FLOP/s')} {dtype}, balance "
             f"{balance(machine, workload.compute_dtype):,.1f} FLOP/byte",
             f"operations of a prefill of {workload.prompt:,} tokens (batch {workload.batch}, context "
             f"{workload.context:,}) and a decode step (batch {workload.batch} at {t:,} tokens of context); "
             f"every byte on the one memory, activations f32, flash attention "
             f"{'on' if workload.flash_attention else 'off'}",
             "expected: " + (expected_label or "calibrated") if expected is not None
             else "expected: none (no calibration applied): ceilings only"]
    head = (f"{'phase':<8} {'layer kind':<13} {'operation':<18} {'layers':>6} {'FLOPs':>10} {'bytes':>10} "
            f"{'FLOP/byte':>9} {'bound':<7} {'ceiling':>10} {'expected':>10} {'share':>6}")
    lines += ["", head]
    for r in timed:
        o = r.op
        exp = "-" if r.seconds_expected is None else fmt(r.seconds_expected, "s")
        lines.append(f"{o.phase:<8} {o.layer_kind:<13} {o.name:<18} {o.layers:>6} {fmt(o.flops, 'FLOP'):>10} "
                     f"{fmt(o.bytes, 'B'):>10} {_intensity_text(o.intensity):>9} {r.bound:<7} "
                     f"{fmt(r.seconds_ceiling, 's'):>10} {exp:>10} {r.share * 100:>5.1f}%")
    lines.append("")
    for s in pass_sums(spec, machine, workload, timed):
        lines.append(f"{s['phase']}: the rows' FLOPs less the small ops' own ({fmt(s['flops_left_out'], 'FLOP')}) "
                     f"are the pass's {fmt(s['pass_flops'], 'FLOP')}; their weight and cache bytes the pass's "
                     f"{fmt(s['pass_bytes'], 'B')}, plus {fmt(s['activation_bytes'], 'B')} of activations it "
                     f"leaves out; summed ceilings {fmt(s['ops_seconds_ceiling'], 's')} against the pass's "
                     f"{fmt(s['pass_seconds_ceiling'], 's')}")
    return "\n".join(lines)


def ops_csv(timed: Sequence[TimedOperation], header: Sequence[str] = ()) -> str:
    """ops.csv: a ``#`` header block, then one row per operation with ``OP_KEYS`` (SI units)."""
    buffer = io.StringIO()
    for line in header:
        buffer.write(f"# {line}\n")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(OP_KEYS)
    for t in timed:
        rec = op_record(t)
        writer.writerow(["" if rec[k] is None else f"{rec[k]:.10g}" if isinstance(rec[k], float) else rec[k]
                         for k in OP_KEYS])
    return buffer.getvalue()


def ops_output(spec: ModelSpec, machine: MachineProfile, workload: Workload, expected: Expected | None,
               form: str = "text") -> str:
    """What ``rooflab predict --ops`` writes, as ``form`` ("text", "json" or "csv"): the rows
    as ``expected`` (a calibration's) expects them, else as the machine's own efficiency
    factors do where it has any (``--calibrated``, ``--bandwidth-efficiency``), else ceilings."""
    profile, label = expected_profile(machine, expected)
    if form == "json":
        return dumps_json(ops_dict(spec, machine, workload, profile, label), indent=2) + "\n"
    if form == "csv":
        return ops_csv(timed_operations(spec, machine, workload, expected=profile))
    return ops_text(spec, machine, workload, profile, label) + "\n"


def expected_profile(machine: MachineProfile, expected: Expected | None) -> tuple[MachineProfile | None, str]:
    """(the machine as expected, what says so): a calibration's, else the machine itself where
    it carries efficiency factors of its own, else (None, "") and the rows are ceilings only."""
    if expected is not None:
        return expected.machine, f"{expected.calibration.engine_label} ({expected.calibration.source})"
    if not machine.efficiency.is_identity:
        return machine, "the machine's efficiency factors"
    return None, ""


def scenario_operations(sc: Scenario, expected: Expected | None) -> tuple[TimedOperation, ...]:
    """The operations of a scenario's prefill and decode step on their clocks, as
    ``expected_profile`` expects them: what a report's ops.csv and roofline-ops.png show."""
    profile, _ = expected_profile(sc.machine, expected)
    return timed_operations(sc.model, sc.machine, sc.workload, expected=profile)
