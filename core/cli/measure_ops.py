"""``rooflab measure model MODEL --engine torch --ops``: the torch engine's passes timed
operation by operation (``measure.engines.torch.ops``), each beside its prediction
(``predict.ops_clocks``): text, or JSON with an ``ops`` list whose rows carry
``seconds_measured`` beside the predicted keys."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rooflab.core.errors import MeasurementError
from rooflab.core.files.safe_json import dumps_json
from rooflab.core.jobs import CancelToken, run_job
from rooflab.core.measure.engines.torch import backend
from rooflab.core.measure.engines.torch.ops import GROUPS, MeasuredOperation, OpsMeasurement, OpsPlan
from rooflab.core.measure.engines.torch.ops_in_child import measure_ops_in_child
from rooflab.core.predict.ops_clocks import TimedOperation, timed_operations
from rooflab.core.report.ops_table import OP_KEYS, op_record
from rooflab.core.report.text import count
from rooflab.core.report.units import fmt
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

DEFAULT_PROMPT = 256


def predicted_for(m: OpsMeasurement, machine: MachineProfile, prompt: int) -> tuple[TimedOperation, ...]:
    """The operations ``predict.ops`` gives the model as it ran, for one of its prompts: a
    prefill of ``prompt`` tokens and the decode step after it, activations in its dtype, the
    attention kernel it ran (eager: scores apart, as without flash attention)."""
    workload = Workload(prompt=prompt, context=0, batch=1, kv_type=backend.KV_TYPE_OF[m.dtype],
                        compute_dtype=m.dtype, flash_attention=m.attention != "eager")
    expected = machine if not machine.efficiency.is_identity else None
    return timed_operations(m.spec, machine, workload, expected=expected,
                            activation_bytes=float(backend.dtype_bytes(m.dtype)))


def compared_rows(m: OpsMeasurement, machine: MachineProfile) -> list[dict[str, Any]]:
    """Every predicted operation with ``seconds_measured`` beside it (None where the run had no
    such operation), then the measured rows no prediction has (residual adds, a fused
    attention, "other"), their predicted keys None."""
    out: list[dict[str, Any]] = []
    for n in dict.fromkeys(o.prompt for o in m.operations):
        measured = {(o.phase, o.layer_kind, o.name): o for o in m.operations if o.prompt == n}
        used: set[tuple[str, str, str]] = set()
        for t in predicted_for(m, machine, n):
            key = (t.op.phase, t.op.layer_kind, t.op.name)
            found = measured.get(key)
            used.add(key)
            out.append({**op_record(t), "prompt": n, **_measured(found, t.seconds_ceiling)})
        for key, o in measured.items():
            if key not in used:
                row: dict[str, Any] = dict.fromkeys(OP_KEYS)
                row.update(name=o.name, layer_kind=o.layer_kind, phase=o.phase, covers=list(GROUPS.get(o.name, ())))
                out.append({**row, "prompt": n, **_measured(o, None)})
    return out


def _measured(o: MeasuredOperation | None, ceiling: float | None) -> dict[str, Any]:
    if o is None:
        return {"seconds_measured": None, "flops_measured": None, "calls": None, "shapes": None,
                "share_of_bound": None}
    share = ceiling / o.seconds if ceiling is not None and o.seconds > 0 else None
    return {"seconds_measured": o.seconds, "flops_measured": o.flops, "calls": o.calls, "shapes": o.shapes,
            "share_of_bound": share}


def _passes(m: OpsMeasurement) -> list[dict[str, Any]]:
    return [{"phase": p.phase, "prompt": p.prompt, "seconds": p.seconds, "seconds_ops": p.seconds_ops,
             "overhead": p.overhead} for p in m.passes]


def _text(m: OpsMeasurement, machine: MachineProfile, rows: list[dict[str, Any]]) -> str:
    lines = [f"{m.label}: torch {m.device} {m.dtype}, {count(m.threads, 'thread')}, "
             f"{m.attention or 'default'} attention; predicted on {machine.name}"]
    for p in m.passes:
        lines.append(f"  {p.phase} of prompt {p.prompt:,}: {fmt(p.seconds, 's')} timed plainly, "
                     f"{fmt(p.seconds_ops, 's')} summed by operation ({p.overhead:+.1%}: the profiler's ranges "
                     f"and the run-to-run spread)")
    lines.append(f"  {'phase':<8} {'layer kind':<13} {'operation':<18} {'FLOP/byte':>9} {'bound':<7} "
                 f"{'ceiling':>10} {'measured':>10} {'of bound':>8}")
    for r in rows:
        intensity = "-" if r["intensity"] is None else f"{r['intensity']:,.2f}"
        ceiling = "-" if r["seconds_ceiling"] is None else fmt(r["seconds_ceiling"], "s")
        measured = "-" if r["seconds_measured"] is None else fmt(r["seconds_measured"], "s")
        share = "-" if r["share_of_bound"] is None else f"{r['share_of_bound']:.0%}"
        lines.append(f"  {r['phase']:<8} {r['layer_kind']:<13} {r['name']:<18} {intensity:>9} {r['bound'] or '-':<7} "
                     f"{ceiling:>10} {measured:>10} {share:>8}")
    lines += [f"  note: {note}" for note in m.notes]
    return "\n".join(lines)


def run_measure_ops(args: argparse.Namespace, engine: str, source: Any, machine: MachineProfile,
                    cancel: CancelToken, on_progress: Any = None) -> int:
    """Time ``source`` by operation and print it beside the prediction; returns the exit status."""
    if engine != "torch":
        raise MeasurementError(f"--ops times operations with the torch engine only (asked: {engine}); "
                               "add --engine torch")
    plan = OpsPlan(prompts=tuple(args.prompts or (DEFAULT_PROMPT,)), repeats=args.repeats, dtype=args.dtype,
                   device=args.device, threads=args.threads, random_weights=args.random_weights)
    m = run_job(measure_ops_in_child(source, plan, cancel), on_progress)
    rows = compared_rows(m, machine)
    if args.json:
        sys.stdout.write(dumps_json({"model": m.label, "engine": "torch", "device": m.device, "dtype": m.dtype,
                                     "threads": m.threads, "attention": m.attention, "machine": machine.name,
                                     "passes": _passes(m), "ops": rows, "notes": list(m.notes)},
                                    indent=2) + "\n")
    else:
        print(_text(m, machine, rows))
    return 0
